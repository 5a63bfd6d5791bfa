"""Attention arithmetic shared by the capture paths.

* :func:`attention_probs` materialises ``softmax(q k^T * scale + mask)``.
* :class:`RecomputedAttention` is scaled dot-product attention whose forward
  runs :func:`torch.nn.functional.scaled_dot_product_attention` (no ``T x T``
  map is kept) and whose backward recomputes the probabilities of that one
  layer, hands ``(A, dL/dA)`` to a callback, and finishes the attention
  backward by hand. Only one layer's maps exist at a time, so capturing
  attention gradients costs no more memory than a memory-efficient backward.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

#: ``(A (B, H, T, S), dA (B, H, T, S)) -> None``
GradientSink = Callable[[Tensor, Tensor], None]


def repeat_heads(tensor: Tensor, groups: int) -> Tensor:
    """Repeat key/value heads for grouped-query attention: ``(B, Hkv, S, D) -> (B, Hkv * groups, S, D)``."""
    return tensor if groups == 1 else tensor.repeat_interleave(groups, dim=1)


def attention_probs(
    query: Tensor, key: Tensor, mask: Optional[Tensor], scale: float, causal: bool
) -> Tensor:
    """``softmax(q k^T * scale + mask)``; boolean masks mark allowed keys with ``True``.

    The scale is folded into ``q`` (``T x D``) rather than applied to the
    ``T x T`` scores. Fully masked rows (padding queries) get a uniform row
    instead of NaN.
    """
    scores = torch.matmul(query * scale, key.transpose(-1, -2))
    lowest = torch.finfo(scores.dtype).min
    if causal:
        t_q, t_k = scores.shape[-2], scores.shape[-1]
        allowed = torch.ones(t_q, t_k, dtype=torch.bool, device=scores.device).tril(diagonal=t_k - t_q)
        scores = scores.masked_fill_(~allowed, lowest)
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill_(~mask, lowest)
        else:
            scores = scores.add_(mask).clamp_(min=lowest)
    return torch.softmax(scores, dim=-1)


def default_scale(query: Tensor, scale: Optional[float]) -> float:
    return 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)


class RecomputedAttention(torch.autograd.Function):
    """SDPA forward; backward recomputes ``A``, reports ``(A, dA)`` to ``sink`` and returns ``dq, dk, dv``.

    With ``capture_only`` (the earliest hooked layer, when nothing below it
    needs a gradient) the backward stops after reporting ``(A, dA)``.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Optional[Tensor],
        scale: float,
        causal: bool,
        groups: int,
        sink: GradientSink,
        capture_only: bool = False,
    ) -> Tensor:
        out = F.scaled_dot_product_attention(
            query, repeat_heads(key, groups), repeat_heads(value, groups), attn_mask=mask, scale=scale,
            is_causal=causal,
        )
        ctx.save_for_backward(query, key, value, mask if mask is not None else torch.empty(0))
        ctx.has_mask, ctx.scale, ctx.causal, ctx.groups, ctx.sink = mask is not None, scale, causal, groups, sink
        ctx.capture_only = capture_only
        return out

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad_out: Tensor):  # type: ignore[override]
        query, key, value, mask = ctx.saved_tensors
        groups = ctx.groups
        key_full, value_full = repeat_heads(key, groups), repeat_heads(value, groups)
        probs = attention_probs(query, key_full, mask if ctx.has_mask else None, ctx.scale, ctx.causal)
        grad_probs = torch.matmul(grad_out, value_full.transpose(-1, -2))
        ctx.sink(probs, grad_probs)
        if ctx.capture_only:  # the earliest layer: nothing below it needs a gradient
            return None, None, None, None, None, None, None, None, None
        need_q, need_k, need_v = ctx.needs_input_grad[:3]
        grad_q = grad_k = grad_v = None
        if need_q or need_k:
            # fused softmax backward: dS = A * (dA - rowsum(dA * A))
            grad_scores = torch._softmax_backward_data(grad_probs, probs, -1, probs.dtype)
            del grad_probs
            if need_q:
                grad_q = torch.matmul(grad_scores, key_full).mul_(ctx.scale)
            if need_k:
                grad_k = _sum_groups(torch.matmul(grad_scores.transpose(-1, -2), query * ctx.scale), groups)
            del grad_scores
        if need_v:
            grad_v = _sum_groups(torch.matmul(probs.transpose(-1, -2), grad_out), groups)
        return grad_q, grad_k, grad_v, None, None, None, None, None, None


def _sum_groups(grad: Tensor, groups: int) -> Tensor:
    if groups == 1:
        return grad
    batch, heads, length, dim = grad.shape
    return grad.view(batch, heads // groups, groups, length, dim).sum(2)
