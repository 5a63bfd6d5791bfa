"""The registry of attribution methods shared by ``explain``, the explorer and the benchmark.

Every method (PR-XAI, the attention baselines, Captum's gradient and
perturbation methods, the random control, and any you add) is built from its
name into an :class:`Explainer` with one signature::

    explainer(input_ids, attention_mask, special_tokens_mask, target) -> (B, T) scores

Example::

    from captum_prxai.methods import MethodContext, build_method, make_forward_func

    explainer = build_method("pr-g", model, make_forward_func(model), MethodContext.from_tokenizer(tokenizer))
    scores = explainer(input_ids, attention_mask, special_tokens_mask, target)

Register your own method with :func:`register_method` (or a PageRank variant
with :func:`register_pr_method`), scores computed elsewhere with
:func:`register_precomputed`.
"""

from captum_prxai.methods.builtin import (
    DEFAULT_METHOD,
    FEATURED_METHODS,
    IG_DEFAULTS,
    PR_PRESETS,
    REFERENCE_METHODS,
    default_method,
    pr_defaults,
    pr_factory,
    register_defaults,
    reference_ids,
    register_pr_method,
)
from captum_prxai.methods.registry import (
    METHODS,
    ExplainFunc,
    Explainer,
    Factory,
    ForwardFunc,
    MethodContext,
    MethodOptions,
    MethodSpec,
    available_methods,
    build_method,
    make_forward_func,
    method_settings,
    parse_methods,
    parse_options,
    register_method,
    register_precomputed,
    resolve_method,
    validate_options,
)

__all__ = [
    "DEFAULT_METHOD",
    "FEATURED_METHODS",
    "REFERENCE_METHODS",
    "IG_DEFAULTS",
    "METHODS",
    "PR_PRESETS",
    "ExplainFunc",
    "Explainer",
    "Factory",
    "ForwardFunc",
    "MethodContext",
    "MethodOptions",
    "MethodSpec",
    "available_methods",
    "build_method",
    "default_method",
    "make_forward_func",
    "method_settings",
    "parse_methods",
    "parse_options",
    "pr_defaults",
    "pr_factory",
    "register_method",
    "reference_ids",
    "register_pr_method",
    "register_precomputed",
    "resolve_method",
    "validate_options",
]

if not METHODS:
    register_defaults()
