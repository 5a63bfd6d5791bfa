"""Small checks shared by the capture, the graph code and the command line: tensors' values, devices."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor


def value_range(tensor: Tensor) -> tuple[float, float]:
    """``(min, max)`` of a non-empty floating-point tensor in one pass and one host sync.

    ``aminmax`` propagates NaN, so both are finite exactly when every value is
    (:func:`all_finite`). About ten times cheaper than
    ``torch.isfinite(t).all()`` on a ``4096 x 4096`` map on CPU, which builds
    boolean temporaries.
    """
    low, high = torch.stack(torch.aminmax(tensor.detach())).tolist()
    return float(low), float(high)


def all_finite(tensor: Tensor) -> bool:
    """Whether every value of a floating-point tensor is finite (no NaN, no infinity); true when empty."""
    if tensor.numel() == 0:
        return True
    low, high = value_range(tensor)
    return math.isfinite(low) and math.isfinite(high)


def check_device(device: Any) -> "torch.device":
    """``device`` as a :class:`torch.device` this PyTorch can use; else a one-line :class:`PRXAIError`.

    ``torch.device("tpu")`` raises a ``RuntimeError`` listing every device type
    PyTorch knows, and ``model.to("cuda")`` on a CPU-only build an
    ``AssertionError`` deep in torch; both are said here instead, with what to
    pass. ``"auto"`` is not a device: resolve it before calling this.

    Args:
        device (str or torch.device): e.g. ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``.

    Returns:
        torch.device: The parsed device.

    Raises:
        PRXAIError: The name is not a device type, or the device is not available.
    """
    from captum_prxai.exceptions import PRXAIError

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise PRXAIError(
            f"unknown device {device!r}; use cpu, cuda (cuda:N for the N-th GPU) or mps"
            + (" (TPUs need torch_xla, which captum-prxai does not support)." if "tpu" in str(device).lower()
               else ".")
        ) from None
    if parsed.type == "cpu":
        return parsed
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            build = "is built without CUDA" if torch.version.cuda is None else "finds no usable GPU"
            raise PRXAIError(f"device {device!r} was asked for, but this PyTorch ({torch.__version__}) {build}; "
                             "use cpu, or install a CUDA build of PyTorch.")
        count = torch.cuda.device_count()
        if parsed.index is not None and parsed.index >= count:
            raise PRXAIError(f"device {device!r} was asked for, but there {'is' if count == 1 else 'are'} only "
                             f"{count} GPU{'' if count == 1 else 's'} (cuda:0..cuda:{count - 1}).")
        return parsed
    if parsed.type == "mps":
        available = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    else:
        backend = getattr(torch, parsed.type, None)
        available = bool(getattr(backend, "is_available", lambda: False)())
    if not available:
        raise PRXAIError(f"device {device!r} is not available in this PyTorch ({torch.__version__}); use cpu"
                         + (" or cuda." if torch.cuda.is_available() else "."))
    return parsed
