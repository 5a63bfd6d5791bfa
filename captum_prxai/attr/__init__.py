"""Captum ``Attribution`` subclasses built on attention graphs."""

from captum_prxai.attr._base import AttentionGraphAttribution
from captum_prxai.attr.attention_flow import AttentionFlow
from captum_prxai.attr.generalized_attention_flow import GeneralizedAttentionFlow
from captum_prxai.attr.pagerank_attribution import (
    GraphExplanation,
    PageRankAttribution,
    PRAttention,
    PRAttentionGradient,
    PRGradient,
    PRTemperedAttentionGradient,
)
from captum_prxai.attr.rollout import AttentionRollout, GradientWeightedRollout, RawAttention

__all__ = [
    "AttentionFlow",
    "AttentionGraphAttribution",
    "AttentionRollout",
    "GeneralizedAttentionFlow",
    "GradientWeightedRollout",
    "GraphExplanation",
    "PageRankAttribution",
    "PRAttention",
    "PRAttentionGradient",
    "PRGradient",
    "PRTemperedAttentionGradient",
    "RawAttention",
]
