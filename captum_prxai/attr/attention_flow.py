"""Attention flow (Abnar & Zuidema, 2020): maximum flow through the layered attention graph."""

from __future__ import annotations

from torch import Tensor

from captum_prxai.attr._base import CapturedGraph
from captum_prxai.attr.rollout import AttentionRollout
from captum_prxai.graph.builders import layered_transitions
from captum_prxai.graph.flow import layered_max_flow

__all__ = ["AttentionFlow"]


class AttentionFlow(AttentionRollout):
    r"""Attention flow (Abnar & Zuidema, 2020).

    Builds the layered graph of attention rollout (head-averaged maps mixed
    with the identity for the residual connection, ``0.5 A + 0.5 I``, rows
    renormalised) and scores each input token by the value of a maximum flow
    from the explained token at the last layer (``[CLS]``, or the last token of
    a decoder) down to that input token. Where rollout multiplies the maps, flow
    is limited by the narrowest layer on each path. Takes the arguments of
    :class:`AttentionRollout` (``residual``: weight of the identity).

    Cost: one forward pass, then one maximum-flow problem per input token on a
    graph of ``(L + 1) T`` nodes and ``L T^2`` edges, solved on the CPU with
    SciPy (Dinic). Affordable for sentences, prohibitive for long documents:
    see ``benchmarks/results/attention_flow_cost.md``.

    References:
        S. Abnar, W. Zuidema. *Quantifying Attention Flow in Transformers.* ACL 2020.
    """

    def _token_scores(self, graph: CapturedGraph) -> Tensor:
        transitions = layered_transitions(graph.maps, self.residual, graph.mask)
        return layered_max_flow(transitions, graph.mask, graph.target_position).to(graph.maps[0].device)
