"""The faithfulness benchmark: attribution methods x examples x removal metrics.

:func:`run_benchmark` explains ``n`` examples of a dataset with every method,
scores each explanation with :func:`captum_prxai.metrics.evaluate_faithfulness`
and writes, into ``out_dir``:

* ``cache.jsonl``: one record per (example, method): tokens, scores, metrics,
  deletion curves, time and memory. A rerun reads it and only computes what
  is missing (resume after an interruption, or add a method later). Records
  are keyed by everything that determines them (see
  :mod:`captum_prxai.bench.cache`), so a rerun with other settings, weights,
  method options or precomputed files recomputes instead of reporting old
  numbers.
* ``results.csv``: one row per (example, method).
* ``summary.md`` / ``summary.json``: method x metric means ± standard error,
  time per example and peak memory.
* ``deletion_curves.png``: mean deletion curves per method.

The run is a sequence of named steps: :func:`_resolve_config`,
:func:`_dataset_items` and :func:`_sample_order`, :func:`_prepare_model`,
:func:`resolve_max_length`, :func:`_method_keys`, then per example
:func:`_explain_examples` (per example :func:`_cached_records` and
:func:`encode_text`, per method :meth:`_Methods.explain`, the metrics and
:func:`_make_record`), and finally :func:`_write_outputs`.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from captum_prxai._cache import write_atomic
from captum_prxai._tokenize import model_input_limit
from captum_prxai.bench.cache import RecordCache, model_fingerprint, record_key
from captum_prxai.bench.settings import MetricSettings
from captum_prxai.exceptions import PRXAIError
from captum_prxai.methods import (
    Explainer,
    ForwardFunc,
    MethodContext,
    build_method,
    make_forward_func,
    method_settings,
    parse_methods,
    validate_options,
)
from captum_prxai.metrics import evaluate_faithfulness

__all__ = ["BenchmarkConfig", "BenchmarkResult", "MetricSettings", "run_benchmark", "select_examples",
           "resolve_max_length", "one_line_warnings", "write_command", "CACHE_FILE"]

CACHE_FILE = "cache.jsonl"


@dataclass
class BenchmarkConfig(MetricSettings):
    """Settings that change the numbers (all part of the cache key): the
    :class:`~captum_prxai.bench.settings.MetricSettings`, plus

    Attributes:
        max_length: Tokenizer truncation length (``None``: the model limit).
        seed: Example selection and random-method seed.
    """

    max_length: Optional[int] = None
    seed: int = 0


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
        meta: The settings actually used (``summary.json``'s ``"meta"``).
    """

    out_dir: Path
    methods: List[str]
    records: List[Dict[str, Any]]
    n_computed: int
    n_cached: int
    errors: List[Tuple[int, str, str]] = field(default_factory=list)
    files: Dict[str, Path] = field(default_factory=dict)
    summary: Dict[str, Dict[str, Dict[str, float]]] = field(default_factory=dict)
    meta: Dict[str, Any] = field(default_factory=dict)


@dataclass
class _Data:
    texts: List[str]
    labels: List[Optional[int]]
    label_names: List[str]
    name: str
    split: Optional[str]


# ----------------------------------------------------------------------------- steps before the loop
def _resolve_config(config: Optional[BenchmarkConfig], config_kwargs: Dict[str, Any]) -> BenchmarkConfig:
    if config is None:
        unknown = sorted(set(config_kwargs) - set(BenchmarkConfig.__dataclass_fields__))
        if unknown:
            raise PRXAIError(f"unknown benchmark setting {unknown[0]!r}; the settings are: "
                             f"{', '.join(BenchmarkConfig.__dataclass_fields__)}.")
        config = BenchmarkConfig(**config_kwargs)
    elif config_kwargs:
        raise PRXAIError("pass either config= or its fields as keyword arguments, not both.")
    config.validate()
    if config.max_length is not None and (isinstance(config.max_length, bool) or
                                          not isinstance(config.max_length, int) or config.max_length < 1):
        raise PRXAIError(f"max_length must be a positive number of tokens, got {config.max_length!r}.")
    return config


def _dataset_items(dataset: Any) -> _Data:
    """Texts, labels, label names, name and split of a TextDataset, (text, label) pairs or texts."""
    if hasattr(dataset, "texts"):
        texts = list(dataset.texts)
        labels = list(getattr(dataset, "labels", None) or [None] * len(texts))
        names = list(getattr(dataset, "label_names", None) or [])
        return _Data(texts, labels, names, str(getattr(dataset, "name", "dataset")),
                     getattr(dataset, "split", None))
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
    return _Data(texts, labels, [], "dataset", None)


