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

__all__ = ["IG_DEFAULTS", "pr_factory", "pr_defaults", "register_pr_method", "register_defaults"]

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
    """``defaults()`` of a PR-XAI (or attention-baseline) method: its constructor's keywords, then ``settings``."""

    def defaults() -> Dict[str, Any]:
        import captum_prxai

        cls = getattr(captum_prxai, class_name)
        return {**_constructor_defaults(cls, _PRESET_FIXED.get(class_name, ())), **settings}

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
_TAG = "tempered_attention_gradient"
#: Registry name of the preset that walks both signs of an edge weight, by ``γ`` (``attention_power``) and the
#: weight ``λ`` of its negative walk, the gate on the walks' correlation (``walk_gate``; None: no gate) and the
#: weight of the graph's hubs (``hub_power``): PR-TAG± (λ = 1, the decoders' former default), PR-TAG± (λ=0.25), PR-TAG±
#: (γ=0.25, λ=0.25) and, with the gate, PR-TAG± (γ=0.25, λ=0.25, gate 0.5) (the former encoder defaults), and the
#: two that weigh each walk by its graph's hubs, ``x ⊙ g^0.5``: PR-TAG± (λ=0.25, hubs 0.5) and PR-TAG± (γ=0.25,
#: λ=0.25, gate 0.5, hubs 0.5) (the former defaults of encoders under 12 layers and of 12 or more), the same two
#: on the class's log-probability (``objective``; thirteenth round): the encoders' former defaults, and PR-TAG± on the
#: class's log-probability (fourteenth round): the decoders' default; the encoders' two from CP-LRP's backward pass
#: (``propagation="conservative"``), alone and with each score weighted by that pass's gradient x input
#: (``relevance_weight=1``; seventeenth round): the encoders' defaults. The key's last three entries are ``objective``,
#: ``propagation`` and ``relevance_weight``.
BOTH_WALKS_PRESETS: Dict[Tuple[str, float, float, Optional[float], float, str, str, float], str] = {
    (_TAG, 0.5, 1.0, None, 0.0, "output", "gradient", 0.0): "pr-tag-pm",
    (_TAG, 0.5, 0.25, None, 0.0, "output", "gradient", 0.0): "pr-tag-pm0.25",
    (_TAG, 0.25, 0.25, None, 0.0, "output", "gradient", 0.0): "pr-tag0.25-pm0.25",
    (_TAG, 0.25, 0.25, 0.5, 0.0, "output", "gradient", 0.0): "pr-tag0.25-pm0.25-gate0.5",
    (_TAG, 0.5, 0.25, None, 0.5, "output", "gradient", 0.0): "pr-tag-pm0.25-hubs0.5",
    (_TAG, 0.25, 0.25, 0.5, 0.5, "output", "gradient", 0.0): "pr-tag0.25-pm0.25-gate0.5-hubs0.5",
    (_TAG, 0.5, 0.25, None, 0.5, "log_probability", "gradient", 0.0): "pr-tag-pm0.25-hubs0.5-lp",
    (_TAG, 0.25, 0.25, 0.5, 0.5, "log_probability", "gradient", 0.0): "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp",
    (_TAG, 0.5, 1.0, None, 0.0, "log_probability", "gradient", 0.0): "pr-tag-pm-lp",
    (_TAG, 0.5, 0.25, None, 0.5, "log_probability", "conservative", 0.0): "pr-tag-pm0.25-hubs0.5-lp-cp",
    (_TAG, 0.25, 0.25, 0.5, 0.5, "log_probability", "conservative", 0.0): "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp",
    (_TAG, 0.5, 0.25, None, 0.5, "log_probability", "conservative", 1.0): "pr-tag-pm0.25-hubs0.5-lp-cp-rel",
    (_TAG, 0.25, 0.25, 0.5, 0.5, "log_probability", "conservative", 1.0): "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp-rel",
}


