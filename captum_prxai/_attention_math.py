"""Attention arithmetic shared by the capture paths, computed in tiles of query rows.

* :func:`attention_probs` materialises ``softmax(q k^T * scale + mask)`` for
  a block of query rows.
* :func:`tile_rows` turns a memory budget into a number of query rows per tile.
* :func:`tiled_attention` is eager attention for capture without gradients:
  each tile's probabilities are handed to a callback and multiplied with
  ``v``, and only one tile of per-head probabilities exists at a time.
* :class:`RecomputedAttention` is scaled dot-product attention whose forward
  runs :func:`torch.nn.functional.scaled_dot_product_attention` (no ``T x T``
  map is kept) and whose backward recomputes the probabilities of that one
  layer, tile by tile, and hands each tile's ``(A, dL/dA)`` to a callback.
  The gradients of ``q``, ``k`` and ``v`` come from the fused kernel's own
  backward where SDPA runs a fused kernel (flash attention on CPU, flash or
  memory-efficient attention on CUDA), and from a tiled backward written
  here where it falls back to its math path.

Why tiles of query rows are exact: the softmax normalises each query row on
its own, and so does its gradient ``dS = A * (dA - rowsum(dA * A))``; the
edge weights are elementwise per head and the head reductions are per entry.
So every row block of the reduced edge map, of ``dq``, and every row block's
contribution to ``dk`` and ``dv`` (summed over the blocks) is what the whole
layer at once would give, up to float summation order.

Memory model (per layer, ``B`` examples, ``H`` heads, ``T`` queries, ``S`` keys):
a tile of ``r`` rows holds at most about five ``(B, H, r, S)`` tensors at once
(scores/probabilities, their gradient, the softmax gradient, the edge weight
and a temporary), where ``r = tile_rows(B, H, T, S, itemsize, budget)`` keeps
one of them within ``budget`` bytes (at least one row). With the default
:data:`DEFAULT_TILE_BYTES` the per-head temporaries stay below about
``5 * DEFAULT_TILE_BYTES`` whatever the length;
:func:`captum_prxai.capture.attention_memory_bytes` counts them.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

#: Default memory budget, in bytes, of one ``(B, H, rows, S)`` per-head tile tensor (16 MiB): small enough
#: that a tile's temporaries stay in the last-level cache's neighbourhood on CPU and well inside any GPU,
#: large enough that at 512 tokens one example's layer is a single tile.
DEFAULT_TILE_BYTES = 16 * 2**20

#: ``(A (B, H, r, S), dA (B, H, r, S) or None, rows) -> None``: one tile of query rows ``rows`` (a slice).
#: With per-example tiles (``per_example=True``) it is called as ``sink(A, dA, rows, batch)``, ``A`` then
#: ``(1, H, r, S)`` and ``batch`` the slice of the one example.
TileSink = Callable[..., None]
#: Old name of :data:`TileSink`.
GradientSink = TileSink


#: Most query rows per tile on CPU. Small tiles keep a tile's per-head temporaries near the size of a core's L2
#: cache, so the elementwise passes (softmax, edge weight, head reduction) run from cache. Measured on a
#: MiniLM-sized model, interleaved in one process (``benchmarks/tile_cap_ab.py``,
#: ``benchmarks/results/tile_cap_cpu.md``): PR-TAG 0.98x -> 0.94x of a forward+backward at 512 tokens, 1.65x ->
#: 1.49x at 2048 and 1.85x -> 1.68x at 4096; PR-A (no backward) is within noise either way. Other devices take the
#: budget alone: there each tile is a kernel launch, and fewer, larger tiles are faster.
CPU_TILE_ROWS = 32
#: On CPU a layer whose per-head tensor holds at most this many bytes is one tile: it fits in L2 as it is, and
#: splitting it (e.g. 128 tokens into 32-row tiles) only adds per-tile work.
CPU_WHOLE_TILE_BYTES = 2**20


def tile_rows(batch: int, heads: int, queries: int, keys: int, itemsize: int, budget: Optional[int] = None,
              max_rows: Optional[int] = None) -> int:
    """Query rows per tile so that one ``(batch, heads, rows, keys)`` tensor fits in ``budget`` bytes.

    ``budget=None`` means :data:`DEFAULT_TILE_BYTES`; ``max_rows`` caps the
    rows further (e.g. :data:`CPU_TILE_ROWS`). The result is between 1 and
    ``queries``.
    """
    budget = DEFAULT_TILE_BYTES if budget is None else int(budget)
    per_row = max(1, batch * heads * keys * itemsize)
    rows = budget // per_row
    if max_rows is not None:
        rows = min(rows, int(max_rows))
    return max(1, min(queries, rows))


def tile_bytes(batch: int, heads: int, queries: int, keys: int, itemsize: int, budget: Optional[int] = None) -> int:
    """Bytes of one ``(batch, heads, rows, keys)`` tile tensor, with ``rows`` from :func:`tile_rows`."""
    return batch * heads * keys * itemsize * tile_rows(batch, heads, queries, keys, itemsize, budget)


def repeat_heads(tensor: Tensor, groups: int) -> Tensor:
    """Repeat key/value heads for grouped-query attention: ``(B, Hkv, S, D) -> (B, Hkv * groups, S, D)``."""
    return tensor if groups == 1 else tensor.repeat_interleave(groups, dim=1)


def attention_probs(
    query: Tensor,
    key: Tensor,
    mask: Optional[Tensor],
    scale: float,
    causal: bool,
    row_offset: int = 0,
    total_rows: Optional[int] = None,
) -> Tensor:
    """``softmax(q k^T * scale + mask)``; boolean masks mark allowed keys with ``True``.

    ``query`` may be a block of query rows: rows ``row_offset ..`` of
    ``total_rows`` (default: the whole sequence), which places the causal
    diagonal; ``mask`` then covers those rows only (see :func:`mask_rows`).
    The scale is folded into ``q`` (``T x D``) rather than applied to the
    ``T x T`` scores. Fully masked rows (padding queries) get a uniform row
    instead of NaN.
    """
    scores = torch.matmul(query * scale, key.transpose(-1, -2))
    lowest = torch.finfo(scores.dtype).min
    if causal:
        t_q, t_k = scores.shape[-2], scores.shape[-1]
        total = t_q if total_rows is None else total_rows
        allowed = torch.ones(t_q, t_k, dtype=torch.bool, device=scores.device).tril(
            diagonal=row_offset + t_k - total
        )
        scores = scores.masked_fill_(~allowed, lowest)
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill_(~mask, lowest)
        else:
            scores = scores.add_(mask).clamp_(min=lowest)
    return torch.softmax(scores, dim=-1)


def mask_rows(mask: Optional[Tensor], rows: slice, total_rows: int) -> Optional[Tensor]:
    """The part of an attention mask (``(..., T, S)`` or broadcast ``(..., 1, S)``) that covers query ``rows``."""
    if mask is None or mask.dim() < 2 or mask.shape[-2] != total_rows or total_rows == 1:
        return mask
    return mask[..., rows, :]


def default_scale(query: Tensor, scale: Optional[float]) -> float:
    return 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)


def _tiles(length: int, rows: int):
    rows = max(1, int(rows))
    for start in range(0, length, rows):
        yield slice(start, min(length, start + rows))


def _batch_tiles(batch: int, length: int, rows: int, per_example: bool):
    """``(examples, rows)`` slices of the tiles: all examples at once, or (``per_example``) one at a time."""
    for examples in ([slice(b, b + 1) for b in range(batch)] if per_example else [slice(0, batch)]):
        for part in _tiles(length, rows):
            yield examples, part


def _examples(tensor: Optional[Tensor], examples: slice, batch: int) -> Optional[Tensor]:
    """The rows ``examples`` of a batched tensor; a mask that broadcasts over the batch is returned as it is."""
    if tensor is None or tensor.dim() == 0 or tensor.shape[0] != batch or examples == slice(0, batch):
        return tensor
    return tensor[examples]


def tiled_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Optional[Tensor],
    scale: float,
    causal: bool,
    groups: int,
    sink: TileSink,
    rows: int,
    per_example: bool = False,
) -> Tensor:
    """Eager attention ``A v`` computed ``rows`` query rows at a time; each tile's ``A`` goes to ``sink``.

    For capture without gradients (attention-only edges): the per-head
    probabilities of one tile, ``(B, H, rows, S)`` (``(1, H, rows, S)`` with
    ``per_example``), are the largest tensor alive. Returns ``(B, H, T, D)``,
    as ``softmax(q k^T) v`` of the whole layer.
    """
    key_full, value_full = repeat_heads(key, groups), repeat_heads(value, groups)
    batch, length = query.shape[0], query.shape[-2]
    per_example = per_example and batch > 1
    if rows >= length and not per_example:
        probs = attention_probs(query, key_full, mask, scale, causal)
        sink(probs, None, slice(0, length))
        return torch.matmul(probs, value_full)
    out = query.new_empty(query.shape[:-1] + (value_full.shape[-1],))
    for examples, part in _batch_tiles(batch, length, rows, per_example):
        tile_mask = mask_rows(_examples(mask, examples, batch), part, length)
        probs = attention_probs(query[examples, :, part], key_full[examples], tile_mask, scale, causal,
                                part.start, length)
        if per_example:
            sink(probs, None, part, examples)
        else:
            sink(probs, None, part)
        out[examples, :, part] = torch.matmul(probs, value_full[examples])
        del probs
    return out


class RecomputedAttention(torch.autograd.Function):
    """SDPA forward; backward recomputes ``A`` tile by tile, reports each ``(A, dA)`` tile to ``sink``.

    The backward walks the query rows in tiles of ``rows`` rows: it recomputes
    the tile's probabilities and their gradient ``dA = dO v^T`` and hands both
    to ``sink`` with the tile's row slice.

    * Where SDPA picks a fused kernel (``torch._fused_sdp_choice``), the
      forward keeps that kernel's autograd graph (it saves ``q, k, v``, the
      output and one log-sum-exp per row, no ``T x T`` map), and ``dq, dk,
      dv`` come from the kernel's own backward: the same gradient as a
      forward+backward through SDPA, at its speed.
    * Otherwise (the math path) each tile also adds its share of ``dq`` (its
      rows), ``dk`` and ``dv`` (sums over the tiles), written here.

    With ``capture_only`` (the earliest hooked layer, when nothing below it
    needs a gradient) the backward only reports the tiles.

    ``example_rows`` asks for per-example tiles of that many rows, ``(1, H, r,
    S)``, reported as ``sink(A, dA, rows, examples)``, where the tiles only
    report (the fused backward, or ``capture_only``): on CPU a batch's tile
    leaves the cache at sizes where one example's stays in it. The
    hand-written backward keeps whole-batch tiles of ``rows`` rows.
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
        sink: TileSink,
        capture_only: bool = False,
        rows: Optional[int] = None,
        example_rows: Optional[int] = None,
    ) -> Tensor:
        needs = (False, False, False) if capture_only else tuple(ctx.needs_input_grad[:3])
        ctx.inner = None
        if any(needs) and _fused_backward_available(query, key, value, mask, causal, groups):
            # keep the fused kernel's own graph (it saves q, k, v, the output and the row log-sum-exp, no T x T
            # map) so that dq, dk and dv come from the fused backward; only the maps are recomputed by hand
            with torch.enable_grad():
                inputs = tuple(t.detach().requires_grad_(need) for t, need in zip((query, key, value), needs))
                inner = F.scaled_dot_product_attention(
                    inputs[0], repeat_heads(inputs[1], groups), repeat_heads(inputs[2], groups), attn_mask=mask,
                    scale=scale, is_causal=causal,
                )
            ctx.inner = (inner, tuple(t for t, need in zip(inputs, needs) if need), needs)
            out = inner.detach()
        else:
            out = F.scaled_dot_product_attention(
                query, repeat_heads(key, groups), repeat_heads(value, groups), attn_mask=mask, scale=scale,
                is_causal=causal,
            )
        ctx.save_for_backward(query, key, value, mask if mask is not None else torch.empty(0))
        ctx.has_mask, ctx.scale, ctx.causal, ctx.groups, ctx.sink = mask is not None, scale, causal, groups, sink
        ctx.capture_only = capture_only
        ctx.rows = query.shape[-2] if rows is None else max(1, int(rows))
        # per-example tiles of example_rows rows where the tiles only report (A, dA): the fused backward, or
        # nothing to differentiate; the hand-written backward accumulates dk and dv over whole-batch tiles
        ctx.per_example = example_rows is not None and query.shape[0] > 1 and (ctx.inner is not None
                                                                               or not any(needs))
        if ctx.per_example:
            ctx.rows = max(1, int(example_rows))
        return out

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad_out: Tensor):  # type: ignore[override]
        query, key, value, mask = ctx.saved_tensors
        mask = mask if ctx.has_mask else None
        groups, scale, length = ctx.groups, ctx.scale, query.shape[-2]
        key_full, value_full = repeat_heads(key, groups), repeat_heads(value, groups)
        if ctx.inner is not None:
            return _fused_backward(ctx, query, key_full, value_full, mask, grad_out)
        need_q, need_k, need_v = (False, False, False) if ctx.capture_only else ctx.needs_input_grad[:3]
        if ctx.per_example:  # capture only: report the tiles
            for _ in _reported_tiles(ctx, query, key_full, value_full, mask, grad_out):
                pass
            return None, None, None, None, None, None, None, None, None, None, None
        single = ctx.rows >= length
        grad_q = grad_k = grad_v = None
        if need_q and not single:
            grad_q = torch.empty_like(query)
        query_scaled = query * scale if need_k else None
        for part, g_out, probs, grad_probs in _reported_tiles(ctx, query, key_full, value_full, mask, grad_out):
            if need_v:
                # A^T dO as (dO^T A)^T: the same product, about twice as fast on CPU BLAS; tiles accumulate in place
                grad_v = _accumulate(grad_v, g_out.transpose(-1, -2), probs)
            if need_q or need_k:
                # fused softmax backward, row by row: dS = A * (dA - rowsum(dA * A))
                grad_scores = torch._softmax_backward_data(grad_probs, probs, -1, probs.dtype)
                del grad_probs, probs
                if need_q:
                    rows_q = torch.matmul(grad_scores, key_full).mul_(scale)
                    if single:
                        grad_q = rows_q
                    else:
                        grad_q[:, :, part] = rows_q
                if need_k:
                    q_part = query_scaled if single else query_scaled[:, :, part]
                    grad_k = _accumulate(grad_k, q_part.transpose(-1, -2), grad_scores)  # (dS^T q)^T
                del grad_scores
            else:
                del grad_probs, probs
        if grad_k is not None:
            grad_k = _sum_groups(grad_k.transpose(-1, -2), groups)
        if grad_v is not None:
            grad_v = _sum_groups(grad_v.transpose(-1, -2), groups)
        return grad_q, grad_k, grad_v, None, None, None, None, None, None, None, None


