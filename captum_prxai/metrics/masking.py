"""Token-level removal of the most (or least) relevant tokens.

Every faithfulness metric in :mod:`captum_prxai.metrics` perturbs its input
through the functions in this module. Tokens come in three kinds:

* *special* tokens (``[CLS]``, ``[SEP]``, ...; ``special_tokens_mask == 1``)
  are never removed;
* *padding* (``attention_mask == 0``) is never removed and never counted;
* every other token is a *real* token. Removal fractions are computed over the
  real tokens of each example separately: ``k = round(fraction * n_real)``
  (halves round up), at least 1 when ``fraction > 0``, at most ``n_real``.

Tokens are removed either by **deletion** (the remaining tokens are packed
together and the sequence is re-padded, as in ERASER, DeYoung et al. 2020) or
by **replacement** with a given token id (``[MASK]``, ``[PAD]``, ...), which
keeps every position and the attention mask unchanged.
"""

from __future__ import annotations

from typing import Literal, Optional, Tuple

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError

#: How tokens are removed: ``"delete"`` re-packs the sequence, ``"replace"``
#: overwrites the token id in place.
RemovalMode = Literal["delete", "replace"]

__all__ = [
    "RemovalMode",
    "real_token_mask",
    "protect_positions",
    "num_tokens_to_remove",
    "select_tokens",
    "remove_tokens",
    "remove_top_k",
]


def _check_2d(name: str, tensor: Tensor, shape: Optional[torch.Size] = None) -> None:
    if not isinstance(tensor, Tensor):
        raise PRXAIError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}.")
    if tensor.dim() != 2:
        raise PRXAIError(
            f"{name} must have shape (batch, tokens), got shape {tuple(tensor.shape)}; "
            "add a batch dimension with .unsqueeze(0) for a single example."
        )
    if shape is not None and tensor.shape != shape:
        raise PRXAIError(
            f"{name} has shape {tuple(tensor.shape)} but input_ids has shape {tuple(shape)}; "
            "all per-token tensors must have the same (batch, tokens) shape."
        )


def protect_positions(special_tokens_mask: Optional[Tensor], attention_mask: Tensor, positions: Tensor) -> Tensor:
    """A special-tokens mask that also protects one position per example.

    A decoder classifier reads its class from the hidden state of the last
    real token, so removing that token moves the position the head reads
    instead of removing evidence: every method that ranks it first (PageRank
    methods do, through the teleport to the explained token) gains
    comprehensiveness for free. Pass the result as ``special_tokens_mask`` to
    the metrics to keep the explained token in every perturbed input, for
    every method alike.

    Args:
        special_tokens_mask: ``(B, T)`` special-token mask, or ``None``.
        attention_mask: ``(B, T)`` attention mask (gives the shape).
        positions: ``(B,)`` index of the position to protect in each example,
            e.g. :func:`captum_prxai.capture.target_positions`.

    Returns:
        ``(B, T)`` long mask, 1 for special tokens and the protected positions.

    Example::

        >>> from captum_prxai.capture import target_positions
        >>> explained = target_positions(mask.bool(), causal=True)  # last real token
        >>> protected = protect_positions(special, mask, explained)
        >>> evaluate_faithfulness(forward, ids, mask, protected, scores)
    """
    _check_2d("attention_mask", attention_mask)
    if special_tokens_mask is not None:
        _check_2d("special_tokens_mask", special_tokens_mask, attention_mask.shape)
    batch, length = attention_mask.shape
    positions = torch.as_tensor(positions, device=attention_mask.device).long().reshape(-1)
    if positions.numel() != batch:
        raise PRXAIError(f"positions must hold one index per example ({batch}), got {positions.numel()}.")
    if bool(((positions < 0) | (positions >= length)).any()):
        raise PRXAIError(f"positions must lie in 0..{length - 1}, got {positions.tolist()}.")
    out = torch.zeros(batch, length, dtype=torch.long, device=attention_mask.device)
    if special_tokens_mask is not None:
        out |= special_tokens_mask.bool().long()
    out[torch.arange(batch, device=out.device), positions] = 1
    return out


