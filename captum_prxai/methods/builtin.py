"""The built-in methods: PR-XAI, the attention baselines, Captum's gradient and perturbation methods, random.

:func:`register_defaults` runs once, when :mod:`captum_prxai.methods` is imported.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

import torch
from torch import Tensor, nn

from captum_prxai.exceptions import PRXAIError
from captum_prxai.methods.registry import (
    Explainer,
    Factory,
    ForwardFunc,
    MethodContext,
    register_method,
)

__all__ = ["DEFAULT_METHOD", "FEATURED_METHODS", "IG_DEFAULTS", "PR_PRESETS", "REFERENCE_METHODS", "default_method",
           "pr_factory", "pr_defaults", "reference_ids", "register_pr_method", "register_defaults"]

#: LayerIntegratedGradients settings of the ``"ig"`` method (overridable per run through ``options``):
#: the one place the benchmark's, ``explain``'s and the explorer's "IG: 50 steps" is written.
IG_DEFAULTS: Dict[str, Any] = {"n_steps": 50, "internal_batch_size": None, "method": "gausslegendre"}


def _opts(ctx: MethodContext, name: str, **defaults: Any) -> Dict[str, Any]:
    merged = dict(defaults)
    merged.update(ctx.options.get(name, {}))
    return merged


def _signature_defaults(fn: Callable, exclude: Iterable[str] = ()) -> Dict[str, Any]:
    """Named parameters of ``fn`` and their defaults (``None`` where there is none)."""
    skip = {"self", *exclude}
    out: Dict[str, Any] = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in skip:
            continue
        out[p.name] = None if p.default is p.empty else p.default
    return out


def _constructor_defaults(cls: type, exclude: Iterable[str] = ()) -> Dict[str, Any]:
    """Keyword arguments of ``cls(forward_func, layers, **kwargs)``, following ``**kwargs`` up the MRO."""
    exclude = {"forward_func", "layers", *exclude}
    out: Dict[str, Any] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        params = inspect.signature(klass.__init__).parameters.values()
        for name, value in _signature_defaults(klass.__init__, exclude).items():
            out.setdefault(name, value)
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return out


#: Settings the PR-XAI presets fix themselves (not options of theirs; PR-A has no negative walk to gate)
_PRESET_FIXED = {"PRAttention": ("edge_weight", "attention_power", "walk_gate"),
                 "PRGradient": ("edge_weight", "attention_power"),
                 "PRAttentionGradient": ("edge_weight", "attention_power"),
                 "PRTemperedAttentionGradient": ("edge_weight",)}


def pr_defaults(class_name: str = "PageRankAttribution", **settings: Any) -> Callable[[], Dict[str, Any]]:
    """``defaults()`` of a PR-XAI (or attention-baseline) method: its constructor's options, then ``settings``.

    A PR-XAI class lists its options with :meth:`~captum_prxai.PageRankAttribution.default_options`
    (``"auto"`` where :func:`captum_prxai.recommended_spec` fills them in); an attention baseline's are its
    constructor's keywords.
    """

    def defaults() -> Dict[str, Any]:
        import captum_prxai

        cls = getattr(captum_prxai, class_name)
        fixed = _PRESET_FIXED.get(class_name, ())
        if hasattr(cls, "default_options"):
            extra = _constructor_defaults(cls, ("spec", *fixed))
            options = {k: v for k, v in cls.default_options().items() if k not in fixed}
            return {**options, **extra, **settings}
        return {**_constructor_defaults(cls, fixed), **settings}

    return defaults


def pr_factory(name: str, label: str, class_name: str = "PageRankAttribution", **settings: Any) -> Factory:
    """Factory of a method that runs ``captum_prxai.<class_name>(forward_func, layers, **settings, **options)``.

    ``settings`` fix the method's configuration (an ablation variant); the
    run's options for ``name`` (``context.options[name]``) override them.
    """

    def factory(model: nn.Module, forward_func: ForwardFunc, ctx: MethodContext) -> Explainer:
        import captum_prxai

        cls = getattr(captum_prxai, class_name)
        attr = cls(forward_func, captum_prxai.attention_layers(model), **_opts(ctx, name, **settings))

        def explain(ids: Tensor, mask: Tensor, special: Tensor, target: Tensor) -> Tensor:
            return attr.attribute(ids, target=target, additional_forward_args=(mask,), attention_mask=mask)

        return Explainer(name, label, explain, attr)

    return factory


#: Registry name of the PR-XAI preset for each built-in edge weight (PRAttention, PRGradient, PRAttentionGradient).
PR_PRESETS: Dict[str, str] = {"attention": "pr-a", "gradient": "pr-g", "attention_gradient": "pr-ag",
                              "tempered_attention_gradient": "pr-tag"}
#: The registry name of the default method: :class:`~captum_prxai.PageRankAttribution` with every option left to
#: the measured defaults of :func:`captum_prxai.recommended_spec`, resolved for each model when it runs.
DEFAULT_METHOD = "pr-xai"
#: The methods a picker shows first (at most eight): the default, the four PR-XAI presets, two attention
#: baselines and Captum's Integrated Gradients. The rest of the registry is one click further.
FEATURED_METHODS: Tuple[str, ...] = ("pr-xai", "pr-a", "pr-g", "pr-ag", "pr-tag", "rollout", "gae", "ig")
#: What ``captum-prxai explain`` runs beside the default when no ``--methods`` are given: the paper's PR-AG and
#: Captum's Integrated Gradients.
REFERENCE_METHODS: Tuple[str, ...] = ("pr-ag", "ig")


def default_method(model: Optional[nn.Module] = None) -> str:
    """Registry name of the method :class:`~captum_prxai.PageRankAttribution` runs with all its defaults.

    The one place the apps (``explain``, the explorer, the dataset runner) read the default from. The method
    resolves its options for the model it explains (:func:`captum_prxai.recommended_spec`), so the name is the
    same for every model; ``model`` is accepted for symmetry with :func:`captum_prxai.recommended_spec`.
    """
    return DEFAULT_METHOD


def register_pr_method(name: str, settings: Dict[str, Any], label: Optional[str] = None,
                       description: Optional[str] = None, family: str = "pr-xai",
                       class_name: str = "PageRankAttribution", overwrite: bool = False) -> Any:
    """Register ``captum_prxai.<class_name>(..., **settings)`` as a method (idempotent unless ``overwrite``).

    Returns:
        The :class:`~captum_prxai.methods.MethodSpec` (the existing one when
        ``name`` is registered already and ``overwrite`` is false).
    """
    from captum_prxai.methods.registry import METHODS

    key = name.strip().lower()  # the registry's spelling of the name
    if key in METHODS and not overwrite:
        return METHODS[key]
    return register_method(name, label or name, family, description or f"{class_name}({settings})",
                           pr_factory(key, label or name, class_name, **settings), overwrite=overwrite,
                           defaults=pr_defaults(class_name, **settings))


def reference_ids(input_ids: Tensor, special_tokens_mask: Tensor, attention_mask: Tensor,
                   token_id: int) -> Tensor:
    """The reference input of Integrated Gradients and the perturbation methods: every real token replaced by
    ``token_id`` (``[PAD]`` by default), special tokens and padding kept. ``(B, T)`` ids."""
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


#: Arguments of Captum's ``attribute`` that the explainers set themselves (not options)
_FIXED_ARGS = ("inputs", "baselines", "target", "additional_forward_args", "feature_mask",
               "return_convergence_delta", "grad_kwargs", "kwargs")


def _ig_defaults() -> Dict[str, Any]:
    from captum.attr import LayerIntegratedGradients

    return {**_signature_defaults(LayerIntegratedGradients.attribute, _FIXED_ARGS), **IG_DEFAULTS}


def _ig_factory(model: nn.Module, forward_func: ForwardFunc, ctx: MethodContext) -> Explainer:
    from captum.attr import LayerIntegratedGradients

    opts = _opts(ctx, "ig", **IG_DEFAULTS)
    attr = LayerIntegratedGradients(forward_func, _embeddings(model))

    def explain(ids: Tensor, mask: Tensor, special: Tensor, target: Tensor) -> Tensor:
        base = reference_ids(ids, special, mask, ctx.pad_token_id)
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


def _perturbation_defaults(captum_class: str, defaults: Dict[str, Any]) -> Callable[[], Dict[str, Any]]:
    def collect() -> Dict[str, Any]:
        import captum.attr

        method = getattr(captum.attr, captum_class).attribute
        return {**_signature_defaults(method, _FIXED_ARGS), **defaults, "reference": "pad"}

    return collect


def _perturbation_factory(name: str, label: str, build: Callable[[ForwardFunc], Any],
                          defaults: Dict[str, Any], use_feature_mask: bool = True) -> Factory:
    def factory(model: nn.Module, forward_func: ForwardFunc, ctx: MethodContext) -> Explainer:
        attr = build(forward_func)
        opts = _opts(ctx, name, **defaults)
        ref = _ablation_ref(ctx, name)
        opts.pop("reference", None)

        def explain(ids: Tensor, mask: Tensor, special: Tensor, target: Tensor) -> Tensor:
            base = reference_ids(ids, special, mask, ref)
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

    from captum_prxai.methods._linear import TorchRidge

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

    from captum_prxai.methods._linear import TorchRidge

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


def _register_perturbation(name: str, label: str, description: str, captum_class: str,
                           build: Callable[[ForwardFunc], Any], defaults: Dict[str, Any],
                           aliases: tuple = (), use_feature_mask: bool = True) -> None:
    register_method(name, label, "perturbation", description,
                    _perturbation_factory(name, label, build, defaults, use_feature_mask), aliases,
                    defaults=_perturbation_defaults(captum_class, defaults), signed=True)


def register_defaults() -> None:
    """Register the built-in methods (called once, on import of :mod:`captum_prxai.methods`)."""
    pr = [
        ("pr-a", "PR-A", "PRAttention", "PageRank on attention weights (PR-XAI)", ()),
        ("pr-g", "PR-G", "PRGradient", "PageRank on attention gradients (PR-XAI)", ()),
        ("pr-ag", "PR-AG", "PRAttentionGradient",
         "PageRank on attention x attention-gradient, the paper's method (PR-XAI)", ()),
        ("pr-tag", "PR-TAG", "PRTemperedAttentionGradient",
         "PageRank on tempered attention x attention-gradient, (A^0.5 dA)+ (PR-XAI)", ()),
    ]
    register_method(DEFAULT_METHOD, "PR-XAI (default)", "pr-xai",
                    "PageRankAttribution with its measured defaults for the model (recommended_spec): "
                    "two-walk PageRank on tempered attention x gradient edges, one pass; read as a ranking "
                    "(unsigned, docs/signed.md)",
                    pr_factory(DEFAULT_METHOD, "PR-XAI (default)"), ("default",),
                    defaults=pr_defaults("PageRankAttribution"))
    for name, label, cls, desc, aliases in pr:
        register_method(name, label, "pr-xai", desc, pr_factory(name, label, cls), aliases, defaults=pr_defaults(cls))
    att = [
        ("raw-attention", "Raw attention", "RawAttention", "last-layer attention of the explained token",
         ("attention",)),
        ("rollout", "Rollout", "AttentionRollout", "attention rollout (Abnar & Zuidema, 2020)", ()),
        ("gae", "GAE", "GradientWeightedRollout",
         "gradient-weighted attention rollout (Chefer et al., 2021)", ("grad-rollout",)),
        ("attention-flow", "Attention flow", "AttentionFlow",
         "max flow through the layered attention graph (Abnar & Zuidema, 2020); slow on long inputs",
         ("flow",)),
        ("gaf", "Generalized attention flow", "GeneralizedAttentionFlow",
         "barrier max flow through the layered attention x gradient graph (Azarkhalili & Libbrecht, 2025)", ()),
    ]
    for name, label, cls, desc, aliases in att:
        register_method(name, label, "attention", desc, pr_factory(name, label, cls), aliases,
                        defaults=pr_defaults(cls))
    register_method("ig", "Integrated Gradients", "gradient",
                    f"Captum LayerIntegratedGradients on the word embeddings, {IG_DEFAULTS['n_steps']} steps, "
                    "[PAD] reference", _ig_factory, ("integrated-gradients",), defaults=_ig_defaults, signed=True)
    register_method("ixg", "Input x Gradient", "gradient",
                    "Captum LayerGradientXActivation on the word embeddings", _ixg_factory,
                    ("input-x-gradient",), defaults=dict, signed=True)
    register_method("saliency", "Saliency", "gradient",
                    "|gradient| of the word embeddings (Captum LayerGradientXActivation, multiply_by_inputs=False)",
                    _saliency_factory, defaults=dict)
    _register_perturbation("occlusion", "Occlusion", "Captum Occlusion, 3-token window, stride 1, [PAD] reference",
                           "Occlusion", _occlusion,
                           {"sliding_window_shapes": (3,), "strides": 1, "perturbations_per_eval": 16},
                           use_feature_mask=False)
    _register_perturbation("feature-ablation", "Feature ablation",
                           "Captum FeatureAblation, one token at a time, [PAD] reference", "FeatureAblation",
                           _feature_ablation, {"perturbations_per_eval": 16}, ("ablation",))
    _register_perturbation("shapley", "Shapley sampling",
                           "Captum ShapleyValueSampling over tokens, 25 permutations, [PAD] reference",
                           "ShapleyValueSampling", _shapley, {"n_samples": 25, "perturbations_per_eval": 16},
                           ("shapley-value-sampling",))
    _register_perturbation("kernel-shap", "KernelSHAP", "Captum KernelShap over tokens, 200 samples, [PAD] reference",
                           "KernelShap", _kernel_shap, {"n_samples": 200, "perturbations_per_eval": 16},
                           ("kernelshap",))
    _register_perturbation("lime", "LIME",
                           "Captum Lime over tokens, 200 samples, cosine kernel (width 0.25), ridge surrogate",
                           "Lime", _lime, {"n_samples": 200, "perturbations_per_eval": 16})
    register_method("random", "Random", "control", "uniform random scores (seeded by the input)",
                    _random_factory, defaults=dict)