def _sample_order(size: int, n: Optional[int], seed: int = 0) -> List[int]:
    """The first ``n`` indices of a seeded permutation, in that order: every prefix is the sample of a smaller ``n``."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise PRXAIError(f"n must be a positive number of examples, got {n!r}.")
    order = torch.randperm(size, generator=torch.Generator().manual_seed(seed)).tolist()
    return order[: size if n is None else min(n, size)]


def select_examples(size: int, n: Optional[int], seed: int = 0) -> List[int]:
    """Indices of the examples benchmarked: a seeded random sample of ``n`` (all if ``n`` is None), sorted."""
    return sorted(_sample_order(size, n, seed))


def write_command(out_dir: Union[str, Path], program: str, argv: Sequence[str], append: bool = False) -> Path:
    """Write ``out_dir/COMMAND``: the exact command line that reproduces a result folder.

    With ``append`` the line is added after the commands already there (a run
    that merged methods into the folder: see ``run_benchmark(merge=True)``).
    """
    import shlex

    path = Path(out_dir) / "COMMAND"
    before = path.read_text(encoding="utf-8") if append and path.is_file() else ""
    return write_atomic(path, before + " ".join([program] + [shlex.quote(a) for a in argv]) + "\n")


#: where a merging run draws the deletion curves of the methods it added (the kept rows have none)
ADDED_PLOT = "deletion_curves-added.png"


def _last_meta(out: Path) -> Dict[str, Any]:
    """The ``"meta"`` of the run last summarised in ``out`` (``summary.json``); empty without the file."""
    import json

    path = out / "summary.json"
    return json.loads(path.read_text(encoding="utf-8"))["meta"] if path.is_file() else {}


def _finished_run(out: Path) -> Optional[Tuple[List[Dict[str, Any]], Dict[str, str]]]:
    """The rows of ``out/results.csv`` and the cache key of each method (from ``summary.json``, empty without
    it); ``None`` when the folder has no ``results.csv``."""
    from captum_prxai.bench.report import read_csv

    path = out / "results.csv"
    if not path.is_file():
        return None
    return read_csv(path), _last_meta(out).get("cache_keys", {})


def _kept_records(out: Path, names: Sequence[str], indices: Sequence[int]) -> Tuple[List[Dict[str, Any]],
                                                                                   List[str], Dict[str, str]]:
    """For ``merge=True``: the rows of ``out/results.csv`` of the methods not in ``names``, their names in the
    file's order and their cache keys (from ``summary.json``); checked to cover exactly ``indices``."""
    run = _finished_run(out)
    if run is None:
        raise PRXAIError(f"merge=True adds methods to a finished run, but {out / 'results.csv'} does not exist; "
                         "run the benchmark without merge first.")
    rows, old_keys = run
    kept = [r for r in rows if r["method"] not in names]
    kept_names = list(dict.fromkeys(r["method"] for r in kept))
    wanted = sorted(indices)
    for name in kept_names:
        have = sorted(r["example"] for r in kept if r["method"] == name)
        if have != wanted:
            raise PRXAIError(f"merge=True needs the same examples as the run in {out}: its {name!r} rows cover "
                             f"{len(have)} examples, this run {len(wanted)} (pass the n of that run).")
    return kept, kept_names, {k: v for k, v in old_keys.items() if k in kept_names}


#: how far apart the explained class's probability (before any removal) may be in a stored row and a rerun of the
#: same model: a rerun of the same weights agrees to about 2e-6 at 512 tokens on one CPU thread; a retrained MPNet
#: BBC News model that did not reproduce differed by 3e-3
SAME_MODEL_TOLERANCE = 1e-4


def _row_mismatch(row: Dict[str, Any], target: int, n_tokens: int, prob: float,
                  tolerance: float = SAME_MODEL_TOLERANCE) -> Optional[str]:
    """Why a stored row was not computed by this run's model on this run's text (``None`` when it was): another
    target, another token count or an explained-class probability more than ``tolerance`` apart."""
    if row["target"] == target and row["n_tokens"] == n_tokens and abs(row["prob"] - prob) <= tolerance:
        return None
    return (f"the model gives target {target}, {n_tokens} tokens and probability {prob:.6f}, but the stored rows "
            f"have {row['target']}, {row['n_tokens']} and {row['prob']:.6f}")


#: ``reuse_retrained=True``: how many of the stored examples (the first in sample order) are computed again with this
#: run's model and compared with the stored rows before any other row of another model is taken
RETRAINED_SPOT_CHECK = 2
#: ``reuse_retrained=True``: how far apart a stored row and this run's may be, on comprehensiveness and sufficiency
#: (the spot check) and on the explained-class probability (every other reused example); a retrained MPNet movie-
#: reviews model that did not reproduce its weights differed from the former one by 4.5e-4 in probability, while
#: the matrix's paired standard errors are 0.003 to 0.04
RETRAINED_TOLERANCE = 1e-2


def _plotted_before(out: Path) -> Optional[int]:
    """How many examples (the first of the sample order) ``out/deletion_curves.png`` averages, as the folder's
    last ``summary.json`` recorded it; ``None`` when it did not (runs before the count was kept)."""
    return _last_meta(out).get("plot_examples")


def _take_row(rows: Dict[tuple, Dict[str, Any]], row: Dict[str, Any], key: str, data: _Data) -> None:
    """Put a stored ``results.csv`` row into ``rows`` under this run's cache ``key``, as :func:`_cached_records`
    looks it up."""
    sha = _text_sha(data.texts[row["example"]])
    rows[(key, row["example"], row["method"], sha, row["label"])] = {**row, "config_key": key, "text_sha": sha}


#: the end of a refused spot check's message (the records it computed are kept)
_SPOT_REFUSED = ("the stored rows are not reused. This run's records of the checked examples are in the cache; run "
                 "without reuse_retrained to compute the rest with this model.")


def _probe_rows(firsts: Dict[int, Dict[str, Any]], probe: Callable[[int], Tuple[int, int, float]],
                tolerance: float) -> Tuple[Dict[int, str], float]:
    """Check one stored row per example (``firsts``) against this run's model: ``probe(index)`` must give its
    target and token count, and its probability within ``tolerance`` (:func:`_row_mismatch`). Returns the examples
    that fail, with why, and the largest probability difference among those that pass."""
    mismatched: Dict[int, str] = {}
    worst = 0.0
    for index in sorted(firsts):
        target, n_tokens, prob = probe(index)
        why = _row_mismatch(firsts[index], target, n_tokens, prob, tolerance)
        if why is not None:
            mismatched[index] = why
        else:
            worst = max(worst, abs(firsts[index]["prob"] - prob))
    return mismatched, worst