def real_token_mask(attention_mask: Tensor, special_tokens_mask: Optional[Tensor] = None) -> Tensor:
    """Boolean mask of the tokens that may be removed.

    Args:
        attention_mask: ``(B, T)``, 1 for tokens, 0 for padding.
        special_tokens_mask: ``(B, T)``, 1 for special tokens that must never
            be removed. ``None`` means there are none.

    Returns:
        ``(B, T)`` bool tensor, True for non-special, non-padding tokens.
    """
    _check_2d("attention_mask", attention_mask)
    real = attention_mask.bool()
    if special_tokens_mask is not None:
        _check_2d("special_tokens_mask", special_tokens_mask, attention_mask.shape)
        real = real & ~special_tokens_mask.bool()
    return real


def num_tokens_to_remove(n_real: Tensor, fraction: float) -> Tensor:
    """Number of tokens to remove per example for a removal fraction.

    ``k = round(fraction * n_real)`` with halves rounded up, at least 1 when
    ``fraction > 0`` and the example has a real token, at most ``n_real``.

    Args:
        n_real: ``(B,)`` integer tensor, real tokens per example.
        fraction: Fraction in ``[0, 1]``.

    Returns:
        ``(B,)`` long tensor.
    """
    fraction = float(fraction)
    if not 0.0 <= fraction <= 1.0:
        raise PRXAIError(
            f"removal fraction must be in [0, 1], got {fraction}; write 20% as 0.2."
        )
    n_real = n_real.long()
    k = torch.floor(n_real.double() * fraction + 0.5).long()
    if fraction > 0:
        k = torch.maximum(k, torch.ones_like(k))
    return torch.minimum(k, n_real)


