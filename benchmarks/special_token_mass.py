"""How much PageRank mass the PR-XAI presets put on special tokens, and what it does to metrics and pictures.

PageRank with the default teleport (``teleport="target"``) jumps back to the
explained token with probability ``1 - damping`` (0.3 at the default damping
0.7) at every step, so that token alone holds at least 30% of the scores. For
encoders the explained token is ``[CLS]``; for the decoder (SmolLM2) it is the
last token, and the first token is the attention sink. This script measures,
on the holdout half used by ``benchmarks/matrix.py``:

1. the share of the scores on the special tokens, per method (PR-TAG, the
   default; PR-G, the former default; PR-AG, the paper's; PR-A), for
   ``minilm--movie-sentences`` (n=100), ``minilm--bbc-news`` (n=30, 512
   tokens) and ``smollm2--tweets`` (n=50), and that the scores ``attribute``
   returns sum to one over the tokens;
2. whether the deletion metrics see that mass: the project's
   :func:`captum_prxai.metrics.evaluate_faithfulness` on the raw scores and on
   the scores with the special tokens zeroed and the rest renormalised (for the
   decoder: the first and the last token, which its tokenizer does not mark as
   special, so the metrics rank and remove them like any word);
3. what the pictures do with it: the colour intensities of one example under
   :func:`captum_prxai.viz._colors.display_max` (the HTML, terminal and graph
   scale), with and without the special tokens setting the maximum;
4. whether the mass depends on the construction: PR-TAG with ``teleport``
   ``"target"`` (default), ``"uniform"`` and ``"input_gradient"`` on 30 movie
   sentences, special-token share and comprehensiveness / sufficiency, paired
   differences ± s.e.

Command (1 torch thread; about 25 minutes on a busy 2-core CPU, most of it the
decoder's metrics)::

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1 python benchmarks/special_token_mass.py

It prints the tables and writes ``benchmarks/results/special-token-mass/summary.md``
and ``COMMAND``; the per-example records go to ``--records`` (default under
``/tmp``, not committed), from which ``--from-records`` rebuilds the report.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results" / "special-token-mass"
METHODS = ("pr-tag", "pr-g", "pr-ag", "pr-a")
LABELS = {"pr-tag": "PR-TAG (default)", "pr-g": "PR-G (former default)", "pr-ag": "PR-AG (paper)", "pr-a": "PR-A"}
TELEPORTS = ("target", "uniform", "input_gradient")


@dataclass
class Cell:
    name: str
    model: str
    dataset: str
    n: int
    max_length: Optional[int] = None
    decoder: bool = False


CELLS = [
    Cell("minilm--movie-sentences", "default", "movie-sentences", 100),
    Cell("minilm--bbc-news", "minilm-bbc-news", "bbc-news", 30, max_length=512),
    Cell("smollm2--tweets", "smollm2-tweets", "tweets", 50, decoder=True),
]


def mean_sem(values: Sequence[float]) -> tuple:
    v = [float(x) for x in values]
    n = len(v)
    if n == 0:
        return float("nan"), float("nan")
    m = sum(v) / n
    if n < 2:
        return m, float("nan")
    var = sum((x - m) ** 2 for x in v) / (n - 1)
    return m, math.sqrt(var / n)


def fmt(values: Sequence[float], digits: int = 3) -> str:
    m, s = mean_sem(values)
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def load(cell: Cell):
    from captum_prxai.bench.ablation import dataset_half
    from captum_prxai.data import load_dataset
    from captum_prxai.models import load_default, load_model

    model, tokenizer = load_default() if cell.model == "default" else load_model(cell.model)
    model.eval()
    data = dataset_half(load_dataset(cell.dataset, "test"), "holdout")
    return model, tokenizer, data


def positions(enc: Any, decoder: bool) -> Dict[str, torch.Tensor]:
    """Boolean (T,) masks: the explained token, the other special token(s), and the ordinary tokens."""
    mask = enc.mask[0].bool()
    length = int(mask.shape[0])
    real = torch.nonzero(mask).flatten()
    first, last = int(real.min()), int(real.max())
    explained = torch.zeros(length, dtype=torch.bool)
    other = torch.zeros(length, dtype=torch.bool)
    if decoder:  # explained: the last token (the classification head reads it); other: the first (attention sink)
        explained[last] = True
        other[first] = True
    else:  # explained: [CLS]; other: [SEP] (every other token the tokenizer marks special)
        explained[first] = True
        other = enc.special[0].bool().cpu().clone()
        other[first] = False
    special = explained | other
    return {"explained": explained, "other": other, "special": special, "ordinary": mask.cpu() & ~special}


def renormalised(scores: torch.Tensor, special: torch.Tensor) -> torch.Tensor:
    """Special tokens set to 0, the ordinary tokens' scores rescaled to sum to one."""
    out = scores.clone()
    out[0, special] = 0.0
    return out / out.sum()


