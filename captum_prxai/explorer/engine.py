"""Model-side work of the explorer: encoding, cached predictions, cached attributions, graphs.

:class:`Engine` holds one classifier, its tokenizer and a set of datasets.
It serves three *lanes*, each with its own copy of the model's modules
(sharing the weights, so a copy costs almost no memory) and its own lock:

* ``"predict"`` -- predictions of typed texts and dataset examples;
* ``"fast"`` -- one-pass methods (PR-XAI, attention baselines, gradients)
  and the graph view;
* ``"slow"`` -- many-pass methods (Integrated Gradients, the perturbation
  methods, attention flow).

The attribution methods install hooks on the modules they explain, so two
methods never share a copy; with separate copies a 20-minute Shapley run
does not hold up a prediction or a PR-G heatmap in another tab.

Every model call of a method goes through a guarded forward function that
raises :class:`JobCancelled` once its job is cancelled, so a cancel takes
effect after at most one forward pass. Many-pass methods run in internal
batches sized by :meth:`Engine.batch_size_for` from the input length and
``memory_budget_mb`` (Captum's ``internal_batch_size`` and
``perturbations_per_eval``), and the engine returns freed memory to the
system after each of them (:func:`release_memory`).

Predictions are cached per example, attributions per
``(input ids, target, method, parameters)``, and graph drawings per those
and the drawing options.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import gc
import itertools
import json
import math
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from captum_prxai._tokenize import encode_text, model_input_limit
from captum_prxai.exceptions import PRXAIError
from captum_prxai.explorer.params import method_options

__all__ = ["Engine", "Encoded", "DatasetStore", "InputTooLong", "JobCancelled", "TooCostly", "as_dataset",
           "method_signed", "model_max_tokens", "release_memory", "rss_bytes", "share_weights"]

#: Methods that run many forward passes (besides the perturbation family): the slow lane.
MANY_PASS = ("ig", "attention-flow", "gaf")
#: Forward passes timed per input length for the estimates (the fastest is used).
TIMED_PASSES = 5
#: Recent runs per method whose measured over estimated time calibrates its estimates.
CALIBRATION_RUNS = 9
#: Runs estimated (before calibration) under this many seconds do not calibrate: a fixed start-up cost
#: dominates them, and they are far under any limit anyway.
CALIBRATION_MIN_SECONDS = 1.0
#: Graph drawings (SVG and drawn nodes and edges) kept in the cache.
GRAPH_CACHE_SIZE = 64


def method_signed(spec: Any) -> bool:
    """Whether a registered method's scores are signed (drawn on the diverging scale centred on 0).

    Read from :attr:`captum_prxai.methods.MethodSpec.signed`.
    """
    return bool(spec.signed)


class InputTooLong(PRXAIError):
    """The text is longer than the explorer or the model accepts (HTTP 413)."""


class JobCancelled(PRXAIError):
    """The job was cancelled; raised by the guarded forward function at the next model call."""


class TooCostly(PRXAIError):
    """A method's estimated time is over the explorer's limit (HTTP 422)."""


#: Longest input, in tokens with special tokens, that a model accepts (``None``: no known limit).
model_max_tokens = model_input_limit


def rss_bytes() -> int:
    """Resident memory of this process, in bytes (0 where unknown); see :func:`captum_prxai.bench._memory.rss_bytes`."""
    from captum_prxai.bench._memory import rss_bytes as _rss

    return _rss() or 0


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the system.

    glibc keeps freed memory of large tensors in its arenas, so resident
    memory stays at its peak after a long Integrated Gradients run;
    ``malloc_trim(0)`` returns it (Linux with glibc only; a no-op elsewhere).
    """
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - memory release is best effort
        pass


def _hook_dicts(module: Any) -> Iterator[Tuple[str, Any]]:
    """``(attribute name, dict)`` of every hook dict of one module (forward, backward, state-dict ...)."""
    for name, value in list(vars(module).items()):
        if "hook" in name and isinstance(value, dict):
            yield name, value


def _between_captures(model: Any) -> Any:
    """A context holding the capture locks of ``model``'s attention layers and configs (none if it has none found).

    An attention capture (:class:`~captum_prxai.hooks.AttentionRecorder`)
    holds them while it has hooks on the layers and its attention
    implementation in the configs.
    """
    from captum_prxai.hooks import _exclusive, attention_layers

    try:
        layers = attention_layers(model)
    except Exception:  # noqa: BLE001 - a model whose attention layers are not found is copied as it is
        return contextlib.nullcontext()
    return _exclusive(layers)


def share_weights(model: Any) -> Any:
    """A copy of ``model``'s modules that shares its parameters and buffers (no weight is copied).

    Hooks installed on one copy do not fire on the other, so two threads can
    explain (or predict) at once without seeing each other's hooks. The copy
    starts without any module hook: the hook dicts of ``model`` (forward,
    backward, state-dict hooks) are not copied but replaced by empty ones, so
    a copy made while a method is running on ``model`` (its hooks installed)
    does not carry that method's hooks. Hooks on the shared parameter tensors
    themselves, and global module hooks, are shared by nature. The copy is
    made between two attention captures on ``model`` (a capture running in
    another thread, which switches the model's attention implementation to
    its own, ends first), so the copy's attention setting is the model's own.
    """
    memo: Dict[int, Any] = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    with _between_captures(model):
        for module in list(model.modules()) if hasattr(model, "modules") else []:
            for _, hooks in _hook_dicts(module):
                memo[id(hooks)] = type(hooks)()  # never deep-copied: an empty dict of the same type
        replica = copy.deepcopy(model, memo)
    for module in replica.modules() if hasattr(replica, "modules") else ():
        if getattr(module, "_is_full_backward_hook", None) is not None:
            module._is_full_backward_hook = None  # no backward hook left: either kind may be registered again
    return replica


@dataclass(frozen=True)
class Encoded:
    """One tokenised input (a batch of one)."""

    input_ids: Any  #: (1, T) long tensor
    attention_mask: Any  #: (1, T)
    special_tokens_mask: Any  #: (1, T)
    tokens: List[str]
    truncated: bool
    full_length: int  #: token count before truncation (of the text after any character cut)
    full_chars: int = 0  #: characters of the text before any character cut

    @property
    def key(self) -> Tuple[int, ...]:
        return tuple(int(i) for i in self.input_ids[0].tolist())

    @property
    def real_tokens(self) -> int:
        """Tokens that are neither special nor padding (the perturbation methods' features)."""
        real = self.attention_mask.bool() & ~self.special_tokens_mask.bool()
        return int(real.sum())