def select_tokens(
    scores: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    fraction: float,
    largest: bool = True,
) -> Tensor:
    """Select the top (or bottom) ``fraction`` of the real tokens by score.

    Ties are broken by position (earlier token first), so the selection is
    deterministic.

    Args:
        scores: ``(B, T)`` attribution scores (higher = more relevant).
        attention_mask: ``(B, T)`` attention mask.
        special_tokens_mask: ``(B, T)`` special-token mask or ``None``.
        fraction: Fraction of real tokens to select, in ``[0, 1]``.
        largest: Select the highest scores (True) or the lowest (False).

    Returns:
        ``(B, T)`` bool tensor, True for selected tokens.
    """
    _check_2d("scores", scores)
    real = real_token_mask(attention_mask, special_tokens_mask)
    if scores.shape != real.shape:
        raise PRXAIError(
            f"scores has shape {tuple(scores.shape)} but attention_mask has shape "
            f"{tuple(real.shape)}; attributions must be reduced to one score per token."
        )
    scores = scores.detach().to(device=real.device, dtype=torch.float64)
    if torch.isnan(scores[real]).any():
        raise PRXAIError("scores contain NaN values; check the attribution method's output.")
    k = num_tokens_to_remove(real.sum(dim=1), fraction)
    fill = float("-inf") if largest else float("inf")
    masked = scores.masked_fill(~real, fill)
    # Real tokens always sort before the fill value; stable sort keeps ties in order.
    order = torch.sort(masked, dim=1, descending=largest, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    return (rank < k.unsqueeze(1)) & real


def remove_tokens(
    input_ids: Tensor,
    attention_mask: Tensor,
    remove: Tensor,
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    special_tokens_mask: Optional[Tensor] = None,
    padding_side: Literal["right", "left"] = "right",
) -> Tuple[Tensor, Tensor]:
    """Remove the tokens flagged in ``remove``.

    Args:
        input_ids: ``(B, T)`` token ids.
        attention_mask: ``(B, T)`` attention mask.
        remove: ``(B, T)`` bool, True for tokens to remove. Padding is ignored.
        mode: ``"delete"`` drops the tokens and re-packs the rest (sequence
            length ``T`` is kept; freed positions become padding), ``"replace"``
            overwrites them with ``replacement_id`` (attention mask unchanged).
        replacement_id: Token id used by ``"replace"`` (e.g. ``[MASK]``).
        pad_token_id: Token id written into freed positions by ``"delete"``.
        special_tokens_mask: Optional ``(B, T)`` mask; flagged tokens are
            protected even if ``remove`` selects them.
        padding_side: Where padding goes after deletion: ``"right"`` packs the
            kept tokens to the left (encoders), ``"left"`` packs them to the
            right (left-padded decoders).

    Returns:
        ``(input_ids, attention_mask)`` of the perturbed batch, same shape.
    """
    _check_2d("input_ids", input_ids)
    _check_2d("attention_mask", attention_mask, input_ids.shape)
    _check_2d("remove", remove, input_ids.shape)
    present = attention_mask.bool()
    remove = remove.bool() & present
    if special_tokens_mask is not None:
        _check_2d("special_tokens_mask", special_tokens_mask, input_ids.shape)
        remove = remove & ~special_tokens_mask.bool()
    if mode == "replace":
        if replacement_id is None:
            raise PRXAIError(
                'mode="replace" needs replacement_id (e.g. tokenizer.mask_token_id or '
                'tokenizer.pad_token_id); or use mode="delete".'
            )
        new_ids = input_ids.masked_fill(remove, int(replacement_id))
        return new_ids, attention_mask.clone()
    if mode != "delete":
        raise PRXAIError(f'mode must be "delete" or "replace", got {mode!r}.')
    if padding_side not in ("right", "left"):
        raise PRXAIError(f'padding_side must be "right" or "left", got {padding_side!r}.')
    keep = present & ~remove
    # Stable argsort on a 0/1 key moves kept tokens together, preserving their order.
    key = (~keep).to(torch.int8) if padding_side == "right" else keep.to(torch.int8)
    order = torch.sort(key, dim=1, stable=True).indices
    new_ids = torch.gather(input_ids, 1, order)
    new_keep = torch.gather(keep, 1, order)
    new_ids = new_ids.masked_fill(~new_keep, int(pad_token_id))
    return new_ids, new_keep.to(attention_mask.dtype)


def remove_top_k(
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    fraction: float,
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    keep: bool = False,
    largest: bool = True,
    padding_side: Literal["right", "left"] = "right",
) -> Tuple[Tensor, Tensor]:
    """Remove the ``fraction`` most relevant real tokens (or keep only them).

    Args:
        input_ids: ``(B, T)`` token ids.
        attention_mask: ``(B, T)`` attention mask.
        special_tokens_mask: ``(B, T)`` special-token mask (never removed) or ``None``.
        scores: ``(B, T)`` attribution scores, higher = more relevant.
        fraction: Fraction of the real tokens selected, in ``[0, 1]``.
        mode: ``"delete"`` or ``"replace"`` (see :func:`remove_tokens`).
        replacement_id: Token id for ``"replace"``.
        pad_token_id: Padding id for ``"delete"``.
        keep: If True, remove every real token *except* the selected ones
            (sufficiency); otherwise remove the selected ones (comprehensiveness).
        largest: Select the most relevant tokens (True) or the least (False).
        padding_side: See :func:`remove_tokens`.

    Returns:
        ``(input_ids, attention_mask)`` of the perturbed batch.
    """
    _check_2d("input_ids", input_ids)
    selected = select_tokens(scores, attention_mask, special_tokens_mask, fraction, largest)
    if keep:
        selected = real_token_mask(attention_mask, special_tokens_mask) & ~selected
    return remove_tokens(
        input_ids,
        attention_mask,
        selected,
        mode=mode,
        replacement_id=replacement_id,
        pad_token_id=pad_token_id,
        special_tokens_mask=special_tokens_mask,
        padding_side=padding_side,
    )
