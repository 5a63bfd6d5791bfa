"""Attention-graph baselines: raw attention, attention rollout and gradient-weighted rollout."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from captum_prxai.attr._base import AttentionGraphAttribution, CapturedGraph
from captum_prxai.graph.builders import propagate, teleport_vector
from captum_prxai.graph.edges import with_residual

__all__ = ["RawAttention", "AttentionRollout", "GradientWeightedRollout"]

class _RowOfTarget(AttentionGraphAttribution):
    """Baselines that read the explained token's row of a relevance matrix."""

    def _start(self, graph: CapturedGraph) -> Tensor:
        return teleport_vector("target", graph.mask, graph.target_position, graph.maps[0].dtype)


class RawAttention(_RowOfTarget):
    r"""The last layer's head-averaged attention from the explained token.

    A common, cheap baseline: the row of the final layer's attention map
    belonging to ``[CLS]`` (encoders) or the last token (decoders).
    """

    edge_weight = "attention"

    def _token_scores(self, graph: CapturedGraph) -> Tensor:
        start = self._start(graph)
        return torch.bmm(start.unsqueeze(1), graph.maps[-1]).squeeze(1)


class AttentionRollout(_RowOfTarget):
    r"""Attention rollout (Abnar & Zuidema, 2020).

    Multiplies the head-averaged attention maps, each mixed with the identity
    for the residual connection (``0.5 A + 0.5 I``, rows renormalised), from
    the last layer down, and reads the explained token's row.

    References:
        S. Abnar, W. Zuidema. *Quantifying Attention Flow in Transformers.* ACL 2020.
    """

    edge_weight = "attention"

    def __init__(self, *args: Any, residual: float = 0.5, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.residual = residual

    def _token_scores(self, graph: CapturedGraph) -> Tensor:
        transitions = [with_residual(m, self.residual) for m in graph.maps]
        return propagate(self._start(graph), transitions)


class GradientWeightedRollout(_RowOfTarget):
    r"""Gradient-weighted attention rollout, the generic attention explainability of Chefer et al. (2021).

    Per layer ``Ā = mean_heads((dA ⊙ A)⁺)``; relevance accumulates as
    ``R ← R + Ā R`` from ``R = I``; the scores are the explained token's row of
    ``R``. One forward and one backward pass.

    References:
        H. Chefer, S. Gur, L. Wolf. *Generic Attention-model Explainability for
        Interpreting Bi-Modal and Encoder-Decoder Transformers.* ICCV 2021.
    """

    edge_weight = "attention_gradient"

    def _token_scores(self, graph: CapturedGraph) -> Tensor:
        return propagate(self._start(graph), graph.maps, accumulate=True)