@dataclass
class _Dataset:
    """Texts with integer labels (what :func:`as_dataset` makes of a list or a DataFrame)."""

    name: str
    texts: List[str]
    labels: List[int]
    label_names: List[str] = field(default_factory=list)


def as_dataset(name: str, data: Any, label_names: Optional[Sequence[str]] = None,
               text_column: str = "text", label_column: str = "label") -> Any:
    """Turn a user's data into a dataset the explorer can browse.

    Args:
        name: Its name in the page.
        data: An object with ``texts``, ``labels`` and ``label_names``
            (returned as it is); a pandas DataFrame with ``text_column`` and
            ``label_column``; a list of ``(text, label)`` pairs; or a list of
            texts (all labelled 0).
        label_names: Class names; default: ``label_names`` of ``data``, else
            the labels' string values (``"0"``, ``"1"`` ...) for integers, or
            the sorted distinct labels when they are strings.

    Returns:
        An object with ``texts``, ``labels`` (integers) and ``label_names``.

    Raises:
        PRXAIError: Texts that are not strings, or labels out of range.
    """
    if all(hasattr(data, a) for a in ("texts", "labels", "label_names")):
        return data
    if hasattr(data, "columns") and hasattr(data, "__getitem__"):  # a pandas DataFrame
        missing = [c for c in (text_column, label_column) if c not in data.columns]
        if text_column in missing:
            raise PRXAIError(f"dataset {name!r}: the DataFrame has no column {text_column!r} "
                             f"(columns: {', '.join(map(str, data.columns))}); pass text_column=.")
        texts = list(data[text_column])
        labels = list(data[label_column]) if label_column not in missing else [0] * len(texts)
    else:
        rows = list(data)
        if rows and isinstance(rows[0], (tuple, list)):
            texts = [r[0] for r in rows]
            labels = [r[1] for r in rows]
        else:
            texts, labels = rows, [0] * len(rows)
    if not all(isinstance(t, str) for t in texts):
        raise PRXAIError(f"dataset {name!r}: every text must be a string.")
    if labels and all(isinstance(v, str) for v in labels):
        names = list(label_names) if label_names is not None else sorted(set(labels))
        unknown = sorted(set(labels) - set(names))
        if unknown:
            raise PRXAIError(f"dataset {name!r}: labels {unknown[:5]} are not in label_names {names}.")
        ints = [names.index(v) for v in labels]
    else:
        try:
            ints = [int(v) for v in labels]
        except (TypeError, ValueError):
            raise PRXAIError(f"dataset {name!r}: labels must be integers or strings.") from None
        top = max(ints, default=0)
        names = list(label_names) if label_names is not None else [str(i) for i in range(top + 1)]
        if any(not 0 <= v < len(names) for v in ints):
            raise PRXAIError(f"dataset {name!r}: labels must be in 0..{len(names) - 1} for label_names {names}.")
    return _Dataset(name, [str(t) for t in texts], ints, [str(n) for n in names])


class DatasetStore:
    """Datasets by name, loaded on first use.

    Args:
        datasets: Either a mapping ``name -> dataset`` (objects with ``texts``,
            ``labels`` and ``label_names``, e.g. a
            :class:`~captum_prxai.data.TextDataset`, or anything
            :func:`as_dataset` accepts: a DataFrame, a list of
            ``(text, label)`` pairs), or ``None`` for the offline datasets of
            :mod:`captum_prxai.data`.
        split: Split loaded from :mod:`captum_prxai.data` (ignored for a mapping).
    """

    def __init__(self, datasets: Optional[Mapping[str, Any]] = None, split: str = "test") -> None:
        self._lock = threading.Lock()
        self._loaded: Dict[str, Any] = {}
        if datasets is not None:
            self._loaded = {str(name): as_dataset(str(name), ds) for name, ds in datasets.items()}
            self.names = list(self._loaded)
            self._loader: Optional[Callable[[str], Any]] = None
        else:
            from captum_prxai.data import list_datasets, load_dataset

            self.names = list_datasets()
            self._loader = lambda name: load_dataset(name, split)
        self.split = split

    def get(self, name: str) -> Any:
        if name not in self.names:
            raise PRXAIError(f"unknown dataset {str(name)[:60]!r}; choose one of: {', '.join(self.names)}.")
        with self._lock:
            if name not in self._loaded:
                assert self._loader is not None
                self._loaded[name] = self._loader(name)
            return self._loaded[name]


