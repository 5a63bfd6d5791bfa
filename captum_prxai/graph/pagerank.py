"""Batched, differentiable PageRank with :func:`networkx.pagerank` semantics.

The power iteration never builds a second ``(B, N, N)`` matrix: the
row-normalised transition ``P = D^-1 A`` is applied as ``(x / d) A`` (the
out-weights ``d`` divide the vector, not the matrix), and a node mask is
applied to the vectors (``v * ((x * v) A)``, out-weights ``v * (A v)``)
instead of to a masked copy of ``A``. Each iteration reads ``A`` once.
Convergence is decided on the device every iteration (each graph of the
batch stops changing once it has converged, exactly as if it were alone);
only the "are all graphs done?" question needs the host, and it is asked
every ``check_every`` iterations (every iteration on CPU, where it costs
nothing; every :data:`CHECK_EVERY` on accelerators, where each question is a
device synchronisation). A graph that converged keeps its value, so the
extra iterations change no result.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from captum_prxai._checks import value_range
from captum_prxai.exceptions import ConvergenceError, PRXAIError

__all__ = ["CHECK_EVERY", "pagerank", "layered_pagerank"]

#: Iterations between two host-side convergence checks on accelerators (each check is one device sync).
CHECK_EVERY = 8


def _check_weights(adjacency: Tensor, name: str = "adjacency") -> None:
    """Finite and non-negative, in one pass over the weights and one host sync (``aminmax`` propagates NaN)."""
    if not torch.is_floating_point(adjacency):
        raise PRXAIError(f"{name} must be a floating-point tensor, got dtype {adjacency.dtype}.")
    if adjacency.numel() == 0:
        return
    low, high = value_range(adjacency)
    if not (math.isfinite(low) and math.isfinite(high)):
        raise PRXAIError(f"{name} contains NaN or infinite weights; PageRank needs finite, non-negative weights.")
    if low < 0:
        raise PRXAIError(
            f"{name} contains negative weights (min {low:.3g}); PageRank needs non-negative "
            "weights. Clamp them (x.clamp(min=0)) or take absolute values first."
        )


def _distribution(
    vector: Optional[Tensor], node_mask: Tensor, name: str, batch: int, nodes: int, like: Tensor
) -> Tensor:
    """Normalise an optional (B, N) or (N,) weight vector to a distribution over the valid nodes."""
    if vector is None:
        vector = node_mask.to(like.dtype)
    else:
        vector = torch.as_tensor(vector, dtype=like.dtype, device=like.device)
        if vector.dim() == 1:
            vector = vector.expand(batch, -1)
        if vector.shape != (batch, nodes):
            raise PRXAIError(f"{name} must have shape ({nodes},) or ({batch}, {nodes}), got {tuple(vector.shape)}.")
        if not torch.isfinite(vector).all() or (vector < 0).any():
            raise PRXAIError(f"{name} must hold finite, non-negative weights.")
        vector = vector * node_mask.to(like.dtype)
    total = vector.sum(-1, keepdim=True)
    if (total <= 0).any():
        raise PRXAIError(f"{name} has no positive weight on a valid node for some graph of the batch.")
    return vector / total


def pagerank(
    adjacency: Tensor,
    damping: float = 0.85,
    personalization: Optional[Tensor] = None,
    dangling: Optional[Tensor] = None,
    tol: float = 1e-6,
    max_iter: int = 100,
    node_mask: Optional[Tensor] = None,
    nstart: Optional[Tensor] = None,
    check_every: Optional[int] = None,
) -> Tensor:
    r"""PageRank of a batch of weighted directed graphs, by power iteration.

    The semantics are those of :func:`networkx.pagerank` [Page et al. 1999;
    Hagberg et al. 2008], applied to each graph of the batch independently:
    row ``i`` of ``adjacency`` lists the weighted out-edges of node ``i``
    and is normalised to sum to one; the mass of *dangling* nodes (rows that
    sum to zero) is redistributed by the ``dangling`` vector (default: the
    personalization vector); with probability ``1 - damping`` the walk
    teleports according to ``personalization`` (default: uniform). Each graph
    stops iterating once its L1 change falls below ``N * tol``, so a graph
    gets the same scores alone as inside a batch.

    Args:
        adjacency (Tensor): Non-negative edge weights of shape ``(B, N, N)``
            (or ``(N, N)`` for a single graph). ``adjacency[b, i, j]`` is the
            weight of the edge ``i -> j``.
        damping (float, optional): The damping factor ``alpha`` in ``[0, 1)``.
            Default: 0.85.
        personalization (Tensor, optional): Teleport weights, shape ``(N,)``
            or ``(B, N)``; normalised to sum to one. Default: uniform over
            the valid nodes.
        dangling (Tensor, optional): Where dangling nodes send their mass,
            shape ``(N,)`` or ``(B, N)``. Default: ``personalization``.
        tol (float, optional): Convergence tolerance; iteration stops when
            ``sum(|x_new - x|) < N * tol`` (as in networkx). Default: 1e-6.
        max_iter (int, optional): Maximum number of iterations. Default: 100.
        node_mask (Tensor, optional): Boolean ``(B, N)``; ``False`` marks nodes
            that are not part of the graph (padding). They get exactly zero,
            and ``N`` counts the valid nodes only. Default: all valid.
        nstart (Tensor, optional): Starting scores ``(B, N)``, a warm start
            (normalised). Default: uniform.
        check_every (int, optional): Iterations between two host-side checks
            of whether every graph has converged. The per-graph stopping rule
            is applied on the device at every iteration, so this changes no
            result, only how often the host waits for the device. Default: 1
            on CPU, :data:`CHECK_EVERY` (8) on other devices.

    Returns:
        Tensor: PageRank scores of shape ``(B, N)`` (or ``(N,)``), each row
        summing to one over the valid nodes. The result is differentiable
        with respect to ``adjacency`` and the vectors, and keeps their dtype
        and device (use at least fp32: in fp16/bf16 the L1 change of the
        iteration cannot fall below ``N * tol`` for the default tolerance).

    Raises:
        PRXAIError: Bad shapes, negative or non-finite weights, bad damping.
        ConvergenceError: Some graph did not converge within ``max_iter``
            iterations; the message reports the error reached.

    References:
        L. Page, S. Brin, R. Motwani, T. Winograd. *The PageRank citation
        ranking: Bringing order to the web.* Stanford InfoLab, 1999.
        A. Hagberg, D. Schult, P. Swart. *Exploring network structure,
        dynamics, and function using NetworkX.* SciPy 2008.
    """
    single = adjacency.dim() == 2
    if single:
        adjacency = adjacency.unsqueeze(0)
        personalization = None if personalization is None else torch.as_tensor(personalization).reshape(1, -1)
        dangling = None if dangling is None else torch.as_tensor(dangling).reshape(1, -1)
        node_mask = None if node_mask is None else torch.as_tensor(node_mask).reshape(1, -1)
        nstart = None if nstart is None else torch.as_tensor(nstart).reshape(1, -1)
    if adjacency.dim() != 3 or adjacency.shape[-1] != adjacency.shape[-2]:
        raise PRXAIError(f"adjacency must have shape (B, N, N) or (N, N), got {tuple(adjacency.shape)}.")
    batch, nodes = adjacency.shape[0], adjacency.shape[-1]
    if nodes == 0 or batch == 0:
        raise PRXAIError(f"adjacency is empty (shape {tuple(adjacency.shape)}); PageRank needs at least one node.")
    if not 0.0 <= float(damping) < 1.0:
        raise PRXAIError(f"damping must be in [0, 1), got {damping}.")
    if max_iter < 1:
        raise PRXAIError(f"max_iter must be at least 1, got {max_iter}.")
    if check_every is None:
        check_every = 1 if adjacency.device.type == "cpu" else CHECK_EVERY
    if isinstance(check_every, bool) or not isinstance(check_every, int) or check_every < 1:
        raise PRXAIError(f"check_every must be a positive int, got {check_every!r}.")
    _check_weights(adjacency)

    valid: Optional[Tensor] = None
    if node_mask is None:
        node_mask = torch.ones(batch, nodes, dtype=torch.bool, device=adjacency.device)
    else:
        node_mask = torch.as_tensor(node_mask, device=adjacency.device).bool()
        if node_mask.shape != (batch, nodes):
            raise PRXAIError(f"node_mask must have shape ({batch}, {nodes}), got {tuple(node_mask.shape)}.")
        if not bool(node_mask.all()):
            valid = node_mask.to(adjacency.dtype)

    p = _distribution(personalization, node_mask, "personalization", batch, nodes, adjacency)
    d = p if dangling is None else _distribution(dangling, node_mask, "dangling", batch, nodes, adjacency)
    x = _distribution(nstart, node_mask, "nstart", batch, nodes, adjacency)

    # out-weights of the masked graph diag(v) A diag(v), without building it: v * (A v)
    if valid is None:
        out_weight = adjacency.sum(-1)
    else:
        out_weight = torch.bmm(adjacency, valid.unsqueeze(-1)).squeeze(-1) * valid
    is_dangling = (out_weight == 0) & node_mask
    inverse = 1.0 / torch.where(out_weight == 0, torch.ones_like(out_weight), out_weight)
    threshold = node_mask.sum(-1).to(adjacency.dtype) * tol
    active = torch.ones(batch, dtype=torch.bool, device=adjacency.device)
    err = torch.full((batch,), float("inf"), dtype=adjacency.dtype, device=adjacency.device)
    for step in range(max_iter):
        dangling_mass = (x * is_dangling).sum(-1, keepdim=True)
        # x P = (x / d) A: the row normalisation divides the vector (x is zero on masked nodes)
        flow = torch.bmm((x * inverse).unsqueeze(1), adjacency).squeeze(1)
        if valid is not None:
            flow = flow * valid
        x_new = damping * (flow + dangling_mass * d) + (1 - damping) * p
        step_err = (x_new - x).abs().sum(-1).detach()
        x = torch.where(active.unsqueeze(-1), x_new, x)
        err = torch.where(active, step_err, err)
        active = active & ~(step_err < threshold)
        if (step + 1) % check_every == 0 or step + 1 == max_iter:
            if not bool(active.any()):
                return x.squeeze(0) if single else x
    worst = int(torch.argmax(err / threshold))
    raise ConvergenceError(
        f"PageRank did not converge in {max_iter} iterations: graph {worst} reached an L1 change of "
        f"{err[worst].item():.3g}, above the tolerance N*tol = {threshold[worst].item():.3g}. "
        "Raise max_iter or tol, or lower damping."
    )


def layered_pagerank(
    transitions: list[Tensor],
    damping: float = 0.85,
    personalization: Optional[Tensor] = None,
) -> Tensor:
    r"""Exact PageRank of a *layered* graph, in one sweep instead of iterations.

    The graph has ``L + 1`` layers of ``T`` nodes; edges only go from layer
    ``l + 1`` down to layer ``l``, with weights ``transitions[l]`` of shape
    ``(B, T, T)`` (row ``i`` = out-edges of node ``(l+1, i)``). Layer 0 has
    no out-edges, so its nodes are dangling; as in :func:`pagerank`, dangling
    mass teleports by ``personalization``. Because the graph is acyclic, the
    stationary distribution satisfies ``x_l = c * p_l + damping * x_{l+1} W_l``
    for a constant ``c`` fixed by normalisation, which one top-down sweep
    computes exactly. The result equals :func:`pagerank` on the full
    ``((L+1) T)``-node graph, at the cost of ``L`` batched matrix-vector
    products and without building that graph.

    Args:
        transitions (list of Tensor): ``L`` non-negative ``(B, T, T)`` weight
            tensors, ``transitions[l]`` linking layer ``l + 1`` to layer ``l``.
        damping (float, optional): Damping factor in ``[0, 1)``. Default: 0.85.
        personalization (Tensor, optional): Teleport weights of shape
            ``(B, L + 1, T)``. Default: uniform over all nodes.

    Returns:
        Tensor: Scores of shape ``(B, L + 1, T)`` summing to one per graph.
        Layer 0 holds the input tokens.
    """
    if not transitions:
        raise PRXAIError("layered_pagerank needs at least one layer of transitions.")
    if not 0.0 <= float(damping) < 1.0:
        raise PRXAIError(f"damping must be in [0, 1), got {damping}.")
    for w in transitions:
        _check_weights(w, "transitions")
    ref = transitions[0]
    batch, tokens = ref.shape[0], ref.shape[-1]
    layers = len(transitions)
    if personalization is None:
        personalization = torch.ones(batch, layers + 1, tokens, dtype=ref.dtype, device=ref.device)
    if personalization.shape != (batch, layers + 1, tokens):
        raise PRXAIError(
            f"personalization must have shape ({batch}, {layers + 1}, {tokens}), got {tuple(personalization.shape)}."
        )
    p = personalization / personalization.sum((-1, -2), keepdim=True)
    scores = [p[:, layers]]
    for level in range(layers - 1, -1, -1):
        weights = transitions[level]
        rows = weights.sum(-1)
        inverse = 1.0 / torch.where(rows == 0, torch.ones_like(rows), rows)
        flow = torch.bmm((scores[-1] * inverse).unsqueeze(1), weights).squeeze(1)  # x D^-1 W, no copy of W
        scores.append(p[:, level] + damping * flow)
    stacked = torch.stack(scores[::-1], dim=1)
    return stacked / stacked.sum((-1, -2), keepdim=True)
