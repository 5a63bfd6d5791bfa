"""Registry of attribution methods the benchmark can run.

Every method is built by a factory ``factory(model, forward_func, context)``
into an :class:`Explainer`, a callable with one uniform signature::

    explainer(input_ids, attention_mask, special_tokens_mask, target) -> (B, T) scores

so that PR-XAI, the attention baselines, Captum's gradient and perturbation
methods and the random control are interchangeable. Captum attributions with
a hidden dimension (layer methods on the word embeddings) are summed over it.

Register your own method with :func:`register_method`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch
from torch import Tensor, nn

from captum_prxai.exceptions import PRXAIError

#: ``forward_func(input_ids, attention_mask) -> logits (B, C)``
ForwardFunc = Callable[[Tensor, Tensor], Tensor]
#: ``explain(input_ids, attention_mask, special_tokens_mask, target) -> (B, T)``
ExplainFunc = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]

__all__ = [
    "MethodContext",
    "MethodSpec",
    "Explainer",
    "METHODS",
    "register_method",
    "register_precomputed",
    "available_methods",
    "resolve_method",
    "parse_methods",
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
    options: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, seed: int = 0,
                       options: Optional[Dict[str, Dict[str, Any]]] = None) -> "MethodContext":
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
        family: ``"pr-xai"``, ``"attention"``, ``"gradient"``, ``"perturbation"`` or ``"control"``.
        description: One line.
        factory: Builds the :class:`Explainer`.
        aliases: Other accepted names.
    """

    name: str
    label: str
    family: str
    description: str
    factory: Factory
    aliases: tuple = ()


#: name -> spec, in display order
METHODS: Dict[str, MethodSpec] = {}


def register_method(name: str, label: str, family: str, description: str, factory: Factory,
                    aliases: Sequence[str] = (), overwrite: bool = False) -> MethodSpec:
    """Add a method to the registry.

    Args:
        name: Command-line name (lower case, no commas).
        label: Display name.
        family: Group shown in the docs.
        description: One line.
        factory: ``factory(model, forward_func, context) -> Explainer``.
        aliases: Other accepted names.
        overwrite: Replace an existing entry of the same name.

    Returns:
        The :class:`MethodSpec`.
    """
    key = name.strip().lower()
    if not key or "," in key:
        raise PRXAIError(f"invalid method name {name!r}: use a non-empty name without commas.")
    if key in METHODS and not overwrite:
        raise PRXAIError(f"method {key!r} is already registered; pass overwrite=True to replace it.")
    spec = MethodSpec(key, label, family, description, factory, tuple(a.lower() for a in aliases))
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
    reports is only the look-up.

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
    table: Dict[tuple, List[float]] = {}
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
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

    key = name.strip().lower()
    return register_method(name, label or name, "precomputed", description or f"scores read from {path}",
                           factory, overwrite=overwrite)


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


# ============================================================================ factories
def _opts(ctx: MethodContext, name: str, **defaults: Any) -> Dict[str, Any]:
    merged = dict(defaults)
    merged.update(ctx.options.get(name, {}))
    return merged


def _reference_ids(input_ids: Tensor, special_tokens_mask: Tensor, attention_mask: Tensor,
                   token_id: int) -> Tensor:
    """Replace every real token by ``token_id``; keep special tokens and padding."""
    real = attention_mask.bool() & ~special_tokens_mask.bool()
    return input_ids.masked_fill(real, int(token_id))


def _token_feature_mask(attention_mask: Tensor, special_tokens_mask: Tensor) -> Tensor:
    """Feature groups: 0 for special tokens and padding, 1..n for the real tokens of each row."""
    real = attention_mask.bool() & ~special_tokens_mask.bool()
    return torch.cumsum(real.long(), dim=1) * real.long()


def _embeddings(model: nn.Module) -> nn.Module:
    get = getattr(model, "get_input_embeddings", None)
    emb = get() if callable(get) else None
    if emb is None:
        raise PRXAIError(
            f"{type(model).__name__} has no get_input_embeddings(); the embedding-layer methods "
            "(ig, ixg, saliency) need a Hugging Face model."
        )
    return emb


def _pr_factory(class_name: str, name: str, label: str) -> Factory:
    def factory(model: nn.Module, forward_func: ForwardFunc, ctx: MethodContext) -> Explainer:
        import captum_prxai

        cls = getattr(captum_prxai, class_name)
        attr = cls(forward_func, captum_prxai.attention_layers(model), **_opts(ctx, name))

        def explain(ids: Tensor, mask: Tensor, special: Tensor, target: Tensor) -> Tensor:
            return attr.attribute(ids, target=target, additional_forward_args=(mask,))

        return Explainer(name, label, explain, attr)

    return factory