class _LRU:
    """A small thread-safe LRU cache with hit/miss counters."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: "OrderedDict[Any, Any]" = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Any) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                self.hits += 1
                return self._data[key]
            self.misses += 1
            return None

    def peek(self, key: Any) -> Any:
        with self._lock:
            return self._data.get(key)

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


@dataclass
class _Lane:
    """One copy of the model with its own lock and guarded forward function."""

    model: Any
    forward: Callable[..., Any]
    lock: Any


def _median(values: Sequence[float]) -> float:
    ordered, n = sorted(values), len(values)
    return ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Engine:
    """Predictions and attributions for the explorer.

    Args:
        model: A sequence classifier (``model(input_ids=..., attention_mask=...).logits``
            unless ``forward_func`` is given).
        tokenizer: Its Hugging Face tokenizer.
        datasets: A :class:`DatasetStore`.
        max_chars: Longest typed text accepted, in characters (longer texts
            are refused, or cut to this length when truncation is asked for).
        cache_size: Attributions kept in the cache.
        batch_size: Batch size of the example predictions.
        memory_budget_mb: Memory one method may use for its activations, in
            MB; sets the internal batch size of the many-pass methods
            (:meth:`batch_size_for`).
        max_method_seconds: Methods estimated to take longer are refused
            (:meth:`check_cost`).
        confirm_seconds: Jobs estimated to take longer need ``confirmed`` (the page asks first).
        forward_func: Optional ``forward_func(model, input_ids, attention_mask) -> logits``
            for a model whose output is not ``.logits`` of a Hugging Face
            classifier; it receives the lane's copy of the model, so it must
            call that argument, not a model it closes over.
        share: Give each lane its own weight-sharing copy of the model
            (:func:`share_weights`); ``False`` runs every lane on ``model``
            under one lock.
    """

    def __init__(self, model: Any, tokenizer: Any, datasets: DatasetStore, max_chars: int = 2000,
                 cache_size: int = 2048, batch_size: int = 32, memory_budget_mb: float = 1024.0,
                 max_method_seconds: float = 300.0, confirm_seconds: float = 20.0,
                 forward_func: Optional[Callable[..., Any]] = None, share: bool = True) -> None:
        from captum_prxai.methods import MethodContext

        if memory_budget_mb <= 0:
            raise PRXAIError(f"memory_budget_mb must be positive, got {memory_budget_mb}.")
        self.model = model.eval() if hasattr(model, "eval") else model
        self.tokenizer = tokenizer
        self.datasets = datasets
        self.max_chars = int(max_chars)
        self.max_tokens = model_max_tokens(model, tokenizer)
        self.batch_size = int(batch_size)
        self.memory_budget = float(memory_budget_mb) * 2 ** 20
        self.max_method_seconds = float(max_method_seconds)
        self.confirm_seconds = float(confirm_seconds)
        from captum_prxai.models import label_names

        from captum_prxai.capture import model_is_causal

        self.label_names = label_names(model)
        #: whether the model is a decoder (explains its last token; see :meth:`explained_position`)
        self.causal = model_is_causal(model)
        self._user_forward = forward_func
        self._local = threading.local()
        self._tokenizer_lock = threading.Lock()
        self.lanes: Dict[str, _Lane] = {}
        base_lock = threading.RLock()
        self.lanes["slow"] = _Lane(self.model, self._guarded(self.model), base_lock)
        for name in ("fast", "predict"):
            replica = None
            if share:
                try:
                    replica = share_weights(self.model)
                except Exception:  # noqa: BLE001 - a model that cannot be copied runs every lane on one lock
                    replica = None
            if replica is None:
                self.lanes[name] = self.lanes["slow"]
            else:
                self.lanes[name] = _Lane(replica, self._guarded(replica), threading.RLock())
        self.lock = self.lanes["slow"].lock  #: lock of the original model
        self.forward = self.lanes["predict"].forward
        self._context = MethodContext.from_tokenizer(tokenizer)
        self._MethodContext = MethodContext
        self.attributions = _LRU(cache_size)
        #: drawn graphs (:meth:`graph_svg`), so an export draws the graph on screen without a pass
        self.graphs = _LRU(GRAPH_CACHE_SIZE)
        self.predictions: Dict[Tuple[str, int], Tuple[int, List[float]]] = {}
        self.prediction_calls = 0  #: model forward passes for example predictions
        #: tokens -> seconds of the first forward passes (batch of one) at that length; their median is used
        self._forward_seconds: Dict[int, List[float]] = {}
        #: method -> measured seconds over uncalibrated estimate of its recent runs (their median scales its estimates)
        self._calibration: Dict[str, List[float]] = {}

    def _guarded(self, model: Any) -> Callable[..., Any]:
        from captum_prxai.methods import make_forward_func

        user = self._user_forward
        base = make_forward_func(model) if user is None else (lambda ids, mask=None: user(model, ids, mask))

        def forward(*args: Any, **kwargs: Any) -> Any:
            cancel = getattr(self._local, "cancel", None)
            if cancel is not None and cancel.is_set():
                raise JobCancelled("cancelled")
            progress = getattr(self._local, "progress", None)
            if progress is not None:
                ids = args[0] if args else kwargs.get("input_ids")
                progress(int(ids.shape[0]) if hasattr(ids, "shape") and len(ids.shape) else 1)
            return base(*args, **kwargs)

        return forward

    # ------------------------------------------------------------------ methods
    def methods(self) -> List[Dict[str, Any]]:
        """The registered methods (from :mod:`captum_prxai.methods`) for the page."""
        from captum_prxai.methods import METHODS
        from captum_prxai.explorer.params import method_param_names

        return [
            {"name": s.name, "label": s.label, "family": s.family, "description": s.description,
             "params": list(method_param_names(s.name, s.family)), "lane": self.lane_of(s.name, s.family),
             "signed": method_signed(s)}
            for s in METHODS.values()
        ]

    def resolve(self, name: Any) -> Any:
        from captum_prxai.methods import resolve_method

        if not isinstance(name, str):
            raise PRXAIError(f"a method name must be a string, got {str(name)[:40]!r}.")
        return resolve_method(name[:60])

    def default_pr_method(self) -> str:
        """The registered method :class:`~captum_prxai.PageRankAttribution` runs with its defaults for this model.

        Read from :func:`captum_prxai.methods.default_method`, so the page and
        the library cannot disagree on the default.
        """
        from captum_prxai.methods import default_method

        return default_method(self.model)

    @staticmethod
    def lane_of(name: str, family: str) -> str:
        """``"slow"`` for many-pass methods (IG, perturbations, attention flow), else ``"fast"``."""
        return "slow" if family == "perturbation" or name in MANY_PASS else "fast"

    # ------------------------------------------------------------------ input
    def check_text(self, text: Any, truncate: bool = False) -> Tuple[str, int]:
        """``(text, characters before any cut)``; refuses empty texts, and long ones unless ``truncate``."""
        if not isinstance(text, str):
            raise PRXAIError("'text' must be a string.")
        if not text.strip():
            raise PRXAIError("the text is empty; type a sentence to explain.")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise PRXAIError(f"the text contains an unpaired surrogate (\\u{ord(text[err.start]):04x}) at "
                             f"character {err.start}, which is not valid Unicode; remove it.") from None
        full = len(text)
        if full > self.max_chars:
            if not truncate:
                raise InputTooLong(
                    f"the text has {full} characters but the explorer accepts at most {self.max_chars}; "
                    "shorten it, tick 'truncate' to explain its first characters, or restart with a larger "
                    "--max-chars."
                )
            text = text[: self.max_chars]
        return text, full

    def encode(self, text: str, truncate: bool = False, full_chars: Optional[int] = None) -> Encoded:
        """Tokenise ``text``; refuse it if it is longer than the model accepts (unless ``truncate``)."""
        def too_long(length: int, limit: int) -> Exception:
            return InputTooLong(
                f"the text has {length} tokens but this model accepts at most {limit}; "
                f"shorten it, or tick 'truncate' to explain only its first {limit} tokens."
            )

        with self._tokenizer_lock:
            ids, mask, special, tokens, truncated, full = encode_text(self.tokenizer, text, self.max_tokens,
                                                                      truncate, too_long)
        chars = len(text) if full_chars is None else int(full_chars)
        return Encoded(ids, mask, special, tokens, truncated or chars > len(text), full, chars)

    # ------------------------------------------------------------------ predictions
    def predict(self, enc: Encoded) -> List[float]:
        """Class probabilities of one encoded input (on the prediction lane; times the forward pass)."""
        import torch

        lane = self.lanes["predict"]
        with lane.lock, torch.no_grad():
            start = time.perf_counter()
            logits = lane.forward(enc.input_ids, enc.attention_mask)
            self._time_forward(int(enc.input_ids.shape[1]), time.perf_counter() - start)
        return [float(p) for p in torch.softmax(logits.double(), -1)[0].tolist()]

    def _predict_texts(self, texts: Sequence[str]) -> List[Tuple[int, List[float]]]:
        import torch

        out: List[Tuple[int, List[float]]] = []
        lane = self.lanes["predict"]
        for start in range(0, len(texts), self.batch_size):
            chunk = list(texts[start:start + self.batch_size])
            kwargs: Dict[str, Any] = {"truncation": True}
            if self.max_tokens is not None:
                kwargs["max_length"] = self.max_tokens
            with self._tokenizer_lock:
                enc = self.tokenizer(chunk, return_tensors="pt", padding=True, **kwargs)
            mask = enc.get("attention_mask")
            if mask is None:
                mask = torch.ones_like(enc["input_ids"])
            with lane.lock, torch.no_grad():  # one batch at a time: other predictions get in between
                probs = torch.softmax(lane.forward(enc["input_ids"], mask).double(), -1)
            self.prediction_calls += 1
            for row in probs.tolist():
                out.append((int(max(range(len(row)), key=row.__getitem__)), [float(p) for p in row]))
        return out

    def example_predictions(self, dataset: str, indices: Iterable[int]) -> int:
        """Predict the listed examples that are not cached yet; returns how many were computed."""
        ds = self.datasets.get(dataset)
        todo = [i for i in indices if (dataset, i) not in self.predictions]
        if not todo:
            return 0
        for i, pred in zip(todo, self._predict_texts([ds.texts[i] for i in todo])):
            self.predictions[(dataset, i)] = pred
        return len(todo)

    def labels_comparable(self, dataset: str) -> bool:
        """Whether the model's classes are the dataset's (so 'correct' / 'wrong' mean something)."""
        names = [str(n).lower() for n in self.datasets.get(dataset).label_names]
        model = [n.lower() for n in self.label_names]
        if names == model:
            return True
        generic = all(n in (f"label_{i}", f"class {i}") for i, n in enumerate(model))
        return generic and len(names) == len(model)

    def list_examples(self, dataset: str, query: str = "", label: Optional[int] = None,
                      predicted: Optional[int] = None, correct: Optional[bool] = None, start: int = 0,
                      limit: int = 20, budget: int = 256) -> Dict[str, Any]:
        """Filter a dataset's examples; predictions are computed only where needed.

        Args:
            dataset: Dataset name.
            query: Case-insensitive substring of the text (all words must occur).
            label: Keep this true class only.
            predicted: Keep this predicted class only.
            correct: ``True``: correctly classified only; ``False``: misclassified only.
            start: First example index to scan (``next_start`` of the previous page).
            limit: Examples per page.
            budget: Largest number of new predictions this call may compute
                for the predicted-class / correctness filters; when it runs
                out the page may be short, ``exhausted`` is false, and the
                next call resumes from ``next_start`` (the page calls again
                with a small budget and shows ``scanned`` as progress).

        Returns:
            ``{"dataset", "size", "items", "next_start", "exhausted", "computed",
            "predicted_total", "scanned"}``; ``scanned`` is the index the scan reached.
        """
        ds = self.datasets.get(dataset)
        n = len(ds.texts)
        classes = len(ds.label_names)
        if label is not None and not 0 <= label < classes:
            raise PRXAIError(f"true class {label} is out of range: {dataset} has classes 0..{classes - 1}.")
        if predicted is not None and not 0 <= predicted < len(self.label_names):
            raise PRXAIError(
                f"predicted class {predicted} is out of range: the model has classes 0..{len(self.label_names) - 1}."
            )
        if correct is not None and not self.labels_comparable(dataset):
            raise PRXAIError(
                f"the model's classes ({', '.join(self.label_names)}) are not the classes of {dataset} "
                f"({', '.join(ds.label_names)}), so 'correct' and 'wrong' are undefined; clear that filter."
            )
        words = [w for w in str(query or "").lower().split() if w]
        start = max(0, int(start))
        limit = max(1, min(int(limit), 200))
        budget = max(1, int(budget))
        needs_pred = predicted is not None or correct is not None
        matches: List[int] = []
        computed = 0
        i = start
        while i < n and len(matches) < limit:
            chunk: List[int] = []
            j = i
            while j < n and len(chunk) < self.batch_size:
                if (label is None or int(ds.labels[j]) == label) and all(w in ds.texts[j].lower() for w in words):
                    chunk.append(j)
                j += 1
            if needs_pred and chunk:
                missing = [k for k in chunk if (dataset, k) not in self.predictions]
                if missing and computed >= budget:
                    break  # out of budget: the next call resumes at i
                computed += self.example_predictions(dataset, missing)
                chunk = [k for k in chunk if self._keep(dataset, k, int(ds.labels[k]), predicted, correct)]
            room = limit - len(matches)
            if len(chunk) > room:
                matches.extend(chunk[:room])
                i = chunk[room]  # the first match that did not fit
                break
            matches.extend(chunk)
            i = j
        computed += self.example_predictions(dataset, matches)  # for display
        comparable = self.labels_comparable(dataset)
        items = []
        for j in matches:
            pred, probs = self.predictions[(dataset, j)]
            lab = int(ds.labels[j])
            items.append({
                "index": j, "text": ds.texts[j], "chars": len(ds.texts[j]), "label": lab,
                "label_name": str(ds.label_names[lab]), "predicted": pred,
                "predicted_name": self.label_names[pred], "probability": probs[pred],
                "correct": (pred == lab) if comparable else None,
            })
        return {
            "dataset": dataset, "size": n, "items": items, "next_start": i if i < n else None,
            "exhausted": i >= n, "computed": computed, "scanned": min(i, n),
            "predicted_total": sum(1 for k in list(self.predictions) if k[0] == dataset),
        }

    def _keep(self, dataset: str, j: int, lab: int, predicted: Optional[int], correct: Optional[bool]) -> bool:
        pred = self.predictions[(dataset, j)][0]
        if predicted is not None and pred != predicted:
            return False
        if correct is not None and (pred == lab) != correct:
            return False
        return True

    # ------------------------------------------------------------------ cost
    def _shape(self) -> Tuple[int, int, int, int, int]:
        """``(layers, hidden, intermediate, heads, bytes per value)`` of the model, for memory estimates."""
        config = getattr(self.model, "config", None)

        def get(*names: str, default: int) -> int:
            for n in names:
                v = getattr(config, n, None)
                if isinstance(v, int) and v > 0:
                    return v
            return default

        layers = get("num_hidden_layers", "n_layer", "num_layers", default=12)
        hidden = get("hidden_size", "n_embd", "d_model", "dim", default=768)
        inter = get("intermediate_size", "n_inner", "ffn_dim", "hidden_dim", default=4 * hidden)
        heads = get("num_attention_heads", "n_head", "num_heads", default=12)
        try:
            itemsize = next(self.model.parameters()).element_size()
        except (StopIteration, AttributeError, TypeError):
            itemsize = 4
        return layers, hidden, inter, heads, itemsize

    def pass_bytes(self, tokens: int, backward: bool) -> int:
        """Estimated activation memory of one example's forward pass (kept for a backward pass if ``backward``).

        Per layer a transformer keeps about ``10 hidden + 2 intermediate``
        values per token (projections, norms, feed-forward) and one
        ``heads x T x T`` attention tensor (the probabilities, which the
        backward pass of softmax needs); a backward pass keeps every layer's,
        a forward pass without gradients about two layers' worth at a time. A
        1.5x margin covers the allocator. Measured on MiniLM-L6 with
        Integrated Gradients (``benchmarks/explorer_memory.py``), the peak
        stays under the budget.
        """
        layers, hidden, inter, heads, itemsize = self._shape()
        per_layer = tokens * (10 * hidden + 2 * inter) + heads * tokens * tokens
        values = layers * per_layer if backward else 2 * per_layer
        return int(1.5 * itemsize * (values + tokens * hidden))

    def batch_size_for(self, tokens: int, backward: bool) -> int:
        """Examples per internal batch that fit ``memory_budget_mb`` at this input length (at least 1)."""
        return max(1, int(self.memory_budget // max(1, self.pass_bytes(tokens, backward))))

    def _time_forward(self, tokens: int, seconds: float) -> None:
        """Keep the first :data:`TIMED_PASSES` timings of a forward pass at this length (later ones are not needed)."""
        samples = self._forward_seconds.setdefault(tokens, [])
        if len(samples) < TIMED_PASSES:
            samples.append(float(seconds))

    def forward_seconds(self, tokens: int) -> float:
        """Seconds of one forward pass: the fastest pass timed at this length, or scaled from the nearest length.

        The fastest of up to :data:`TIMED_PASSES` timings, which are then
        kept: other work only ever slows a pass down, so one slow pass does
        not swing the estimate, and a later estimate of the same request is
        never larger than an earlier one (the largest setting the page was
        given stays accepted). A machine that is slower all the time is
        covered by the methods' calibration (:meth:`calibration`).
        """
        known = {t: sorted(v) for t, v in list(self._forward_seconds.items()) if v}
        if not known:
            import torch

            ids = torch.full((1, tokens), int(self._context.pad_token_id), dtype=torch.long)
            lane = self.lanes["predict"]
            with lane.lock, torch.no_grad():
                start = time.perf_counter()
                lane.forward(ids, torch.ones_like(ids))
                self._time_forward(tokens, time.perf_counter() - start)
            return self._forward_seconds[tokens][0]
        nearest = tokens if tokens in known else min(known, key=lambda t: abs(t - tokens))
        return known[nearest][0] * tokens / nearest

    def calibration(self, name: str) -> Tuple[float, int]:
        """``(factor, runs)``: the median of measured over estimated seconds of ``name``'s recent runs (1.0 if none).

        Only runs of many-pass methods (IG, the perturbation methods)
        estimated at :data:`CALIBRATION_MIN_SECONDS` or more count: the time
        of a one-pass method or a short run is mostly its fixed start-up.

        Clamped to ``[0.01, 100]`` (a batched method can run 20 times faster
        than its evaluations one by one), so one odd run cannot make a method
        look free or impossible.
        """
        ratios = list(self._calibration.get(name, []))
        if not ratios:
            return 1.0, 0
        return max(0.01, min(100.0, _median(ratios))), len(ratios)

    def _calibrate(self, name: str, enc: Encoded, params: Mapping[str, Any], seconds: float) -> None:
        if self.forward_rows(enc, name, params) <= 1:
            return  # a one-pass method's time is mostly its fixed start-up, which no ratio describes
        count, _ = self.evaluations(enc, name, params)
        raw = count * self.forward_seconds(int(enc.input_ids.shape[1]))
        if raw >= CALIBRATION_MIN_SECONDS and seconds > 0:
            ratios = self._calibration.setdefault(name, [])
            ratios.append(seconds / raw)
            del ratios[:-CALIBRATION_RUNS]

    def forward_rows(self, enc: Encoded, name: str, params: Mapping[str, Any]) -> int:
        """Inputs a method's model calls evaluate in all (its progress counts them); 1 for one-pass methods."""
        spec, used, _, _ = self.method_key(name, params)
        count, _ = self.evaluations(enc, spec.name, params)
        if spec.name == "ig":
            return int(used.get("ig_steps", 50))
        if spec.family == "perturbation" and spec.name in ("occlusion", "feature-ablation", "shapley", "kernel-shap",
                                                             "lime"):
            return count
        return 1

    def evaluations(self, enc: Encoded, name: str, params: Mapping[str, Any]) -> Tuple[int, str]:
        """``(model evaluations, how they add up)`` of one method on ``enc``.

        A forward plus backward pass counts as 3 evaluations. The counts
        follow each Captum method's algorithm with the explorer's settings.
        """
        spec, used, options, _ = self.method_key(name, params)
        real = max(1, enc.real_tokens)
        n = spec.name
        if n == "ig":
            steps = int(used.get("ig_steps", 50))
            return 3 * steps, f"{steps} steps x (forward + backward)"
        if n == "occlusion":
            w = int(used.get("window", 3))
            pos = max(1, int(enc.input_ids.shape[1]) - w + 1)
            return pos + 1, f"{pos} window positions"
        if n == "feature-ablation":
            return real + 1, f"{real} tokens"
        if n == "shapley":
            perms = int(used.get("permutations", 25))
            return perms * real + 1, f"{perms} permutations x {real} tokens"
        if n in ("kernel-shap", "lime"):
            samples = int(used.get("samples", 200))
            return samples + 1, f"{samples} samples"
        if spec.family in ("pr-xai", "attention", "gradient"):
            return 3, "one forward + backward pass"
        return 3, "about one pass"

    def estimate(self, enc: Encoded, name: str, params: Mapping[str, Any]) -> Dict[str, Any]:
        """Estimated cost of one method: ``{"method", "label", "evaluations", "seconds", "detail", "lane"}``.

        Seconds are the evaluations times this machine's measured forward
        time at this length: a rough guide (batched passes are often faster,
        a busy machine slower).
        """
        spec, used, _, _ = self.method_key(name, params)
        count, detail = self.evaluations(enc, spec.name, params)
        factor, runs = self.calibration(spec.name)
        seconds = count * self.forward_seconds(int(enc.input_ids.shape[1])) * factor
        return {"method": spec.name, "label": spec.label, "evaluations": count, "seconds": seconds,
                "detail": detail, "lane": self.lane_of(spec.name, spec.family), "calibration": factor,
                "calibrated_runs": runs, "rows": self.forward_rows(enc, spec.name, params),
                "text": f"{spec.label}: about {_duration(seconds)} ({detail})"}

    def largest_setting(self, enc: Encoded, name: str, params: Mapping[str, Any], seconds: float
                        ) -> Optional[Tuple[str, int]]:
        """``(parameter, value)``: the largest value of the method's cost parameter whose estimate fits ``seconds``.

        For IG's steps, Shapley's permutations, KernelSHAP / LIME's samples and
        occlusion's window (whose cost falls as it grows, so its range's top is
        returned). ``None`` for a method without such a parameter, or when even
        the smallest value does not fit.
        """
        from captum_prxai.explorer.params import PARAMS

        spec = self.resolve(name)
        key = {"ig": "ig_steps", "shapley": "permutations", "kernel-shap": "samples", "lime": "samples",
               "occlusion": "window"}.get(spec.name)
        if key is None:
            return None
        lo, hi = int(PARAMS[key].minimum), int(PARAMS[key].maximum)
        if key == "window":
            return key, hi

        def fits(v: int) -> bool:
            return self.estimate(enc, spec.name, dict(params, **{key: v}))["seconds"] <= seconds

        if not fits(lo):
            return None
        while lo < hi:  # the estimate grows with the value: bisect
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
        return key, lo

    def check_cost(self, estimates: Sequence[Mapping[str, Any]]) -> None:
        """Refuse a method estimated over ``max_method_seconds`` (:class:`TooCostly`)."""
        for e in estimates:
            if e["seconds"] > self.max_method_seconds:
                raise TooCostly(
                    f"{e['label']} would take about {_duration(e['seconds'])} here ({e['detail']}); the explorer's "
                    f"limit is {_duration(self.max_method_seconds)} per method. Lower its setting, shorten the "
                    "text, or restart the explorer with a larger --max-method-seconds."
                )

    # ------------------------------------------------------------------ attributions
    def method_key(self, name: str, params: Mapping[str, Any]
                   ) -> Tuple[Any, Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
        """``(spec, used params, factory options, context fields)`` of a method for the page's parameters."""
        spec = self.resolve(name)
        used, options, context = method_options(spec.name, spec.family, params)
        return (spec, used, options, context)

    def cache_key(self, enc: Encoded, target: int, name: str, used: Mapping[str, Any]) -> Tuple[Any, ...]:
        return (enc.key, int(target), name, json.dumps(dict(used), sort_keys=True))

    def cached(self, enc: Encoded, target: int, name: str, params: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
        """The cached result, if any, without counting a hit or miss."""
        spec, used, _, _ = self.method_key(name, params)
        return self.attributions.peek(self.cache_key(enc, target, spec.name, used))

    def explain(self, enc: Encoded, target: int, name: str, params: Mapping[str, Any],
                cancel: Optional[threading.Event] = None,
                progress: Optional[Callable[[int], None]] = None) -> Dict[str, Any]:
        """Scores of one method (cached), on the method's lane.

        Args:
            enc: The input.
            target: Class explained.
            name: Registered method name.
            params: The page's parameters.
            cancel: Set it to stop the method at its next model call
                (:class:`JobCancelled` is raised).
            progress: Called before each model call with the number of inputs
                it evaluates (the progress of a running method).

        Returns:
            ``{"method", "label", "family", "params", "scores", "seconds", "cached", "batch"}``.
        """
        import torch

        from captum_prxai.methods import build_method

        spec, used, options, ctx = self.method_key(name, params)
        key = self.cache_key(enc, target, spec.name, used)
        hit = self.attributions.get(key)
        if hit is not None:
            return dict(hit, cached=True)
        tokens = int(enc.input_ids.shape[1])
        lane_name = self.lane_of(spec.name, spec.family)
        batch = None
        if spec.name == "ig":
            batch = options["internal_batch_size"] = min(int(options.get("n_steps", 50)),
                                                         self.batch_size_for(tokens, backward=True))
        elif spec.family == "perturbation":
            batch = options["perturbations_per_eval"] = min(16, self.batch_size_for(tokens, backward=False))
        pad = self._context.pad_token_id
        if ctx.get("reference") == "mask":
            if self._context.mask_token_id is None:
                raise PRXAIError(f"{spec.label}: the tokenizer has no [MASK] token; use the baseline 'pad'.")
            pad = int(self._context.mask_token_id)
        context = self._MethodContext(pad_token_id=pad, mask_token_id=self._context.mask_token_id,
                                      seed=self._context.seed, options={spec.name: options})
        lane = self.lanes[lane_name]
        self._local.cancel = cancel
        self._local.progress = progress
        try:
            with lane.lock:
                if cancel is not None and cancel.is_set():
                    raise JobCancelled("cancelled")
                explainer = build_method(spec.name, lane.model, lane.forward, context)
                start = time.perf_counter()
                scores = explainer(enc.input_ids, enc.attention_mask, enc.special_tokens_mask,
                                   torch.tensor([int(target)]))
                seconds = time.perf_counter() - start
                values = [float(v) for v in scores[0].tolist()]
                del explainer, scores
        finally:
            self._local.cancel = None
            self._local.progress = None
            if lane_name == "slow":
                release_memory()
        if not all(math.isfinite(v) for v in values):
            raise PRXAIError(f"method {spec.label} returned NaN or infinite scores for this input.")
        self._calibrate(spec.name, enc, params, seconds)
        result = {"method": spec.name, "label": spec.label, "family": spec.family, "params": used,
                  "scores": values, "seconds": seconds, "batch": batch, "signed": method_signed(spec)}
        self.attributions.put(key, result)
        return dict(result, cached=False)

    # ------------------------------------------------------------------ graph view
    def scored_graph(self, enc: Encoded, target: int, name: str, params: Mapping[str, Any],
                     cancel: Optional[threading.Event] = None,
                     progress: Optional[Callable[[int], None]] = None) -> Any:
        """The :class:`~captum_prxai.attr.pagerank_attribution.GraphExplanation` of a PR-XAI method.

        Built by the method's own attribution with the page's options and
        :meth:`~captum_prxai.PageRankAttribution.attribute_graph`, so its
        ``adjacency`` is exactly the graph whose PageRank gave the scores.
        Runs on the ``"fast"`` lane; ``cancel`` and ``progress`` as in :meth:`explain`.
        """
        import torch

        from captum_prxai.methods import build_method

        spec, used, options, _ = self.method_key(name, params)
        self._check_graph_method(spec)
        context = self._MethodContext(pad_token_id=self._context.pad_token_id,
                                      mask_token_id=self._context.mask_token_id, seed=self._context.seed,
                                      options={spec.name: options})
        lane = self.lanes["fast"]
        self._local.cancel = cancel
        self._local.progress = progress
        try:
            with lane.lock:
                if cancel is not None and cancel.is_set():
                    raise JobCancelled("cancelled")
                attribution = build_method(spec.name, lane.model, lane.forward, context).attribution
                graph = attribution.attribute_graph(enc.input_ids, target=torch.tensor([int(target)]),
                                                    additional_forward_args=(enc.attention_mask,))
        finally:
            self._local.cancel = None
            self._local.progress = None
        return spec, used, graph

    def _check_graph_method(self, spec: Any) -> None:
        if spec.family != "pr-xai":
            pr = [m["name"] for m in self.methods() if m["family"] == "pr-xai"]
            raise PRXAIError(f"the graph view draws the graph PageRank ran on, so it needs a PR-XAI method; pick "
                             f"one of {', '.join(pr)}, not {spec.name!r}.")

    def check_graph(self, name: str, params: Mapping[str, Any], top_edges: int = 30, layout: str = "line",
                    nodes: int = 40, walk: str = "positive") -> Dict[str, Any]:
        """Check a graph request before anything is computed; returns its options as :meth:`graph_svg` takes them.

        Refuses a method that is not PR-XAI, options out of range, and the
        negative walk of a method that walks the positive edges only (read
        from the spec the method resolves to for this model, without a pass).

        Raises:
            PRXAIError: With a message that says what to change.
        """
        from captum_prxai.methods import build_method

        if layout not in ("line", "circle"):
            raise PRXAIError(f"layout must be 'line' or 'circle', got {str(layout)[:20]!r}.")
        top_edges = int(top_edges)
        if not 1 <= top_edges <= 200:
            raise PRXAIError(f"top_edges must be between 1 and 200, got {top_edges}.")
        nodes = int(nodes)
        if not 2 <= nodes <= 200:
            raise PRXAIError(f"nodes must be between 2 and 200, got {nodes}.")
        if walk not in ("positive", "negative"):
            raise PRXAIError(f"walk must be 'positive' or 'negative', got {str(walk)[:20]!r}.")
        spec, _, options, _ = self.method_key(name, params)
        self._check_graph_method(spec)
        if walk == "negative":
            context = self._MethodContext(pad_token_id=self._context.pad_token_id, options={spec.name: options})
            attribution = build_method(spec.name, self.model, self.lanes["fast"].forward, context).attribution
            if not attribution.resolve(self.model).both_walks:
                raise PRXAIError(f"{spec.label} walks the positive edges only, so it has no negative walk to draw; "
                                 "pick a method that walks both signs (PR-TAG±) or walk 'positive'.")
        return {"top_edges": top_edges, "layout": layout, "nodes": nodes, "walk": walk}

    def graph_key(self, enc: Encoded, target: int, name: str, params: Mapping[str, Any],
                  options: Mapping[str, Any]) -> Tuple[Any, ...]:
        spec, used, _, _ = self.method_key(name, params)
        return self.cache_key(enc, target, spec.name, used) + (json.dumps(dict(options), sort_keys=True),)

    def cached_graph(self, enc: Encoded, target: int, name: str, params: Mapping[str, Any],
                     options: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
        """The cached drawing of this graph request (:meth:`graph_svg`'s answer), if any."""
        return self.graphs.peek(self.graph_key(enc, target, name, params, options))

    def graph_svg(self, enc: Encoded, target: int, name: str, params: Mapping[str, Any], top_edges: int = 30,
                  layout: str = "line", nodes: int = 40, walk: str = "positive",
                  cancel: Optional[threading.Event] = None,
                  progress: Optional[Callable[[int], None]] = None) -> Dict[str, Any]:
        """The graph PageRank ran on for this method and these options, drawn as SVG.

        Only the ``nodes`` highest-ranked nodes are drawn (in text order), with
        the ``top_edges`` strongest edges among them; nodes are sized by their
        PageRank. For the token graph of a one-walk method the ranks are the
        method's token scores; for the layered graph (one node per token and
        layer) they are the PageRank of each node of the same graph. A method
        that walks both signs (``walks="both"``, PR-TAG±) has two graphs, and
        its scores are the positive walk's PageRank minus ``λ`` times the
        negative walk's (``λ`` = 0 where ``walk_gate`` kept the positive walk
        alone): ``walk`` picks the one drawn (``"positive"`` or
        ``"negative"``), sized by its own PageRank, and the title says which
        and how the scores combine them.

        Returns:
            ``{"method", "label", "svg", "title", "graph", "walk", "walks", "walk_weight", "nodes", "edges",
            "scores"}``: ``walk`` the drawn walk, ``walks`` the walks the method has, ``walk_weight`` the ``λ``
            of this example's negative walk (``None`` with one walk),
            ``nodes`` the drawn nodes' indices into the graph's adjacency,
            ``edges`` the drawn ``[i, j, weight]`` (same indices), ``scores``
            the method's token scores. Answers are cached per input, target,
            method, parameters and drawing options (``"cached"`` says whether
            this one came from the cache).

        The options are checked first (:meth:`check_graph`); the pass runs on
        the ``"fast"`` lane and stops at a cancel (:class:`JobCancelled`), as
        in :meth:`explain`.
        """
        from captum_prxai.hooks import attention_layers
        from captum_prxai.viz.explanation import walks_phrase
        from captum_prxai.viz.graph import attention_graph_svg, top_edges_of

        drawing = self.check_graph(name, params, top_edges=top_edges, layout=layout, nodes=nodes, walk=walk)
        top_edges, nodes = drawing["top_edges"], drawing["nodes"]
        key = self.graph_key(enc, target, name, params, drawing)
        hit = self.graphs.get(key)
        if hit is not None:
            return dict(hit, cached=True)
        spec, used, graph = self.scored_graph(enc, target, name, params, cancel=cancel, progress=progress)
        two_walks = graph.negative_adjacency is not None
        if walk == "negative" and not two_walks:
            raise PRXAIError(f"{spec.label} walks the positive edges only, so it has no negative walk to draw; "
                             "pick a method that walks both signs (PR-TAG±) or walk 'positive'.")
        drawn = graph.negative_adjacency if walk == "negative" else graph.adjacency
        adjacency = drawn[0].detach().double()
        scores = graph.scores[0].detach().double()
        node_mask = graph.node_mask[0]
        layered = adjacency.shape[0] != scores.shape[0]
        # nodes sized by the drawn walk's scores as scoring weighed them (its PageRank, times the hubs' weight with
        # hub_power); a one-walk token graph's are the scores
        ranks = graph.walk_scores(walk)[0] if layered or two_walks else scores.abs()
        if layered:
            positions, layers_of = graph.node_position.tolist(), graph.node_layer.tolist()
            labels = [f"{enc.tokens[p]}@{l}" for p, l in zip(positions, layers_of)]
        else:
            labels = list(enc.tokens)
        real = [i for i in range(adjacency.shape[0]) if bool(node_mask[i])]
        chosen = sorted(sorted(real, key=lambda i: -float(ranks[i]))[:nodes])
        sub = adjacency[chosen][:, chosen]
        edges = [[chosen[i], chosen[j], w] for i, j, w in top_edges_of(sub, top_edges)]
        layers = graph.built.num_layers if layered else len(attention_layers(self.lanes["fast"].model))
        what = f"{spec.label}: {str(graph.spec.edge_weight).replace('_', ' x ')} edges, "
        if layered:
            what += f"layered graph ({layers + 1} x {len(enc.tokens)} nodes)"
        else:
            what += f"token graph ({layers} layers summed)"
        weight = None
        if two_walks:
            weight = float(graph.walk_weights[0])
            what += f", {walk} walk ({walks_phrase(graph)}; nodes sized by this walk's)"
        if graph.spec.relevance_weight:  # the token scores, not the walk, carry the same pass's gradient x input
            what += ", token scores times 1 + R/max|R| (R: gradient x input)"
        shown = (f"top {len(chosen)} of {len(real)} nodes" if len(chosen) < len(real) else f"{len(real)} nodes")
        title = f"{what}; {shown}, {len(edges)} strongest edges"
        explained = self.explained_position(enc)
        if layered:  # the explained token's node in the last layer
            top_layer = max(layers_of)
            explained = next((i for i, (p, l) in enumerate(zip(positions, layers_of))
                              if p == explained and l == top_layer), None)
        # the title goes beside the SVG (as text that wraps), not into it: a long title drawn in the figure is
        # wider than the figure and gets cut off on both sides
        svg = attention_graph_svg([labels[i] for i in chosen], sub, [float(ranks[i]) for i in chosen],
                                  top_edges=top_edges, layout=layout, title=None,
                                  explained_position=chosen.index(explained) if explained in chosen else None)
        result = {"method": spec.name, "label": spec.label, "svg": svg, "title": title,
                  "graph": "layered" if layered else "token", "walk": walk,
                  "walks": ["positive", "negative"] if two_walks else ["positive"], "walk_weight": weight,
                  "nodes": chosen, "edges": edges,
                  "scores": [float(v) for v in scores.tolist()], "params": used}
        self.graphs.put(key, result)
        return dict(result, cached=False)

    def explained_position(self, enc: Encoded) -> int:
        """Index of ``enc``'s explained token: the first for encoders, the last real one for decoders."""
        from captum_prxai.capture import target_positions

        return int(target_positions(enc.attention_mask.bool(), self.causal)[0])

    # ------------------------------------------------------------------ stats
    def stats(self) -> Dict[str, Any]:
        return {"attribution_hits": self.attributions.hits, "attribution_misses": self.attributions.misses,
                "attributions_cached": len(self.attributions), "graphs_cached": len(self.graphs),
                "predictions_cached": len(self.predictions),
                "prediction_calls": self.prediction_calls, "rss_mb": round(rss_bytes() / 2 ** 20, 1),
                "memory_budget_mb": round(self.memory_budget / 2 ** 20, 1)}
