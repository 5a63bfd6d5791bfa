"""Attention graphs: edge weights, graph builders and batched PageRank."""

from captum_prxai.graph.builders import layered_transitions, propagate, teleport_vector, token_graph
from captum_prxai.graph.flow import layered_max_flow
from captum_prxai.graph.edges import EDGE_WEIGHTS, HEAD_REDUCTIONS, reduce_heads, with_residual
from captum_prxai.graph.pagerank import layered_pagerank, pagerank

__all__ = [
    "EDGE_WEIGHTS",
    "HEAD_REDUCTIONS",
    "layered_max_flow",
    "layered_pagerank",
    "layered_transitions",
    "pagerank",
    "propagate",
    "reduce_heads",
    "teleport_vector",
    "token_graph",
    "with_residual",
]
