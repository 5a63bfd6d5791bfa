"""The faithfulness benchmark: attribution methods x examples x removal metrics.

:func:`run_benchmark` explains ``n`` examples of a dataset with every method,
scores each explanation with :func:`captum_prxai.metrics.evaluate_faithfulness`
and writes, into ``out_dir``:

* ``cache.jsonl``: one record per (example, method): tokens, scores, metrics,
  deletion curves, time and memory. A rerun with the same settings reads it
  and only computes what is missing (resume after an interruption, or add a
  method later).
* ``results.csv``: one row per (example, method).
* ``summary.md`` / ``summary.json``: method x metric means ± standard error,
  time per example and peak memory.
* ``deletion_curves.png``: mean deletion curves per method.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from captum_prxai._limits import max_input_length
from captum_prxai.bench.methods import (
    Explainer,
    ForwardFunc,
    MethodContext,
    build_method,
    make_forward_func,
    parse_methods,
)
from captum_prxai.exceptions import PRXAIError
from captum_prxai.metrics import ERASER_BINS, evaluate_faithfulness

__all__ = ["BenchmarkConfig", "BenchmarkResult", "run_benchmark", "select_examples", "write_command", "CACHE_FILE"]

CACHE_FILE = "cache.jsonl"
_CACHE_VERSION = 1


@dataclass
class BenchmarkConfig:
    """Settings that change the numbers (part of the cache key).

    Attributes:
        mode: Token removal, ``"delete"`` (ERASER) or ``"replace"``.
        replacement: ``"mask"`` or ``"pad"``: the token used by ``"replace"``.
        bins: Comprehensiveness / sufficiency removal fractions.
        steps: Deletion-curve steps.
        log_odds_fraction: Fraction removed for log-odds.
        accuracy_fraction: Fraction removed for accuracy after removal.
        max_length: Tokenizer truncation length (``None``: the model limit).
        seed: Example selection and random-method seed.
    """

    mode: str = "delete"
    replacement: str = "mask"
    bins: Tuple[float, ...] = ERASER_BINS
    steps: int = 10
    log_odds_fraction: float = 0.2
    accuracy_fraction: float = 0.2
    max_length: Optional[int] = None
    seed: int = 0

    def key(self, model_fingerprint: str, method_options: Dict[str, Any]) -> str:
        blob = json.dumps(
            {"v": _CACHE_VERSION, "cfg": self.__dict__ | {"bins": list(self.bins)}, "model": model_fingerprint,
             "opts": method_options}, sort_keys=True, default=str,
        )
        return hashlib.sha1(blob.encode()).hexdigest()[:16]


@dataclass
class BenchmarkResult:
    """What :func:`run_benchmark` returns.

    Attributes:
        out_dir: Output folder.
        methods: Method names, in order.
        records: One dict per (example, method), as stored in ``cache.jsonl``.
        n_computed: Explanations computed by this call.
        n_cached: Explanations read from the cache.
        errors: ``(example index, method, message)`` of failed explanations.
        files: Written files by kind (``"cache"``, ``"csv"``, ``"markdown"``,
            ``"json"``, ``"plot"``).
        summary: ``{method: {metric: {"mean", "sem", "n"}}}``.
    """

    out_dir: Path
    methods: List[str]
    records: List[Dict[str, Any]]
    n_computed: int
    n_cached: int
    errors: List[Tuple[int, str, str]] = field(default_factory=list)
    files: Dict[str, Path] = field(default_factory=dict)
    summary: Dict[str, Dict[str, Dict[str, float]]] = field(default_factory=dict)


# ----------------------------------------------------------------------------- helpers
def _dataset_items(dataset: Any) -> Tuple[List[str], List[Optional[int]], List[str], str]:
    """(texts, labels, label_names, name) from a TextDataset, (text, label) pairs or texts."""
    if hasattr(dataset, "texts"):
        texts = list(dataset.texts)
        labels = list(getattr(dataset, "labels", None) or [None] * len(texts))
        names = list(getattr(dataset, "label_names", None) or [])
        return texts, labels, names, str(getattr(dataset, "name", "dataset"))
    texts, labels = [], []
    for item in dataset:
        if isinstance(item, str):
            texts.append(item)
            labels.append(None)
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            texts.append(item[0])
            labels.append(None if item[1] is None else int(item[1]))
        else:
            raise PRXAIError(
                "dataset must be a captum_prxai.data.TextDataset, a list of texts or a list of (text, label) "
                f"pairs; got an item of type {type(item).__name__}."
            )
    return texts, labels, [], "dataset"


def _sample_order(size: int, n: Optional[int], seed: int = 0) -> List[int]:
    """The first ``n`` indices of a seeded permutation, in that order: every prefix is the sample of a smaller ``n``."""
    if n is not None and n < 1:
        raise PRXAIError(f"n must be a positive number of examples, got {n}.")
    order = torch.randperm(size, generator=torch.Generator().manual_seed(seed)).tolist()
    return order[: size if n is None else min(n, size)]


def select_examples(size: int, n: Optional[int], seed: int = 0) -> List[int]:
    """Indices of the examples benchmarked: a seeded random sample of ``n`` (all if ``n`` is None), sorted."""
    return sorted(_sample_order(size, n, seed))


def write_command(out_dir: Union[str, Path], program: str, argv: Sequence[str]) -> Path:
    """Write ``out_dir/COMMAND``: the exact command line that reproduces a result folder."""
    import shlex

    path = Path(out_dir) / "COMMAND"
    path.write_text(" ".join([program] + [shlex.quote(a) for a in argv]) + "\n")
    return path


def _model_fingerprint(model: nn.Module) -> str:
    config = getattr(model, "config", None)
    name = getattr(config, "_name_or_path", "") or type(model).__name__
    with torch.no_grad():
        total = sum(float(p.detach().double().sum()) for p in model.parameters())
        n_params = sum(p.numel() for p in model.parameters())
    return f"{type(model).__name__}:{name}:{n_params}:{total:.8e}"


def _display_name(model: nn.Module) -> str:
    name = str(getattr(getattr(model, "config", None), "_name_or_path", "") or "")
    return Path(name).name if name else type(model).__name__


def _model_limit(model: nn.Module, tokenizer: Any) -> int:
    limit = max_input_length(getattr(model, "config", None), tokenizer)
    return 512 if limit is None else limit


def _text_sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _read_cache(path: Path, key: str) -> Dict[Tuple[int, str], Dict[str, Any]]:
    done: Dict[Tuple[int, str], Dict[str, Any]] = {}
    if not path.is_file():
        return done
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                warnings.warn(f"{path}:{line_no}: skipping a damaged cache line (interrupted write?).")
                continue
            if rec.get("config_key") == key:
                done[(int(rec["example"]), str(rec["method"]))] = rec
    return done


def _seed_for(seed: int, index: int, method: str) -> int:
    digest = hashlib.sha1(f"{seed}:{index}:{method}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def _tolist(t: Tensor) -> List[float]:
    return [float(x) for x in t.detach().cpu().reshape(-1).tolist()]


# ----------------------------------------------------------------------------- main entry
def run_benchmark(
    model: nn.Module,
    tokenizer: Any,
    dataset: Any,
    methods: Union[str, Sequence[str]],
    n: Optional[int] = 100,
    out_dir: Union[str, Path] = "benchmark-results",
    *,
    forward_func: Optional[ForwardFunc] = None,
    config: Optional[BenchmarkConfig] = None,
    method_options: Optional[Dict[str, Dict[str, Any]]] = None,
    device: Union[str, torch.device, None] = None,
    batch_size: int = 64,
    resume: bool = True,
    progress: bool = True,
    plot: bool = True,
    model_name: Optional[str] = None,
    warmup: bool = True,
    **config_kwargs: Any,
) -> BenchmarkResult:
    """Benchmark attribution methods on a dataset with removal-based faithfulness metrics.

    Examples are explained one at a time (so time and memory are per
    example), each for the class the model predicts; gold labels are used
    only for ``accuracy`` (accuracy after removing the top tokens). They are
    taken in sampling order, so the examples an interrupted run finished are
    exactly the sample of a smaller ``n``: rerun with that ``n`` to summarise
    them from the cache.

    Args:
        model: A sequence classifier (Hugging Face ``*ForSequenceClassification``).
        tokenizer: Its tokenizer (must support ``return_special_tokens_mask``).
        dataset: A :class:`captum_prxai.data.TextDataset`, a list of
            ``(text, label)`` pairs or a list of texts.
        methods: Method names (see :func:`captum_prxai.bench.available_methods`),
            a list or a comma-separated string.
        n: Number of examples (a seeded random sample); ``None`` for all.
        out_dir: Output folder (created).
        forward_func: ``forward_func(input_ids, attention_mask) -> logits``
            (default: :func:`~captum_prxai.bench.make_forward_func`).
        config: A :class:`BenchmarkConfig`; or pass its fields as keyword
            arguments (``mode="replace"``, ``steps=20``, ...).
        method_options: Per-method overrides, e.g. ``{"ig": {"n_steps": 20}}``.
        device: Where to run (default: the model's device).
        batch_size: Perturbed inputs per forward pass in the metrics.
        resume: Reuse results in ``out_dir/cache.jsonl`` computed with the
            same settings and model.
        progress: Show a tqdm progress bar.
        plot: Write ``deletion_curves.png``.
        model_name: Name shown in the report (default: from the model config).
        warmup: Run each method once, untimed, before its first timed call, so
            one-off costs (kernel loading, hook set-up) don't count as time.

    Returns:
        A :class:`BenchmarkResult`.

    Raises:
        PRXAIError: Unknown method, empty dataset, bad settings.
    """
    from tqdm.auto import tqdm

    from captum_prxai.bench._memory import PeakMemory
    from captum_prxai.bench.report import summarize, write_csv, write_markdown, write_plot, write_summary_json

    if config is None:
        config = BenchmarkConfig(**config_kwargs)
    elif config_kwargs:
        raise PRXAIError("pass either config= or its fields as keyword arguments, not both.")
    if config.mode not in ("delete", "replace"):
        raise PRXAIError(f'mode must be "delete" or "replace", got {config.mode!r}.')
    if config.replacement not in ("mask", "pad"):
        raise PRXAIError(f'replacement must be "mask" or "pad", got {config.replacement!r}.')
    names = parse_methods(methods)
    texts, labels, label_names, data_name = _dataset_items(dataset)
    if not texts:
        raise PRXAIError("the dataset is empty; nothing to benchmark.")
    indices = _sample_order(len(texts), n, config.seed)

    if device is None:
        try:
            device = next(model.parameters()).device
        except StopIteration:
            device = torch.device("cpu")
    device = torch.device(device)
    model.to(device)
    model.eval()
    forward = forward_func or make_forward_func(model)
    method_options = dict(method_options or {})
    ctx = MethodContext.from_tokenizer(tokenizer, seed=config.seed, options=method_options)
    replacement_id: Optional[int] = None
    if config.mode == "replace":
        replacement_id = ctx.mask_token_id if config.replacement == "mask" else ctx.pad_token_id
        if replacement_id is None:
            raise PRXAIError('the tokenizer has no [MASK] token; use replacement="pad" or mode="delete".')
    max_length = config.max_length or _model_limit(model, tokenizer)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache_path = out / CACHE_FILE
    key = config.key(_model_fingerprint(model), method_options)
    cached = _read_cache(cache_path, key) if resume else {}
    if not resume and cache_path.exists():
        cache_path.unlink()

    explainers: Dict[str, Explainer] = {}
    records: List[Dict[str, Any]] = []
    errors: List[Tuple[int, str, str]] = []
    n_computed = n_cached = 0
    bar = tqdm(total=len(indices) * len(names), disable=not progress, desc="benchmark", unit="expl")
    try:
        for index in indices:
            text, label = texts[index], labels[index]
            sha = _text_sha(text)
            todo = []
            for name in names:
                rec = cached.get((index, name))
                if rec is not None and rec.get("text_sha") == sha:
                    records.append(rec)
                    n_cached += 1
                    bar.update(1)
                else:
                    todo.append(name)
            if not todo:
                continue
            enc = tokenizer(text, truncation=True, max_length=max_length, return_special_tokens_mask=True,
                            return_tensors="pt")
            ids = enc["input_ids"].to(device)
            mask = enc["attention_mask"].to(device)
            special = enc["special_tokens_mask"].to(device)
            with torch.no_grad():
                logits = forward(ids, mask)
            target = logits.argmax(dim=-1)
            tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
            for name in todo:
                bar.set_postfix_str(f"{name} #{index}")
                try:
                    if name not in explainers:
                        explainers[name] = build_method(name, model, forward, ctx)
                        if warmup:
                            torch.manual_seed(_seed_for(config.seed, index, name))
                            explainers[name](ids, mask, special, target)
                    torch.manual_seed(_seed_for(config.seed, index, name))
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                    with PeakMemory(device) as mem:
                        start = time.perf_counter()
                        scores = explainers[name](ids, mask, special, target)
                        if device.type == "cuda":
                            torch.cuda.synchronize(device)
                        elapsed = time.perf_counter() - start
                    if not torch.isfinite(scores).all():
                        raise PRXAIError(f"method {name!r} returned non-finite scores.")
                    res = evaluate_faithfulness(
                        forward, ids, mask, special, scores, target=target,
                        labels=None if label is None else torch.tensor([label], device=device),
                        bins=config.bins, steps=config.steps, log_odds_fraction=config.log_odds_fraction,
                        accuracy_fraction=config.accuracy_fraction, mode=config.mode,
                        replacement_id=replacement_id, pad_token_id=ctx.pad_token_id, batch_size=batch_size,
                    )
                except Exception as err:  # keep benchmarking the other methods (Ctrl-C still stops)
                    message = f"{type(err).__name__}: {err}"
                    errors.append((index, name, message))
                    bar.write(f"warning: {name} failed on example {index}: {message}")
                    bar.update(1)
                    continue
                metrics = {k: float(v[0]) for k, v in res.items()
                           if k not in ("curve_most", "curve_least", "curve_fractions", "target", "prob")}
                rec = {
                    "config_key": key,
                    "example": index,
                    "text_sha": sha,
                    "method": name,
                    "label": label,
                    "label_name": label_names[label] if label is not None and label < len(label_names) else None,
                    "target": int(target[0]),
                    "correct": None if label is None else bool(int(target[0]) == label),
                    "prob": float(res["prob"][0]),
                    "n_tokens": int(mask[0].sum()),
                    "metrics": metrics,
                    "curve_fractions": _tolist(res["curve_fractions"]),
                    "curve_most": _tolist(res["curve_most"][0]),
                    "curve_least": _tolist(res["curve_least"][0]),
                    "time_s": elapsed,
                    "peak_mem_mb": mem.peak_bytes / 2**20,
                    "mem_kind": mem.kind,
                    "tokens": tokens,
                    "scores": _tolist(scores[0]),
                }
                with cache_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(rec) + "\n")
                records.append(rec)
                n_computed += 1
                bar.update(1)
    finally:
        bar.close()

    order = {name: i for i, name in enumerate(names)}
    records.sort(key=lambda r: (r["example"], order[r["method"]]))
    summary = summarize(records, names)
    per_example = {r["example"]: r for r in records}
    correct = [r["correct"] for r in per_example.values() if r.get("correct") is not None]
    meta = {
        "dataset": data_name,
        "n_examples": len(indices),
        "model": model_name or _display_name(model),
        "device": str(device),
        "mode": config.mode,
        "replacement": config.replacement if config.mode == "replace" else None,
        "bins": list(config.bins),
        "steps": config.steps,
        "log_odds_fraction": config.log_odds_fraction,
        "accuracy_fraction": config.accuracy_fraction,
        "max_length": max_length,
        "seed": config.seed,
        "errors": len(errors),
        "model_accuracy": sum(correct) / len(correct) if correct else None,
        "mean_prob": sum(r["prob"] for r in per_example.values()) / len(per_example) if per_example else None,
    }
    files = {"cache": cache_path}
    files["csv"] = write_csv(records, out / "results.csv")
    files["markdown"] = write_markdown(summary, names, meta, out / "summary.md", bins=config.bins)
    files["json"] = write_summary_json(summary, meta, out / "summary.json")
    if plot and records:
        files["plot"] = write_plot(records, names, out / "deletion_curves.png")
    return BenchmarkResult(out, names, records, n_computed, n_cached, errors, files, summary)