#: LayerIntegratedGradients settings of the ``"ig"`` method (overridable per run through ``options``)
IG_DEFAULTS: Dict[str, Any] = {"n_steps": 50, "internal_batch_size": None, "method": "gausslegendre"}


def _ig_factory(model: nn.Module, forward_func: ForwardFunc, ctx: MethodContext) -> Explainer:
    from captum.attr import LayerIntegratedGradients

    opts = _opts(ctx, "ig", **IG_DEFAULTS)
    attr = LayerIntegratedGradients(forward_func, _embeddings(model))

    def explain(ids: Tensor, mask: Tensor, special: Tensor, target: Tensor) -> Tensor:
        base = _reference_ids(ids, special, mask, ctx.pad_token_id)
        return attr.attribute(ids, baselines=base, target=target, additional_forward_args=(mask,), **opts)

    return Explainer("ig", "Integrated Gradients", explain, attr)


def _ixg_factory(model: nn.Module, forward_func: ForwardFunc, ctx: MethodContext) -> Explainer:
    from captum.attr import LayerGradientXActivation

    attr = LayerGradientXActivation(forward_func, _embeddings(model))

    def explain(ids: Tensor, mask: Tensor, special: Tensor, target: Tensor) -> Tensor:
        return attr.attribute(ids, target=target, additional_forward_args=(mask,))

    return Explainer("ixg", "Input x Gradient", explain, attr)


def _saliency_factory(model: nn.Module, forward_func: ForwardFunc, ctx: MethodContext) -> Explainer:
    from captum.attr import LayerGradientXActivation

    attr = LayerGradientXActivation(forward_func, _embeddings(model), multiply_by_inputs=False)

    def explain(ids: Tensor, mask: Tensor, special: Tensor, target: Tensor) -> Tensor:
        grad = attr.attribute(ids, target=target, additional_forward_args=(mask,))
        return grad.abs()  # Captum's Saliency takes |gradient|; summed over the hidden dim

    return Explainer("saliency", "Saliency", explain, attr)


def _ablation_ref(ctx: MethodContext, name: str) -> int:
    choice = _opts(ctx, name, reference="pad")["reference"]
    if choice == "mask":
        if ctx.mask_token_id is None:
            raise PRXAIError(f"method {name!r}: the tokenizer has no [MASK] token; use reference 'pad'.")
        return int(ctx.mask_token_id)
    if choice != "pad":
        raise PRXAIError(f"method {name!r}: reference must be 'pad' or 'mask', got {choice!r}.")
    return ctx.pad_token_id


def _perturbation_factory(name: str, label: str, build: Callable[[ForwardFunc], Any],
                          defaults: Dict[str, Any], use_feature_mask: bool = True) -> Factory:
    def factory(model: nn.Module, forward_func: ForwardFunc, ctx: MethodContext) -> Explainer:
        attr = build(forward_func)
        opts = _opts(ctx, name, **defaults)
        ref = _ablation_ref(ctx, name)
        opts.pop("reference", None)

        def explain(ids: Tensor, mask: Tensor, special: Tensor, target: Tensor) -> Tensor:
            base = _reference_ids(ids, special, mask, ref)
            kwargs = dict(opts)
            if use_feature_mask:
                kwargs["feature_mask"] = _token_feature_mask(mask, special)
            scores = attr.attribute(ids, baselines=base, target=target, additional_forward_args=(mask,), **kwargs)
            real = mask.bool() & ~special.bool()
            return scores.float() * real.to(scores.device)

        return Explainer(name, label, explain, attr)

    return factory


def _occlusion(forward_func: ForwardFunc) -> Any:
    from captum.attr import Occlusion

    return Occlusion(forward_func)


def _feature_ablation(forward_func: ForwardFunc) -> Any:
    from captum.attr import FeatureAblation

    return FeatureAblation(forward_func)


def _shapley(forward_func: ForwardFunc) -> Any:
    from captum.attr import ShapleyValueSampling

    return ShapleyValueSampling(forward_func)


def _kernel_shap(forward_func: ForwardFunc) -> Any:
    from captum.attr import KernelShap

    from captum_prxai.bench._linear import TorchRidge

    attr = KernelShap(forward_func)
    attr.interpretable_model = TorchRidge(alpha=0.0)  # Captum's default needs scikit-learn
    return attr


def _lime_similarity(original_inp: Any, perturbed_inp: Any, perturbed_interpretable_inp: Tensor,
                     **kwargs: Any) -> Tensor:
    """LIME's text kernel: exp(-d^2 / 0.25^2), d = cosine distance to the all-present vector."""
    z = perturbed_interpretable_inp.float().reshape(perturbed_interpretable_inp.shape[0], -1)
    ones = torch.ones_like(z)
    cos = torch.nn.functional.cosine_similarity(z, ones, dim=1, eps=1e-12)
    d = 1.0 - cos
    return torch.exp(-(d ** 2) / 0.25 ** 2)