def _reusable_rows(out: Path, keys: Dict[str, str], indices: Sequence[int], data: _Data,
                   probe: Callable[[int], Tuple[int, int, float]], retrained: bool = False,
                   drop: frozenset = frozenset()
                   ) -> Tuple[Dict[tuple, Dict[str, Any]], Dict[Tuple[str, int], Dict[str, Any]]]:
    """For ``reuse_results=True``: the rows of ``out/results.csv`` whose method's cache key (kept in
    ``summary.json``) equals this run's, for this run's examples, keyed as :func:`_cached_records` looks them up.

    The key covers the model's weights, the tokenizer, the dataset's name and split, the settings and the
    method's options, but not the dataset's content, and ``results.csv`` keeps no text. So each example is
    checked once more before its rows are taken: ``probe(index)`` (one forward pass of this run's model on this
    run's text) must give the rows' target, token count and probability (:func:`_row_mismatch`). The rows of an
    example that fails are not taken, and the example is computed again; a warning says how many. A method whose
    stored key differs from this run's (e.g. a retrained model) has none of its rows taken, with a warning; with
    ``retrained`` those rows are returned instead, as ``{(method, example): row}``, for :func:`_retrained_rows`, and
    the probability check is to :data:`RETRAINED_TOLERANCE` (a run extended this way keeps the former model's rows
    under this model's key, and resuming it must take them again). The ``(method, example)`` rows in ``drop`` are
    never taken (:func:`_retrained_pairs`).
    """
    run = _finished_run(out)
    if run is None:
        return {}, {}
    old_rows, old_keys = run
    wanted = set(indices)
    candidates: List[Dict[str, Any]] = []
    stale: Dict[str, None] = {}  # methods whose stored key is not this run's, in file order
    stale_rows: Dict[Tuple[str, int], Dict[str, Any]] = {}
    for r in old_rows:
        if r["example"] in wanted and r["method"] in keys and (r["method"], r["example"]) not in drop:
            if old_keys.get(r["method"]) == keys[r["method"]]:
                candidates.append(r)
            else:
                stale[r["method"]] = None
                stale_rows[(r["method"], r["example"])] = r
    if stale and not retrained:
        warnings.warn(f"reuse_results=True: the rows of {', '.join(stale)} in {out / 'results.csv'} were made under "
                      "another cache key (other model weights, tokenizer, dataset, settings or method options), so "
                      "none of them is reused: those methods are computed again on every example not in this "
                      "run's cache.", stacklevel=3)
    first_rows: Dict[int, Dict[str, Any]] = {}
    for r in candidates:
        first_rows.setdefault(r["example"], r)
    mismatched, _ = _probe_rows(first_rows, probe, RETRAINED_TOLERANCE if retrained else SAME_MODEL_TOLERANCE)
    if mismatched:
        first = min(mismatched)
        warnings.warn(f"reuse_results=True: the rows of {len(mismatched)} of {len(first_rows)} "
                      f"examples in {out / 'results.csv'} do not match this run (example {first}: "
                      f"{mismatched[first]}): the dataset's content or the model differs under the same cache key. "
                      "Those examples are computed again; their stored rows are replaced.", stacklevel=3)
    rows: Dict[tuple, Dict[str, Any]] = {}
    for r in candidates:
        if r["example"] in mismatched:
            continue
        _take_row(rows, r, keys[r["method"]], data)
    return rows, (stale_rows if retrained else {})


def _retrained_rows(stale: Dict[Tuple[str, int], Dict[str, Any]], fresh: Sequence[Dict[str, Any]],
                    keys: Dict[str, str], data: _Data, probe: Callable[[int], Tuple[int, int, float]],
                    out: Path, covered: Optional[set] = None) -> Tuple[Dict[tuple, Dict[str, Any]], Dict[str, Any]]:
    """For ``reuse_retrained=True``: the stored rows made under another cache key, once the spot check passed.

    ``fresh`` are this run's records of the spot-check examples. Every method with stored rows must have one on a
    spot-check example whose target and token count equal the stored row's and whose probability, comprehensiveness
    and sufficiency are within :data:`RETRAINED_TOLERANCE` of them, else nothing is reused and :class:`PRXAIError`
    says where they differ (the fresh records stay in the cache). Every method of the run must have a stored row on
    each example taken, stale or under this run's key (``covered``: the ``(method, example)`` pairs that
    :func:`_reusable_rows` took), so that no example mixes the two models. The other stored examples are then
    checked as :func:`_reusable_rows` checks them, with the probability to :data:`RETRAINED_TOLERANCE`. Returns the
    rows keyed for :func:`_cached_records` and what the reports say of them (``meta["reused_retrained"]``)."""
    by_id = {(r["method"], r["example"]): r for r in fresh}
    spot = sorted({r["example"] for r in fresh})
    worst, compared = 0.0, set()
    for (method, example), row in stale.items():
        rec = by_id.get((method, example))
        if rec is None:
            continue
        compared.add(method)
        why = _row_mismatch(row, rec["target"], rec["n_tokens"], rec["prob"], RETRAINED_TOLERANCE)
        if why is not None:
            raise PRXAIError(f"reuse_retrained=True: on example {example} {why} in {out / 'results.csv'}, more than "
                             f"{RETRAINED_TOLERANCE:g} apart: {_SPOT_REFUSED}")
        for metric in ("comprehensiveness", "sufficiency"):
            now, then = rec["metrics"][metric], row["metrics"][metric]
            if abs(now - then) > RETRAINED_TOLERANCE:
                raise PRXAIError(
                    f"reuse_retrained=True: on example {example}, {method}'s {metric} is {now:.4f} with this model "
                    f"and {then:.4f} in {out / 'results.csv'}, more than {RETRAINED_TOLERANCE:g} apart: "
                    f"{_SPOT_REFUSED}")
            worst = max(worst, abs(now - then))
    unchecked = sorted({m for m, _ in stale} - compared)
    if unchecked:
        raise PRXAIError(f"reuse_retrained=True: {', '.join(unchecked)} has no record on the spot-check examples "
                         f"{spot}, so its stored rows cannot be checked and are not reused.")
    rows: Dict[tuple, Dict[str, Any]] = {}
    firsts: Dict[int, Dict[str, Any]] = {}
    for (method, example), row in stale.items():
        if example not in spot:
            firsts.setdefault(example, row)
    for example in sorted(firsts):  # all of an example's rows from one model: none computed beside the former ones
        missing = [m for m in keys if (m, example) not in stale and (m, example) not in (covered or set())]
        if missing:
            raise PRXAIError(f"reuse_retrained=True: {', '.join(missing)} has no row for example {example} in "
                             f"{out / 'results.csv'}; computed now it would come from this model beside the former "
                             "model's rows of the same example. Leave it out of this run's methods.")
    mismatched, prob_diff = _probe_rows(firsts, probe, RETRAINED_TOLERANCE)
    if mismatched:
        warnings.warn(f"reuse_retrained=True: {len(mismatched)} of {len(firsts)} stored examples differ from this "
                      f"run by more than {RETRAINED_TOLERANCE:g} in target, token count or probability (first: "
                      f"{min(mismatched)}); they are computed again.", stacklevel=3)
    for (method, example), row in stale.items():
        if example in spot or example in mismatched:
            continue
        _take_row(rows, row, keys[method], data)
    taken = sorted(set(firsts) - set(mismatched))
    methods = sorted({m for m, _ in stale})
    # every method's key changed: another model (the key holds the weights); else only those methods' options or inputs
    note = {"examples": len(taken), "example_ids": taken, "methods": methods, "every_method": set(keys) <= set(methods),
            "spot_check": spot, "max_metric_difference": worst, "max_prob_difference": prob_diff,
            "tolerance": RETRAINED_TOLERANCE}
    return rows, note