def metric_values(forward, enc, scores, target, kwargs) -> Dict[str, float]:
    from captum_prxai.metrics import evaluate_faithfulness

    res = evaluate_faithfulness(forward, enc.ids, enc.mask, enc.special, scores, target=target, **kwargs)
    return {k: float(v[0]) for k, v in res.items()
            if k not in ("curve_most", "curve_least", "curve_fractions", "target", "prob")}


def rank_among_real(scores: torch.Tensor, enc: Any, pos: int) -> int:
    """1-based rank of token ``pos`` in the order the metrics remove tokens (ties: earlier first)."""
    from captum_prxai.metrics.masking import real_token_mask

    real = real_token_mask(enc.mask, enc.special)[0]
    if not bool(real[pos]):
        return 0  # protected: never ranked
    s = scores[0].double()
    idx = torch.nonzero(real).flatten().tolist()
    order = sorted(idx, key=lambda i: (-float(s[i]), i))
    return order.index(pos) + 1


def run_cell(cell: Cell, metric_examples: int, teleport_n: int, log) -> Dict[str, Any]:
    from captum_prxai.bench.runner import _encode, resolve_max_length, select_examples
    from captum_prxai.bench.settings import MetricSettings
    from captum_prxai.methods import MethodContext, build_method, make_forward_func, validate_options
    from captum_prxai.viz import _colors
    from captum_prxai.viz.tokens import is_special_token

    t0 = time.perf_counter()
    model, tokenizer, data = load(cell)
    indices = select_examples(len(data.texts), cell.n, 0)
    max_length = resolve_max_length(cell.max_length, model, tokenizer)
    forward = make_forward_func(model)
    ctx = MethodContext.from_tokenizer(tokenizer, seed=0)
    kwargs = MetricSettings().metric_kwargs(ctx.mask_token_id, ctx.pad_token_id, 64)
    explainers = {m: build_method(m, model, forward, ctx) for m in METHODS}
    teleporters = {}
    if teleport_n:
        for tp in TELEPORTS:
            opts = validate_options({"pr-tag": {"teleport": tp}})
            teleporters[tp] = build_method("pr-tag", model, forward,
                                           MethodContext.from_tokenizer(tokenizer, seed=0, options=opts))
    rows: List[Dict[str, Any]] = []
    metric_rows: List[Dict[str, Any]] = []
    teleport_rows: List[Dict[str, Any]] = []
    example: Dict[str, Any] = {}
    for k, index in enumerate(indices):
        enc = _encode(tokenizer, data.texts[index], max_length, torch.device("cpu"))
        with torch.no_grad():
            target = forward(enc.ids, enc.mask).argmax(dim=-1)
        pos = positions(enc, cell.decoder)
        explained_pos = int(torch.nonzero(pos["explained"]).flatten()[0])
        for m, explainer in explainers.items():
            scores = explainer(enc.ids, enc.mask, enc.special, target)
            s = scores[0].double()
            ordinary = s[pos["ordinary"]]
            vals = [float(x) for x in s]
            top_d = _colors.display_max(enc.tokens, vals, False)
            top_a = _colors.display_max(enc.tokens, vals, False, include_special=True)
            ordm = pos["ordinary"].tolist()
            int_d = [t for t, o in zip(_colors.intensities(vals, False, top_d), ordm) if o]
            int_a = [t for t, o in zip(_colors.intensities(vals, False, top_a), ordm) if o]
            rows.append({
                "int_default": sum(int_d) / max(len(int_d), 1), "int_all": sum(int_a) / max(len(int_a), 1),
                "viz_special": is_special_token(enc.tokens[explained_pos]),
                "example": index, "method": m, "n_tokens": int(enc.mask.sum()),
                "sum": float(s.sum()), "min": float(s.min()),
                "explained": float(s[pos["explained"]].sum()), "other": float(s[pos["other"]].sum()),
                "special": float(s[pos["special"]].sum()),
                "explained_top1": bool(float(s[explained_pos]) >= float(ordinary.max())) if ordinary.numel() else True,
                "explained_over_ordinary_max": float(s[explained_pos] / ordinary.max()) if ordinary.numel() else 0.0,
                "explained_rank": rank_among_real(scores, enc, explained_pos),
                "marked_special": int(enc.special[0].sum()),
            })
            if k < metric_examples:
                raw = metric_values(forward, enc, scores, target, kwargs)
                ren = metric_values(forward, enc, renormalised(scores, pos["special"]), target, kwargs)
                metric_rows.append({"example": index, "method": m, "raw": raw, "renormalised": ren,
                                    "max_abs_diff": max(abs(raw[key] - ren[key]) for key in raw)})
            if m == "pr-tag" and not example:
                example = {"index": index, "tokens": enc.tokens, "scores": [float(x) for x in s],
                           "special": pos["special"].tolist()}
        if k < teleport_n:
            for tp, explainer in teleporters.items():
                scores = explainer(enc.ids, enc.mask, enc.special, target)
                s = scores[0].double()
                met = metric_values(forward, enc, scores, target, kwargs)
                teleport_rows.append({"example": index, "teleport": tp, "sum": float(s.sum()),
                                      "explained": float(s[pos["explained"]].sum()),
                                      "special": float(s[pos["special"]].sum()),
                                      "comprehensiveness": met["comprehensiveness"],
                                      "sufficiency": met["sufficiency"], "aopc_most": met["aopc_most"]})
        if (k + 1) % 10 == 0 or k + 1 == len(indices):
            log(f"{cell.name}: {k + 1}/{len(indices)} examples, {time.perf_counter() - t0:.0f}s")
    return {"cell": cell, "rows": rows, "metrics": metric_rows, "teleport": teleport_rows, "example": example,
            "damping": float(explainers["pr-tag"].attribution.damping), "seconds": time.perf_counter() - t0}


