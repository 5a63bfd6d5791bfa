"""One worker: loads the model once and explains shards of texts, batch by batch.

The same :class:`Worker` runs in process (the ``local`` engine) and inside
each Ray actor (the ``ray`` engine), so both engines compute every row with
the same code, the same batches and hence the same numbers. Scores come from
the method registry's explainers, i.e. from the attribution classes'
``attribute()`` (and :meth:`~captum_prxai.attr.PageRankAttribution.attribute_long`
for windowed long texts): the capture -> graph -> PageRank chain is the core's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from captum_prxai.exceptions import PRXAIError

__all__ = ["Worker", "plan_batches", "LONG_POLICIES", "SKIP_REASONS"]

#: what to do with a text longer than the model accepts
LONG_POLICIES = ("truncate", "windows", "skip")
#: ``skip_reason`` values of skipped rows
SKIP_REASONS = ("empty", "too-long", "no-label")


def method_registry():
    """The method registry module (its one import site in this package): :mod:`captum_prxai.methods`."""
    from captum_prxai import methods

    return methods


def load_model_spec(model: Union[str, Tuple[Any, Any]]) -> Tuple[Any, Any]:
    """``"default"``, a checkpoint folder, a trained model's name, or a ready ``(model, tokenizer)`` pair."""
    if isinstance(model, tuple):
        if len(model) != 2:
            raise PRXAIError("pass the model as a name or path, or as a (model, tokenizer) pair.")
        return model
    from captum_prxai.models import load_model

    return load_model(str(model))


def plan_batches(lengths: Sequence[int], token_budget: int, bucketing: bool = True) -> List[List[int]]:
    """Group texts into batches of at most ``token_budget`` padded tokens.

    With ``bucketing``, texts are taken shortest first (ties by position), so
    each batch holds texts of similar length and dynamic padding wastes
    little; without it they are taken in input order. A batch's cost is
    ``len(batch) * max(length in batch)``; a text longer than the budget
    gets a batch of its own.

    Args:
        lengths: Token count of each text.
        token_budget: Padded tokens per batch.
        bucketing: Sort by length first.

    Returns:
        Batches of indices into ``lengths``.
    """
    if token_budget < 1:
        raise PRXAIError(f"token_budget must be at least 1, got {token_budget}.")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i)) if bucketing else list(range(len(lengths)))
    batches: List[List[int]] = []
    current: List[int] = []
    longest = 0
    for i in order:
        new_longest = max(longest, lengths[i])
        if current and (len(current) + 1) * new_longest > token_budget:
            batches.append(current)
            current, new_longest = [], lengths[i]
        current.append(i)
        longest = new_longest
    if current:
        batches.append(current)
    return batches


def _check_options_selected(method_options: Dict[str, Dict[str, Any]], methods: Sequence[str]) -> None:
    """Refuse options for a method that is not run (they would be ignored, yet stored with the results)."""
    unused = [m for m in method_options if m not in methods]
    if unused:
        example = next(iter(method_options[unused[0]]), "KEY")
        raise PRXAIError(
            f"options given for {', '.join(unused)} (--option {unused[0]}.{example}=...), which "
            f"{'is' if len(unused) == 1 else 'are'} not among the methods run ({', '.join(methods)}); "
            "add it to the methods (--methods) or drop the option."
        )


@dataclass
class _Doc:
    record: Dict[str, Any]
    ids: List[int]
    special: List[int]
    tokens: List[str]
    n_tokens: int
    truncated: bool
    windowed: bool