def _carried_retrained(earlier: Sequence[Dict[str, Any]], from_csv: set, names: Sequence[str] = (),
                       this_model: Optional[Dict[int, set]] = None) -> List[Dict[str, Any]]:
    """The earlier notes whose examples this run took from ``results.csv`` again (``from_csv``: examples with a row
    taken from there), each counting only those; a note with no example left is dropped. A note without
    ``example_ids`` (written before they were kept) is carried as it is.

    ``names``: every method of this run, in order; ``this_model``: per example, the methods whose rows there were
    made by this run's model (records with curves: computed now or cached under this run's keys). A note of a
    former model's rows of every method whose examples now have rows of this model too (methods added since) says
    which, as ``"this_model"`` (method: on how many of the note's examples), and names the former model's as
    ``"methods"``: on those examples the pairs between the two span the two models.
    """
    carried = []
    for note in earlier:
        if "example_ids" not in note:
            carried.append(dict(note))
            continue
        ids = [e for e in note["example_ids"] if e in from_csv]
        if not ids:
            continue
        note = {**note, "examples": len(ids), "example_ids": ids}
        counts = {m: sum(m in (this_model or {}).get(e, set()) for e in ids) for m in names}
        mixed = {m: n for m, n in counts.items() if n}
        if "this_model" in note or (note.get("every_method", note.get("methods") is None) and mixed):
            # a former model's rows of every method but those this model made there
            note.update(every_method=not mixed, methods=[m for m in names if m not in mixed])
            note.pop("this_model", None)
            if mixed:
                note["this_model"] = mixed
        carried.append(note)
    return carried


def _retrained_pairs(notes: Sequence[Dict[str, Any]], names: Sequence[str]) -> set:
    """For ``recompute_retrained=True``: the ``(method, example)`` rows of ``names`` that the earlier
    ``reuse_retrained`` runs' ``notes`` describe, to be computed again with this run's model. A note of a former
    model names whole examples, every method, except a method that its ``this_model`` says this model made on
    every one of them (on fewer, it is not known where, so it is computed again too); a note of one method's
    changed key names that method's rows alone."""
    pairs: set = set()
    for note in notes:
        if "example_ids" not in note:
            raise PRXAIError("recompute_retrained=True: a note in summary.json (reused_retrained) was written before "
                             "the examples it took were kept, so they cannot be found: run without reuse_results "
                             "to compute every example with this model.")
        if note.get("every_method", note.get("methods") is None) or "this_model" in note:
            made_here = {m for m, k in note.get("this_model", {}).items() if k == len(note["example_ids"])}
            methods = [m for m in names if m not in made_here]
        else:
            methods = [m for m in note["methods"] if m in names]
        pairs |= {(m, e) for m in methods for e in note["example_ids"]}
    return pairs


def _finished_prefix(indices: Sequence[int], data: _Data, keys: Dict[str, str], cached: Dict[tuple, Dict[str, Any]],
                     out: Path) -> int:
    """``finished_only=True``: how many examples, from the start of the sample order, have every method's record."""
    done = 0
    for index in indices:
        if _cached_records(cached, keys, index, _text_sha(data.texts[index]), data.labels[index])[1]:
            break
        done += 1
    if not done:
        raise PRXAIError(f"finished_only=True: {out} has no example with a record of every method ({', '.join(keys)}) "
                         "for these settings; nothing to summarise.")
    return done


def _prepare_model(model: nn.Module, device: Union[str, torch.device, None]) -> torch.device:
    if device is None:
        try:
            device = next(model.parameters()).device
        except StopIteration:
            device = torch.device("cpu")
    device = torch.device(device)
    model.to(device)
    model.eval()
    return device


