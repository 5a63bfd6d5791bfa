"""Model-side work of the explorer: encoding, cached predictions, cached attributions, graphs.

:class:`Engine` holds one classifier, its tokenizer and a set of datasets.
Every model or tokenizer call runs under one lock (the attention hooks of
the attribution methods are installed on the shared model, and fast
tokenizers are not re-entrant), so the web server may call it from any
thread. Predictions are cached per example and attributions per
``(input ids, target, method, parameters)``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from captum_prxai._limits import encode_text, max_input_length
from captum_prxai.exceptions import PRXAIError
from captum_prxai.explorer.params import method_options

__all__ = ["Engine", "Encoded", "DatasetStore", "InputTooLong", "model_max_tokens"]


class InputTooLong(PRXAIError):
    """The text is longer than the explorer or the model accepts (HTTP 413)."""

#: Attention-graph edge weight of each PR-XAI method, for the graph view.
GRAPH_EDGES = {"pr-a": "attention", "pr-g": "gradient", "pr-ag": "attention_gradient"}


def model_max_tokens(model: Any, tokenizer: Any) -> Optional[int]:
    """Longest input, in tokens with special tokens, that ``model`` accepts (``None``: no known limit)."""
    return max_input_length(getattr(model, "config", None), tokenizer)


@dataclass(frozen=True)
class Encoded:
    """One tokenised input (a batch of one)."""

    input_ids: Any  #: (1, T) long tensor
    attention_mask: Any  #: (1, T)
    special_tokens_mask: Any  #: (1, T)
    tokens: List[str]
    truncated: bool
    full_length: int  #: token count before truncation

    @property
    def key(self) -> Tuple[int, ...]:
        return tuple(int(i) for i in self.input_ids[0].tolist())


class DatasetStore:
    """Datasets by name, loaded on first use.

    Args:
        datasets: Either a mapping ``name -> dataset`` (objects with ``texts``,
            ``labels`` and ``label_names``, e.g. a
            :class:`~captum_prxai.data.TextDataset`), or ``None`` for the
            offline datasets of :mod:`captum_prxai.data`.
        split: Split loaded from :mod:`captum_prxai.data` (ignored for a mapping).
    """

    def __init__(self, datasets: Optional[Mapping[str, Any]] = None, split: str = "test") -> None:
        self._lock = threading.Lock()
        self._loaded: Dict[str, Any] = {}
        if datasets is not None:
            self._loaded = dict(datasets)
            self.names = list(self._loaded)
            self._loader: Optional[Callable[[str], Any]] = None
        else:
            from captum_prxai.data import list_datasets, load_dataset

            self.names = list_datasets()
            self._loader = lambda name: load_dataset(name, split)
        self.split = split

    def get(self, name: str) -> Any:
        if name not in self.names:
            raise PRXAIError(f"unknown dataset {name!r}; choose one of: {', '.join(self.names)}.")
        with self._lock:
            if name not in self._loaded:
                assert self._loader is not None
                self._loaded[name] = self._loader(name)
            return self._loaded[name]

    def is_loaded(self, name: str) -> bool:
        return name in self._loaded


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


def _label_names(model: Any, fallback: Sequence[str] = ()) -> List[str]:
    config = getattr(model, "config", None)
    n = int(getattr(config, "num_labels", 0) or len(fallback) or 2)
    id2label = getattr(config, "id2label", None) or {}
    names = []
    for i in range(n):
        name = id2label.get(i, id2label.get(str(i)))
        names.append(str(name) if name is not None else f"class {i}")
    return names


class Engine:
    """Predictions and attributions for the explorer.

    Args:
        model: A sequence classifier (``model(input_ids=..., attention_mask=...).logits``).
        tokenizer: Its Hugging Face tokenizer.
        datasets: A :class:`DatasetStore`.
        max_chars: Longest text accepted from the page, in characters.
        cache_size: Attributions kept in the cache.
        batch_size: Batch size of the example predictions.
    """

    def __init__(self, model: Any, tokenizer: Any, datasets: DatasetStore, max_chars: int = 2000,
                 cache_size: int = 2048, batch_size: int = 32) -> None:
        from captum_prxai.bench.methods import MethodContext, make_forward_func

        self.model = model.eval() if hasattr(model, "eval") else model
        self.tokenizer = tokenizer
        self.datasets = datasets
        self.max_chars = int(max_chars)
        self.max_tokens = model_max_tokens(model, tokenizer)
        self.batch_size = int(batch_size)
        self.label_names = _label_names(model)
        self.lock = threading.RLock()
        self.forward = make_forward_func(model)
        self._context = MethodContext.from_tokenizer(tokenizer)
        self._MethodContext = MethodContext
        self.attributions = _LRU(cache_size)
        self.predictions: Dict[Tuple[str, int], Tuple[int, List[float]]] = {}
        self.prediction_calls = 0  #: model forward passes for example predictions

    # ------------------------------------------------------------------ methods
    def methods(self) -> List[Dict[str, Any]]:
        """The registered methods (from :mod:`captum_prxai.bench.methods`) for the page."""
        from captum_prxai.bench.methods import METHODS
        from captum_prxai.explorer.params import method_param_names

        return [
            {"name": s.name, "label": s.label, "family": s.family, "description": s.description,
             "params": list(method_param_names(s.name, s.family))}
            for s in METHODS.values()
        ]

    def resolve(self, name: Any) -> Any:
        from captum_prxai.bench.methods import resolve_method

        if not isinstance(name, str):
            raise PRXAIError(f"a method name must be a string, got {name!r}.")
        return resolve_method(name)

    # ------------------------------------------------------------------ input
    def check_text(self, text: Any) -> str:
        if not isinstance(text, str):
            raise PRXAIError("'text' must be a string.")
        if not text.strip():
            raise PRXAIError("the text is empty; type a sentence to explain.")
        if len(text) > self.max_chars:
            raise InputTooLong(
                f"the text has {len(text)} characters but the explorer accepts at most {self.max_chars}; "
                "shorten it (or restart with a larger --max-chars)."
            )
        return text

    def encode(self, text: str, truncate: bool = False) -> Encoded:
        """Tokenise ``text``; refuse it if it is longer than the model accepts (unless ``truncate``)."""
        def too_long(length: int, limit: int) -> Exception:
            return InputTooLong(
                f"the text has {length} tokens but this model accepts at most {limit}; "
                f"shorten it, or tick 'truncate' to explain only its first {limit} tokens."
            )

        with self.lock:
            ids, mask, special, tokens, truncated, full = encode_text(self.tokenizer, text, self.max_tokens, truncate, too_long)
        return Encoded(ids, mask, special, tokens, truncated, full)

    # ------------------------------------------------------------------ predictions
    def predict(self, enc: Encoded) -> List[float]:
        """Class probabilities of one encoded input."""
        import torch

        with self.lock, torch.no_grad():
            logits = self.forward(enc.input_ids, enc.attention_mask)
        return [float(p) for p in torch.softmax(logits.double(), -1)[0].tolist()]

    def _predict_texts(self, texts: Sequence[str]) -> List[Tuple[int, List[float]]]:
        import torch

        out: List[Tuple[int, List[float]]] = []
        with self.lock, torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                chunk = list(texts[start:start + self.batch_size])
                kwargs: Dict[str, Any] = {"truncation": True}
                if self.max_tokens is not None:
                    kwargs["max_length"] = self.max_tokens
                enc = self.tokenizer(chunk, return_tensors="pt", padding=True, **kwargs)
                mask = enc.get("attention_mask")
                if mask is None:
                    mask = torch.ones_like(enc["input_ids"])
                probs = torch.softmax(self.forward(enc["input_ids"], mask).double(), -1)
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
                next call resumes from ``next_start``.

        Returns:
            ``{"dataset", "size", "items", "next_start", "exhausted", "computed",
            "predicted_total"}``.
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
                "index": j, "text": ds.texts[j], "label": lab, "label_name": str(ds.label_names[lab]),
                "predicted": pred, "predicted_name": self.label_names[pred], "probability": probs[pred],
                "correct": (pred == lab) if comparable else None,
            })
        return {
            "dataset": dataset, "size": n, "items": items, "next_start": i if i < n else None,
            "exhausted": i >= n, "computed": computed,
            "predicted_total": sum(1 for k in self.predictions if k[0] == dataset),
        }

    def _keep(self, dataset: str, j: int, lab: int, predicted: Optional[int], correct: Optional[bool]) -> bool:
        pred = self.predictions[(dataset, j)][0]
        if predicted is not None and pred != predicted:
            return False
        if correct is not None and (pred == lab) != correct:
            return False
        return True

    # ------------------------------------------------------------------ attributions
    def method_key(self, name: str, params: Mapping[str, Any]) -> Tuple[Any, Dict[str, Any], Dict[str, Any]]:
        """``(spec, used params, factory options)`` of a method for the page's parameters."""
        spec = self.resolve(name)
        used, options = method_options(spec.name, spec.family, params)
        return spec, used, options

    def cache_key(self, enc: Encoded, target: int, name: str, used: Mapping[str, Any]) -> Tuple[Any, ...]:
        return (enc.key, int(target), name, json.dumps(dict(used), sort_keys=True))

    def cached(self, enc: Encoded, target: int, name: str, params: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
        """The cached result, if any, without counting a hit or miss."""
        spec, used, _ = self.method_key(name, params)
        return self.attributions.peek(self.cache_key(enc, target, spec.name, used))

    def explain(self, enc: Encoded, target: int, name: str, params: Mapping[str, Any]) -> Dict[str, Any]:
        """Scores of one method (cached).

        Returns:
            ``{"method", "label", "family", "params", "scores", "seconds", "cached"}``.
        """
        import torch

        from captum_prxai.bench.methods import build_method

        spec, used, options = self.method_key(name, params)
        key = self.cache_key(enc, target, spec.name, used)
        hit = self.attributions.get(key)
        if hit is not None:
            return dict(hit, cached=True)
        context = self._MethodContext(pad_token_id=self._context.pad_token_id,
                                      mask_token_id=self._context.mask_token_id,
                                      seed=self._context.seed, options={spec.name: options})
        with self.lock:
            explainer = build_method(spec.name, self.model, self.forward, context)
            start = time.perf_counter()
            scores = explainer(enc.input_ids, enc.attention_mask, enc.special_tokens_mask,
                               torch.tensor([int(target)]))
            seconds = time.perf_counter() - start
        values = [float(v) for v in scores[0].tolist()]
        if not all(v == v and abs(v) != float("inf") for v in values):
            raise PRXAIError(f"method {spec.label} returned NaN or infinite scores for this input.")
        result = {"method": spec.name, "label": spec.label, "family": spec.family, "params": used,
                  "scores": values, "seconds": seconds}
        self.attributions.put(key, result)
        return dict(result, cached=False)

    # ------------------------------------------------------------------ graph view
    def graph_svg(self, enc: Encoded, target: int, name: str, params: Mapping[str, Any], top_edges: int = 30,
                  layout: str = "line") -> Dict[str, Any]:
        """The token graph PageRank runs on, drawn as SVG (nodes sized by the method's scores).

        Edges are the method's per-layer edge weights (attention, gradient or
        attention x gradient), heads combined as chosen, summed over layers.
        """
        import captum_prxai
        import torch
        from captum_prxai.graph.builders import token_graph
        from captum_prxai.graph.edges import edge_weight_fn, reduce_heads
        from captum_prxai.hooks import AttentionRecorder
        from captum_prxai.viz.graph import attention_graph_svg

        spec, used, _ = self.method_key(name, params)
        if spec.name not in GRAPH_EDGES:
            raise PRXAIError(f"the graph view draws PR-XAI graphs; pick one of {', '.join(GRAPH_EDGES)}, "
                             f"not {spec.name!r}.")
        if layout not in ("line", "circle"):
            raise PRXAIError(f"layout must be 'line' or 'circle', got {layout!r}.")
        top_edges = int(top_edges)
        if not 1 <= top_edges <= 200:
            raise PRXAIError(f"top_edges must be between 1 and 200, got {top_edges}.")
        result = self.explain(enc, target, spec.name, params)
        edge = edge_weight_fn(GRAPH_EDGES[spec.name])
        heads = used.get("head_reduction", "mean")
        with_gradients = spec.name != "pr-a"

        def keep(layer: int, attention: Any, grad: Any) -> Any:
            return reduce_heads(edge(attention, grad), heads)

        with self.lock:
            recorder = AttentionRecorder(captum_prxai.attention_layers(self.model), keep,
                                         with_gradients=with_gradients)
            with (torch.enable_grad() if with_gradients else torch.no_grad()), recorder:
                logits = self.forward(enc.input_ids, enc.attention_mask)
                if with_gradients:
                    recorder.backward(logits[0, int(target)])
            maps = [m.detach() for m in recorder.collected()]
            residual = 0.5 if used.get("graph") == "layered" else 0.0
            adjacency = token_graph(maps, residual)[0]
            title = f"{spec.label}: {GRAPH_EDGES[spec.name].replace('_', ' x ')} edges, {len(maps)} layers summed"
            svg = attention_graph_svg(enc.tokens, adjacency, result["scores"], top_edges=top_edges, layout=layout,
                                      title=title)
        return {"method": spec.name, "label": spec.label, "svg": svg, "title": title}

    # ------------------------------------------------------------------ stats
    def stats(self) -> Dict[str, Any]:
        return {"attribution_hits": self.attributions.hits, "attribution_misses": self.attributions.misses,
                "attributions_cached": len(self.attributions), "predictions_cached": len(self.predictions),
                "prediction_calls": self.prediction_calls}