def _lime(forward_func: ForwardFunc) -> Any:
    from captum.attr import Lime

    from captum_prxai.bench._linear import TorchRidge

    return Lime(forward_func, interpretable_model=TorchRidge(alpha=1.0), similarity_func=_lime_similarity)


def _random_factory(model: nn.Module, forward_func: ForwardFunc, ctx: MethodContext) -> Explainer:
    def explain(ids: Tensor, mask: Tensor, special: Tensor, target: Tensor) -> Tensor:
        rows = []
        for row in ids:
            digest = hashlib.sha1(row.cpu().numpy().tobytes() + str(ctx.seed).encode()).digest()
            gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))
            rows.append(torch.rand(row.shape[0], generator=gen))
        return torch.stack(rows).to(ids.device)

    return Explainer("random", "Random", explain, None)


def _register_defaults() -> None:
    pr = [
        ("pr-ag", "PR-AG", "PRAttentionGradient", "PageRank on attention x attention-gradient (PR-XAI)", ()),
        ("pr-a", "PR-A", "PRAttention", "PageRank on attention weights (PR-XAI)", ()),
        ("pr-g", "PR-G", "PRGradient", "PageRank on attention gradients (PR-XAI)", ()),
    ]
    for name, label, cls, desc, aliases in pr:
        register_method(name, label, "pr-xai", desc, _pr_factory(cls, name, label), aliases)
    att = [
        ("raw-attention", "Raw attention", "RawAttention", "last-layer attention of the explained token",
         ("attention",)),
        ("rollout", "Rollout", "AttentionRollout", "attention rollout (Abnar & Zuidema, 2020)", ()),
        ("gae", "GAE", "GradientWeightedRollout",
         "gradient-weighted attention rollout (Chefer et al., 2021)", ("grad-rollout",)),
        ("attention-flow", "Attention flow", "AttentionFlow",
         "max flow through the layered attention graph (Abnar & Zuidema, 2020); slow on long inputs",
         ("flow",)),
    ]
    for name, label, cls, desc, aliases in att:
        register_method(name, label, "attention", desc, _pr_factory(cls, name, label), aliases)
    register_method("ig", "Integrated Gradients", "gradient",
                    "Captum LayerIntegratedGradients on the word embeddings, 50 steps, [PAD] reference",
                    _ig_factory, ("integrated-gradients",))
    register_method("ixg", "Input x Gradient", "gradient",
                    "Captum LayerGradientXActivation on the word embeddings", _ixg_factory,
                    ("input-x-gradient",))
    register_method("saliency", "Saliency", "gradient",
                    "|gradient| of the word embeddings (Captum LayerGradientXActivation, multiply_by_inputs=False)",
                    _saliency_factory)
    register_method("occlusion", "Occlusion", "perturbation",
                    "Captum Occlusion, 3-token window, stride 1, [PAD] reference",
                    _perturbation_factory("occlusion", "Occlusion", _occlusion,
                                          {"sliding_window_shapes": (3,), "strides": 1,
                                           "perturbations_per_eval": 16}, use_feature_mask=False))
    register_method("feature-ablation", "Feature ablation", "perturbation",
                    "Captum FeatureAblation, one token at a time, [PAD] reference",
                    _perturbation_factory("feature-ablation", "Feature ablation", _feature_ablation,
                                          {"perturbations_per_eval": 16}), ("ablation",))
    register_method("shapley", "Shapley sampling", "perturbation",
                    "Captum ShapleyValueSampling over tokens, 25 permutations, [PAD] reference",
                    _perturbation_factory("shapley", "Shapley sampling", _shapley,
                                          {"n_samples": 25, "perturbations_per_eval": 16}),
                    ("shapley-value-sampling",))
    register_method("kernel-shap", "KernelSHAP", "perturbation",
                    "Captum KernelShap over tokens, 200 samples, [PAD] reference",
                    _perturbation_factory("kernel-shap", "KernelSHAP", _kernel_shap,
                                          {"n_samples": 200, "perturbations_per_eval": 16}),
                    ("kernelshap",))
    register_method("lime", "LIME", "perturbation",
                    "Captum Lime over tokens, 200 samples, cosine kernel (width 0.25), ridge surrogate",
                    _perturbation_factory("lime", "LIME", _lime,
                                          {"n_samples": 200, "perturbations_per_eval": 16}))
    register_method("random", "Random", "control", "uniform random scores (seeded by the input)",
                    _random_factory)


_register_defaults()
