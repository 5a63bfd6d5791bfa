"""Graph builders: from per-layer ``(B, T, T)`` edge maps to the graph PageRank runs on.

Two constructions, both with edges from the attending token (row) to the
attended token (column):

* the **token graph** has one node per token; its edge weights are the
  per-layer maps summed over layers (optionally each row-normalised with the
  residual stream as self-edges first);
* the **layered graph** has one node per token per layer, ``L + 1`` layers;
  node ``(l + 1, i)`` links to ``(l, j)`` with the layer-``l`` map, mixed
  with the residual stream (``(l + 1, i) -> (l, i)``). Layer 0 holds the
  input tokens. With attention edges, ``residual = 0.5`` and teleport to the
  target, its scores are attention rollout (Abnar & Zuidema, 2020) up to a
  constant.
"""

from __future__ import annotations

from typing import Optional, Union

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.edges import with_residual

__all__ = ["GRAPHS", "TELEPORTS", "drop_self_loops", "drop_sink_edges", "token_graph", "layered_transitions", "teleport_vector", "propagate"]

GRAPHS = ("token", "layered")
TELEPORTS = ("target", "uniform", "input_gradient")


def token_graph(maps: list[Tensor], residual: float = 0.0, normalize_layers: bool = False) -> Tensor:
    """Sum the per-layer maps into one ``(B, T, T)`` token graph.

    With ``residual > 0`` each layer is row-normalised and mixed with the
    identity (:func:`~captum_prxai.graph.edges.with_residual`) before summing.
    With ``normalize_layers`` each layer's map is scaled to unit total weight
    first, so every layer counts the same whatever the size of its gradients.
    Of one map with neither, the map itself is returned (not a copy).
    """
    if not maps:
        raise PRXAIError("token_graph needs at least one layer's map.")
    if residual > 0:
        maps = [with_residual(m, residual) for m in maps]
    total: Optional[Tensor] = None
    for m in maps:
        if normalize_layers:
            mass = m.sum((-1, -2), keepdim=True)
            m = m / torch.where(mass == 0, torch.ones_like(mass), mass)
        total = m if total is None else total + m  # never in place: one map may be the caller's own
    return total


def drop_sink_edges(maps: list[Tensor], mask: Tensor) -> list[Tensor]:
    """Remove the edges into each example's first real token (the *attention sink* of decoders).

    Causal language models park a large share of their attention on the first
    position whatever it holds (Xiao et al., 2024, "Efficient Streaming
    Language Models with Attention Sinks"). Left in, that node soaks up most
    of the PageRank mass; without its in-edges, each row is renormalised over
    the tokens that carry content. The first token then scores only what it
    receives by teleport.
    """
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    first = torch.where(mask, positions, torch.full_like(positions, mask.shape[1])).amin(-1)
    keep = (positions != first[:, None]).to(maps[0].dtype)
    return [m * keep[:, None, :] for m in maps]


def drop_self_loops(maps: list[Tensor]) -> list[Tensor]:
    """Remove each token's attention to itself from the token graph.

    In a causal graph every walk runs towards the start of the text, and a
    node whose only remaining out-edge is its self-loop (the token right after
    a removed sink, or the first token itself) traps the walker until it
    teleports, collecting mass it does not deserve. Without self-loops such a
    node is dangling and hands its mass back through the teleport vector.
    """
    eye = torch.eye(maps[0].shape[-1], dtype=maps[0].dtype, device=maps[0].device)
    return [m * (1 - eye) for m in maps]


def layered_transitions(maps: list[Tensor], residual: float, mask: Tensor) -> list[Tensor]:
    """Per-layer transitions of the layered graph, padding rows and columns zeroed."""
    valid = mask.to(maps[0].dtype)
    keep = valid[:, :, None] * valid[:, None, :]
    return [with_residual(m, residual) * keep for m in maps]


def teleport_vector(
    teleport: Union[str, Tensor],
    mask: Tensor,
    target_position: Tensor,
    dtype: torch.dtype,
    input_gradient: Optional[Tensor] = None,
) -> Tensor:
    """The ``(B, T)`` teleport (personalisation) distribution over tokens.

    Args:
        teleport: ``"target"`` (all mass on the explained token, e.g. ``[CLS]``),
            ``"uniform"`` (over real tokens), ``"input_gradient"`` (the positive
            part of gradient x input at the first layer's input, a one-pass
            saliency signal; examples where it is all zero teleport to the
            target), or a ``(B, T)`` / ``(T,)`` tensor of non-negative weights.
        mask: ``(B, T)`` real-token mask.
        target_position: ``(B,)`` index of the explained token.
        input_gradient: ``(B, T)`` gradient x input, needed for ``"input_gradient"``.
    """
    if isinstance(teleport, str) and teleport == "input_gradient":
        if input_gradient is None:
            raise PRXAIError("teleport='input_gradient' needs the gradient x input of the first layer's input.")
        vector = input_gradient.to(dtype).clamp(min=0) * mask
        empty = vector.sum(-1) <= 0
        if empty.any():
            fallback = teleport_vector("target", mask, target_position, dtype)
            vector = torch.where(empty[:, None], fallback, vector)
        return vector
    batch, length = mask.shape
    if isinstance(teleport, Tensor):
        vector = teleport.to(device=mask.device, dtype=dtype)
        if vector.dim() == 1:
            vector = vector.expand(batch, -1)
        if vector.shape != (batch, length):
            raise PRXAIError(f"A teleport tensor must have shape ({length},) or ({batch}, {length}), got {tuple(vector.shape)}.")
        if (vector < 0).any() or not torch.isfinite(vector).all():
            raise PRXAIError("A teleport tensor must hold finite, non-negative weights.")
        vector = vector * mask
        if (vector.sum(-1) <= 0).any():
            raise PRXAIError("The teleport tensor puts no weight on any real token of some example.")
        return vector
    if teleport == "uniform":
        return mask.to(dtype)
    if teleport == "target":
        vector = torch.zeros(batch, length, dtype=dtype, device=mask.device)
        vector[torch.arange(batch, device=mask.device), target_position] = 1.0
        return vector
    raise PRXAIError(f"Unknown teleport {teleport!r}; choose one of {list(TELEPORTS)} or pass a (B, T) tensor.")


def propagate(start: Tensor, transitions: list[Tensor], accumulate: bool = False) -> Tensor:
    """Push a ``(B, T)`` relevance vector from the top layer down through the layers.

    Computes ``start @ M_L @ ... @ M_1`` for ``M_l = transitions[l - 1]``
    without forming the matrix product, or ``start @ (I + M_L) ... (I + M_1)``
    when ``accumulate`` is set (the update ``R <- R + M R`` of Chefer et al.,
    2021). Costs ``L`` batched vector-matrix products.
    """
    vector = start
    for transition in reversed(transitions):
        step = torch.bmm(vector.unsqueeze(1), transition).squeeze(1)
        vector = vector + step if accumulate else step
    return vector