def default_method(model: Optional[nn.Module] = None, *, causal: Optional[bool] = None,
                   depth: Optional[int] = None) -> str:
    """Registry name of the method :class:`~captum_prxai.PageRankAttribution` runs with all its defaults on ``model``.

    The one place the apps (``explain``, the explorer, the dataset runner, the
    benchmark's matrix) read the default from: the preset whose edges are
    :data:`captum_prxai.graph.spec.DEFAULT_EDGE_WEIGHT`, walked as the class's
    ``walks="auto"``, ``negative_weight="auto"`` and ``attention_power="auto"``
    walk them (``walk_gate="auto"`` gates them, ``hub_power="auto"`` weighs
    them, ``objective="auto"`` says what their gradient explains,
    ``propagation="auto"`` how it propagates and ``relevance_weight="auto"``
    how much the same pass's gradient x input weighs each score): PR-TAG±
    (λ=0.25, hubs 0.5, log-prob., CP x relevance)
    (``"pr-tag-pm0.25-hubs0.5-lp-cp-rel"``) for encoders of fewer than 12
    attention layers and without a model, PR-TAG± (γ=0.25, λ=0.25, gate 0.5,
    hubs 0.5, log-prob., CP x relevance)
    (``"pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp-rel"``) for encoders of 12 or
    more,
    PR-TAG± (log-prob.) (``"pr-tag-pm-lp"``, λ = 1) for decoders
    (:func:`captum_prxai.capture.model_is_causal`). ``causal`` and ``depth``
    (the number of attention layers) say which without a model; each takes
    precedence over ``model``.
    """
    from captum_prxai.capture import model_depth, model_is_causal
    from captum_prxai.graph.spec import (
        DEFAULT_EDGE_WEIGHT,
        auto_attention_power,
        auto_hub_power,
        auto_negative_weight,
        auto_objective,
        auto_propagation,
        auto_relevance_weight,
        auto_walk_gate,
        auto_walks,
    )

    if causal is None:
        causal = model is not None and model_is_causal(model)
    if depth is None:
        depth = 0 if model is None else model_depth(model)
    if auto_walks(DEFAULT_EDGE_WEIGHT) == "positive":
        return PR_PRESETS[DEFAULT_EDGE_WEIGHT]
    return BOTH_WALKS_PRESETS[(DEFAULT_EDGE_WEIGHT, auto_attention_power(causal, depth), auto_negative_weight(causal),
                               auto_walk_gate(causal, depth), auto_hub_power(causal, depth),
                               auto_objective(causal, depth), auto_propagation(causal, depth),
                               auto_relevance_weight(causal, depth))]


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
                    defaults=_perturbation_defaults(captum_class, defaults))