@contextlib.contextmanager
def one_line_warnings(prefix: str) -> Iterator[None]:
    """Print warnings as one line, ``"<prefix>: warning: <message>"``, on stderr (for command-line tools)."""

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        print(f"{prefix}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def _display_name(model: nn.Module) -> str:
    name = str(getattr(getattr(model, "config", None), "_name_or_path", "") or "")
    return Path(name).name if name else type(model).__name__


def _model_card(model: nn.Module) -> Optional[Dict[str, Any]]:
    """What the model card saved beside the model's weights (``captum-prxai train``) says of its training: name,
    held-out accuracy, date and the CPU kernels that trained it; ``None`` for a model without a card."""
    import json

    name = str(getattr(getattr(model, "config", None), "_name_or_path", "") or "")
    card = Path(name) / "model_card.json" if name else None
    if card is None or not card.is_file():
        return None
    try:
        data = json.loads(card.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {k: data[k] for k in ("name", "accuracy", "created", "cpu") if k in data} if isinstance(data, dict) else None


def min_input_length(tokenizer: Any) -> int:
    """The shortest truncation length that keeps one real token: the special tokens the tokenizer adds, plus one."""
    count = getattr(tokenizer, "num_special_tokens_to_add", None)
    try:
        specials = int(count(pair=False)) if callable(count) else 0
    except (TypeError, ValueError):  # pragma: no cover - exotic tokenizers
        specials = 0
    return specials + 1


def resolve_max_length(requested: Optional[int], model: nn.Module, tokenizer: Any) -> int:
    """The truncation length a run uses: ``requested``, checked against the model and the tokenizer.

    Args:
        requested: Tokens per input, special tokens included (``None``: the
            model's limit, or 512 when nothing says).

    Raises:
        PRXAIError: Fewer tokens than the special tokens plus one real token
            (e.g. 3 for ``[CLS] x [SEP]``), or more than the model accepts.
    """
    limit = model_input_limit(model, tokenizer)
    if requested is None:
        return 512 if limit is None else limit
    least = min_input_length(tokenizer)
    if requested < least:
        raise PRXAIError(f"max_length {requested} is too short: this tokenizer adds {least - 1} special token(s), "
                         f"so inputs need at least {least} tokens to keep one word; use max_length >= {least}.")
    if limit is not None and requested > limit:
        raise PRXAIError(f"max_length {requested} is more than this model accepts ({limit} tokens); "
                         f"use max_length <= {limit}.")
    return requested


def tokenizer_fingerprint(tokenizer: Any) -> Dict[str, Any]:
    """Class, vocabulary hash and special-token ids of a tokenizer (what decides the token ids)."""
    vocab = getattr(tokenizer, "get_vocab", None)
    items = sorted(vocab().items()) if callable(vocab) else []
    digest = hashlib.blake2b(repr(items).encode(), digest_size=12).hexdigest()
    specials = {k: getattr(tokenizer, k, None) for k in ("pad_token_id", "mask_token_id", "cls_token_id",
                                                         "sep_token_id", "bos_token_id", "eos_token_id")}
    return {"class": type(tokenizer).__name__, "vocab": digest, "special": specials,
            "side": getattr(tokenizer, "truncation_side", None)}


def _method_keys(names: Sequence[str], options: Dict[str, Dict[str, Any]], config: BenchmarkConfig,
                 max_length: int, model: nn.Module, tokenizer: Any, data: _Data,
                 device: torch.device, protect_explained: bool = False) -> Dict[str, str]:
    """The cache key of each method's records: every input that determines them (the device type too:
    records hold time and memory)."""
    import captum_prxai

    shared = {
        "package": getattr(captum_prxai, "__version__", ""),
        "metrics": config.metric_fields(),
        "max_length": max_length,
        "seed": config.seed,
        "model": model_fingerprint(model),
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "dataset": {"name": data.name, "split": data.split},
        "device": device.type,
    }
    if protect_explained:  # only then: the records of runs without it keep their keys
        shared["protect_explained"] = True
    return {name: record_key({**shared, "method": method_settings(name, options)}) for name in names}


# ----------------------------------------------------------------------------- steps of the loop
def _text_sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _seed_for(seed: int, index: int, method: str) -> int:
    digest = hashlib.sha1(f"{seed}:{index}:{method}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def _tolist(t: Tensor) -> List[float]:
    return [float(x) for x in t.detach().cpu().reshape(-1).tolist()]


def _cached_records(cached: Dict[tuple, Dict[str, Any]], keys: Dict[str, str], index: int, sha: str,
                    label: Optional[int]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """(the records of example ``index`` the cache has for this run, the methods still to compute)."""
    hits, todo = [], []
    for name, key in keys.items():
        rec = cached.get((key, index, name, sha, label))
        if rec is not None:
            hits.append(rec)
        else:
            todo.append(name)
    return hits, todo


@dataclass
class EncodedText:
    """One text as the benchmark encodes it: ids, mask and special-tokens mask ``(1, T)``, and its tokens."""

    ids: Tensor
    mask: Tensor
    special: Tensor
    tokens: List[str]


def encode_text(tokenizer: Any, text: str, max_length: int, device: torch.device) -> EncodedText:
    """``text`` tokenised as every method of the benchmark sees it: truncated to ``max_length``, with its
    special-tokens mask (what a precomputed method's scores must be aligned to)."""
    enc = tokenizer(text, truncation=True, max_length=max_length, return_special_tokens_mask=True,
                    return_tensors="pt")
    ids = enc["input_ids"].to(device)
    if ids.shape[1] > max_length:  # the tokenizer could not truncate (guarded by resolve_max_length)
        raise PRXAIError(f"the tokenizer returned {ids.shape[1]} tokens for max_length {max_length}.")
    mask = enc["attention_mask"].to(device) if "attention_mask" in enc else torch.ones_like(ids)
    special = enc["special_tokens_mask"].to(device)
    return EncodedText(ids, mask, special, tokenizer.convert_ids_to_tokens(ids[0].tolist()))


def _prober(data: _Data, tokenizer: Any, max_length: int, device: torch.device,
            forward: ForwardFunc) -> Callable[[int], Tuple[int, int, float]]:
    """``probe(index)``: ``(target, token count, target probability)`` of example ``index`` under this run's model,
    tokenisation and text, as a record stores them (one forward pass)."""

    def probe(index: int) -> Tuple[int, int, float]:
        enc = encode_text(tokenizer, data.texts[index], max_length, device)
        with torch.no_grad():
            probs = torch.softmax(forward(enc.ids, enc.mask).float(), dim=-1)[0]
        target = int(probs.argmax())
        return target, int(enc.mask[0].sum()), float(probs[target])

    return probe


class _Methods:
    """Builds each method once (with an untimed warm-up call), then times and measures its calls."""

    def __init__(self, model: nn.Module, forward: ForwardFunc, ctx: MethodContext, seed: int, warmup: bool,
                 device: torch.device) -> None:
        self.model, self.forward, self.ctx = model, forward, ctx
        self.seed, self.warmup, self.device = seed, warmup, device
        self._built: Dict[str, Explainer] = {}

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def explain(self, name: str, index: int, enc: EncodedText, target: Tensor) -> Tuple[Tensor, float, Any]:
        """``(scores, seconds, PeakMemory)`` of one call of method ``name``."""
        from captum_prxai.bench._memory import PeakMemory

        if name not in self._built:
            self._built[name] = build_method(name, self.model, self.forward, self.ctx)
            if self.warmup:
                torch.manual_seed(_seed_for(self.seed, index, name))
                self._built[name](enc.ids, enc.mask, enc.special, target)
        torch.manual_seed(_seed_for(self.seed, index, name))
        self._sync()
        with PeakMemory(self.device) as mem:
            start = time.perf_counter()
            scores = self._built[name](enc.ids, enc.mask, enc.special, target)
            self._sync()
            elapsed = time.perf_counter() - start
        if not torch.isfinite(scores).all():
            raise PRXAIError(f"method {name!r} returned non-finite scores.")
        return scores, elapsed, mem


def _make_record(key: str, index: int, sha: str, name: str, label: Optional[int], label_names: List[str],
                 target: Tensor, enc: EncodedText, res: Dict[str, Tensor], scores: Tensor, elapsed: float,
                 mem: Any) -> Dict[str, Any]:
    metrics = {k: float(v[0]) for k, v in res.items()
               if k not in ("curve_most", "curve_least", "curve_fractions", "target", "prob")}
    return {
        "config_key": key,
        "example": index,
        "text_sha": sha,
        "method": name,
        "label": label,
        "label_name": label_names[label] if label is not None and label < len(label_names) else None,
        "target": int(target[0]),
        "correct": None if label is None else bool(int(target[0]) == label),
        "prob": float(res["prob"][0]),
        "n_tokens": int(enc.mask[0].sum()),
        "metrics": metrics,
        "curve_fractions": _tolist(res["curve_fractions"]),
        "curve_most": _tolist(res["curve_most"][0]),
        "curve_least": _tolist(res["curve_least"][0]),
        "time_s": elapsed,
        "peak_mem_mb": mem.peak_bytes / 2**20,
        "mem_kind": mem.kind,
        "tokens": enc.tokens,
        "scores": _tolist(scores[0]),
    }


@dataclass
class _Tally:
    records: List[Dict[str, Any]] = field(default_factory=list)
    errors: List[Tuple[int, str, str]] = field(default_factory=list)
    n_computed: int = 0
    n_cached: int = 0


def resolve_protect_explained(protect_explained: Optional[bool], model: nn.Module) -> bool:
    """``protect_explained``, or (``None``) whether the model is a decoder (:func:`~captum_prxai.capture.model_is_causal`)."""
    if protect_explained is not None:
        if not isinstance(protect_explained, bool):
            raise PRXAIError(f"protect_explained must be True, False or None, got {protect_explained!r}.")
        return protect_explained
    from captum_prxai.capture import model_is_causal

    return model_is_causal(model)


def metric_special_mask(enc: EncodedText, protect_explained: bool) -> Tensor:
    """The special-tokens mask the metrics see: plus the last real token when the explained token is protected."""
    if not protect_explained:
        return enc.special
    from captum_prxai.capture import target_positions
    from captum_prxai.metrics import protect_positions

    return protect_positions(enc.special, enc.mask, target_positions(enc.mask.bool(), causal=True))


def _explain_examples(indices: Sequence[int], data: _Data, keys: Dict[str, str], cached: Dict[tuple, Dict[str, Any]],
                      cache: RecordCache, tokenizer: Any, max_length: int, device: torch.device,
                      forward: ForwardFunc, runner: _Methods, metric_kwargs: Dict[str, Any], bar: Any,
                      protect_explained: bool = False) -> _Tally:
    """The loop: per example, reuse the cached records, then explain, score and store the missing ones.

    A method that fails on an example is reported and skipped; the others
    still run (Ctrl-C still stops the run). With ``protect_explained`` the
    metrics never remove the last real token (a decoder's explained token);
    the methods still see the tokenizer's special-tokens mask.
    """
    tally = _Tally()
    for index in indices:
        text, label = data.texts[index], data.labels[index]
        sha = _text_sha(text)
        hits, todo = _cached_records(cached, keys, index, sha, label)
        tally.records += hits
        tally.n_cached += len(hits)
        bar.update(len(hits))
        if not todo:
            continue
        enc = encode_text(tokenizer, text, max_length, device)
        with torch.no_grad():
            target = forward(enc.ids, enc.mask).argmax(dim=-1)
        gold = None if label is None else torch.tensor([label], device=device)
        metric_special = metric_special_mask(enc, protect_explained)
        for name in todo:
            bar.set_postfix_str(f"{name} #{index}")
            try:
                scores, elapsed, mem = runner.explain(name, index, enc, target)
                res = evaluate_faithfulness(forward, enc.ids, enc.mask, metric_special, scores, target=target,
                                            labels=gold, **metric_kwargs)
            except Exception as err:
                message = f"{type(err).__name__}: {err}"
                tally.errors.append((index, name, message))
                bar.write(f"warning: {name} failed on example {index}: {message}")
                bar.update(1)
                continue
            rec = _make_record(keys[name], index, sha, name, label, data.label_names, target, enc, res, scores,
                               elapsed, mem)
            cache.append(rec)
            tally.records.append(rec)
            tally.n_computed += 1
            bar.update(1)
    return tally


def _check_same_model(kept: Sequence[Dict[str, Any]], records: Sequence[Dict[str, Any]], out: Path) -> None:
    """``merge=True``: refuse to pair the kept rows with rows of another model (or tokenisation), seen as
    :func:`_row_mismatch` sees it."""
    before = {r["example"]: r for r in kept}
    for r in records:
        old = before.get(r["example"])
        why = None if old is None else _row_mismatch(old, r["target"], r["n_tokens"], r["prob"])
        if why is not None:
            raise PRXAIError(
                f"merge=True: on example {r['example']} {why} in {out / 'results.csv'}: not the same model, so the "
                "methods would not be paired. Nothing was merged (the new scores are in the cache); rerun the whole "
                "benchmark on this model instead.")


# ----------------------------------------------------------------------------- the last step
def _write_outputs(out: Path, names: List[str], records: List[Dict[str, Any]], meta: Dict[str, Any],
                   settings: MetricSettings, plot: bool, kept: Sequence[Dict[str, Any]] = (),
                   kept_names: Sequence[str] = ()) -> Tuple[Dict[str, Any], Dict[str, Path]]:
    from captum_prxai.bench.report import summarize, write_csv, write_markdown, write_plot, write_summary_json

    plotted, plot_path = list(names), out / ("deletion_curves.png" if not kept_names else ADDED_PLOT)
    records.sort(key=lambda r: (r["example"], plotted.index(r["method"])))
    plot_records = list(records)
    names = list(kept_names) + list(names)
    records = list(kept) + list(records)
    order = {name: i for i, name in enumerate(names)}
    records.sort(key=lambda r: (r["example"], order[r["method"]]))
    summary = summarize(records, names)
    per_example = {r["example"]: r for r in records}
    correct = [r["correct"] for r in per_example.values() if r.get("correct") is not None]
    meta = {
        **meta,
        "longest_input_tokens": max((r["n_tokens"] for r in records), default=None),
        "model_accuracy": sum(correct) / len(correct) if correct else None,
        "mean_prob": sum(r["prob"] for r in per_example.values()) / len(per_example) if per_example else None,
    }
    files: Dict[str, Path] = {"cache": out / CACHE_FILE}
    files["csv"] = write_csv(records, out / "results.csv")
    files["markdown"] = write_markdown(summary, names, meta, out / "summary.md", settings=settings)
    files["json"] = write_summary_json(summary, meta, out / "summary.json")
    if plot and plot_records:
        files["plot"] = write_plot(plot_records, plotted, plot_path)
    return {"summary": summary, "meta": meta}, files


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
    protect_explained: Optional[bool] = None,
    merge: bool = False,
    reuse_results: bool = False,
    reuse_retrained: bool = False,
    recompute_retrained: bool = False,
    finished_only: bool = False,
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
        methods: Method names (see :func:`captum_prxai.methods.available_methods`),
            a list or a comma-separated string.
        n: Number of examples (a seeded random sample); ``None`` for all.
        out_dir: Output folder (created).
        forward_func: ``forward_func(input_ids, attention_mask) -> logits``
            (default: :func:`~captum_prxai.methods.make_forward_func`). It is
            not part of the cache key: resume only with the same function.
        config: A :class:`BenchmarkConfig`; or pass its fields as keyword
            arguments (``mode="replace"``, ``steps=20``, ...).
        method_options: Per-method overrides, e.g. ``{"ig": {"n_steps": 20}}``.
        device: Where to run (default: the model's device).
        batch_size: Perturbed inputs per forward pass in the metrics.
        resume: Reuse the records in ``out_dir/cache.jsonl`` whose key matches
            (same metric settings, truncation, seed, model weights, tokenizer,
            dataset, device type, the method's options and any precomputed
            file's content); other records are recomputed, never reused.
        progress: Show a tqdm progress bar.
        plot: Write ``deletion_curves.png``.
        model_name: Name shown in the report (default: from the model config).
        warmup: Run each method once, untimed, before its first timed call, so
            one-off costs (kernel loading, hook set-up) don't count as time.
        protect_explained: Never remove the last real token in the metrics,
            for every method alike. A decoder classifier reads its class
            there, so removing it moves the read-out rather than removing
            evidence (see :func:`captum_prxai.metrics.protect_positions`).
            ``None`` (default): on for models whose attention is causal
            (:func:`captum_prxai.capture.model_is_causal`), off otherwise.
            Part of the cache key when on.
        merge: Add ``methods`` to the finished run in ``out_dir`` rather than
            replace it: the rows of the run's other methods are read back from
            its ``results.csv`` and kept, so the tables cover them all, and
            ``methods`` are computed (or taken from the cache) as usual. The
            kept rows must cover exactly this run's examples (same ``n`` and
            seed), checked before the first example. The CSV has no deletion
            curves, so the added methods' curves go to
            ``deletion_curves-added.png`` and ``deletion_curves.png`` is left
            as it is.
        reuse_results: Also resume from the run's ``results.csv`` (with
            ``resume``), for a folder whose ``cache.jsonl`` is gone, e.g. a
            committed run: a row is taken when its method's cache key, kept in
            ``summary.json``, equals this run's (the same weights, tokenizer,
            dataset, settings and options), so a larger ``n`` computes only
            the new examples. The key names the dataset but not its texts,
            so each reused example is checked with one forward pass: a row
            whose target, token count or explained-class probability (to
            1e-4) differs from this run's is not taken, and the example is
            computed again, with a warning. A method whose stored key
            differs (e.g. a retrained model) reuses nothing, also with a
            warning. The CSV has no deletion curves, so when rows
            are taken from it ``deletion_curves.png`` is not redrawn (and
            those records carry no tokens, scores or curves).
        reuse_retrained: With ``reuse_results``, also take the rows of a
            method whose stored key differs, for a model retrained with
            the same recipe whose weights are not bit-for-bit the former
            ones. First the first :data:`RETRAINED_SPOT_CHECK` stored
            examples are computed with this run's model; there every
            method's target and token count must equal its stored rows', and
            its explained-class probability, comprehensiveness and
            sufficiency be within :data:`RETRAINED_TOLERANCE` of them, else
            :class:`PRXAIError` and nothing is reused. Each other stored
            example is checked as above, with the probability to that
            tolerance. All of an example's rows come from one model, so the
            methods stay paired (a method with no stored row on a taken
            example is refused); the cell then mixes two models, and
            ``summary.json`` (``meta["reused_retrained"]``, one note per
            such run, with the examples and methods it took) and
            ``summary.md`` say how many examples, and how far apart the
            models were on the checks. Later runs that take those rows from
            ``results.csv`` again keep the notes, counting the examples
            still taken.
        recompute_retrained: With ``reuse_results``, the opposite of
            ``reuse_retrained``: compute again, with this run's model, every
            row that earlier ``reuse_retrained`` runs took under another key
            (``meta["reused_retrained"]``): on an example whose rows a former
            model made, every method but one this model made on all of that
            note's examples; where only one method's key had changed, that
            method's rows. The other rows are taken from
            ``results.csv`` as usual, so the run then holds one model's rows
            and carries no such note.
        finished_only: Compute nothing: summarise the longest prefix of the
            sample order whose examples have every method's record (in the
            cache, or with ``reuse_results`` in ``results.csv``), e.g. the
            part an interrupted run finished. ``n`` is then an upper bound.

    Returns:
        A :class:`BenchmarkResult`.

    Raises:
        PRXAIError: Unknown method or option, empty dataset, bad settings
            (all checked before the first example).
    """
    from tqdm.auto import tqdm

    config = _resolve_config(config, config_kwargs)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise PRXAIError(f"batch_size must be a positive number of inputs per forward pass, got {batch_size!r}.")
    names = parse_methods(methods)
    method_options = validate_options(method_options or {})
    data = _dataset_items(dataset)
    if not data.texts:
        raise PRXAIError("the dataset is empty; nothing to benchmark.")
    indices = _sample_order(len(data.texts), n, config.seed)
    device = _prepare_model(model, device)
    forward = forward_func or make_forward_func(model)
    ctx = MethodContext.from_tokenizer(tokenizer, seed=config.seed, options=method_options)
    metric_kwargs = config.metric_kwargs(ctx.mask_token_id, ctx.pad_token_id, batch_size)
    max_length = resolve_max_length(config.max_length, model, tokenizer)
    protect = resolve_protect_explained(protect_explained, model)

    if merge and reuse_results:
        raise PRXAIError("merge=True adds methods on the same examples and reuse_results=True extends a run to "
                         "more examples: use one at a time.")
    if reuse_retrained and not reuse_results:
        raise PRXAIError("reuse_retrained=True takes the rows of a retrained model from results.csv: it needs "
                         "reuse_results=True.")
    if recompute_retrained and (reuse_retrained or not reuse_results):
        raise PRXAIError("recompute_retrained=True computes again the rows that an earlier reuse_retrained run took "
                         "from a former model: it needs reuse_results=True, and cannot be combined with "
                         "reuse_retrained=True, which keeps them.")
    if finished_only and (merge or not resume):
        raise PRXAIError("finished_only=True summarises what a run's cache (or results.csv) already holds: it needs "
                         "resume=True and cannot merge.")
    out = Path(out_dir)
    kept, kept_names, kept_keys = _kept_records(out, names, indices) if merge else ([], [], {})
    out.mkdir(parents=True, exist_ok=True)
    cache = RecordCache(out / CACHE_FILE)
    keys = _method_keys(names, method_options, config, max_length, model, tokenizer, data, device, protect)
    runner = _Methods(model, forward, ctx, config.seed, warmup, device)
    retrained_note: Optional[Dict[str, Any]] = None
    from captum_prxai.bench.report import retrained_notes

    earlier_notes = retrained_notes(_last_meta(out)) if resume and (reuse_results or merge) else []
    drop = frozenset(_retrained_pairs(earlier_notes, names)) if recompute_retrained and resume else frozenset()
    if recompute_retrained:
        earlier_notes = []  # every row they describe is computed again (or comes from this model's cache)
    spot_computed = 0  # records the spot check computed: counted as computed, not as taken from the cache
    if resume:
        cached = cache.read(set(keys.values()))
        if reuse_results:  # records from the cache first: they carry curves and scores
            probe = _prober(data, tokenizer, max_length, device, forward)
            rows, stale = _reusable_rows(out, keys, indices, data, probe, retrained=reuse_retrained, drop=drop)
            cached = {**rows, **cached}
            if stale:  # reuse_retrained: check the first stored examples against this model, then take the rest
                stored = {e for _, e in stale}
                spot = [i for i in indices if i in stored][:RETRAINED_SPOT_CHECK]
                if finished_only and any(_cached_records(cached, keys, i, _text_sha(data.texts[i]),
                                                         data.labels[i])[1] for i in spot):
                    raise PRXAIError(f"finished_only=True computes nothing, but reuse_retrained=True first checks "
                                     f"examples {sorted(spot)} with this model and the cache does not have them all: "
                                     "run once without finished_only.")
                with tqdm(total=len(spot) * len(names), disable=not progress, desc="spot check", unit="expl") as b:
                    checked = _explain_examples(spot, data, keys, cached, cache, tokenizer, max_length, device,
                                                forward, runner, metric_kwargs, b, protect)
                spot_computed = checked.n_computed
                for rec in checked.records:
                    cached[(rec["config_key"], rec["example"], rec["method"], rec["text_sha"], rec["label"])] = rec
                covered = {(k[2], k[1]) for k in rows}
                rows, retrained_note = _retrained_rows(stale, checked.records, keys, data, probe, out, covered)
                cached = {**rows, **cached}
    else:
        cache.clear()
        cached = {}
    if finished_only:
        indices = indices[: _finished_prefix(indices, data, keys, cached, out)]

    bar = tqdm(total=len(indices) * len(names), disable=not progress, desc="benchmark", unit="expl")
    try:
        tally = _explain_examples(indices, data, keys, cached, cache, tokenizer, max_length, device, forward,
                                  runner, metric_kwargs, bar, protect)
    finally:
        bar.close()
    tally.n_computed += spot_computed
    tally.n_cached -= spot_computed

    meta = {
        "dataset": data.name,
        "split": data.split,
        "n_examples": len(indices),
        "model": model_name or _display_name(model),
        "model_card": _model_card(model),
        "device": str(device),
        **config.metric_fields(),
        "max_length": max_length,
        "seed": config.seed,
        "batch_size": batch_size,
        "protect_explained": protect,
        "errors": len(tally.errors),
        "cache_keys": {**kept_keys, **keys},
    }
    # rows taken from results.csv carry no curves: those examples keep what earlier runs said of their rows
    # (records with curves were made by this run's model: computed now or cached under its keys)
    from_csv: set = set()
    this_model: Dict[int, set] = {}
    for r in [*tally.records, *kept]:
        if "curve_most" in r:
            this_model.setdefault(r["example"], set()).add(r["method"])
        else:
            from_csv.add(r["example"])
    notes = _carried_retrained(earlier_notes, from_csv, list(kept_names) + list(names), this_model) + (
        [retrained_note] if retrained_note is not None else [])
    if notes:
        meta["reused_retrained"] = notes
    if kept:
        _check_same_model(kept, tally.records, out)
    if plot:  # rows reused from a CSV have no curves, and a merge leaves the first run's plot as it is
        redrawn = not kept_names and all("curve_most" in r for r in tally.records)
        meta["plot_examples"] = len(indices) if redrawn else _plotted_before(out)
        plot = redrawn or bool(kept_names)
    written, files = _write_outputs(out, names, tally.records, meta, config.metrics_only(), plot, kept, kept_names)
    return BenchmarkResult(out, names, tally.records, tally.n_computed, tally.n_cached, tally.errors, files,
                           written["summary"], written["meta"])
