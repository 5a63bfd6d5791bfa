"""Edge weights of the attention graph: from attention ``A``, its gradient ``dA``, or both.

Each edge weight maps per-head tensors ``(B, H, T, T)`` to non-negative
per-head weights; :func:`reduce_heads` then collapses the head axis. Row
``i`` of a map holds the edges from the attending token ``i`` (query) to the
attended tokens ``j`` (keys).
"""

from __future__ import annotations

from typing import Callable, Optional, Union

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError

__all__ = [
    "EDGE_WEIGHTS",
    "HEAD_REDUCTIONS",
    "edge_weight_fn",
    "reduce_heads",
    "tempered_attention_gradient",
    "with_residual",
]

#: ``(A, dA) -> weights``; ``dA`` is ``None`` for attention-only edges.
EdgeWeight = Callable[[Tensor, Optional[Tensor]], Tensor]


def _attention(attention: Tensor, grad: Optional[Tensor]) -> Tensor:
    return attention


def _gradient(attention: Tensor, grad: Optional[Tensor]) -> Tensor:
    assert grad is not None
    return grad.clamp(min=0)


def _attention_gradient(attention: Tensor, grad: Optional[Tensor]) -> Tensor:
    assert grad is not None
    return (attention * grad).clamp_(min=0)


def _gradient_abs(attention: Tensor, grad: Optional[Tensor]) -> Tensor:
    assert grad is not None
    return grad.abs()


def _attention_gradient_abs(attention: Tensor, grad: Optional[Tensor]) -> Tensor:
    assert grad is not None
    return (attention * grad).abs_()


def tempered_attention_gradient(power: float = 0.5) -> EdgeWeight:
    r"""``(A^γ ⊙ dA)⁺`` with ``γ = power``: attention tempered by a power, times its gradient.

    One family between PR-G (``γ = 0``: ``dA⁺``) and PR-AG (``γ = 1``:
    ``(A ⊙ dA)⁺``). A small power keeps the gradient's sign and size where
    the attention is weak but not zero, while still discounting edges the
    model barely attends to. ``γ = 0.5`` was chosen by the worst-case rule
    of docs/research/default_search.md (over six cells, two encoders and a decoder).
    """
    if isinstance(power, bool) or not isinstance(power, (int, float)) or not 0.0 <= float(power) <= 2.0:
        raise PRXAIError(f"attention_power must be a number in [0, 2], got {power!r}.")
    power = float(power)

    def edge(attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        assert grad is not None
        if power == 0.0:  # A^0 = 1 everywhere (torch.pow(0, 0) = 1)
            return grad.clamp(min=0)
        if power == 1.0:
            return (attention * grad).clamp_(min=0)
        # one new tensor, then in place; sqrt is several times cheaper than pow on CPU
        tempered = attention.sqrt() if power == 0.5 else attention.pow(power)
        return tempered.mul_(grad).clamp_(min=0)

    edge.__qualname__ = f"tempered_attention_gradient({power:g})"
    return edge


#: Built-in edge weights. ``gradient`` and ``attention_gradient`` keep the positive
#: part per head, as in Chefer et al. (2021): an edge that lowers the target is no path
#: for relevance.
EDGE_WEIGHTS: dict[str, EdgeWeight] = {
    "attention": _attention,
    "gradient": _gradient,
    "attention_gradient": _attention_gradient,
    "gradient_abs": _gradient_abs,
    "attention_gradient_abs": _attention_gradient_abs,
    "tempered_attention_gradient": tempered_attention_gradient(0.5),
}

#: Head reductions: ``(B, H, T, T) -> (B, T, T)``.
HEAD_REDUCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "mean": lambda w: w.mean(dim=1),
    "sum": lambda w: w.sum(dim=1),
    "max": lambda w: w.amax(dim=1),
}


def edge_weight_fn(edge_weight: Union[str, EdgeWeight], attention_power: Optional[float] = None) -> EdgeWeight:
    """Resolve an edge-weight name (or pass a callable through).

    ``attention_power`` is the ``γ`` of ``"tempered_attention_gradient"``
    (default 0.5); other edge weights take none.
    """
    if callable(edge_weight):
        return edge_weight
    if edge_weight not in EDGE_WEIGHTS:
        raise PRXAIError(f"Unknown edge_weight {edge_weight!r}; choose one of {sorted(EDGE_WEIGHTS)} or pass a callable.")
    if edge_weight == "tempered_attention_gradient" and attention_power is not None:
        return tempered_attention_gradient(attention_power)
    return EDGE_WEIGHTS[edge_weight]


def reduce_heads(weights: Tensor, head_reduction: str = "mean") -> Tensor:
    """Collapse the head axis of ``(B, H, T, T)`` weights."""
    if head_reduction not in HEAD_REDUCTIONS:
        raise PRXAIError(f"Unknown head_reduction {head_reduction!r}; choose one of {sorted(HEAD_REDUCTIONS)}.")
    return HEAD_REDUCTIONS[head_reduction](weights)


def with_residual(edges: Tensor, residual: float) -> Tensor:
    """Row-normalise ``(B, T, T)`` edges and mix in the residual stream as self-edges.

    Returns ``(1 - residual) * rownorm(edges) + residual * I``; rows without
    weight keep only the self-edge. ``residual = 0.5`` with attention edges is
    the rollout matrix of Abnar & Zuidema (2020).
    """
    rows = edges.sum(-1, keepdim=True)
    normalised = edges / torch.where(rows == 0, torch.ones_like(rows), rows)
    eye = torch.eye(edges.shape[-1], dtype=edges.dtype, device=edges.device)
    keep = torch.where(rows == 0, torch.ones_like(rows), torch.full_like(rows, residual))
    return (1 - residual) * normalised * (rows != 0) + keep * eye