def register_defaults() -> None:
    """Register the built-in methods (called once, on import of :mod:`captum_prxai.methods`)."""
    pr = [
        ("pr-ag", "PR-AG", "PRAttentionGradient", "PageRank on attention x attention-gradient (PR-XAI)", ()),
        ("pr-a", "PR-A", "PRAttention", "PageRank on attention weights (PR-XAI)", ()),
        ("pr-g", "PR-G", "PRGradient", "PageRank on attention gradients (PR-XAI)", ()),
        ("pr-tag", "PR-TAG", "PRTemperedAttentionGradient",
         "PageRank on tempered attention x attention-gradient, (A^0.5 dA)+ (PR-XAI)", ()),
    ]
    for name, label, cls, desc, aliases in pr:
        register_method(name, label, "pr-xai", desc, pr_factory(name, label, cls), aliases, defaults=pr_defaults(cls))
    register_method("pr-tag-pm", "PR-TAG±", "pr-xai",
                    "PR-TAG's PageRank minus that of the negative walk, (A^0.5 (-dA))+: signed scores, one pass "
                    "(PR-XAI)", pr_factory("pr-tag-pm", "PR-TAG±", "PRTemperedAttentionGradient", walks="both",
                                           negative_weight=1.0),
                    defaults=pr_defaults("PRTemperedAttentionGradient", walks="both", negative_weight=1.0))
    register_method("pr-tag-pm-lp", "PR-TAG± (log-prob.)", "pr-xai",
                    "PR-TAG± explaining the class's log-probability instead of its logit "
                    "(objective='log_probability'): the decoders' default, chosen in the fourteenth round of "
                    "docs/default_search.md; one pass (PR-XAI)",
                    pr_factory("pr-tag-pm-lp", "PR-TAG± (log-prob.)", "PRTemperedAttentionGradient", walks="both",
                               negative_weight=1.0, objective="log_probability"),
                    defaults=pr_defaults("PRTemperedAttentionGradient", walks="both", negative_weight=1.0,
                                         objective="log_probability"))
    register_method("pr-tag-pm0.25", "PR-TAG± (λ=0.25)", "pr-xai",
                    "PR-TAG's PageRank minus 0.25 x that of the negative walk: the encoders' former default, chosen "
                    "in the fourth round of docs/default_search.md; one pass (PR-XAI)",
                    pr_factory("pr-tag-pm0.25", "PR-TAG± (λ=0.25)", "PRTemperedAttentionGradient", walks="both",
                               negative_weight=0.25),
                    defaults=pr_defaults("PRTemperedAttentionGradient", walks="both", negative_weight=0.25))
    register_method("pr-tag0.25-pm0.25", "PR-TAG± (γ=0.25, λ=0.25)", "pr-xai",
                    "PR-TAG± (λ=0.25) on edges tempered less, (A^0.25 dA)+: a former default of encoders of 12 or "
                    "more layers, chosen in the seventh round of docs/default_search.md; one pass (PR-XAI)",
                    pr_factory("pr-tag0.25-pm0.25", "PR-TAG± (γ=0.25, λ=0.25)", "PRTemperedAttentionGradient",
                               walks="both", negative_weight=0.25, attention_power=0.25),
                    defaults=pr_defaults("PRTemperedAttentionGradient", walks="both", negative_weight=0.25,
                                         attention_power=0.25))
    register_method("pr-tag0.25-pm0.25-gate0.5", "PR-TAG± (γ=0.25, λ=0.25, gate 0.5)", "pr-xai",
                    "PR-TAG± (γ=0.25, λ=0.25), or its positive walk alone on an example where the two walks' "
                    "scores correlate above 0.5: the former default of encoders of 12 or more layers, chosen in the "
                    "ninth round of docs/default_search.md; one pass (PR-XAI)",
                    pr_factory("pr-tag0.25-pm0.25-gate0.5", "PR-TAG± (γ=0.25, λ=0.25, gate 0.5)",
                               "PRTemperedAttentionGradient", walks="both", negative_weight=0.25, attention_power=0.25,
                               walk_gate=0.5),
                    defaults=pr_defaults("PRTemperedAttentionGradient", walks="both", negative_weight=0.25,
                                         attention_power=0.25, walk_gate=0.5))
    hubs = [("pr-tag-pm0.25-hubs0.5", "PR-TAG± (λ=0.25, hubs 0.5)", "PR-TAG± (λ=0.25)", "under 12 layers",
             dict(walks="both", negative_weight=0.25)),
            ("pr-tag0.25-pm0.25-gate0.5-hubs0.5", "PR-TAG± (γ=0.25, λ=0.25, gate 0.5, hubs 0.5)",
             "PR-TAG± (γ=0.25, λ=0.25, gate 0.5)", "of 12 or more layers",
             dict(walks="both", negative_weight=0.25, attention_power=0.25, walk_gate=0.5))]
    for name, label, base, depth, settings in hubs:
        register_method(name, label, "pr-xai",
                        f"{base} with each walk's PageRank weighted by its graph's global PageRank, x * g^0.5 "
                        f"(hub_power=0.5): a former default of encoders {depth}, chosen in the eleventh round of "
                        "docs/default_search.md; one pass (PR-XAI)",
                        pr_factory(name, label, "PRTemperedAttentionGradient", hub_power=0.5, **settings),
                        defaults=pr_defaults("PRTemperedAttentionGradient", hub_power=0.5, **settings))
        lp_name, lp_label = f"{name}-lp", label[:-1] + ", log-prob.)"
        register_method(lp_name, lp_label, "pr-xai",
                        f"{label} explaining the class's log-probability instead of its logit "
                        f"(objective='log_probability'): a former default of encoders {depth}, chosen in the "
                        "thirteenth round of docs/default_search.md; one pass (PR-XAI)",
                        pr_factory(lp_name, lp_label, "PRTemperedAttentionGradient", hub_power=0.5,
                                   objective="log_probability", **settings),
                        defaults=pr_defaults("PRTemperedAttentionGradient", hub_power=0.5,
                                             objective="log_probability", **settings))
        for suffix, weight, what in (
                ("-cp", 0.0, f": measured for encoders {depth}"),
                ("-cp-rel", 1.0, f", each score times 1 + R / max|R|, R that pass's gradient x input "
                                 f"(relevance_weight=1): the default of encoders {depth}, chosen")):
            cp_name, cp_label = lp_name + suffix, lp_label[:-1] + (", CP)" if not weight else ", CP x relevance)")
            register_method(cp_name, cp_label, "pr-xai",
                            f"{lp_label} from a backward pass with each attention softmax and LayerNorm scale held "
                            f"constant (propagation='conservative', CP-LRP's backward pass, Ali et al. 2022){what} "
                            "in the seventeenth round of docs/default_search.md; one pass (PR-XAI)",
                            pr_factory(cp_name, cp_label, "PRTemperedAttentionGradient", hub_power=0.5,
                                       objective="log_probability", propagation="conservative",
                                       relevance_weight=weight, **settings),
                            defaults=pr_defaults("PRTemperedAttentionGradient", hub_power=0.5,
                                                 objective="log_probability", propagation="conservative",
                                                 relevance_weight=weight, **settings))
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
        register_method(name, label, "attention", desc, pr_factory(name, label, cls), aliases,
                        defaults=pr_defaults(cls))
    register_method("ig", "Integrated Gradients", "gradient",
                    f"Captum LayerIntegratedGradients on the word embeddings, {IG_DEFAULTS['n_steps']} steps, "
                    "[PAD] reference", _ig_factory, ("integrated-gradients",), defaults=_ig_defaults)
    register_method("ixg", "Input x Gradient", "gradient",
                    "Captum LayerGradientXActivation on the word embeddings", _ixg_factory,
                    ("input-x-gradient",), defaults=dict)
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