# ----------------------------------------------------------------------------- report
def share_table(results: List[Dict[str, Any]]) -> List[str]:
    lines = ["| cell | method | n | tokens in `special_tokens_mask` (mean) | sum of scores (min/max) | "
             "explained token | other special | all special | explained is top token | explained ÷ top ordinary |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        cell = res["cell"]
        expl = "last token" if cell.decoder else "[CLS]"
        other = "first token (sink)" if cell.decoder else "[SEP]"
        for m in METHODS:
            rows = [r for r in res["rows"] if r["method"] == m]
            sums = [r["sum"] for r in rows]
            lines.append(
                f"| {cell.name} | {LABELS[m]} | {len(rows)} | "
                f"{sum(r['marked_special'] for r in rows) / len(rows):.1f} | {min(sums):.6f} / {max(sums):.6f} | "
                f"{expl}: {fmt([r['explained'] for r in rows])} | {other}: {fmt([r['other'] for r in rows])} | "
                f"{fmt([r['special'] for r in rows])} | "
                f"{sum(r['explained_top1'] for r in rows)}/{len(rows)} | "
                f"{fmt([r['explained_over_ordinary_max'] for r in rows], 2)} |")
    return lines


def _delta(rows: List[Dict[str, Any]], key: str) -> List[float]:
    return [r["renormalised"][key] - r["raw"][key] for r in rows]


def metric_table(results: List[Dict[str, Any]]) -> List[str]:
    lines = ["| cell | method | examples | explained token: rank in removal order (0 = protected) | "
             "comprehensiveness raw → renormalised | sufficiency raw → renormalised | "
             "Δ comprehensiveness (renormalised − raw) | Δ sufficiency | max abs difference, all metrics |",
             "|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        for m in METHODS:
            mr = [r for r in res["metrics"] if r["method"] == m]
            if not mr:
                continue
            ranks = [r["explained_rank"] for r in res["rows"] if r["method"] == m][: len(mr)]
            counts = {v: ranks.count(v) for v in sorted(set(ranks))}
            ranks_text = ", ".join(f"{v}: {c}/{len(ranks)}" for v, c in counts.items())
            lines.append(
                f"| {res['cell'].name} | {LABELS[m]} | {len(mr)} | {ranks_text} | "
                f"{fmt([r['raw']['comprehensiveness'] for r in mr])} → "
                f"{fmt([r['renormalised']['comprehensiveness'] for r in mr])} | "
                f"{fmt([r['raw']['sufficiency'] for r in mr])} → {fmt([r['renormalised']['sufficiency'] for r in mr])} | "
                f"{fmt(_delta(mr, 'comprehensiveness'), 4)} | {fmt(_delta(mr, 'sufficiency'), 4)} | "
                f"{max(r['max_abs_diff'] for r in mr):.3g} |")
    return lines


def example_table(res: Dict[str, Any]) -> List[str]:
    from captum_prxai.viz import _colors

    ex = res["example"]
    tokens, scores = ex["tokens"], ex["scores"]
    top_default = _colors.display_max(tokens, scores, False)
    top_all = _colors.display_max(tokens, scores, False, include_special=True)
    t_default = _colors.intensities(scores, False, top_default)
    t_all = _colors.intensities(scores, False, top_all)
    from captum_prxai.viz.tokens import is_special_token

    summary = (f"Colour maximum: {top_default:.4f} by default, {top_all:.4f} with the special tokens; ")
    if len(tokens) > 60:  # long inputs: the numbers only
        ordinary = [(a, b) for sp, a, b in zip(ex["special"], t_default, t_all) if not sp]
        return [f"{res['cell'].name}, holdout example {ex['index']}, PR-TAG ({len(tokens)} tokens): " + summary
                + f"mean intensity of the ordinary tokens {sum(a for a, _ in ordinary) / len(ordinary):.2f} vs "
                f"{sum(b for _, b in ordinary) / len(ordinary):.2f}."]
    lines = [f"{res['cell'].name}, holdout example {ex['index']}, PR-TAG; colour intensity in [0, 1] "
             f"(the HTML / terminal / graph scale, `viz._colors.display_max` then `intensities`):", "",
             "| token | score | counted as special here | special to the viz (`is_special_token`) | intensity, default scale | "
             "intensity, `scale_special_tokens=True` |", "|---|---|---|---|---|---|"]
    for tok, s, sp, a, b in zip(tokens, scores, ex["special"], t_default, t_all):
        shown = tok.replace("|", "\\|")
        lines.append(f"| `{shown}` | {s:.4f} | {'yes' if sp else ''} | {'yes' if is_special_token(tok) else ''} | "
                     f"{a:.2f} | {b:.2f} |")
    ordinary = [(s, a, b) for tok, s, sp, a, b in zip(tokens, scores, ex["special"], t_default, t_all) if not sp]
    lines += ["", summary + f"mean intensity of the ordinary tokens {sum(a for _, a, _ in ordinary) / len(ordinary):.2f} "
                  f"vs {sum(b for _, _, b in ordinary) / len(ordinary):.2f}."]
    return lines


def washout_table(results: List[Dict[str, Any]]) -> List[str]:
    """Per cell and method: how bright the ordinary tokens are under the default colour scale."""
    lines = ["| cell | method | explained token special to the viz (`is_special_token`) | mean colour intensity of "
             "the ordinary tokens, default scale | same, `scale_special_tokens=True` |", "|---|---|---|---|---|"]
    for res in results:
        for m in METHODS:
            rows = [r for r in res["rows"] if r["method"] == m]
            lines.append(f"| {res['cell'].name} | {LABELS[m]} | {sum(r['viz_special'] for r in rows)}/{len(rows)} | "
                         f"{fmt([r['int_default'] for r in rows], 2)} | {fmt([r['int_all'] for r in rows], 2)} |")
    return lines


def teleport_table(res: Dict[str, Any]) -> List[str]:
    rows = res["teleport"]
    n = len({r["example"] for r in rows})
    lines = [f"PR-TAG on {n} holdout examples of {res['cell'].name} (the first {n} of the n={res['cell'].n} sample); "
             "paired differences against `teleport=\"target\"` (the default):", "",
             "| teleport | sum of scores (min/max) | [CLS] share | all special share | comprehensiveness | "
             "Δ comprehensiveness | sufficiency (lower is better) | Δ sufficiency | AOPC (most first) | Δ AOPC |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    base = {r["example"]: r for r in rows if r["teleport"] == "target"}
    for tp in TELEPORTS:
        rr = [r for r in rows if r["teleport"] == tp]
        sums = [r["sum"] for r in rr]
        d = {key: [r[key] - base[r["example"]][key] for r in rr]
             for key in ("comprehensiveness", "sufficiency", "aopc_most")}
        lines.append(f"| `{tp}` | {min(sums):.6f} / {max(sums):.6f} | {fmt([r['explained'] for r in rr])} | "
                     f"{fmt([r['special'] for r in rr])} | {fmt([r['comprehensiveness'] for r in rr])} | "
                     f"{fmt(d['comprehensiveness'], 4) if tp != 'target' else '—'} | "
                     f"{fmt([r['sufficiency'] for r in rr])} | {fmt(d['sufficiency'], 4) if tp != 'target' else '—'} | "
                     f"{fmt([r['aopc_most'] for r in rr])} | {fmt(d['aopc_most'], 4) if tp != 'target' else '—'} |")
    return lines


def conclusions(results: List[Dict[str, Any]]) -> List[str]:
    """The findings, with the numbers of this run."""
    out = ["## Conclusions", ""]
    enc = [r for r in results if not r["cell"].decoder]
    dec = [r for r in results if r["cell"].decoder]
    shares = "; ".join(f"{r['cell'].name} " + ", ".join(
        f"{LABELS[m].split()[0]} {mean_sem([x['special'] for x in r['rows'] if x['method'] == m])[0]:.2f}"
        for m in METHODS) for r in results)
    out.append(f"* **Size.** Mean share of the scores on the special tokens: {shares}. The scores sum to one "
               "over the tokens (max deviation "
               f"{max(abs(x['sum'] - 1) for r in results for x in r['rows']):.1e}). With the target teleport the "
               "explained token receives the whole teleport term, 1 − damping = 0.3, before any edge; PR-A, whose "
               "attention edges also point at `[CLS]`, puts well over half of the mass there on the encoders.")
    if enc:
        diff = max((m["max_abs_diff"] for r in enc for m in r["metrics"]), default=float("nan"))
        n_ex = sum(len(r["metrics"]) for r in enc)
        out.append(f"* **(a) Deletion metrics, encoders: no effect.** `bench/runner._encode` asks the tokenizer for "
                   "`special_tokens_mask` and passes it to `evaluate_faithfulness`; `metrics/masking.real_token_mask` "
                   "drops those tokens, `select_tokens` ranks only the real tokens (special ones are filled with "
                   "−inf/+inf before the sort) and `remove_tokens` never removes them; `k` counts real tokens only. "
                   "Renormalising the ordinary scores is a positive rescaling, which keeps their order, so every "
                   f"metric is unchanged: max abs difference {diff:.3g} over {n_ex} (example, method) pairs, all "
                   "metrics of `evaluate_faithfulness`.")
    for r in dec:
        parts = []
        for m in METHODS:
            rows = [x for x in r["rows"] if x["method"] == m]
            first = sum(x["explained_rank"] == 1 for x in rows)
            mr = [x for x in r["metrics"] if x["method"] == m]
            raw = mean_sem([x["raw"]["comprehensiveness"] for x in mr])[0]
            dc = mean_sem(_delta(mr, "comprehensiveness"))
            ds = mean_sem(_delta(mr, "sufficiency"))
            parts.append(f"{LABELS[m].split()[0]}: last token first in the removal order in {first}/{len(rows)}; "
                         f"comprehensiveness {raw:.3f}, Δ {dc[0]:+.3f} ± {dc[1]:.3f}; Δ sufficiency "
                         f"{ds[0]:+.3f} ± {ds[1]:.3f} (n={len(mr)})")
        out.append(f"* **(a) Deletion metrics, decoder ({r['cell'].name}): the mass is ranked and removed.** The "
                   "SmolLM2 tokenizer adds no special tokens (`special_tokens_mask` is all 0), so for the metrics "
                   "the first and the last token are real tokens like any word. The last token has no in-edges "
                   "(causal attention; self-loops dropped, `self_loops=\"auto\"`), so its whole score is the "
                   "teleport's: the 0.3 jump plus the mass of the dangling tokens, which the walk sends back through "
                   "the teleport vector; the first token (sink) gets ~0 (its in-edges are dropped, "
                   "`sink=\"auto\"`). That score makes the last token the top-ranked token of every example, "
                   "so it is deleted at every comprehensiveness bin (the whole 1% bin on short texts, k = 1), and "
                   "deleting it moves the position the classification head reads. Zeroing the first and last "
                   "token and renormalising (section 2, paired renormalised − raw): " + "; ".join(parts) + ".")
    pics = []
    for r in results:
        rows = [x for x in r["rows"] if x["method"] == "pr-tag"]
        pics.append(f"{r['cell'].name}: explained token recognised by `is_special_token` in "
                    f"{sum(x['viz_special'] for x in rows)}/{len(rows)}, ordinary tokens' mean intensity "
                    f"{mean_sem([x['int_default'] for x in rows])[0]:.2f} (default scale) vs "
                    f"{mean_sem([x['int_all'] for x in rows])[0]:.2f} (`scale_special_tokens=True`)")
    out.append("* **(b) Pictures.** `viz._colors.display_max` (used by `html.token_heatmap_html`, "
               "`records.to_visualization_records`, `terminal` and `graph`) leaves tokens that "
               "`viz.tokens.is_special_token` recognises (`[CLS]`, `[SEP]`, `<s>`, `<|...|>`) out of the colour "
               "maximum and clips them to full colour, so on the encoders `[CLS]` does not wash out the words; "
               "with `scale_special_tokens=True` it would. The decoder's last token is an ordinary word to that "
               "regex, so it sets the maximum and the other words are pale. PR-TAG: " + "; ".join(pics) + ". "
               "The explorer's top-token bar chart (`explorer/static/app.js`, `topTokens`) scales bars by the "
               "largest |score| with special tokens included, so `[CLS]` takes the full bar there.")
    for r in results:
        if not r["teleport"]:
            continue
        rows = r["teleport"]
        base = {x["example"]: x for x in rows if x["teleport"] == "target"}
        bits = []
        for tp in TELEPORTS:
            rr = [x for x in rows if x["teleport"] == tp]
            sh = mean_sem([x["special"] for x in rr])[0]
            if tp == "target":
                bits.append(f"`{tp}` special share {sh:.3f}, comprehensiveness "
                            f"{mean_sem([x['comprehensiveness'] for x in rr])[0]:.3f}")
                continue
            dc = mean_sem([x["comprehensiveness"] - base[x["example"]]["comprehensiveness"] for x in rr])
            dsu = mean_sem([x["sufficiency"] - base[x["example"]]["sufficiency"] for x in rr])
            bits.append(f"`{tp}` special share {sh:.3f}, Δ comprehensiveness {dc[0]:+.3f} ± {dc[1]:.3f}, "
                        f"Δ sufficiency {dsu[0]:+.3f} ± {dsu[1]:.3f}")
        worse = all(mean_sem([x["comprehensiveness"] - base[x["example"]]["comprehensiveness"]
                              for x in rows if x["teleport"] == tp])[0] < 0 for tp in TELEPORTS[1:])
        verdict = (" The other teleports remove most of the special-token mass but lower comprehensiveness and "
                   "raise sufficiency (both worse): since the encoder metrics never see the special tokens, the mass "
                   "costs nothing there, and the teleport that creates it is the better construction."
                   if worse else " The other teleports remove most of the mass; see the table for the metrics.")
        out.append(f"* **(c) Construction.** The mass is the teleport's: PR-TAG on {len(base)} movie sentences, "
                   + "; ".join(bits) + "." + verdict + " `GraphSpec.teleport` takes `\"target\"` (default), `\"uniform\"`, "
                   "`\"input_gradient\"` or a tensor (`graph/builders.TELEPORTS`).")
    return out


def report(results: List[Dict[str, Any]], command: str) -> str:
    out = ["# Special-token mass of the PR-XAI presets", "",
           "Holdout half of each test split (`dataset_half(load_dataset(ds, \"test\"), \"holdout\")`), examples "
           "`select_examples(len, n, 0)` as in `benchmarks/matrix.py`, each explained for the predicted class. "
           "Mean ± standard error over examples. The explained token is `[CLS]` for the encoders and the last "
           "token for the decoder; the other special tokens are `[SEP]` (encoders) and the first token, the "
           "attention sink (decoder). Produced by:", "", "```", command, "```", "",
           "## 1. Share of the scores on the special tokens", ""]
    damping = results[0]["damping"] if results else float("nan")
    out += share_table(results)
    out += ["", f"`attribute` returns scores that sum to one over the tokens (column 5: min and max of the sum over "
                f"the examples). Column 4: how many tokens the tokenizer marks special, the tokens the metrics "
                f"protect (2 for the encoders, none for SmolLM2). Damping {damping}: with `teleport=\"target\"` the walk jumps back to the explained "
                f"token with probability {1 - damping:.1f} at every step, so that token holds at least "
                f"{1 - damping:.1f} of the mass whatever the edges are.", "",
            "## 2. Deletion metrics (`evaluate_faithfulness`, the benchmark's settings) on raw vs renormalised scores",
            "", "Renormalised: the special tokens' scores set to 0 and the ordinary tokens' scores divided by their "
                "sum. The rank column counts the examples by the place of the explained token in the metrics' removal "
                "order (`rank: examples`; 1 = removed first; 0 = protected by `special_tokens_mask`, never removed).",
                ""]
    out += metric_table(results)
    out += ["", "## 3. Pictures", "", "Over all examples of each cell:", ""]
    out += washout_table(results) + [""]
    for res in results:
        if res["example"]:
            out += example_table(res) + [""]
    out += ["## 4. Teleport (PR-TAG)", ""]
    for res in results:
        if res["teleport"]:
            out += teleport_table(res) + [""]
    out += conclusions(results)
    return "\n".join(out) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", default=",".join(c.name for c in CELLS))
    parser.add_argument("--n", type=int, default=None, help="examples per cell (default: the cell's n)")
    parser.add_argument("--metric-examples", type=int, default=5,
                        help="examples per cell scored raw vs renormalised")
    parser.add_argument("--decoder-metric-examples", type=int, default=50,
                        help="the same for the decoder cell, where the two differ")
    parser.add_argument("--teleport-n", type=int, default=30, help="movie sentences for the teleport comparison")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--records", default="/tmp/special-token-mass/records.json",
                        help="where the raw per-example records are kept (not committed)")
    parser.add_argument("--from-records", action="store_true",
                        help="rebuild the report from --records and OUT/COMMAND instead of recomputing")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    import json
    from dataclasses import asdict

    out = Path(args.out)
    wanted = [c.strip() for c in args.cells.split(",") if c.strip()]
    results = []
    if args.from_records:
        results = json.loads(Path(args.records).read_text())
        for r in results:
            r["cell"] = Cell(**r["cell"])
    for cell in CELLS if not args.from_records else ():
        if cell.name not in wanted:
            continue
        if args.n is not None:
            cell.n = args.n
        k = args.decoder_metric_examples if cell.decoder else args.metric_examples
        tn = args.teleport_n if cell.name == "minilm--movie-sentences" else 0
        results.append(run_cell(cell, min(k, cell.n), min(tn, cell.n), log))
    import shlex

    command = ("OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1 python benchmarks/special_token_mass.py"
               + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)))
    out.mkdir(parents=True, exist_ok=True)
    if args.from_records:
        command = (out / "COMMAND").read_text().strip()
    else:
        Path(args.records).parent.mkdir(parents=True, exist_ok=True)
        Path(args.records).write_text(json.dumps([{**r, "cell": asdict(r["cell"])} for r in results]))
        (out / "COMMAND").write_text(command + "\n")
    text = report(results, command)
    print(text)
    (out / "summary.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
