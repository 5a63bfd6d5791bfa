"""The faithfulness matrix under metrics the default was not tuned on (issue 65, parts 3 and 4).

The PR-XAI default was chosen by ERASER comprehensiveness and sufficiency with hard deletion at 1/5/10/20/50%
(the "tuned protocol"). This script measures, on the cells of ``benchmarks/matrix.py`` (same held-out examples,
same tokenisation, same methods' settings), the default against PR-AG, GAE, generalized attention flow, LIG,
AttnLRP (precomputed, see ``benchmarks/attnlrp/README.md``) and the random control under:

* ERASER comprehensiveness and sufficiency, the tuned protocol (from :func:`captum_prxai.bench.run_benchmark`);
* soft comprehensiveness and sufficiency (Zhao & Aletras 2023; :mod:`captum_prxai.metrics.soft`);
* normalised AOPC (Edin et al. 2024; :func:`captum_prxai.metrics.normalized_aopc`);
* F-Fidelity Fid+ and Fid- (Zheng et al. 2025; :func:`captum_prxai.metrics.f_fidelity`), on one copy of the
  cell's model fine-tuned once per run with the library's documented cheap budget (30 AdamW steps of 8 training
  examples, lr 5e-5, at most 10% of the tokens removed) on a seeded sample of the cell's training split;
* ERASER comprehensiveness and sufficiency with the removed tokens *replaced*
  (:func:`captum_prxai.metrics.replacement_token_id`: ``[MASK]`` for encoders, a space for decoders);

and gives each method's cost: the attribution's time per example (one CPU thread) and its peak memory, as the
benchmark runner measures them.

Each cell writes ``benchmarks/results/metric-matrix/<cell>/``: the runner's outputs (``results.csv``,
``summary.md``, ``summary.json``; its ``cache.jsonl`` with the scores stays local), ``metrics.jsonl`` (one record per
example and method, the per-record cache of the metrics above, committed), ``meta.json`` (the keys and examples the
tables read) and ``COMMAND``. A rerun computes only what is missing: the runner resumes from its cache (or, with
the scores gone, from ``results.csv``), and the metrics from ``metrics.jsonl``. ``--tables`` writes
``benchmarks/results/metric_matrix.md`` from every cell's folder, listing the cells not run yet.

    OMP_NUM_THREADS=1 nice -n 15 python benchmarks/metric_matrix.py --cell minilm--movie-sentences --n 40 --threads 1
    python benchmarks/metric_matrix.py --tables
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' own modules
from matrix import ARCH_NAMES, CELLS, DATA_NAMES, RESULTS, Cell  # noqa: E402

OUT_DIR = RESULTS / "metric-matrix"
TABLES = RESULTS / "metric_matrix.md"
METRICS_FILE = "metrics.jsonl"
META_FILE = "meta.json"

#: The rivals of the default, in table order (the default comes first, the random control last).
RIVALS = ("pr-ag", "gae", "gaf", "ig", "attnlrp", "random")
#: Display names (the matrix's "ig" is LayerIntegratedGradients on the embeddings).
NAMES = {"pr-ag": "PR-AG", "gae": "GAE", "gaf": "GAF", "ig": "LIG", "attnlrp": "AttnLRP", "random": "random"}


@dataclass(frozen=True)
class Metric:
    """One column of the study: its record key, its header, and whether higher is better."""

    key: str
    header: str
    higher: bool
    tuned: bool = False


#: The metrics, in table order. The first two are the protocol the default was tuned on.
METRICS: Tuple[Metric, ...] = (
    Metric("eraser_comp", "ERASER comprehensiveness (tuned protocol)", True, tuned=True),
    Metric("eraser_suff", "ERASER sufficiency (tuned protocol)", False, tuned=True),
    Metric("soft_comp", "Soft comprehensiveness (Soft-NC)", True),
    Metric("soft_suff", "Soft sufficiency (Soft-NS)", True),
    Metric("naopc", "Normalised AOPC", True),
    Metric("ffid_comp", "F-Fidelity comprehensiveness (Fid+)", True),
    Metric("ffid_suff", "F-Fidelity sufficiency (Fid-)", False),
    Metric("replace_comp", "Comprehensiveness, replacement token", True),
    Metric("replace_suff", "Sufficiency, replacement token", False),
)
SHORT = {"eraser_comp": "ERASER comp. ↑", "eraser_suff": "ERASER suff. ↓", "soft_comp": "Soft-NC ↑",
         "soft_suff": "Soft-NS ↑", "naopc": "NAOPC ↑", "ffid_comp": "Fid+ ↑", "ffid_suff": "Fid- ↓",
         "replace_comp": "repl. comp. ↑", "replace_suff": "repl. suff. ↓"}


@dataclass(frozen=True)
class MetricSettings:
    """The settings of the metrics beyond the tuned protocol (all part of each record's key).

    The sample sizes are below the library's defaults (20 masks, beam 5, 10 subsets) to fit this CPU; the
    fine-tuning budget is the library's default.

    Attributes:
        soft_samples: Bernoulli masks per example of the soft metrics.
        naopc_beam: Beam width of normalised AOPC's bounds.
        naopc_max_tokens: Normalised AOPC only on examples with at most this many real tokens (its bounds cost
            about ``beam * n^2`` forward rows); longer examples get no value.
        ffid_samples: Random subsets per example and fraction of F-Fidelity.
        ffid_train: Training examples of the cell the copy is fine-tuned on (a seeded sample).
        ffid_steps, ffid_lr, ffid_batch, ffid_mask_rate: The fine-tuning budget (the library's defaults).
        seed: Seed of every random draw.
    """

    soft_samples: int = 10
    naopc_beam: int = 2
    naopc_max_tokens: int = 64
    ffid_samples: int = 5
    ffid_train: int = 256
    ffid_steps: int = 30
    ffid_lr: float = 5e-5
    ffid_batch: int = 8
    ffid_mask_rate: float = 0.1
    seed: int = 0


def cell_methods(cell: Cell) -> List[str]:
    """The methods of ``cell`` in this study: its default (the research variant equal to ``pr-xai``), then
    :data:`RIVALS`."""
    return [cell.default, *RIVALS]


# ----------------------------------------------------------------------------- per-record metrics
def _text_of(dataset: Any, index: int) -> str:
    return dataset.texts[index] if hasattr(dataset, "texts") else dataset[index][0]


def _memo_forward(forward: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Tensor, Tensor], Tensor]:
    """``forward`` remembering its outputs by input: normalised AOPC's bounds depend on the example only, so the
    methods of one example share their forward passes (the values are the same as without the memo)."""
    memo: Dict[Tuple, Tensor] = {}

    def call(ids: Tensor, mask: Tensor) -> Tensor:
        key = (tuple(ids.shape), ids.cpu().numpy().tobytes(), mask.cpu().numpy().tobytes())
        if key not in memo:
            memo[key] = forward(ids, mask)
        return memo[key]

    return call


def embedding_forward(model: nn.Module) -> Callable[[Tensor, Tensor], Tensor]:
    """``forward(inputs_embeds, attention_mask) -> logits`` of a Hugging Face classifier (the soft metrics')."""

    def forward(embeds: Tensor, mask: Tensor) -> Tensor:
        out = model(inputs_embeds=embeds, attention_mask=mask.long())
        return out.logits if hasattr(out, "logits") else out

    return forward


def finetune_copy(model: nn.Module, tokenizer: Any, train: Any, max_length: int, settings: MetricSettings,
                  pad_token_id: int) -> nn.Module:
    """F-Fidelity's fine-tuned copy of ``model`` (the model itself is never modified): the library's
    :func:`~captum_prxai.metrics.random_mask_finetune` on a seeded sample of ``settings.ffid_train`` training
    examples with their gold labels."""
    from captum_prxai.bench import select_examples
    from captum_prxai.metrics import random_mask_finetune

    size = len(train.texts) if hasattr(train, "texts") else len(train)
    picked = select_examples(size, settings.ffid_train, settings.seed)
    texts = [_text_of(train, i) for i in picked]
    labels = [train.labels[i] if hasattr(train, "labels") else train[i][1] for i in picked]
    device = next(model.parameters()).device
    enc = tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_special_tokens_mask=True,
                    return_tensors="pt")
    return random_mask_finetune(model, enc["input_ids"].to(device), enc["attention_mask"].to(device),
                                torch.tensor(labels, device=device), enc["special_tokens_mask"].to(device),
                                steps=settings.ffid_steps, lr=settings.ffid_lr, mask_rate=settings.ffid_mask_rate,
                                train_batch_size=settings.ffid_batch, pad_token_id=pad_token_id,
                                seed=settings.seed)


def example_metrics(model: nn.Module, forward: Callable[[Tensor, Tensor], Tensor], ids: Tensor, mask: Tensor,
                    special: Tensor, scores: Tensor, target: int, finetuned: nn.Module, replacement_id: int,
                    pad_token_id: int, settings: MetricSettings, batch_size: int = 64
                    ) -> List[Dict[str, Optional[float]]]:
    """The metrics beyond the tuned protocol of one example's explanations, one dict per row of ``scores``.

    ``ids``, ``mask`` and ``special`` are the example's ``(1, T)`` tensors, ``scores`` the ``(M, T)`` scores of
    its ``M`` methods; each metric is one call of the library's function on the example repeated ``M`` times
    (one batch, so the random draws of the soft metrics and of F-Fidelity are those of that batch): soft
    comprehensiveness and sufficiency, normalised AOPC (``None`` above ``settings.naopc_max_tokens`` real
    tokens), F-Fidelity on ``finetuned``, and ERASER removal with ``replacement_id`` in place of the tokens.
    """
    from captum_prxai.metrics import (ERASER_BINS, comprehensiveness, f_fidelity, normalized_aopc,
                                      soft_comprehensiveness, soft_sufficiency, sufficiency)

    rows = scores.shape[0]
    scores = scores.to(torch.float32)
    ids, mask, special = (t.expand(rows, -1) for t in (ids, mask, special))
    out: Dict[str, List[Optional[float]]] = {}
    with torch.no_grad():
        embeds = model.get_input_embeddings()(ids)
    soft = dict(target=target, n_samples=settings.soft_samples, seed=settings.seed, batch_size=batch_size)
    efwd = embedding_forward(model)
    out["soft_comp"] = soft_comprehensiveness(efwd, embeds, mask, special, scores, **soft).tolist()
    out["soft_suff"] = soft_sufficiency(efwd, embeds, mask, special, scores, **soft).tolist()
    n_real = int((mask[0].bool() & ~special[0].bool()).sum())
    if n_real <= settings.naopc_max_tokens:
        out["naopc"] = normalized_aopc(forward, ids, mask, special, scores, target=target,
                                       beam_width=settings.naopc_beam, pad_token_id=pad_token_id,
                                       batch_size=batch_size).naopc.tolist()
    else:
        out["naopc"] = [None] * rows
    fid = f_fidelity(model, ids, mask, special, scores, target=target, mask_rate=settings.ffid_mask_rate,
                     n_samples=settings.ffid_samples, finetuned=finetuned, pad_token_id=pad_token_id,
                     seed=settings.seed, batch_size=batch_size)
    out["ffid_comp"], out["ffid_suff"] = fid.fid_plus.tolist(), fid.fid_minus.tolist()
    removal = dict(target=target, bins=ERASER_BINS, mode="replace", replacement_id=replacement_id,
                   pad_token_id=pad_token_id, batch_size=batch_size)
    out["replace_comp"] = comprehensiveness(forward, ids, mask, special, scores, **removal).mean.tolist()
    out["replace_suff"] = sufficiency(forward, ids, mask, special, scores, **removal).mean.tolist()
    return [{k: (None if v[r] is None or math.isnan(v[r]) else float(v[r])) for k, v in out.items()}
            for r in range(rows)]


def metric_keys(attribution_keys: Dict[str, str], settings: MetricSettings, replacement_id: int,
                methods: Sequence[str]) -> Dict[str, str]:
    """The key of each method's metric records: its attribution's cache key (model, tokenizer, data, method
    options, the tuned protocol's settings), this study's settings and the replacement token."""
    from captum_prxai.bench.cache import record_key

    shared = {"settings": asdict(settings), "replacement_id": replacement_id, "study": "metric-matrix/1"}
    return {m: record_key({**shared, "attribution": attribution_keys[m]}) for m in methods}


def run_metrics(model: nn.Module, tokenizer: Any, dataset: Any, train: Any, methods: Sequence[str], n: int,
                out_dir: Path, *, model_name: Optional[str] = None, max_length: Optional[int] = None,
                method_options: Optional[Dict[str, Dict[str, Any]]] = None,
                settings: MetricSettings = MetricSettings(), batch_size: int = 64,
                log: Callable[[str], None] = print) -> Dict[str, Any]:
    """Explain the first ``n`` examples of ``dataset`` with ``methods`` (through
    :func:`captum_prxai.bench.run_benchmark`: its example selection, encoding, method construction, ERASER
    metrics, time and memory, and its resumable cache), then compute every :data:`METRICS` column of each
    (example, method) not yet in ``out_dir/metrics.jsonl``.

    Returns:
        ``{"records": [...], "computed": int, "cached": int, "keys": {method: key}, "examples": [...]}``; the
        records are in example order, then ``methods`` order.
    """
    from captum_prxai.bench import MethodContext, make_forward_func, run_benchmark
    from captum_prxai.bench.cache import RecordCache
    from captum_prxai.bench.runner import (encode_text, metric_special_mask, resolve_max_length,
                                           resolve_protect_explained)
    from captum_prxai.capture import model_is_causal
    from captum_prxai.metrics import replacement_token_id

    out_dir = Path(out_dir)
    result = run_benchmark(model, tokenizer, dataset, list(methods), n=n, out_dir=out_dir, model_name=model_name,
                           max_length=max_length, method_options=method_options, plot=False, progress=False,
                           reuse_results=True, batch_size=batch_size)
    if result.errors:
        raise RuntimeError(f"{len(result.errors)} explanations failed, first: {result.errors[0]}")
    causal = model_is_causal(model)
    replacement_id = replacement_token_id(tokenizer, causal=causal)
    pad_token_id = MethodContext.from_tokenizer(tokenizer).pad_token_id
    keys = metric_keys(result.meta["cache_keys"], settings, replacement_id, methods)
    cache = RecordCache(out_dir / METRICS_FILE)
    cached = cache.read(set(keys.values()))
    device = next(model.parameters()).device
    length = resolve_max_length(max_length, model, tokenizer)
    protect = resolve_protect_explained(None, model)
    forward = make_forward_func(model)
    finetuned: Optional[nn.Module] = None
    by_example: Dict[int, Dict[str, Dict[str, Any]]] = {}
    for rec in result.records:
        by_example.setdefault(rec["example"], {})[rec["method"]] = rec
    records, computed, n_cached = [], 0, 0
    for count, (index, recs) in enumerate(by_example.items(), 1):
        rids = {m: (keys[m], index, m, recs[m]["text_sha"], recs[m]["label"]) for m in methods}
        if all(rid in cached for rid in rids.values()):
            records += [cached[rids[m]] for m in methods]
            n_cached += len(methods)
            continue
        # an example is computed for all its methods at once (one batch: the same draws whatever was cached)
        lost = [m for m in methods if "scores" not in recs[m]]
        if lost:
            raise RuntimeError(f"example {index}: the metrics of {lost} are not all in {METRICS_FILE} and their "
                               "scores are not in the runner's cache.jsonl (only in results.csv); delete the "
                               "example's rows from results.csv to compute them again.")
        enc = encode_text(tokenizer, _text_of(dataset, index), length, device)
        scores = torch.tensor([recs[m]["scores"] for m in methods], dtype=torch.float32, device=device)
        if scores.shape[1] != enc.ids.shape[1]:
            raise RuntimeError(f"example {index}: {scores.shape[1]} scores for {enc.ids.shape[1]} tokens")
        if finetuned is None:
            log(f"fine-tuning F-Fidelity's copy ({settings.ffid_steps} steps)")
            finetuned = finetune_copy(model, tokenizer, train, length, settings, pad_token_id)
        values = example_metrics(model, _memo_forward(forward), enc.ids, enc.mask, metric_special_mask(enc, protect),
                                 scores, recs[methods[0]]["target"], finetuned, replacement_id, pad_token_id,
                                 settings, batch_size)
        for method, value in zip(methods, values):
            rec = recs[method]
            if rids[method] in cached:  # kept as it was
                records.append(cached[rids[method]])
                n_cached += 1
                continue
            out = {"config_key": keys[method], "example": index, "method": method, "text_sha": rec["text_sha"],
                   "label": rec["label"], "target": rec["target"], "n_tokens": rec["n_tokens"], "prob": rec["prob"],
                   "metrics": {"eraser_comp": rec["metrics"]["comprehensiveness"],
                               "eraser_suff": rec["metrics"]["sufficiency"], **value},
                   "time_s": rec["time_s"], "peak_mem_mb": rec["peak_mem_mb"]}
            cache.append(out)
            records.append(out)
            computed += 1
        log(f"example {count}/{len(by_example)} (#{index}) done")
    return {"records": records, "computed": computed, "cached": n_cached, "keys": keys,
            "examples": list(by_example)}


# ----------------------------------------------------------------------------- one cell of the matrix
def run_cell(cell: Cell, n: Optional[int], argv: Sequence[str], settings: MetricSettings = MetricSettings()) -> Path:
    """Run the study on one cell of ``benchmarks/matrix.py`` (its model, held-out examples, max_length and LIG
    batch) into ``metric-matrix/<cell>/``."""
    from captum_prxai.bench import register_precomputed
    from captum_prxai.bench.ablation import dataset_half
    from captum_prxai.bench.runner import write_command
    from captum_prxai.data import load_dataset
    from captum_prxai.models import load_model

    model, tokenizer = load_model(cell.model)
    dataset = dataset_half(load_dataset(cell.dataset, "test"), "holdout")
    train = load_dataset(cell.dataset, "train")
    for name, text, scores in cell.precomputed:
        register_precomputed(name, RESULTS / scores, label=text, overwrite=True)
    out = OUT_DIR / cell.name
    done = run_metrics(model, tokenizer, dataset, train, cell_methods(cell), n or cell.n or (100 if cell.long else 200),
                       out, model_name=cell.model, max_length=cell.max_length,
                       method_options={"ig": {"internal_batch_size": cell.ig_batch}} if cell.ig_batch else None,
                       settings=settings, log=lambda m: print(f"[{cell.name}] {m}", flush=True))
    write_meta(out, cell.name, cell_methods(cell), done, settings)
    write_command(out, "OMP_NUM_THREADS=1 nice -n 15 python benchmarks/metric_matrix.py", argv)
    print(f"[{cell.name}] {done['computed']} records computed, {done['cached']} from {METRICS_FILE}", flush=True)
    return out


def write_meta(out: Path, name: str, methods: Sequence[str], done: Dict[str, Any], settings: MetricSettings) -> Path:
    """``meta.json``: the keys and examples of a run (what :func:`load_cell` and the tables read)."""
    from captum_prxai.bench.cache import write_atomic

    meta = {"cell": name, "methods": list(methods), "keys": done["keys"], "examples": done["examples"],
            "settings": asdict(settings)}
    return write_atomic(Path(out) / META_FILE, json.dumps(meta, indent=1) + "\n")


# ----------------------------------------------------------------------------- tables
def load_cell(folder: Path) -> Optional[Dict[str, Dict[str, Dict[int, float]]]]:
    """``{metric: {method: {example: value}}}`` plus ``"time_s"`` and ``"peak_mem_mb"``, of a cell's last run (the
    records of ``meta.json``'s keys and examples), or ``None`` when the cell has not run."""
    from captum_prxai.bench.cache import RecordCache

    if not (folder / META_FILE).is_file():
        return None
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    keys, examples = meta["keys"], set(meta["examples"])
    values: Dict[str, Dict[str, Dict[int, float]]] = {}
    for rec in RecordCache(folder / METRICS_FILE).read(set(keys.values())).values():
        if rec["example"] not in examples or keys.get(rec["method"]) != rec["config_key"]:
            continue
        fields = {**rec["metrics"], "time_s": rec["time_s"], "peak_mem_mb": rec["peak_mem_mb"]}
        for name, value in fields.items():
            if value is not None:
                values.setdefault(name, {}).setdefault(rec["method"], {})[rec["example"]] = float(value)
    return values


def _stat(values: Dict[int, float]) -> Dict[str, float]:
    from captum_prxai.metrics import mean_sem

    mean, sem = mean_sem(list(values.values())) if values else (float("nan"), float("nan"))
    return {"mean": mean, "sem": sem, "n": len(values)}


def side(diff: Dict[str, float], higher: bool) -> str:
    """The default's side of a paired difference ``default − rival``: ``ahead``, ``level`` or ``behind`` by more than
    one paired standard error (the matrix's convention, :func:`captum_prxai.bench.report.paired_verdict`)."""
    from captum_prxai.bench.report import paired_verdict

    comp_side, suff_side = paired_verdict(diff, diff).split(" / ")
    return comp_side if higher else suff_side


def best_method(per_method: Dict[str, Dict[int, float]], higher: bool, control: str = "random") -> Optional[str]:
    """The method with the best mean on one metric of one cell, the control aside (``None`` if none has values)."""
    means = {m: _stat(v)["mean"] for m, v in per_method.items() if m != control and v}
    means = {m: v for m, v in means.items() if not math.isnan(v)}
    return max(means, key=lambda m: means[m] if higher else -means[m]) if means else None


def standing(per_method: Dict[str, Dict[int, float]], default: str, higher: bool,
             control: str = "random") -> Optional[str]:
    """Where the default stands on one metric of one cell among the methods but the control: ``first`` (the best
    mean), ``level`` (not first, but within one paired standard error of the best), else ``behind``; ``None``
    without the default's values."""
    from captum_prxai.bench.report import paired_difference

    means = {m: _stat(v)["mean"] for m, v in per_method.items() if m != control and v}
    if default not in means or math.isnan(means[default]):
        return None
    best = best_method(per_method, higher, control)
    if best == default or means[best] == means[default]:
        return "first"
    diff = paired_difference(per_method[default], per_method[best])
    return "level" if side(diff, higher) == "level" else "behind"


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's τ-b of two score lists (:func:`scipy.stats.kendalltau`); ``nan`` for fewer than two items."""
    from scipy.stats import kendalltau

    if len(x) < 2:
        return float("nan")
    return float(kendalltau(x, y).statistic)


def rank_agreement(cells: Sequence[Dict[str, Dict[str, Dict[int, float]]]], metrics: Sequence[Metric] = METRICS
                   ) -> Dict[Tuple[str, str], Dict[str, float]]:
    """Kendall's τ between every two metrics' rankings of the methods, per cell (over the methods both metrics
    have there, each metric oriented so that higher is better), then its mean over the cells: ``{(a, b): {"mean",
    "n"}}``."""
    out: Dict[Tuple[str, str], Dict[str, float]] = {}
    for i, a in enumerate(metrics):
        for b in metrics[i + 1:]:
            taus = []
            for cell in cells:
                ma, mb = cell.get(a.key, {}), cell.get(b.key, {})
                common = [m for m in ma if m in mb and ma[m] and mb[m]]
                xs = [_stat(ma[m])["mean"] * (1 if a.higher else -1) for m in common]
                ys = [_stat(mb[m])["mean"] * (1 if b.higher else -1) for m in common]
                tau = kendall_tau(xs, ys)
                if not math.isnan(tau):
                    taus.append(tau)
            out[(a.key, b.key)] = {"mean": sum(taus) / len(taus) if taus else float("nan"), "n": len(taus)}
    return out


def summary_counts(standings: Dict[str, Dict[str, Optional[str]]]) -> Dict[str, Dict[str, Any]]:
    """Per metric, from ``{metric: {cell: standing}}``: the cells where the default is first, level, behind, and
    the number of cells with a standing."""
    out = {}
    for metric, per_cell in standings.items():
        run = {c: s for c, s in per_cell.items() if s is not None}
        out[metric] = {k: sorted(c for c, s in run.items() if s == k) for k in ("first", "level", "behind")}
        out[metric]["run"] = len(run)
    return out


def heading(cell: Cell, n: Optional[int]) -> str:
    """A cell's column heading: ``MiniLM · sentences (n=40)``, or ``(not run)``."""
    return f"{ARCH_NAMES[cell.architecture]} · {DATA_NAMES[cell.dataset]} " + (f"(n={n})" if n else "(not run)")


def write_tables(path: Path = TABLES, out_dir: Path = OUT_DIR) -> Path:
    """``benchmarks/results/metric_matrix.md``: per metric a table (methods x cells) and the paired differences
    default − rival with verdicts, the summary of the default's standing, the rank agreement between metrics, and
    per cell the metrics next to the cost."""
    from captum_prxai.bench.cache import write_atomic
    from captum_prxai.bench.report import format_signed, format_stat, markdown_table, paired_difference

    cells = list(CELLS.values())
    data = {c.name: load_cell(out_dir / c.name) for c in cells}
    ran = [c for c in cells if data[c.name] is not None]
    missing = [c.name for c in cells if data[c.name] is None]
    n_of = {c.name: len(json.loads((out_dir / c.name / META_FILE).read_text())["examples"]) for c in ran}
    heads = [heading(c, n_of.get(c.name)) for c in cells]
    lines = ["# The faithfulness matrix under other metrics", "",
             "The default (`pr-xai`, i.e. each cell's `research_default` column of the matrix) against PR-AG, GAE, "
             "generalized attention flow (GAF), LIG (the matrix's `ig`: LayerIntegratedGradients on the embeddings), "
             "AttnLRP (lxt, precomputed) and a random control, on the held-out examples of each cell of "
             "[`matrix.md`](matrix.md) (the first n of the matrix's sample). The default was tuned on the first two "
             "metrics (ERASER, hard deletion at 1/5/10/20/50%); the others were never optimised. Generated by "
             "`python benchmarks/metric_matrix.py --tables` from [`metric-matrix/<cell>/`](metric-matrix/) (each "
             "with its `COMMAND`, e.g. `OMP_NUM_THREADS=1 nice -n 15 python benchmarks/metric_matrix.py --cell "
             "minilm--movie-sentences --n 100 --threads 1`); see docs/metrics.md for the metrics.", "",
             "Metrics: ERASER comprehensiveness ↑ / sufficiency ↓ (tuned protocol); soft comprehensiveness (Soft-NC) "
             "↑ and soft sufficiency (Soft-NS) ↑ (Zhao & Aletras 2023: Bernoulli masks on the embeddings, 10 draws); "
             "normalised AOPC ↑ (Edin et al. 2024, bounds by beam search of width 2, on examples of at most 64 real tokens); F-Fidelity Fid+ ↑ / "
             "Fid- ↓ (Zheng et al. 2025, on one copy per cell fine-tuned for 30 AdamW steps of 8 training examples, "
             "lr 5e-5, ≤ 10% of tokens removed; α = 10..50%, 5 random subsets each); comprehensiveness ↑ / sufficiency ↓ "
             "with the removed tokens replaced by `[MASK]` (a space on decoders) instead of deleted. Soft-NC divides by "
             "1 − S(x, ŷ, 0), which is tiny where zeroing every embedding barely moves the prediction, so a few "
             "examples can dominate its mean (values above 1 come from them): read it with its s.e. and the paired "
             "table. Cost: the "
             "attribution's wall-clock seconds per example on one CPU thread (`nice`d, on a shared 2-core machine: "
             "read the ratios, not the absolute values) and its peak memory above the process's level (resident "
             "set; memory the process already holds is not counted, so small attributions read 0); AttnLRP ran "
             "elsewhere, so its cost is not comparable (the look-up only).", ""]
    if missing:
        lines += [f"Not run yet (their columns are marked so, with — in every row): {', '.join(missing)}.", ""]
    standings: Dict[str, Dict[str, Optional[str]]] = {}
    for metric in METRICS:
        lines += [f"## {metric.header} {'↑' if metric.higher else '↓'}", "", "Mean ± s.e. over examples.", ""]
        rows = []
        for slot in ("default", *RIVALS):
            row = ["default (pr-xai)" if slot == "default" else NAMES[slot]]
            for c in cells:
                method = c.default if slot == "default" else slot
                values = (data[c.name] or {}).get(metric.key, {}).get(method)
                row.append(format_stat(_stat(values)) if values else ("n/a" if data[c.name] else "—"))
            rows.append(row)
        lines += markdown_table(["method"] + heads, rows) + [""]
        lines += [f"Paired default − rival (same examples), and the default's side: ahead / behind by more than one "
                  f"paired s.e., else level ({'>' if metric.higher else '<'} 0 favours the default).", ""]
        rows = []
        for rival in RIVALS:
            row = [NAMES[rival]]
            for c in cells:
                per = (data[c.name] or {}).get(metric.key, {})
                if c.default in per and rival in per:
                    diff = paired_difference(per[c.default], per[rival])
                    row.append(f"{format_signed(diff)} {side(diff, metric.higher)}")
                else:
                    row.append("n/a" if data[c.name] else "—")
            rows.append(row)
        lines += markdown_table(["default −"] + heads, rows) + [""]
        standings[metric.key] = {c.name: standing(data[c.name].get(metric.key, {}), c.default, metric.higher)
                                 for c in ran}
    counts = summary_counts(standings)

    def best_label(cell_name: str, metric: Metric) -> str:
        best = best_method(data[cell_name].get(metric.key, {}), metric.higher)
        return NAMES.get(best, str(best))

    lines += ["## Summary: cells where the default is first or level", "",
              "Per metric, among the six methods but the random control: first = the best mean; level = not first "
              "but within one paired standard error of the best method; behind otherwise. Counted over the cells "
              "run so far.", ""]
    rows = []
    for metric in METRICS:
        c = counts[metric.key]
        rows.append([SHORT[metric.key] + (" (tuned)" if metric.tuned else ""),
                     f"{len(c['first']) + len(c['level'])} / {c['run']}", str(len(c["first"])), str(len(c["level"])),
                     ", ".join(f"{name} ({best_label(name, metric)})" for name in c["behind"]) or "none"])
    lines += markdown_table(["metric", "first or level", "first", "level", "behind in (the best there)"], rows)
    lines += [""]
    tuned_ok = {c.name for c in ran if all(standings[m.key][c.name] in ("first", "level") for m in METRICS if m.tuned)}
    only_tuned = {m.key: sorted(n for n in tuned_ok if standings[m.key][n] == "behind") for m in METRICS if not m.tuned}
    lines += ["Where the lead holds only under the tuned protocol (first or level on both ERASER metrics, behind on "
              "the metric): " + "; ".join(f"{SHORT[k]}: {', '.join(v)}" for k, v in only_tuned.items() if v)
              + ("." if any(only_tuned.values()) else "nowhere."), ""]
    agreement = rank_agreement([data[c.name] for c in ran])
    lines += ["## Rank agreement between the metrics", "",
              "Kendall's τ-b between two metrics' rankings of the seven methods (their means, each metric oriented "
              "so that higher is better), per cell, then the mean over the cells run (1 = the same order, −1 the "
              "reverse).", ""]
    header = ["τ"] + [SHORT[m.key] for m in METRICS[1:]]
    rows = []
    for i, a in enumerate(METRICS[:-1]):
        row = [SHORT[a.key]] + [""] * i
        for b in METRICS[i + 1:]:
            t = agreement[(a.key, b.key)]
            row.append("n/a" if math.isnan(t["mean"]) else f"{t['mean']:+.2f}".replace("-", "−"))
        rows.append(row)
    lines += markdown_table(header, rows) + [""]
    lines += ["## Per cell: faithfulness next to cost", "",
              "Means over the cell's examples; cost of the attribution per example.", ""]
    for c in ran:
        lines += [f"### {heading(c, n_of[c.name])}: `{c.name}`", ""]
        rows = []
        for method in cell_methods(c):
            row = ["default (pr-xai)" if method == c.default else NAMES[method]]
            for metric in METRICS:
                values = data[c.name].get(metric.key, {}).get(method)
                row.append(f"{_stat(values)['mean']:.3f}" if values else "—")
            if method == "attnlrp":
                row += ["precomputed", "precomputed"]
            else:
                row += [format_stat(_stat(data[c.name].get(k, {}).get(method, {})), digits)
                        for k, digits in (("time_s", 3), ("peak_mem_mb", 1))]
            rows.append(row)
        lines += markdown_table(["method"] + [SHORT[m.key] for m in METRICS] + ["CPU s / example", "peak MB"],
                                rows) + [""]
    return write_atomic(path, "\n".join(lines))


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", action="append", default=[], choices=sorted(CELLS), help="cell(s) to run")
    parser.add_argument("--n", type=int, default=None, help="examples (default: the matrix's, 200 short, 100 long)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tables", action="store_true", help="write benchmarks/results/metric_matrix.md")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    for name in args.cell:
        print(run_cell(CELLS[name], args.n, argv), flush=True)
    if args.tables:
        print(write_tables())
    return 0


if __name__ == "__main__":
    sys.exit(main())
