"""How much PageRank mass the PR-XAI presets put on special tokens, and what it does to metrics and pictures.

PageRank with the default teleport (``teleport="target"``) jumps back to the
explained token with probability ``1 - damping`` (0.3 at the default damping
0.7) at every step, so that token alone holds at least 30% of the scores. For
encoders the explained token is ``[CLS]``; for the decoder (SmolLM2) it is the
last token, and the first token is the attention sink. This script measures,
on the holdout half used by ``benchmarks/matrix.py``:

1. the scores on the special tokens, per method (the model's
   default, :func:`captum_prxai.methods.default_method`: PR-TAG± (λ=0.25) on
   MiniLM-L6 when the committed table was made, PR-TAG± (λ=0.25, hubs 0.5)
   since the eleventh round of docs/research/default_search.md, PR-TAG± (λ = 1) on SmolLM2; PR-TAG, one walk; PR-AG, the
   paper's; PR-A), for ``minilm--movie-sentences`` (n=100),
   ``minilm--bbc-news`` (n=30, 512 tokens) and ``smollm2--tweets`` (n=50), and
   what the scores ``attribute`` returns sum to (one for one walk, ``1 − λ`` for
   two: each walk sums to one);
2. whether the deletion metrics see that mass: the project's
   :func:`captum_prxai.metrics.evaluate_faithfulness` on the raw scores and on
   the scores with the special tokens zeroed and the rest rescaled (divided by
   the sum of their absolute values), with the special-tokens mask the
   benchmark gives the metrics (for the decoder, whose tokenizer marks no
   token special, the explained last token is added: ``run_benchmark``'s
   ``protect_explained``), and where the explained token would fall in the
   removal order without that protection;
3. what the pictures do with it: the colour intensities of one example under
   :func:`captum_prxai.viz._colors.display_max` (the HTML, terminal and graph
   scale), with and without the special tokens setting the maximum;
4. whether the mass depends on the construction: the default with ``teleport``
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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' own modules
from research_methods import register_research_methods, research_default  # noqa: E402

register_research_methods()  # the research variants the tables name (idempotent)

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results" / "special-token-mass"
#: the methods of each cell; ``DEFAULT`` stands for the model's own default (``default_method``, resolved per cell)
DEFAULT = "default"
METHODS = (DEFAULT, "pr-tag", "pr-ag", "pr-a")
LABELS = {"pr-tag": "PR-TAG (one walk)", "pr-ag": "PR-AG (paper)", "pr-a": "PR-A"}
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
    """Special tokens set to 0, the ordinary tokens' scores divided by the sum of their absolute values (a positive
    rescaling, so their order is kept; two walks can give negative scores)."""
    out = scores.clone()
    out[0, special] = 0.0
    return out / out.abs().sum()


def metric_values(forward, enc, scores, target, kwargs, special: torch.Tensor) -> Dict[str, float]:
    """``evaluate_faithfulness`` with the special-tokens mask ``special`` (the one the benchmark passes)."""
    from captum_prxai.metrics import evaluate_faithfulness

    res = evaluate_faithfulness(forward, enc.ids, enc.mask, special, scores, target=target, **kwargs)
    return {k: float(v[0]) for k, v in res.items()
            if k not in ("curve_most", "curve_least", "curve_fractions", "target", "prob")}


def rank_among_real(scores: torch.Tensor, enc: Any, pos: int, special: torch.Tensor) -> int:
    """1-based rank of token ``pos`` in the order the metrics remove tokens (ties: earlier first), with the
    special-tokens mask ``special``; 0 if that mask protects it."""
    from captum_prxai.metrics.masking import real_token_mask

    real = real_token_mask(enc.mask, special)[0]
    if not bool(real[pos]):
        return 0  # protected: never ranked
    s = scores[0].double()
    idx = torch.nonzero(real).flatten().tolist()
    order = sorted(idx, key=lambda i: (-float(s[i]), i))
    return order.index(pos) + 1


def run_cell(cell: Cell, metric_examples: int, teleport_n: int, log) -> Dict[str, Any]:
    from captum_prxai.bench.runner import (
        encode_text,
        metric_special_mask,
        resolve_max_length,
        resolve_protect_explained,
        select_examples,
    )
    from captum_prxai.bench.settings import MetricSettings
    from captum_prxai.methods import (
        METHODS as REGISTRY,
        MethodContext,
        build_method,
        make_forward_func,
        validate_options,
    )
    from captum_prxai import viz as _colors  # the shared colour scale: display_max, intensities, is_signed
    from captum_prxai.viz.tokens import is_special_token

    t0 = time.perf_counter()
    model, tokenizer, data = load(cell)
    indices = select_examples(len(data.texts), cell.n, 0)
    max_length = resolve_max_length(cell.max_length, model, tokenizer)
    forward = make_forward_func(model)
    ctx = MethodContext.from_tokenizer(tokenizer, seed=0)
    kwargs = MetricSettings().metric_kwargs(ctx.mask_token_id, ctx.pad_token_id, 64)
    default = research_default(model)
    names = {m: default if m == DEFAULT else m for m in METHODS}
    explainers = {m: build_method(names[m], model, forward, ctx) for m in METHODS}
    # the benchmark's rule: a decoder's explained (last real) token stays in every perturbed input
    protect = resolve_protect_explained(None, model)
    teleporters = {}
    if teleport_n:
        for tp in TELEPORTS:
            opts = validate_options({default: {"teleport": tp}})
            teleporters[tp] = build_method(default, model, forward,
                                           MethodContext.from_tokenizer(tokenizer, seed=0, options=opts))
    rows: List[Dict[str, Any]] = []
    metric_rows: List[Dict[str, Any]] = []
    teleport_rows: List[Dict[str, Any]] = []
    example: Dict[str, Any] = {}
    for k, index in enumerate(indices):
        enc = encode_text(tokenizer, data.texts[index], max_length, torch.device("cpu"))
        with torch.no_grad():
            target = forward(enc.ids, enc.mask).argmax(dim=-1)
        pos = positions(enc, cell.decoder)
        explained_pos = int(torch.nonzero(pos["explained"]).flatten()[0])
        metric_special = metric_special_mask(enc, protect)
        for m, explainer in explainers.items():
            scores = explainer(enc.ids, enc.mask, enc.special, target)
            s = scores[0].double()
            ordinary = s[pos["ordinary"]]
            vals = [float(x) for x in s]
            # as the pictures draw them (viz.html.token_heatmap_html): the scale by the scores' sign, and a
            # decoder's explained token named, so it is left out of the maximum like a special token
            signed = _colors.is_signed(vals)
            shown = explained_pos if cell.decoder else None
            top_d = _colors.display_max(enc.tokens, vals, signed, explained=shown)
            top_a = _colors.display_max(enc.tokens, vals, signed, include_special=True)
            ordm = pos["ordinary"].tolist()
            int_d = [abs(t) for t, o in zip(_colors.intensities(vals, signed, top_d), ordm) if o]
            int_a = [abs(t) for t, o in zip(_colors.intensities(vals, signed, top_a), ordm) if o]
            rows.append({
                "int_default": sum(int_d) / max(len(int_d), 1), "int_all": sum(int_a) / max(len(int_a), 1),
                "viz_special": is_special_token(enc.tokens[explained_pos]),
                "example": index, "method": m, "n_tokens": int(enc.mask.sum()),
                "sum": float(s.sum()), "min": float(s.min()),
                "explained": float(s[pos["explained"]].sum()), "other": float(s[pos["other"]].sum()),
                "special": float(s[pos["special"]].sum()),
                "explained_top1": bool(float(s[explained_pos]) >= float(ordinary.max())) if ordinary.numel() else True,
                "explained_over_ordinary_max": float(s[explained_pos] / ordinary.max()) if ordinary.numel() else 0.0,
                "explained_rank": rank_among_real(scores, enc, explained_pos, metric_special),
                "explained_rank_unprotected": rank_among_real(scores, enc, explained_pos, enc.special),
                "marked_special": int(enc.special[0].sum()),
            })
            if k < metric_examples:
                raw = metric_values(forward, enc, scores, target, kwargs, metric_special)
                ren = metric_values(forward, enc, renormalised(scores, pos["special"]), target, kwargs,
                                    metric_special)
                metric_rows.append({"example": index, "method": m, "raw": raw, "renormalised": ren,
                                    "max_abs_diff": max(abs(raw[key] - ren[key]) for key in raw)})
            if m == DEFAULT and not example:
                example = {"index": index, "tokens": enc.tokens, "scores": [float(x) for x in s],
                           "special": pos["special"].tolist(), "signed": signed, "explained": shown}
        if k < teleport_n:
            for tp, explainer in teleporters.items():
                scores = explainer(enc.ids, enc.mask, enc.special, target)
                s = scores[0].double()
                met = metric_values(forward, enc, scores, target, kwargs, metric_special)
                teleport_rows.append({"example": index, "teleport": tp, "sum": float(s.sum()),
                                      "explained": float(s[pos["explained"]].sum()),
                                      "special": float(s[pos["special"]].sum()),
                                      "comprehensiveness": met["comprehensiveness"],
                                      "sufficiency": met["sufficiency"], "aopc_most": met["aopc_most"]})
        if (k + 1) % 10 == 0 or k + 1 == len(indices):
            log(f"{cell.name}: {k + 1}/{len(indices)} examples, {time.perf_counter() - t0:.0f}s")
    return {"cell": cell, "rows": rows, "metrics": metric_rows, "teleport": teleport_rows, "example": example,
            "default": default, "default_label": REGISTRY[default].label, "protected": protect,
            "damping": float(explainers["pr-tag"].attribution.damping), "seconds": time.perf_counter() - t0}


def label(res: Dict[str, Any], method: str) -> str:
    """A method's label in a cell's rows: the default by its registry label."""
    return f"{res['default_label']} (default)" if method == DEFAULT else LABELS[method]


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
                f"| {cell.name} | {label(res, m)} | {len(rows)} | "
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
             "same without `protect_explained` | "
             "comprehensiveness raw → renormalised | sufficiency raw → renormalised | "
             "Δ comprehensiveness (renormalised − raw) | Δ sufficiency | max abs difference, all metrics |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        for m in METHODS:
            mr = [r for r in res["metrics"] if r["method"] == m]
            if not mr:
                continue
            texts = []
            for key in ("explained_rank", "explained_rank_unprotected"):
                ranks = [r[key] for r in res["rows"] if r["method"] == m][: len(mr)]
                counts = {v: ranks.count(v) for v in sorted(set(ranks))}
                texts.append(", ".join(f"{v}: {c}/{len(ranks)}" for v, c in counts.items()))
            lines.append(
                f"| {res['cell'].name} | {label(res, m)} | {len(mr)} | {texts[0]} | {texts[1]} | "
                f"{fmt([r['raw']['comprehensiveness'] for r in mr])} → "
                f"{fmt([r['renormalised']['comprehensiveness'] for r in mr])} | "
                f"{fmt([r['raw']['sufficiency'] for r in mr])} → {fmt([r['renormalised']['sufficiency'] for r in mr])} | "
                f"{fmt(_delta(mr, 'comprehensiveness'), 4)} | {fmt(_delta(mr, 'sufficiency'), 4)} | "
                f"{max(r['max_abs_diff'] for r in mr):.3g} |")
    return lines


def example_table(res: Dict[str, Any]) -> List[str]:
    from captum_prxai import viz as _colors  # the shared colour scale: display_max, intensities, is_signed

    ex = res["example"]
    tokens, scores, signed = ex["tokens"], ex["scores"], ex["signed"]
    top_default = _colors.display_max(tokens, scores, signed, explained=ex["explained"])
    top_all = _colors.display_max(tokens, scores, signed, include_special=True)
    t_default = _colors.intensities(scores, signed, top_default)
    t_all = _colors.intensities(scores, signed, top_all)
    from captum_prxai.viz.tokens import is_special_token

    summary = (f"Colour maximum: {top_default:.4f} by default, {top_all:.4f} with the special tokens; ")
    if len(tokens) > 60:  # long inputs: the numbers only
        ordinary = [(abs(a), abs(b)) for sp, a, b in zip(ex["special"], t_default, t_all) if not sp]
        return [f"{res['cell'].name}, holdout example {ex['index']}, {label(res, DEFAULT)} ({len(tokens)} tokens): "
                + summary
                + f"mean intensity of the ordinary tokens {sum(a for a, _ in ordinary) / len(ordinary):.2f} vs "
                f"{sum(b for _, b in ordinary) / len(ordinary):.2f}."]
    lines = [f"{res['cell'].name}, holdout example {ex['index']}, {label(res, DEFAULT)}; colour intensity in "
             f"{'[-1, 1] (the diverging scale of signed scores)' if signed else '[0, 1]'} "
             f"(the HTML / terminal / graph scale, `viz._colors.display_max` then `intensities`):", "",
             "| token | score | counted as special here | special to the viz (`is_special_token`) | intensity, default scale | "
             "intensity, `scale_special_tokens=True` |", "|---|---|---|---|---|---|"]
    for tok, s, sp, a, b in zip(tokens, scores, ex["special"], t_default, t_all):
        shown = tok.replace("|", "\\|")
        lines.append(f"| `{shown}` | {s:.4f} | {'yes' if sp else ''} | {'yes' if is_special_token(tok) else ''} | "
                     f"{a:.2f} | {b:.2f} |")
    ordinary = [(s, abs(a), abs(b)) for tok, s, sp, a, b in zip(tokens, scores, ex["special"], t_default, t_all)
                if not sp]
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
            lines.append(f"| {res['cell'].name} | {label(res, m)} | {sum(r['viz_special'] for r in rows)}/{len(rows)} | "
                         f"{fmt([r['int_default'] for r in rows], 2)} | {fmt([r['int_all'] for r in rows], 2)} |")
    return lines


def teleport_table(res: Dict[str, Any]) -> List[str]:
    rows = res["teleport"]
    n = len({r["example"] for r in rows})
    lines = [f"{label(res, DEFAULT)} on {n} holdout examples of {res['cell'].name} (the first {n} of the "
             f"n={res['cell'].n} sample); "
             "paired differences against `teleport=\"target\"` (the default):", "",
             "| teleport | sum of scores (min/max) | [CLS] score | all special tokens | comprehensiveness | "
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
        f"{label(r, m)} {mean_sem([x['special'] for x in r['rows'] if x['method'] == m])[0]:.2f}"
        for m in METHODS) for r in results)
    one_walk = [x["sum"] for r in results for x in r["rows"] if x["method"] != DEFAULT]
    sums = "; ".join(f"{r['cell'].name}'s {label(r, DEFAULT)} " + "{:.3f}–{:.3f}".format(
        *(f([x["sum"] for x in r["rows"] if x["method"] == DEFAULT]) for f in (min, max))) for r in results)
    out.append(f"* **Size.** Mean score on the special tokens: {shares}. One walk sums to one over the tokens "
               f"(max deviation {max(abs(v - 1) for v in one_walk):.1e}); the defaults walk twice, each walk sums "
               f"to one, so `P⁺ − λ P⁻` sums to 1 − λ: {sums}. With the target teleport the explained token "
               "receives the whole teleport term of each walk, 1 − damping = 0.3, before any edge, and the default "
               "subtracts λ times the negative walk's share there from the positive walk's. PR-A, whose attention "
               "edges also point at `[CLS]`, puts well over half of the mass there on the encoders.")
    if enc:
        diff = max((m["max_abs_diff"] for r in enc for m in r["metrics"]), default=float("nan"))
        n_ex = sum(len(r["metrics"]) for r in enc)
        out.append(f"* **(a) Deletion metrics, encoders: no effect.** `bench/runner.encode_text` asks the tokenizer for "
                   "`special_tokens_mask` and passes it to `evaluate_faithfulness`; `metrics/masking.real_token_mask` "
                   "drops those tokens, `select_tokens` ranks only the real tokens (special ones are filled with "
                   "−inf/+inf before the sort) and `remove_tokens` never removes them; `k` counts real tokens only. "
                   "Rescaling the ordinary scores is positive, which keeps their order, so every "
                   f"metric is unchanged: max abs difference {diff:.3g} over {n_ex} (example, method) pairs, all "
                   "metrics of `evaluate_faithfulness`.")
    for r in dec:
        parts, protected = [], []
        for m in METHODS:
            rows = [x for x in r["rows"] if x["method"] == m]
            protected.append(sum(x["explained_rank"] == 0 for x in rows) == len(rows))
            first = sum(x["explained_rank_unprotected"] == 1 for x in rows)
            mr = [x for x in r["metrics"] if x["method"] == m]
            dc = mean_sem(_delta(mr, "comprehensiveness"))
            ds = mean_sem(_delta(mr, "sufficiency"))
            parts.append(f"{label(r, m)}: without the protection first in the removal order in {first}/{len(rows)}; "
                         f"Δ comprehensiveness {dc[0]:+.3f} ± {dc[1]:.3f}, Δ sufficiency {ds[0]:+.3f} ± {ds[1]:.3f} "
                         f"(n={len(mr)})")
        kept = ("it is never ranked or removed (rank 0 in every example, for every method)" if all(protected)
                else "yet it was ranked in some examples (see section 2)")
        own = [x for x in r["rows"] if x["method"] == DEFAULT]
        score = mean_sem([x["explained"] for x in own])
        places = sorted(x["explained_rank_unprotected"] for x in own)
        lam = 1 - mean_sem([x["sum"] for x in own])[0]  # each walk sums to one, so the scores sum to 1 − λ
        walks = (f" In the default's two walks each walk gives the last token its teleport term, so `P⁺ − λ P⁻` "
                 f"(λ = {lam:.2f}) leaves it {score[0]:+.3f} ± {score[1]:.3f} on average, and without the protection it "
                 f"would fall at place {places[len(places) // 2]} of the removal order (median over the examples).")
        out.append(f"* **(a) Deletion metrics, decoder ({r['cell'].name}).** The SmolLM2 tokenizer adds no special "
                   "tokens (`special_tokens_mask` is all 0), so the benchmark adds the explained last token to the "
                   f"mask the metrics see (`run_benchmark`'s `protect_explained`, on for decoders): {kept}. The last "
                   "token has no in-edges (causal attention; self-loops dropped, `self_loops=\"auto\"`), so its "
                   "score is the teleport's; the first token (sink) gets ~0 (its in-edges are dropped, "
                   "`sink=\"auto\"`) and is ranked like any word. Zeroing the first and last token and rescaling "
                   "(section 2, paired renormalised − raw): " + "; ".join(parts) + "." + walks)
    pics = []
    for r in results:
        rows = [x for x in r["rows"] if x["method"] == DEFAULT]
        pics.append(f"{r['cell'].name}: ordinary tokens' mean intensity "
                    f"{mean_sem([x['int_default'] for x in rows])[0]:.2f} (default scale) vs "
                    f"{mean_sem([x['int_all'] for x in rows])[0]:.2f} (`scale_special_tokens=True`)")
    out.append("* **(b) Pictures.** `viz._colors.display_max` (used by `html.token_heatmap_html`, "
               "`records.to_visualization_records`, `terminal` and `graph`) leaves tokens that "
               "`viz.tokens.is_special_token` recognises (`[CLS]`, `[SEP]`, `<s>`, `<|...|>`) and the explained "
               "token it is given (a decoder's last word) out of the colour maximum and clips them to full colour, "
               "so the teleport's mass does not wash out the words; with `scale_special_tokens=True` it would. "
               f"The default: " + "; ".join(pics) + ".")
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
                bits.append(f"`{tp}` special-token score {sh:.3f}, comprehensiveness "
                            f"{mean_sem([x['comprehensiveness'] for x in rr])[0]:.3f}")
                continue
            dc = mean_sem([x["comprehensiveness"] - base[x["example"]]["comprehensiveness"] for x in rr])
            dsu = mean_sem([x["sufficiency"] - base[x["example"]]["sufficiency"] for x in rr])
            bits.append(f"`{tp}` special-token score {sh:.3f}, Δ comprehensiveness {dc[0]:+.3f} ± {dc[1]:.3f}, "
                        f"Δ sufficiency {dsu[0]:+.3f} ± {dsu[1]:.3f}")
        worse = all(mean_sem([x["comprehensiveness"] - base[x["example"]]["comprehensiveness"]
                              for x in rows if x["teleport"] == tp])[0] < 0 for tp in TELEPORTS[1:])
        verdict = (" The other teleports remove most of the special-token mass but lower comprehensiveness: "
                   "since the encoder metrics never see the special tokens, the mass costs nothing there, and the "
                   "teleport that creates it is the better construction."
                   if worse else " The other teleports remove most of the mass; see the table for the metrics.")
        out.append(f"* **(c) Construction.** The mass is the teleport's: {label(r, DEFAULT)} on {len(base)} "
                   f"movie sentences, " + "; ".join(bits) + "." + verdict + " `GraphSpec.teleport` takes "
                   "`\"target\"` (default), `\"uniform\"`, `\"input_gradient\"` or a tensor "
                   "(`graph/builders.TELEPORTS`).")
    return out


def report(results: List[Dict[str, Any]], command: str) -> str:
    out = ["# Special-token mass of the PR-XAI presets", "",
           "Holdout half of each test split (`dataset_half(load_dataset(ds, \"test\"), \"holdout\")`), examples "
           "`select_examples(len, n, 0)` as in `benchmarks/matrix.py`, each explained for the predicted class. "
           "Mean ± standard error over examples. The explained token is `[CLS]` for the encoders and the last "
           "token for the decoder; the other special tokens are `[SEP]` (encoders) and the first token, the "
           "attention sink (decoder). Produced by:", "", "```", command, "```", "",
           "## 1. Scores on the special tokens", ""]
    damping = results[0]["damping"] if results else float("nan")
    out += share_table(results)
    out += ["", f"Column 5: min and max over the examples of the sum of the scores `attribute` returns (one for one "
                f"walk; 1 − λ for the defaults' two walks, `P⁺ − λ P⁻`, each walk summing to one). Column 4: how "
                f"many tokens the tokenizer marks special (2 for the encoders, none for SmolLM2; the benchmark "
                f"also protects SmolLM2's explained last token). Damping {damping}: with `teleport=\"target\"` "
                f"each walk jumps back to the explained token with probability {1 - damping:.1f} at every step, "
                f"so that token holds at least {1 - damping:.1f} of each walk's mass whatever the edges are.", "",
            "## 2. Deletion metrics (`evaluate_faithfulness`, the benchmark's settings) on raw vs renormalised scores",
            "", "Renormalised: the special tokens' scores set to 0 and the ordinary tokens' scores divided by the sum "
                "of their absolute values. The metrics get the benchmark's special-tokens mask (the decoder's "
                "explained last token added: `protect_explained`). The rank columns count the examples by the place "
                "of the explained token in the metrics' removal order (`rank: examples`; 1 = removed first; 0 = "
                "protected, never removed), with that mask and with the tokenizer's alone.",
                ""]
    out += metric_table(results)
    out += ["", "## 3. Pictures", "", "Over all examples of each cell:", ""]
    out += washout_table(results) + [""]
    for res in results:
        if res["example"]:
            out += example_table(res) + [""]
    out += ["## 4. Teleport (the default)", ""]
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