class Worker:
    """Explains records ``{"row", "id", "text", "label"}`` with the registry's methods.

    Args:
        model: ``"default"``, a checkpoint folder, a trained model's name, or
            a ``(model, tokenizer)`` pair.
        methods: Registry names (see :func:`captum_prxai.bench.methods.available_methods`).
        method_options: Per-method overrides, e.g. ``{"pr-g": {"damping": 0.5}}``.
        target: ``"predicted"`` (the model's class), ``"label"`` (the gold
            label; rows without one are skipped) or a class index.
        long: ``"truncate"``, ``"windows"`` (PR-XAI methods only: stitched
            sliding windows, :meth:`PageRankAttribution.attribute_long`) or
            ``"skip"`` for texts over ``max_length``.
        max_length: Tokens per text, special tokens included (default: the model's limit).
        window_stride: Content tokens between window starts (default: half a window).
        token_budget: Padded tokens per batch.
        bucketing: Sort each shard by length before batching.
        device: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``, ...
        threads: ``torch.set_num_threads`` for this worker (``None``: leave it).
    """

    def __init__(
        self,
        model: Union[str, Tuple[Any, Any]] = "default",
        methods: Optional[Sequence[str]] = None,
        method_options: Optional[Dict[str, Dict[str, Any]]] = None,
        target: Union[str, int] = "predicted",
        long: str = "truncate",
        max_length: Optional[int] = None,
        window_stride: Optional[int] = None,
        token_budget: int = 8192,
        bucketing: bool = True,
        device: str = "auto",
        threads: Optional[int] = None,
    ) -> None:
        import torch

        from captum_prxai._tokenize import model_input_limit

        if threads is not None:
            if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                raise PRXAIError(f"threads must be a whole number, at least 1, got {threads!r}.")
            torch.set_num_threads(threads)
        if long not in LONG_POLICIES:
            raise PRXAIError(f"unknown long-text policy {long!r}; choose from: {', '.join(LONG_POLICIES)}.")
        if not (target in ("predicted", "label") or (isinstance(target, int) and not isinstance(target, bool))):
            raise PRXAIError(f"target must be 'predicted', 'label' or a class index, got {target!r}.")
        registry = method_registry()
        method_options = registry.validate_options(method_options or {})  # aliases -> registry names
        if methods is not None:
            methods = registry.parse_methods(list(methods))  # refused before the model loads
            _check_options_selected(method_options, methods)
        from captum_prxai._checks import check_device

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        device = check_device(device)  # an unknown or unavailable device is refused before the model loads
        self.model, self.tokenizer = load_model_spec(model)
        self.methods = methods if methods is not None else registry.parse_methods(registry.default_method(self.model))
        _check_options_selected(method_options, self.methods)
        self.device = device
        self.model.to(self.device)
        from captum_prxai.models import label_names

        self.label_names = label_names(self.model)
        if isinstance(target, int) and not 0 <= target < len(self.label_names):
            raise PRXAIError(f"target {target} is out of range: the model has {len(self.label_names)} classes "
                             f"(0..{len(self.label_names) - 1}).")
        self.target = target
        limit = model_input_limit(self.model, self.tokenizer)
        if max_length is not None:
            if max_length < 3:
                raise PRXAIError(f"max_length must be at least 3 tokens, got {max_length}.")
            limit = max_length if limit is None else min(max_length, limit)
        self.max_length = limit
        self.long = long
        self.window_stride = window_stride or (max((limit - 2) // 2, 1) if limit else None)
        self.token_budget = int(token_budget)
        self.bucketing = bool(bucketing)
        pad = getattr(self.tokenizer, "pad_token_id", None)
        self.pad_id = int(pad if pad is not None else 0)
        self.forward_func = registry.make_forward_func(self.model)
        self.method_options = method_options
        context = registry.MethodContext.from_tokenizer(self.tokenizer, options=method_options)
        self.explainers = [registry.build_method(m, self.model, self.forward_func, context) for m in self.methods]
        if long == "windows":
            slow = [e.name for e in self.explainers if not hasattr(e.attribution, "attribute_long")]
            if slow:
                raise PRXAIError(
                    f"--long windows explains long texts with stitched windows, which only the PR-XAI methods "
                    f"(pr-tag, pr-g, pr-ag, pr-a) support; {', '.join(slow)} cannot. Use --long truncate or skip, "
                    "or drop those methods."
                )

    # ------------------------------------------------------------------ encode
    def _encode(self, record: Dict[str, Any]) -> Union[_Doc, Dict[str, Any]]:
        from captum_prxai._tokenize import encode_text

        text = record.get("text")
        if text is None or not str(text).strip():
            return self._skipped(record, "empty")
        if self.target == "label" and record.get("label") is None:
            return self._skipped(record, "no-label")
        never = lambda n, lim: PRXAIError("unreachable")  # noqa: E731  (no limit: never too long)
        enc = encode_text(self.tokenizer, str(text), None, False, never)
        n_tokens = int(enc.full_length)
        truncated = windowed = False
        if self.max_length is not None and n_tokens > self.max_length:
            if self.long == "skip":
                return self._skipped(record, "too-long", n_tokens)
            if self.long == "truncate":
                enc = encode_text(self.tokenizer, str(text), self.max_length, True, never)
                truncated = True
            else:
                windowed = True
        return _Doc(record, [int(i) for i in enc.input_ids[0].tolist()],
                    [int(i) for i in enc.special_tokens_mask[0].tolist()], list(enc.tokens), n_tokens,
                    truncated, windowed)

    def _skipped(self, record: Dict[str, Any], reason: str, n_tokens: Optional[int] = None) -> Dict[str, Any]:
        row = self._row(record)
        row.update(skip_reason=reason, n_tokens=n_tokens)
        return row

    def _row(self, record: Dict[str, Any]) -> Dict[str, Any]:
        from captum_prxai.corpus.io import score_column

        row: Dict[str, Any] = {
            "row": int(record["row"]), "id": str(record["id"]), "input_hash": record.get("input_hash"),
            "label": record.get("label"),
            "skip_reason": None, "n_tokens": None, "truncated": None, "windows": None, "tokens": None,
            "predicted": None, "probabilities": None, "target": None,
        }
        for name in self.methods:
            row[score_column(name)] = None
        return row

    def _target(self, doc: _Doc, predicted: int) -> int:
        if self.target == "predicted":
            return predicted
        if self.target == "label":
            return int(doc.record["label"])
        return int(self.target)

    # ------------------------------------------------------------------ explain
    def iter_process(self, records: Sequence[Dict[str, Any]]) -> Iterator[List[Dict[str, Any]]]:
        """Explain one shard of records, yielding the rows of each batch as it is done.

        Skipped records come first (one list), then each windowed text on its
        own, then each batch of the token budget.

        Args:
            records: ``{"row", "id", "text", "label"}`` dicts (label: class
                index or ``None``; ``input_hash`` is copied to the row).
        """
        from captum_prxai.corpus.io import score_column

        skipped: List[Dict[str, Any]] = []
        docs: List[_Doc] = []
        windowed: List[_Doc] = []
        for record in records:
            encoded = self._encode(record)
            if isinstance(encoded, dict):
                skipped.append(encoded)
            else:
                (windowed if encoded.windowed else docs).append(encoded)
        if skipped:
            yield skipped
        for doc in windowed:
            yield [self._explain_windowed(doc)]
        for batch in plan_batches([len(d.ids) for d in docs], self.token_budget, self.bucketing):
            yield self._explain_batch([docs[i] for i in batch], score_column)

    def process(self, records: Sequence[Dict[str, Any]],
                on_batch: Optional[Callable[[int], None]] = None) -> List[Dict[str, Any]]:
        """Explain one shard of records; returns one row per record, in input order.

        Args:
            records: ``{"row", "id", "text", "label"}`` dicts (label: class index or ``None``).
            on_batch: Called with the number of texts after each batch (progress).
        """
        out: List[Dict[str, Any]] = []
        for rows in self.iter_process(records):
            out.extend(rows)
            if on_batch:
                on_batch(len(rows))
        return sorted(out, key=lambda r: r["row"])

    def _explain_batch(self, docs: List[_Doc], score_column: Callable[[str], str]) -> List[Dict[str, Any]]:
        import torch

        width = max(len(d.ids) for d in docs)
        ids = torch.full((len(docs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(docs), width), dtype=torch.long)
        special = torch.zeros((len(docs), width), dtype=torch.long)
        for i, d in enumerate(docs):
            n = len(d.ids)
            ids[i, :n] = torch.tensor(d.ids)
            mask[i, :n] = 1
            special[i, :n] = torch.tensor(d.special)
        ids, mask, special = ids.to(self.device), mask.to(self.device), special.to(self.device)
        with torch.no_grad():
            logits = self.forward_func(ids, mask)
        probs = torch.softmax(logits.double(), -1).cpu()
        predicted = probs.argmax(-1).tolist()
        targets = [self._target(d, p) for d, p in zip(docs, predicted)]
        target_t = torch.tensor(targets, dtype=torch.long, device=self.device)
        scores = {e.name: e(ids, mask, special, target_t).cpu() for e in self.explainers}
        rows = []
        for i, d in enumerate(docs):
            n = len(d.ids)
            row = self._row(d.record)
            row.update(n_tokens=d.n_tokens, truncated=d.truncated, windows=0, tokens=d.tokens,
                       predicted=int(predicted[i]), probabilities=[float(p) for p in probs[i].tolist()],
                       target=int(targets[i]))
            for name, s in scores.items():
                row[score_column(name)] = [float(v) for v in s[i, :n].tolist()]
            rows.append(row)
        return rows

    def _explain_windowed(self, doc: _Doc) -> Dict[str, Any]:
        """One long text, with :meth:`PageRankAttribution.attribute_long` (prediction: mean of the windows' logits)."""
        import torch

        from captum_prxai.corpus.io import score_column
        from captum_prxai.graph.windows import plan_windows

        ids = torch.tensor([doc.ids], dtype=torch.long, device=self.device)
        row = self._row(doc.record)
        target: Optional[int] = None if self.target == "predicted" else self._target(doc, -1)
        for e in self.explainers:
            scores, logits = e.attribution.attribute_long(ids, target=target, window=self.max_length,
                                                          stride=self.window_stride, return_logits=True)
            if row["probabilities"] is None:
                probs = torch.softmax(logits[0].detach().double(), -1).cpu()
                predicted = int(probs.argmax())
                target = predicted if target is None else target
                windows = int(plan_windows(len(doc.ids), self.max_length, self.window_stride).positions.shape[0])
                row.update(n_tokens=doc.n_tokens, truncated=False, windows=windows, tokens=doc.tokens,
                           predicted=predicted, probabilities=[float(p) for p in probs.tolist()], target=target)
            row[score_column(e.name)] = [float(v) for v in scores[0].detach().float().cpu().tolist()]
        return row
