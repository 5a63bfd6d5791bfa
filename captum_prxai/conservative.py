"""Conservative propagation: one backward pass with the attention softmax and the normalisers' scale held constant.

Gradient x input through a transformer is not conserved: the attention softmax and the LayerNorm scale pass
gradient through their own inputs that no token's contribution corresponds to. CP-LRP (Ali et al., "XAI for
Transformers: Better Explanations through Conservative Propagation", ICML 2022) holds both constant in the backward
pass, their forward values unchanged, so gradient x input is conserved through them; AttnLRP (Achtibat et al.,
ICML 2024) refines the rule for the softmax. Under :func:`conservative_propagation` a PR-XAI pass is that backward
pass: the attention gradient ``dA`` (the graph's edges) and the gradient x input at the first attention layer are
those of the network with its attention weights and normalisers fixed.

What is held, inside the block and on the calling thread only:

* every attention row's softmax (a ``softmax`` over an input of three or more dimensions; a classifier's softmax over
  ``(B, C)`` logits is left alone), and where the softmax's input is never materialised, the queries and keys: in
  ``torch.nn.functional.scaled_dot_product_attention`` and in the capture's own attention function
  (:func:`captum_prxai.hooks._capture_attention`);
* every ``torch.nn.functional.layer_norm`` and ``rms_norm`` scale (``σ`` of ``(x − mean) / σ``, the root mean square
  of ``x / rms``); normalisers a model writes out by hand (many decoders' RMSNorm) are not seen.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode

from captum_prxai.exceptions import PRXAIError

__all__ = ["PROPAGATIONS", "check_propagation", "conservative_propagation", "held_constant", "is_conservative"]

#: How the backward pass propagates (``capture_graph``'s ``propagation``): ``"gradient"`` the model's own gradient,
#: ``"conservative"`` with the attention softmax and the normalisers' scale held constant (CP-LRP's backward pass)
PROPAGATIONS = ("gradient", "conservative")

_state = threading.local()


def check_propagation(propagation: str, choices: Sequence[str] = PROPAGATIONS) -> str:
    """``propagation`` if it is one of ``choices`` (default :data:`PROPAGATIONS`); else a :class:`PRXAIError`."""
    if not isinstance(propagation, str) or propagation not in choices:
        raise PRXAIError(f"propagation must be one of {', '.join(map(repr, choices))}, got {propagation!r}.")
    return propagation


def is_conservative() -> bool:
    """Whether the calling thread is inside :func:`conservative_propagation`."""
    return getattr(_state, "depth", 0) > 0


def held_constant(tensor: Tensor) -> Tensor:
    """``tensor``'s value with no gradient through it: ``0 · tensor`` keeps it in the autograd graph, so a gradient
    taken at the result (the capture's ``dA``) still exists while nothing reaches what ``tensor`` was computed from."""
    return tensor.detach() + 0 * tensor if tensor.requires_grad else tensor


def _dims(normalized_shape: Any) -> tuple[int, ...]:
    """The trailing dimensions a norm reduces over (``normalized_shape`` may be an int, as torch accepts)."""
    count = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    return tuple(range(-count, 0))


def _wide(x: Tensor) -> Tensor:
    """``x`` in at least fp32, as torch's own norm kernels take their statistics."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _layer_norm(x: Tensor, normalized_shape: Any, weight: Optional[Tensor] = None,
                bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    dims, wide = _dims(normalized_shape), _wide(x)
    centred = wide - wide.mean(dims, keepdim=True)
    out = (centred / (centred.pow(2).mean(dims, keepdim=True) + eps).sqrt().detach()).to(x.dtype)
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


def _rms_norm(x: Tensor, normalized_shape: Any, weight: Optional[Tensor] = None,
              eps: Optional[float] = None) -> Tensor:
    dims, wide = _dims(normalized_shape), _wide(x)
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    out = (wide / (wide.pow(2).mean(dims, keepdim=True) + eps).sqrt().detach()).to(x.dtype)
    return out if weight is None else out * weight


_SOFTMAX = (F.softmax, torch.softmax, Tensor.softmax)
_NORMS = {F.layer_norm: _layer_norm, F.rms_norm: _rms_norm}


class _Conservative(TorchFunctionMode):
    """The torch-function mode of :func:`conservative_propagation` (thread-local, as every such mode)."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        kwargs = kwargs or {}
        if func in _NORMS and torch.is_grad_enabled():
            return _NORMS[func](*args, **kwargs)
        if func is F.scaled_dot_product_attention:  # its softmax is inside: hold its logits' inputs instead
            args = tuple(held_constant(a) if i < 2 else a for i, a in enumerate(args))
            kwargs = {k: held_constant(v) if k in ("query", "key") else v for k, v in kwargs.items()}
        out = func(*args, **kwargs)
        if func in _SOFTMAX and isinstance(out, Tensor) and out.dim() >= 3:
            return held_constant(out)
        return out


@contextmanager
def conservative_propagation() -> Iterator[None]:
    """Run a pass under conservative propagation (see the module's docstring); the forward values are unchanged.

    Example::

        >>> with conservative_propagation():
        ...     logits = model(input_ids).logits
        >>> logits[0, label].backward()  # CP-LRP's backward pass
    """
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        with _Conservative():
            yield
    finally:
        _state.depth -= 1
