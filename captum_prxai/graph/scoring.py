r"""Step 3 of the flow: a built graph -> token scores (:func:`score_graph`), as a sequence of named steps.

For the token graph, with ``x⁺`` and ``x⁻`` the personalised PageRank of the positive and negative walks and
``g⁺``, ``g⁻`` the same graphs' global PageRank::

    x = walk_ranks(spec, built)                          # 1. personalised PageRank of each walk
    s = hub_weighted(x, global_ranks(spec, built), p)    # 2. x ⊙ g^p, renormalised        (spec.hub_power)
    s = s⁺ − λ s⁻                                        # 3. λ per example: walk_weights   (negative_weight,
                                                         #    0 where the walks agree: walk_gate)
    s = apply_sign(spec, s, R)                           # 4. sign of R                     (signed, one walk)
    s = relevance_weighted(spec, s, R, mask)             # 5. s ⊙ (1 + w R / max|R|)        (relevance_weight)

``R`` is the gradient x input at the first attention layer from the same backward pass. Every step is the
identity at its option's neutral value, so :class:`~captum_prxai.graph.spec.GraphSpec`'s defaults give the
paper's method: one walk's personalised PageRank. The layered graph is solved exactly in one sweep instead of
steps 1-3 (:func:`layered_scores`).

References:
    B. Azarkhalili, L. Li, M. W. Libbrecht. *PR-XAI: PageRank-Based Feature Attribution for Transformers.*
    ACL 2026.
    L. Page, S. Brin, R. Motwani, T. Winograd. *The PageRank citation ranking.* 1999.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.build import BuiltGraph
from captum_prxai.graph.pagerank import layered_pagerank, pagerank
from captum_prxai.graph.spec import GraphSpec

__all__ = [
    "apply_sign",
    "global_ranks",
    "hub_weighted",
    "layered_scores",
    "relevance_weighted",
    "score_graph",
    "walk_correlation",
    "walk_ranks",
    "walk_weights",
]


def score_graph(spec: GraphSpec, built: BuiltGraph) -> Tensor:
    """``(B, T)`` token scores of a built graph: the steps of this module in order, zero on padding.

    One walk: non-negative, summing to one (unless ``signed`` or a ``relevance_weight``). Two walks
    (``walks="both"``): ``s⁺ − λ s⁻``, signed, summing to ``1 − λ`` before the relevance weight.
    """
    if built.kind == "layered":
        scores = layered_scores(spec, built)
    else:
        ranks = walk_ranks(spec, built)
        walks = ranks
        if spec.hub_power:
            walks = [hub_weighted(x, g, spec.hub_power, built.mask) for x, g in zip(ranks, global_ranks(spec, built))]
        scores = walks[0]
        if len(walks) == 2:
            weights = walk_weights(spec, built, ranks[0], ranks[1]).to(scores.dtype)
            scores = walks[0] - weights[:, None] * walks[1]
    scores = apply_sign(spec, scores, built.input_gradient)
    return relevance_weighted(spec, scores, built.input_gradient, built.mask)


def _solve(spec: GraphSpec, built: BuiltGraph, teleport: Optional[Tensor]) -> list[Tensor]:
    """PageRank of each walk's graph (the positive one, then the negative one), in one batched call."""
    assert built.adjacency is not None
    walks = 1 if built.negative is None else 2
    graphs = built.adjacency if walks == 1 else torch.cat([built.adjacency, built.negative])
    personalization = None if teleport is None else teleport.repeat(walks, 1)
    ranks = pagerank(graphs, spec.damping, personalization=personalization, node_mask=built.mask.repeat(walks, 1),
                     tol=spec.tol, max_iter=spec.max_iter)
    return list(ranks.chunk(walks))


def walk_ranks(spec: GraphSpec, built: BuiltGraph) -> list[Tensor]:
    """Step 1: each walk's personalised PageRank ``(B, T)``, teleporting to ``built.teleport``; summing to one.

    ``[x⁺]`` for one walk, ``[x⁺, x⁻]`` with the negative walk (``walks="both"``), solved in one batched call.
    """
    return _solve(spec, built, built.teleport)


def global_ranks(spec: GraphSpec, built: BuiltGraph) -> list[Tensor]:
    """Each walk's global PageRank ``g`` (a uniform teleport over the real tokens), the hubs of step 2."""
    return _solve(spec, built, None)


def hub_weighted(ranks: Tensor, global_ranks: Tensor, power: float, mask: Tensor) -> Tensor:
    r"""Step 2: ``(B, T)`` a walk's PageRank weighted by its graph's hubs, ``x ⊙ g^p``, zero outside ``mask``,
    renormalised to sum to one over each row (``power = 0`` gives ``ranks`` back, renormalised).

    Raises the tokens the whole graph routes its traffic to: the reverse of the relative PageRank ``x / g`` of
    Andersen, Chung and Lang (2006).

    References:
        R. Andersen, F. Chung, K. Lang. *Local graph partitioning using PageRank vectors.* FOCS 2006.
    """
    weighted = ranks * global_ranks.clamp_min(1e-30).pow(power) * mask.to(ranks.dtype)
    return weighted / weighted.sum(-1, keepdim=True)