def _fused_backward_available(query: Tensor, key: Tensor, value: Tensor, mask: Optional[Tensor], causal: bool,
                              groups: int) -> bool:
    """Whether SDPA would run a fused kernel here (whose backward keeps no ``T x T`` map), not the math path."""
    if not hasattr(torch, "_fused_sdp_choice"):
        return False
    try:
        choice = torch._fused_sdp_choice(query, repeat_heads(key, groups), repeat_heads(value, groups), mask, 0.0,
                                         causal)
    except (RuntimeError, TypeError):
        return False
    return int(choice) > 0  # SDPBackend: 0 = math, -1 = error; flash, efficient, cuDNN, ... are positive


def _reported_tiles(ctx: torch.autograd.function.FunctionCtx, query: Tensor, key_full: Tensor, value_full: Tensor,
                    mask: Optional[Tensor], grad_out: Tensor):
    """Per tile of query rows: recompute ``A`` and ``dA = dO v^T``, hand them to the sink, yield ``(rows, dO, A, dA)``."""
    batch, length = query.shape[0], query.shape[-2]
    per_example = getattr(ctx, "per_example", False)
    single = ctx.rows >= length and not per_example
    value_t = value_full.transpose(-1, -2)
    for examples, part in _batch_tiles(batch, length, ctx.rows, per_example):
        if single:
            q, g_out, keys, values_t, tile_mask = query, grad_out, key_full, value_t, mask
        else:
            q, g_out = query[examples, :, part], grad_out[examples, :, part]
            keys, values_t = key_full[examples], value_t[examples]
            tile_mask = mask_rows(_examples(mask, examples, batch), part, length)
        probs = attention_probs(q, keys, tile_mask, ctx.scale, ctx.causal, part.start, length)
        grad_probs = torch.matmul(g_out, values_t)
        if per_example:
            ctx.sink(probs, grad_probs, part, examples)
        else:
            ctx.sink(probs, grad_probs, part)
        yield part, g_out, probs, grad_probs
        del probs, grad_probs  # so that one tile's maps are alive at a time, not two


