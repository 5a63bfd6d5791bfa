"""Sliding windows for texts longer than the model's positions, and stitching their graphs.

A long sequence ``prefix + content + suffix`` (e.g. ``[CLS] ... [SEP]``) is
cut into overlapping windows ``prefix + content[start:start + w] + suffix``
that each fit the model. Every window yields a token graph over its own
positions; :func:`stitch_window_graphs` adds them into one graph over the
whole sequence, mapping each window's positions back to global ones (the
prefix and suffix tokens of every window are the same global nodes). Edges in
overlapping regions are summed, so PageRank on the stitched graph scores
every token of the text at once.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError

__all__ = ["WindowPlan", "plan_windows", "stitch_window_graphs"]


class WindowPlan(NamedTuple):
    """Where each window's positions sit in the full sequence."""

    positions: Tensor  #: ``(W, window)`` global index of each window position (-1 for padding)
    mask: Tensor  #: ``(W, window)`` real positions


def plan_windows(length: int, window: int, stride: int, prefix: int = 1, suffix: int = 1) -> WindowPlan:
    """Overlapping windows covering ``length`` tokens, each ``window`` long at most.

    Args:
        length: Tokens in the full sequence, special tokens included.
        window: Tokens per window (the model's maximum length).
        stride: Content tokens between window starts (``<=`` the content per window).
        prefix: Leading special tokens repeated in every window (``[CLS]``).
        suffix: Trailing special tokens repeated in every window (``[SEP]``).
    """
    content = length - prefix - suffix
    per_window = window - prefix - suffix
    if per_window < 1:
        raise PRXAIError(f"window={window} leaves no room for content besides {prefix + suffix} special tokens.")
    if not 1 <= stride <= per_window:
        raise PRXAIError(f"stride must be between 1 and {per_window} (the content per window), got {stride}.")
    if content < 1:
        raise PRXAIError(f"The sequence has {length} tokens, none of them content between the special tokens.")
    starts = list(range(0, max(content - per_window, 0) + 1, stride))
    if starts[-1] + per_window < content:
        starts.append(content - per_window)
    size = prefix + min(per_window, content) + suffix
    positions = torch.full((len(starts), size), -1, dtype=torch.long)
    for row, start in enumerate(starts):
        chunk = torch.arange(prefix + start, prefix + min(start + per_window, content))
        glob = torch.cat([torch.arange(prefix), chunk, torch.arange(length - suffix, length)])
        positions[row, : glob.numel()] = glob
    return WindowPlan(positions, positions >= 0)


def stitch_window_graphs(graphs: Tensor, plan: WindowPlan, length: int) -> Tensor:
    """Sum per-window ``(W, window, window)`` graphs into one ``(length, length)`` graph."""
    windows, size = plan.positions.shape
    if graphs.shape != (windows, size, size):
        raise PRXAIError(f"Expected window graphs of shape {(windows, size, size)}, got {tuple(graphs.shape)}.")
    positions = plan.positions.to(graphs.device).clamp(min=0)
    valid = plan.mask.to(graphs.device)
    weights = graphs * valid[:, :, None] * valid[:, None, :]
    flat = (positions[:, :, None] * length + positions[:, None, :]).reshape(-1)
    stitched = torch.zeros(length * length, dtype=graphs.dtype, device=graphs.device)
    stitched.index_add_(0, flat, weights.reshape(-1))
    return stitched.view(length, length)
