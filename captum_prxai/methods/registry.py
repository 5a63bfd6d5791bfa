"""The registry: method names -> factories of :class:`Explainer` objects with one uniform signature.

Every method is built by a factory ``factory(model, forward_func, context)``
into an :class:`Explainer`, a callable with one uniform signature::

    explainer(input_ids, attention_mask, special_tokens_mask, target) -> (B, T) scores

so that PR-XAI, the attention baselines, Captum's gradient and perturbation
methods and the random control are interchangeable. Captum attributions with
a hidden dimension (layer methods on the word embeddings) are summed over it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import torch
from torch import Tensor, nn

from captum_prxai.exceptions import PRXAIError

#: ``forward_func(input_ids, attention_mask) -> logits (B, C)``
ForwardFunc = Callable[[Tensor, Tensor], Tensor]
#: ``explain(input_ids, attention_mask, special_tokens_mask, target) -> (B, T)``
ExplainFunc = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]
#: Per-method options: ``{"ig": {"n_steps": 20}}``
MethodOptions = Dict[str, Dict[str, Any]]

__all__ = [
    "ForwardFunc",
    "ExplainFunc",
    "MethodOptions",
    "MethodContext",
    "MethodSpec",
    "Explainer",
    "Factory",
    "METHODS",
    "register_method",
    "register_precomputed",
    "available_methods",
    "resolve_method",
    "parse_methods",
    "parse_options",
    "validate_options",
    "method_settings",
    "build_method",
    "make_forward_func",
]


@dataclass
class MethodContext:
    """Token ids and settings the factories need besides the model.

    Attributes:
        pad_token_id: Id of ``[PAD]``; the reference token of Integrated
            Gradients and the perturbation methods.
        mask_token_id: Id of ``[MASK]`` (``None`` if the tokenizer has none).
        seed: Base seed of the random control.
        options: Per-method overrides, e.g. ``{"ig": {"n_steps": 20},
            "shapley": {"n_samples": 10}}``.
    """

    pad_token_id: int = 0
    mask_token_id: Optional[int] = None
    seed: int = 0
    options: MethodOptions = field(default_factory=dict)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, seed: int = 0,
                       options: Optional[MethodOptions] = None) -> "MethodContext":
        pad = getattr(tokenizer, "pad_token_id", None)
        if pad is None:
            pad = getattr(tokenizer, "eos_token_id", None)
        return cls(pad_token_id=int(pad if pad is not None else 0),
                   mask_token_id=getattr(tokenizer, "mask_token_id", None),
                   seed=seed, options=dict(options or {}))


class Explainer:
    """A method ready to run: ``explainer(input_ids, attention_mask, special_tokens_mask, target)``.

    Attributes:
        name: Registry name.
        label: Display name.
        attribution: The underlying attribution object (Captum or PR-XAI),
            or ``None`` for the random control.
    """

    def __init__(self, name: str, label: str, fn: ExplainFunc, attribution: Any = None) -> None:
        self.name = name
        self.label = label
        self._fn = fn
        self.attribution = attribution

    def __call__(self, input_ids: Tensor, attention_mask: Tensor, special_tokens_mask: Tensor,
                 target: Tensor) -> Tensor:
        scores = self._fn(input_ids, attention_mask, special_tokens_mask, target)
        if isinstance(scores, tuple):
            scores = scores[0]
        scores = scores.detach()
        if scores.dim() > 2:
            scores = scores.reshape(scores.shape[0], scores.shape[1], -1).sum(dim=-1)
        if scores.shape != input_ids.shape:
            raise PRXAIError(
                f"method {self.name!r} returned scores of shape {tuple(scores.shape)} for inputs of shape "
                f"{tuple(input_ids.shape)}; an explainer must return one score per token."
            )
        return scores.float()

    def __repr__(self) -> str:
        return f"Explainer({self.name!r})"


Factory = Callable[[nn.Module, ForwardFunc, MethodContext], Explainer]


@dataclass(frozen=True)
class MethodSpec:
    """A registered method.

    Attributes:
        name: Registry (command-line) name.
        label: Display name for tables and plots.
        family: ``"pr-xai"``, ``"attention"``, ``"gradient"``, ``"perturbation"``,
            ``"control"`` or ``"precomputed"``.
        description: One line.
        factory: Builds the :class:`Explainer`.
        aliases: Other accepted names.
        defaults: ``defaults() -> {option: default value}``: every option the
            method accepts, with the value it runs with when none is given.
            ``None``: the options are not checked (custom methods).
        fingerprint: What else determines the method's scores, e.g. the
            content hash of a precomputed file (part of the benchmark's cache key).
        signed: Whether the scores carry a sign (evidence for the explained
            output positive, against it negative), so that a picture draws
            them on a diverging scale centred on 0; unsigned scores are drawn
            on a sequential scale from 0.
    """

    name: str
    label: str
    family: str
    description: str
    factory: Factory
    aliases: tuple = ()
    defaults: Optional[Callable[[], Dict[str, Any]]] = None
    fingerprint: str = ""
    signed: bool = False


#: name -> spec, in display order
METHODS: Dict[str, MethodSpec] = {}


def register_method(name: str, label: str, family: str, description: str, factory: Factory,
                    aliases: Sequence[str] = (), overwrite: bool = False,
                    defaults: Optional[Callable[[], Dict[str, Any]]] = None,
                    fingerprint: str = "", signed: bool = False) -> MethodSpec:
    """Add a method to the registry.

    Args:
        name: Command-line name (lower case, no commas).
        label: Display name.
        family: Group shown in the docs.
        description: One line.
        factory: ``factory(model, forward_func, context) -> Explainer``.
        aliases: Other accepted names.
        overwrite: Replace an existing entry of the same name.
        defaults: ``defaults() -> {option: value}``, the options the method
            accepts (see :class:`MethodSpec`); ``None`` accepts any option.
        fingerprint: See :class:`MethodSpec`.
        signed: Whether the scores are signed (see :class:`MethodSpec`).

    Returns:
        The :class:`MethodSpec`.
    """
    key = name.strip().lower()
    if not key or "," in key:
        raise PRXAIError(f"invalid method name {name!r}: use a non-empty name without commas.")
    if key in METHODS and not overwrite:
        raise PRXAIError(f"method {key!r} is already registered; pass overwrite=True to replace it.")
    spec = MethodSpec(key, label, family, description, factory, tuple(a.lower() for a in aliases),
                      defaults, fingerprint, bool(signed))
    METHODS[key] = spec
    return spec


def register_precomputed(name: str, path: Union[str, Path], label: Optional[str] = None,
                         description: Optional[str] = None, overwrite: bool = False) -> MethodSpec:
    """Register token scores computed elsewhere (another library, another environment) as a method.

    The file is JSON Lines, one object per explained input with ``"input_ids"``
    (the token ids exactly as the benchmark tokenises the text) and
    ``"scores"`` (one float per token) for the class the benchmark explains
    (the model's predicted class); the ``target`` passed at run time is not
    checked. The benchmark then scores these
    explanations with the same metrics as every other method; the time it
    reports is only the look-up. The file is read once, here; its content hash
    becomes the method's :attr:`MethodSpec.fingerprint`, so the benchmark's
    cache never serves scores of an older version of the file.

    Args:
        name: Method name; ``label``/``description``: shown in reports.
        path: The JSON Lines file.
        overwrite: Replace an existing method of the same name.

    Raises:
        PRXAIError: Missing or malformed file; at run time, an input the file
            does not cover.
    """
    path = Path(path)
    if not path.is_file():
        raise PRXAIError(f"no precomputed scores at {path}.")
    raw = path.read_bytes()
    table: Dict[tuple, List[float]] = {}
    for line_no, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            ids, scores = [int(i) for i in rec["input_ids"]], [float(v) for v in rec["scores"]]
        except (ValueError, KeyError, TypeError) as err:
            raise PRXAIError(f"{path}:{line_no}: expected JSON with input_ids and scores ({err}).") from None
        if len(ids) != len(scores):
            raise PRXAIError(f"{path}:{line_no}: {len(ids)} input_ids but {len(scores)} scores.")
        table[tuple(ids)] = scores
    key = name.strip().lower()

    def factory(model: nn.Module, forward_func: ForwardFunc, ctx: MethodContext) -> Explainer:
        def explain(ids: Tensor, mask: Tensor, special: Tensor, target: Tensor) -> Tensor:
            rows = []
            for row, row_mask in zip(ids.tolist(), mask.tolist()):
                real = tuple(i for i, m in zip(row, row_mask) if m)
                if real not in table:
                    raise PRXAIError(f"{path} has no scores for this input ({len(real)} tokens); "
                                     "compute them for the same examples and tokenisation.")
                scores = table[real] + [0.0] * (len(row) - len(real))
                rows.append(scores)
            return torch.tensor(rows, dtype=torch.float32, device=ids.device)

        return Explainer(key, label or name, explain, None)

    return register_method(name, label or name, "precomputed", description or f"scores read from {path}",
                           factory, overwrite=overwrite, defaults=dict,
                           fingerprint="sha256:" + hashlib.sha256(raw).hexdigest())


def available_methods() -> List[str]:
    """Registered method names, in registration order."""
    return list(METHODS)


def resolve_method(name: str) -> MethodSpec:
    """Look a method up by name or alias.

    Raises:
        PRXAIError: Unknown name (the message lists the known ones).
    """
    key = name.strip().lower()
    if key in METHODS:
        return METHODS[key]
    for spec in METHODS.values():
        if key in spec.aliases:
            return spec
    raise PRXAIError(
        f"unknown method {name.strip()!r}; choose from: {', '.join(METHODS)} "
        "(comma-separated, e.g. --methods pr-ag,ig,random)."
    )


def parse_methods(spec: str | Sequence[str]) -> List[str]:
    """``"pr-ag, ig"`` or ``["pr-ag", "ig"]`` -> canonical names, duplicates dropped."""
    raw = spec.split(",") if isinstance(spec, str) else list(spec)
    names: List[str] = []
    for item in raw:
        if not str(item).strip():
            continue
        name = resolve_method(str(item)).name
        if name not in names:
            names.append(name)
    if not names:
        raise PRXAIError("no method given; pass e.g. --methods pr-ag,ig,random.")
    return names


def validate_options(options: Mapping[str, Mapping[str, Any]]) -> MethodOptions:
    """Check that every option names a registered method and an option it accepts.

    Args:
        options: ``{method: {option: value}}`` (method names or aliases).

    Returns:
        The same options under the methods' registry names (what the
        factories look up), so ``{"integrated-gradients": ...}`` reaches ``"ig"``.

    Raises:
        PRXAIError: Unknown method, or an option the method does not take
            (the message lists those it does).
    """
    canonical: MethodOptions = {}
    for method, opts in options.items():
        spec = resolve_method(method)
        canonical.setdefault(spec.name, {}).update(opts)
        if spec.defaults is None:
            continue
        known = spec.defaults()
        unknown = sorted(set(opts) - set(known))
        if unknown:
            choices = ", ".join(sorted(known)) or "none"
            raise PRXAIError(f"method {spec.name!r} has no option {unknown[0]!r}; its options: {choices}.")
    return canonical


def _split_option(item: str) -> tuple:
    """``"METHOD.KEY=VALUE"`` -> ``(METHOD, KEY, VALUE)``; METHOD may itself hold dots and ``=``
    (ablation variants such as ``pr:g:token:target:0.7:normalize_layers=true``)."""
    lowered = item.strip().lower()
    names = sorted([*METHODS, *(a for spec in METHODS.values() for a in spec.aliases)], key=len, reverse=True)
    method = next((n for n in names if lowered.startswith(n + ".")), None)
    if method is not None:
        rest = item.strip()[len(method) + 1:]
    else:
        key, _, _ = item.partition("=")
        method, _, _ = key.partition(".")
        rest = item[len(method) + 1:]
    name, sep, value = rest.partition("=")
    if not sep or not method.strip() or not name.strip():
        raise PRXAIError(f"bad --option {item!r}; write METHOD.KEY=VALUE, e.g. --option ig.n_steps=20.")
    return method, name.strip(), value


def parse_options(items: Sequence[str]) -> MethodOptions:
    """``["ig.n_steps=20"]`` -> ``{"ig": {"n_steps": 20}}``, checked with :func:`validate_options`.

    Values are read as JSON when they parse (``20``, ``true``, ``[3]``; lists
    become tuples), otherwise kept as strings.

    Raises:
        PRXAIError: An item not of the form ``METHOD.KEY=VALUE``, an unknown
            method, or an option the method does not take.
    """
    options: MethodOptions = {}
    for item in items:
        method, name, value = _split_option(item)
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        if isinstance(parsed, list):
            parsed = tuple(parsed)
        options.setdefault(resolve_method(method).name, {})[name] = parsed
    return validate_options(options)


#: Options added after benchmark records were cached, with the value that gives the scores of before the
#: option existed: at that value they stay out of :func:`method_settings`, so those records remain valid.
KEY_NEUTRAL_OPTIONS: Dict[str, Any] = {"walks": "positive", "walk_gate": None, "hub_power": 0.0,
                                       "objective": "output", "propagation": "gradient", "relevance_weight": 0.0}


def method_settings(name: str, options: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Dict[str, Any]:
    """Everything the registry knows that determines a method's scores (the benchmark caches by it).

    Returns:
        ``{"method", "family", "options", "fingerprint"}``: the options are the
        method's defaults updated with ``options[name]``, so a record computed
        before a default changed is not taken for one computed after.
    """
    spec = resolve_method(name)
    given = dict((options or {}).get(spec.name, {}))
    effective = dict(spec.defaults()) if spec.defaults is not None else {}
    effective.update(given)
    effective = {k: v for k, v in effective.items() if k not in KEY_NEUTRAL_OPTIONS or KEY_NEUTRAL_OPTIONS[k] != v}
    return {"method": spec.name, "family": spec.family, "options": effective, "fingerprint": spec.fingerprint}


def build_method(name: str, model: nn.Module, forward_func: ForwardFunc,
                 context: Optional[MethodContext] = None) -> Explainer:
    """Build the :class:`Explainer` of a registered method.

    Args:
        name: Method name or alias.
        model: The model (used for its embedding and attention layers).
        forward_func: ``forward_func(input_ids, attention_mask) -> logits``.
        context: Token ids and options (default: pad id 0, no mask id).
    """
    spec = resolve_method(name)
    return spec.factory(model, forward_func, context or MethodContext())


def make_forward_func(model: nn.Module) -> ForwardFunc:
    """``forward_func(input_ids, attention_mask) -> logits`` of a Hugging Face classifier.

    Ids are cast to ``long`` so that perturbation methods that build their
    samples in floating point (Lime, KernelSHAP) still pass valid ids.
    """

    def forward_func(input_ids: Tensor, attention_mask: Optional[Tensor] = None) -> Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        out = model(input_ids=input_ids.long(), attention_mask=attention_mask.long())
        return out.logits if hasattr(out, "logits") else out

    return forward_func
