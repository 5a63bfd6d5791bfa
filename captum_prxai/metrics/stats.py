"""Confidence intervals for benchmark means."""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError

__all__ = ["mean_sem", "bootstrap_ci", "format_mean_sem"]

ArrayLike = Union[Tensor, Sequence[float]]


def _values(values: ArrayLike) -> Tensor:
    t = torch.as_tensor(values, dtype=torch.float64).reshape(-1)
    return t[~torch.isnan(t)]


def mean_sem(values: ArrayLike) -> Tuple[float, float]:
    """Mean and standard error of the mean (sample std / sqrt(n)); NaNs are ignored.

    Args:
        values: 1-D values (one per example).

    Returns:
        ``(mean, sem)``; ``sem`` is NaN for fewer than two values and both are
        NaN for none.
    """
    t = _values(values)
    n = t.numel()
    if n == 0:
        return float("nan"), float("nan")
    mean = float(t.mean())
    if n < 2:
        return mean, float("nan")
    return mean, float(t.std(unbiased=True)) / math.sqrt(n)


def bootstrap_ci(
    values: ArrayLike,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    statistic: Optional[Callable[[Tensor], Tensor]] = None,
    seed: Optional[int] = 0,
) -> Tuple[float, float]:
    """Percentile bootstrap confidence interval.

    Args:
        values: 1-D values (NaNs ignored).
        n_resamples: Number of bootstrap resamples.
        confidence: Coverage, e.g. 0.95.
        statistic: Maps a ``(R, n)`` tensor of resamples to ``(R,)`` statistics
            (default: mean over dim 1).
        seed: Seed of the resampling generator (``None``: random).

    Returns:
        ``(low, high)``; NaNs when there are no values.
    """
    if not 0.0 < confidence < 1.0:
        raise PRXAIError(f"confidence must be in (0, 1), got {confidence}.")
    if n_resamples < 1:
        raise PRXAIError(f"n_resamples must be at least 1, got {n_resamples}.")
    t = _values(values)
    n = t.numel()
    if n == 0:
        return float("nan"), float("nan")
    gen = torch.Generator()
    if seed is not None:
        gen.manual_seed(seed)
    else:
        gen.seed()
    idx = torch.randint(n, (n_resamples, n), generator=gen)
    samples = t[idx]
    stats = statistic(samples) if statistic is not None else samples.mean(dim=1)
    alpha = (1.0 - confidence) / 2.0
    q = torch.quantile(stats.double(), torch.tensor([alpha, 1.0 - alpha], dtype=torch.float64))
    return float(q[0]), float(q[1])


def format_mean_sem(values: ArrayLike, digits: int = 3) -> str:
    """``"0.123 ± 0.010"`` (or ``"n/a"`` when there are no values)."""
    mean, sem = mean_sem(values)
    if math.isnan(mean):
        return "n/a"
    if math.isnan(sem):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {sem:.{digits}f}"