def _fused_backward(ctx: torch.autograd.function.FunctionCtx, query: Tensor, key_full: Tensor, value_full: Tensor,
                    mask: Optional[Tensor], grad_out: Tensor) -> tuple:
    """Report every tile's ``(A, dA)`` to the sink, then take ``dq, dk, dv`` from the fused kernel's backward."""
    for _ in _reported_tiles(ctx, query, key_full, value_full, mask, grad_out):
        pass
    inner, inputs, needs = ctx.inner
    ctx.inner = None
    grads = iter(torch.autograd.grad(inner, inputs, grad_out))
    grad_q, grad_k, grad_v = (next(grads) if need else None for need in needs)
    return grad_q, grad_k, grad_v, None, None, None, None, None, None, None, None


def _accumulate(total: Optional[Tensor], left: Tensor, right: Tensor) -> Tensor:
    """``total + left @ right`` for ``(B, H, m, k) @ (B, H, k, n)``, in place (one ``baddbmm_``) after the first tile."""
    if total is None:
        return torch.matmul(left, right)
    batch, heads, rows, inner = left.shape
    total.view(batch * heads, rows, -1).baddbmm_(left.reshape(batch * heads, rows, inner),
                                                 right.reshape(batch * heads, inner, -1))
    return total


def _sum_groups(grad: Tensor, groups: int) -> Tensor:
    if groups == 1:
        return grad
    batch, heads, length, dim = grad.shape
    return grad.reshape(batch, heads // groups, groups, length, dim).sum(2)
