"""captum-prxai: PR-XAI, PageRank-based feature attribution for transformers, as a Captum plugin.

The flow: capture attention (:mod:`captum_prxai.hooks`) -> build the graph
(:mod:`captum_prxai.graph`) -> PageRank (:func:`pagerank`) -> token scores
(:mod:`captum_prxai.attr`).
"""

from captum_prxai.attr import (
    AttentionGraphAttribution,
    AttentionRollout,
    GradientWeightedRollout,
    PageRankAttribution,
    PRAttention,
    PRAttentionGradient,
    PRGradient,
    RawAttention,
)
from captum_prxai.exceptions import ConvergenceError, PRXAIError
from captum_prxai.graph import layered_pagerank, pagerank
from captum_prxai.hooks import AttentionRecorder, attention_layers, sdpa_attention

__version__ = "0.1.0"

__all__ = [
    "AttentionGraphAttribution",
    "AttentionRecorder",
    "AttentionRollout",
    "ConvergenceError",
    "GradientWeightedRollout",
    "PRAttention",
    "PRAttentionGradient",
    "PRGradient",
    "PRXAIError",
    "PageRankAttribution",
    "RawAttention",
    "attention_layers",
    "layered_pagerank",
    "pagerank",
    "sdpa_attention",
]
