"""Input checks shared by the soft, normalised and fine-tuned faithfulness metrics."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError
from captum_prxai.metrics.masking import _check_2d, real_token_mask


def _rows(rows: list) -> str:
    shown = ", ".join(map(str, rows[:10])) + (", ..." if len(rows) > 10 else "")
    return f"row{'s' if len(rows) > 1 else ''} {shown}"


def _check_token_inputs(
    metric: str,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
) -> Tensor:
    """Check the per-token tensors of a metric and return the ``(B, T)`` real-token mask.

    Refuses inconsistent shapes, examples with no token that may be removed
    (all padding, or only special tokens) and non-finite scores on real tokens,
    each with a :class:`PRXAIError` naming the metric.
    """
    _check_2d("input_ids", input_ids)
    _check_2d("attention_mask", attention_mask, input_ids.shape)
    if special_tokens_mask is not None:
        _check_2d("special_tokens_mask", special_tokens_mask, input_ids.shape)
    _check_2d("scores", scores, input_ids.shape)
    real = real_token_mask(attention_mask, special_tokens_mask)
    empty = ~real.any(dim=1)
    if bool(empty.any()):
        rows = empty.nonzero().flatten().tolist()
        raise PRXAIError(
            f"{metric}: {_rows(rows)} of attention_mask (less special tokens) "
            f"{'have' if len(rows) > 1 else 'has'} no token to perturb: every position is padding or a special "
            "token. Drop such examples (or fix the mask: 1 for tokens, 0 for padding)."
        )
    values = scores.detach()
    if not values.is_floating_point():
        values = values.double()
    bad = ~torch.isfinite(values) & real
    if bool(bad.any()):
        rows = bad.any(dim=1).nonzero().flatten().tolist()
        raise PRXAIError(
            f"{metric}: scores of {_rows(rows)} contain NaN or infinite values on real tokens; "
            "check the attribution method's output."
        )
    return real


def _check_positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise PRXAIError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def _check_fraction(name: str, value: float, allow_zero: bool = False) -> float:
    value = float(value)
    low_ok = value >= 0.0 if allow_zero else value > 0.0
    if not (low_ok and value <= 1.0):
        raise PRXAIError(f"{name} must be a fraction in {'[0' if allow_zero else '(0'}, 1], got {value}.")
    return value