def walk_correlation(positive: Tensor, negative: Tensor, ordinary: Tensor) -> Tensor:
    """``(B,)`` Pearson correlation of two walks' scores ``(B, T)`` over each example's ``ordinary`` tokens.

    ``ordinary`` ``(B, T)`` marks the tokens compared (:func:`walk_weights` passes the real tokens other than the
    explained one, whose teleport mass both walks share). An example where either walk is constant on them gets
    0. High when the negative walk ranks the same tokens as the positive one (it then mostly retraces the graph's
    traffic), low or negative when it singles out other tokens. Computed in float64.
    """
    weight = ordinary.to(torch.float64)
    count = weight.sum(-1, keepdim=True).clamp_min(1.0)
    centred = []
    for walk in (positive, negative):
        walk = walk.to(torch.float64) * weight
        centred.append((walk - walk.sum(-1, keepdim=True) / count) * weight)
    p, n = centred
    scale = p.norm(dim=-1) * n.norm(dim=-1)
    return torch.where(scale > 0, (p * n).sum(-1) / scale.clamp_min(1e-300), torch.zeros_like(scale))


def walk_weights(spec: GraphSpec, built: BuiltGraph, positive: Tensor, negative: Tensor) -> Tensor:
    """Step 3: ``(B,)`` float64, the weight ``λ`` of each example's negative walk: ``spec.negative_weight``, or 0
    where the gate keeps the positive walk alone (:func:`walk_correlation` of the walks' PageRank ``positive``
    and ``negative`` ``(B, T)`` over the real tokens other than the explained one, above ``spec.walk_gate``)."""
    weights = torch.full((positive.shape[0],), spec.negative_weight, dtype=torch.float64, device=positive.device)
    if spec.walk_gate is None:
        return weights
    ordinary = built.mask.bool().clone()
    if built.target_position is not None:
        ordinary[torch.arange(ordinary.shape[0], device=ordinary.device), built.target_position] = False
    agree = walk_correlation(positive, negative, ordinary) > spec.walk_gate
    return torch.where(agree, torch.zeros_like(weights), weights)


def apply_sign(spec: GraphSpec, scores: Tensor, input_gradient: Optional[Tensor]) -> Tensor:
    """Step 4: with ``spec.signed``, each score takes the sign of its token's gradient x input; else unchanged."""
    if not spec.signed:
        return scores
    if input_gradient is None:
        raise PRXAIError("signed=True needs gradients; the attention maps were captured without a backward pass.")
    return torch.where(input_gradient < 0, -scores, scores)


def relevance_weighted(spec: GraphSpec, scores: Tensor, input_gradient: Optional[Tensor], mask: Tensor) -> Tensor:
    """Step 5: ``scores ⊙ (1 + w · R / max|R|)`` per example, ``w = spec.relevance_weight`` and ``R`` the gradient x
    input ``(B, T)`` at the first attention layer (zero on padding); ``scores`` unchanged when ``w`` is 0.

    With ``propagation="conservative"`` (:mod:`captum_prxai.conservative`) ``R`` is CP-LRP's relevance of each
    token (Ali et al., ICML 2022): the walk says how much of the explained token's attention flow reaches a token,
    ``R`` how much the token's own embedding contributes, and the product ranks first the tokens both credit.
    """
    if not spec.relevance_weight:
        return scores
    if input_gradient is None:
        raise PRXAIError("relevance_weight needs the gradient x input of the same pass; the capture returned none.")
    relevance = input_gradient.to(scores.dtype) * mask.to(scores.dtype)
    largest = relevance.abs().amax(-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
    return scores * (1 + spec.relevance_weight * relevance / largest)


def layered_scores(spec: GraphSpec, built: BuiltGraph) -> Tensor:
    """The layered graph's scores: PageRank of its input-layer nodes, teleporting to the top layer, renormalised
    to sum to one (solved exactly in one sweep, :func:`~captum_prxai.graph.pagerank.layered_pagerank`)."""
    assert built.transitions is not None
    layers = len(built.transitions)
    teleport = built.teleport
    personalization = torch.zeros(teleport.shape[0], layers + 1, teleport.shape[1], dtype=teleport.dtype,
                                  device=teleport.device)
    personalization[:, layers] = teleport
    scores = layered_pagerank(built.transitions, spec.damping, personalization)[:, 0]
    return scores / scores.sum(-1, keepdim=True)
