"""Attention graphs, in the order of the flow.

* :mod:`~captum_prxai.graph.spec`: :class:`GraphSpec`, every option of a PR-XAI graph (the algorithm);
* :mod:`~captum_prxai.graph.edges`: the per-head edge weights ``W(A, dA)`` and the head reduction;
* :mod:`~captum_prxai.graph.build`: a captured pass -> the graph PageRank runs on (:func:`build_graph`);
* :mod:`~captum_prxai.graph.scoring`: the graph -> token scores, as named steps (:func:`score_graph`);
* :mod:`~captum_prxai.graph.pagerank`: batched, differentiable PageRank; :mod:`~captum_prxai.graph.windows`:
  long texts; :mod:`~captum_prxai.graph.flow`: max-flow for the attention-flow baseline.

The measured recipe for a model lives apart, in :func:`captum_prxai.recommended_spec`.
"""

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
