"""captum-prxai: PR-XAI, PageRank-based feature attribution for transformers, as a Captum plugin.

The flow, once for every consumer: capture one pass (:func:`capture_graph`,
:mod:`captum_prxai.hooks`) -> build the graph (:class:`GraphSpec`,
:func:`build_graph`) -> PageRank (:func:`score_graph`, :func:`pagerank`) ->
token scores (:mod:`captum_prxai.attr`). The algorithm is :class:`GraphSpec`;
the measured recipe for a model is :func:`recommended_spec`. See
docs/architecture.md.

The public names below are imported on first use (PEP 562), so that the
command line starts without loading torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from captum_prxai._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "AttentionFlow": "captum_prxai.attr",
    "AttentionGraphAttribution": "captum_prxai.attr",
    "AttentionRollout": "captum_prxai.attr",
    "GeneralizedAttentionFlow": "captum_prxai.attr",
    "GradientWeightedRollout": "captum_prxai.attr",
    "PRAttention": "captum_prxai.attr",
    "PRAttentionGradient": "captum_prxai.attr",
    "PRGradient": "captum_prxai.attr",
    "PRTemperedAttentionGradient": "captum_prxai.attr",
    "PageRankAttribution": "captum_prxai.attr",
    "RawAttention": "captum_prxai.attr",
    "ConvergenceError": "captum_prxai.exceptions",
    "PRXAIError": "captum_prxai.exceptions",
    "PRXAIWarning": "captum_prxai.exceptions",
    "GraphExplanation": "captum_prxai.attr",
    "GraphSpec": "captum_prxai.graph.spec",
    "build_graph": "captum_prxai.graph.build",
    "score_graph": "captum_prxai.graph.scoring",
    "recommended_spec": "captum_prxai.recommended",
    "capture_graph": "captum_prxai.capture",
    "LLMGraphAttribution": "captum_prxai.llm",
    "CapturedGraph": "captum_prxai.capture",
    "layered_pagerank": "captum_prxai.graph",
    "pagerank": "captum_prxai.graph",
    "AttentionRecorder": "captum_prxai.hooks",
    "attention_layers": "captum_prxai.hooks",
    "sdpa_attention": "captum_prxai.hooks",
}
_SUBMODULES = {
    "attr", "bench", "capture", "corpus", "data", "exceptions", "explorer", "graph", "hooks", "llm", "methods",
    "metrics", "models", "recommended", "viz",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from captum_prxai.attr import (
        AttentionFlow,
        AttentionGraphAttribution,
        AttentionRollout,
        GeneralizedAttentionFlow,
        GradientWeightedRollout,
        PageRankAttribution,
        PRAttention,
        PRAttentionGradient,
        PRGradient,
        PRTemperedAttentionGradient,
        RawAttention,
    )
    from captum_prxai.attr import GraphExplanation
    from captum_prxai.capture import CapturedGraph, capture_graph
    from captum_prxai.exceptions import ConvergenceError, PRXAIError, PRXAIWarning
    from captum_prxai.graph.build import build_graph
    from captum_prxai.graph.scoring import score_graph
    from captum_prxai.graph.spec import GraphSpec
    from captum_prxai.recommended import recommended_spec
    from captum_prxai.graph import layered_pagerank, pagerank
    from captum_prxai.hooks import AttentionRecorder, attention_layers, sdpa_attention
    from captum_prxai.llm import LLMGraphAttribution


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _SUBMODULES)
