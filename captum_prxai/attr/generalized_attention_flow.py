"""Generalized attention flow (Azarkhalili & Libbrecht, 2025): barrier maximum flow through the layered graph."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from captum_prxai.attr._base import CapturedGraph
from captum_prxai.attr.rollout import AttentionRollout
from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.builders import layered_transitions
from captum_prxai.graph.flow import layered_barrier_flow

__all__ = ["GeneralizedAttentionFlow"]

#: Information tensors of the paper: attention (AF), attention gradient (GF), attention x gradient (AGF).
INFORMATION = ("attention", "gradient", "attention_gradient")


class GeneralizedAttentionFlow(AttentionRollout):
    r"""Generalized attention flow (GAF; Azarkhalili & Libbrecht, 2025).

    Builds the layered graph of attention flow from an *information tensor*
    per layer (head-reduced, mixed with the identity for the residual
    connection, ``(1 - r) M + r I``, rows renormalised; the edge from token
    ``j`` at layer ``l`` to token ``i`` at layer ``l + 1`` has capacity
    ``M_l[i, j]``), joins a super source to every input token and the last
    layer to a super sink (every token with ``sink="all"``, the explained token
    with ``sink="target"``), and solves the maximum-flow problem with a
    log-barrier (interior-point) method. Maximum flows are not unique; the
    barrier's limit is, so the scores are well defined: token ``j``'s score is
    the flow leaving the source through it, and the scores sum to the maximum
    flow value (efficiency). Tokens placed alike in the graph get equal scores.

    Args:
        information (str): The capacities: ``"attention_gradient"`` (default;
            AGF, the positive part of attention x its gradient, the paper's
            best variant), ``"attention"`` (AF) or ``"gradient"`` (GF).
        sink (str): ``"all"`` (default) or ``"target"``.
        residual (float): Weight of the identity, as in :class:`AttentionRollout`.
        tol (float): Relative duality gap of the barrier method (``1e-7``).
        Other arguments as in :class:`~captum_prxai.attr.AttentionGraphAttribution`.

    Cost: one forward pass (and one backward pass for the gradient
    variants), then per example a barrier method of some tens to a few hundred
    Newton steps, each a banded Cholesky factorisation of the ``(L + 1) T``
    node Laplacian (bandwidth ``2 T``): ``O(L T^3)`` per step, on the CPU. See
    ``benchmarks/results/generalized_attention_flow_cost.md``.

    References:
        B. Azarkhalili, M. Libbrecht. *Generalized Attention Flow: Feature
        Attribution for Transformer Models via Maximum Flow.* ACL 2025.
    """

    def __init__(self, *args: Any, information: str = "attention_gradient", sink: str = "all",
                 tol: float = 1e-7, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if information not in INFORMATION:
            raise PRXAIError(f"information must be one of {', '.join(INFORMATION)}; got {information!r}.")
        if sink not in ("all", "target"):
            raise PRXAIError(f'sink must be "all" (every output token) or "target" (the explained token), '
                             f"got {sink!r}.")
        if not 0 < float(tol) < 1:
            raise PRXAIError(f"tol must be in (0, 1), got {tol!r}.")
        self.information = information
        self.edge_weight = information
        self.sink = sink
        self.tol = float(tol)

    def _token_scores(self, graph: CapturedGraph) -> Tensor:
        transitions = layered_transitions(graph.maps, self.residual, graph.mask)
        return layered_barrier_flow(transitions, graph.mask, graph.target_position, sink=self.sink,
                                    tol=self.tol).to(graph.maps[0].device)
