"""The research variants of PR-XAI that the benchmark tables compare, registered by the benchmarks themselves.

The library's registry holds the methods a user picks from (the default ``pr-xai``, the four presets, the
attention baselines and Captum's methods). The tables in ``benchmarks/results`` also name the variants that the
default search measured on its way (docs/research/default_search.md), such as
``pr-tag-pm0.25-hubs0.5-lp-cp-rel``: each is a :class:`captum_prxai.PageRankAttribution` with every option fixed.
Importing this module registers them (idempotent), through the registry's public hook
:func:`captum_prxai.methods.register_pr_method`, so every table's command runs as it did.

:func:`research_default` names, for a model, the variant whose options equal the library's default
(:func:`captum_prxai.recommended_spec`): the column under which the matrix records the default.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from captum_prxai.methods import register_pr_method

__all__ = ["RESEARCH_VARIANTS", "register_research_methods", "research_default"]

_TAG = "tempered_attention_gradient"
#: name -> (label, the options of PRTemperedAttentionGradient). Each key's options, in the order
#: attention_power, negative_weight, walk_gate, hub_power, objective, propagation, relevance_weight.
_VARIANTS: Dict[str, Tuple[str, Tuple[float, float, Optional[float], float, str, str, float]]] = {
    "pr-tag-pm": ("PR-TAG±", (0.5, 1.0, None, 0.0, "output", "gradient", 0.0)),
    "pr-tag-pm-lp": ("PR-TAG± (log-prob.)", (0.5, 1.0, None, 0.0, "log_probability", "gradient", 0.0)),
    "pr-tag-pm0.25": ("PR-TAG± (λ=0.25)", (0.5, 0.25, None, 0.0, "output", "gradient", 0.0)),
    "pr-tag0.25-pm0.25": ("PR-TAG± (γ=0.25, λ=0.25)", (0.25, 0.25, None, 0.0, "output", "gradient", 0.0)),
    "pr-tag0.25-pm0.25-gate0.5": ("PR-TAG± (γ=0.25, λ=0.25, gate 0.5)",
                                  (0.25, 0.25, 0.5, 0.0, "output", "gradient", 0.0)),
    "pr-tag-pm0.25-hubs0.5": ("PR-TAG± (λ=0.25, hubs 0.5)", (0.5, 0.25, None, 0.5, "output", "gradient", 0.0)),
    "pr-tag0.25-pm0.25-gate0.5-hubs0.5": ("PR-TAG± (γ=0.25, λ=0.25, gate 0.5, hubs 0.5)",
                                          (0.25, 0.25, 0.5, 0.5, "output", "gradient", 0.0)),
    "pr-tag-pm0.25-hubs0.5-lp": ("PR-TAG± (λ=0.25, hubs 0.5, log-prob.)",
                                 (0.5, 0.25, None, 0.5, "log_probability", "gradient", 0.0)),
    "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp": ("PR-TAG± (γ=0.25, λ=0.25, gate 0.5, hubs 0.5, log-prob.)",
                                             (0.25, 0.25, 0.5, 0.5, "log_probability", "gradient", 0.0)),
    "pr-tag-pm0.25-hubs0.5-lp-cp": ("PR-TAG± (λ=0.25, hubs 0.5, log-prob., CP)",
                                    (0.5, 0.25, None, 0.5, "log_probability", "conservative", 0.0)),
    "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp": ("PR-TAG± (γ=0.25, λ=0.25, gate 0.5, hubs 0.5, log-prob., CP)",
                                                (0.25, 0.25, 0.5, 0.5, "log_probability", "conservative", 0.0)),
    "pr-tag-pm0.25-hubs0.5-lp-cp-rel": ("PR-TAG± (λ=0.25, hubs 0.5, log-prob., CP x relevance)",
                                        (0.5, 0.25, None, 0.5, "log_probability", "conservative", 1.0)),
    "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp-rel": (
        "PR-TAG± (γ=0.25, λ=0.25, gate 0.5, hubs 0.5, log-prob., CP x relevance)",
        (0.25, 0.25, 0.5, 0.5, "log_probability", "conservative", 1.0)),
}
_KEYS = ("attention_power", "negative_weight", "walk_gate", "hub_power", "objective", "propagation",
         "relevance_weight")
#: name -> the options of each research variant (two walks on PR-TAG's edges, every other option fixed)
RESEARCH_VARIANTS: Dict[str, Dict[str, Any]] = {
    name: {"edge_weight": _TAG, "walks": "both", **dict(zip(_KEYS, values))} for name, (_, values) in _VARIANTS.items()
}


def register_research_methods() -> None:
    """Register every research variant (idempotent: a name already registered is left as it is)."""
    for name, (label, _) in _VARIANTS.items():
        options = {k: v for k, v in RESEARCH_VARIANTS[name].items() if k != "edge_weight"}
        register_pr_method(name, options, label=label, class_name="PRTemperedAttentionGradient",
                           description=f"{label}: a research variant of PR-XAI (docs/research/default_search.md)")


def research_default(model: Any = None, *, causal: Optional[bool] = None, depth: Optional[int] = None) -> str:
    """The research variant whose options equal the library's default on ``model`` (or on a model of the given
    attention type and depth): the matrix's column for the default."""
    from captum_prxai import recommended_spec

    spec = recommended_spec(model, causal=causal, depth=depth)
    key = tuple(getattr(spec, k) for k in _KEYS)
    for name, (_, values) in _VARIANTS.items():
        if values == key and spec.edge_weight == _TAG and spec.walks == "both":
            return name
    raise KeyError(f"no research variant has the default's options {dict(zip(_KEYS, key))}")


register_research_methods()
