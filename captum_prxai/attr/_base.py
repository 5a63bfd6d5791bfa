"""Shared machinery of the attention-graph attributions.

:class:`AttentionGraphAttribution` runs one forward pass (and one backward
pass when the edges need gradients) under an
:class:`~captum_prxai.hooks.AttentionRecorder`, and hands the per-layer,
head-reduced maps to the subclass, which turns them into token scores.
Input checks, target selection, padding and the Captum conventions live here
once for all methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import torch
from captum._utils.common import _format_additional_forward_args
from captum.attr import GradientAttribution
from captum.log import log_usage
from torch import Tensor, nn

from captum_prxai._limits import max_input_length
from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.edges import edge_weight_fn, reduce_heads
from captum_prxai.hooks import AttentionExtractor, AttentionRecorder

TargetType = Union[None, int, Sequence[int], Tensor]



def attention_memory_bytes(
    batch: int, length: int, layers: int, heads: int, itemsize: int = 4, capture: str = "recompute"
) -> int:
    """Rough peak memory of the attention maps of one attribution pass.

    With ``capture="recompute"`` only one layer's maps exist at a time: about
    five ``(B, H, T, T)`` tensors in its backward (probabilities, their
    gradient, the softmax gradient, the edge product and a temporary). With
    ``capture="weights"`` autograd keeps one map per layer for the backward
    pass, plus about three for the layer being computed: ``(L + 3)`` maps.
    """
    maps = 5 if capture == "recompute" else layers + 3
    return maps * batch * heads * length * length * itemsize


def available_memory_bytes(device: torch.device) -> Optional[int]:
    """Free memory on ``device`` (CUDA: free device memory; CPU: ``MemAvailable``), or ``None`` if unknown."""
    if device.type == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@dataclass
class CapturedGraph:
    """What one pass through the model yields for graph building."""

    maps: list[Tensor]  #: per layer, ``(B, T, T)`` head-reduced edge weights
    mask: Tensor  #: ``(B, T)`` bool, real (non-padding) tokens
    target_position: Tensor  #: ``(B,)`` index of the token whose output is explained
    causal: bool  #: whether the attention was causal (decoder)
    input_gradient: Optional[Tensor] = None  #: ``(B, T)`` gradient x input at the first layer, when asked for


class AttentionGraphAttribution(GradientAttribution):
    r"""Base class: token attributions computed from a model's attention graph.

    Args:
        forward_func (Callable): The model's forward function returning
            logits of shape ``(B, C)`` (or one score per example, ``(B,)``).
            It is called as ``forward_func(inputs, *additional_forward_args)``.
        layers (sequence of nn.Module): The attention modules to hook, first
            layer first; :func:`captum_prxai.attention_layers` finds them.
        attention_fn (callable, optional): Extracts the ``(B, H, T, T)``
            attention probabilities from a hooked module's call; see
            :class:`~captum_prxai.hooks.AttentionRecorder`.
        head_reduction (str): ``"mean"`` (default), ``"sum"`` or ``"max"``.
        target_position (str or int): The token whose output is explained:
            ``"auto"`` (default) takes the last real token when the attention
            is causal (decoders) and the first token (``[CLS]``) otherwise;
            ``"first"``, ``"last"`` or a fixed index force a choice.
        capture (str): ``"auto"`` (default), ``"recompute"`` or ``"weights"``;
            how attention and its gradient are captured, see
            :class:`~captum_prxai.hooks.AttentionRecorder`. Both give the same
            scores; ``"recompute"`` never holds more than one layer's maps.
    """

    #: edge weight used on each layer's attention (name or callable ``(A, dA) -> W``)
    edge_weight: Any = "attention"

    def __init__(
        self,
        forward_func: Callable,
        layers: Union[nn.Module, Sequence[nn.Module]],
        attention_fn: Optional[AttentionExtractor] = None,
        head_reduction: str = "mean",
        target_position: Union[str, int] = "auto",
        capture: str = "auto",
    ) -> None:
        super().__init__(forward_func)
        if isinstance(layers, nn.Module):
            layers = [layers]
        self.layers = list(layers)
        if not self.layers:
            raise PRXAIError("layers is empty; pass the attention modules, e.g. captum_prxai.attention_layers(model).")
        self.attention_fn = attention_fn
        reduce_heads(torch.zeros(1, 1, 1, 1), head_reduction)  # validates the name
        self.head_reduction = head_reduction
        if not (isinstance(target_position, int) or target_position in ("auto", "first", "last")):
            raise PRXAIError(f"target_position must be 'auto', 'first', 'last' or an int, got {target_position!r}.")
        self.target_position = target_position
        if capture not in ("auto", "recompute", "weights"):
            raise PRXAIError(f"capture must be 'auto', 'recompute' or 'weights', got {capture!r}.")
        self.capture = capture

    # -- Captum protocol ------------------------------------------------------------------------
    def has_convergence_delta(self) -> bool:
        return False

    @property
    def multiplies_by_inputs(self) -> bool:
        return False

    @log_usage(part_of_slo=True)
    def attribute(
        self,
        inputs: Tensor,
        target: TargetType = None,
        additional_forward_args: Any = None,
        attention_mask: Optional[Tensor] = None,
        internal_batch_size: Optional[int] = None,
    ) -> Tensor:
        r"""Score every input token from one pass through the model.

        Args:
            inputs (Tensor): Token ids ``(B, T)`` or input embeddings ``(B, T, D)``.
            target (int, sequence of int or Tensor, optional): The output
                index to explain, one for all or one per example. ``None``
                explains each example's predicted class.
            additional_forward_args (Any, optional): Further arguments of
                ``forward_func``, e.g. ``(attention_mask,)``.
            attention_mask (Tensor, optional): ``(B, T)`` padding mask. If
                omitted, the first 0/1 ``(B, T)`` integer tensor of
                ``additional_forward_args`` is used; else every token is real.
            internal_batch_size (int, optional): Process the batch in chunks
                of this size.

        Returns:
            Tensor: ``(B, T)`` float scores for token ids, exactly zero on
            padding; for embeddings, a tensor of the input's shape whose sum
            over the last axis is the token score. PageRank scores sum to one
            per example (their absolute values, with ``signed=True``).

        Examples::

            >>> pr = PRAttentionGradient(forward, attention_layers(model))
            >>> scores = pr.attribute(input_ids, target=1, additional_forward_args=(attention_mask,))
        """
        return self._attribute(inputs, target, additional_forward_args, attention_mask, internal_batch_size)

    # -- subclass hooks -------------------------------------------------------------------------
    def _needs_gradients(self) -> bool:
        return self.edge_weight != "attention" or self._needs_input_gradient()

    def _needs_input_gradient(self) -> bool:
        return False

    def _layer_map(self, layer: int, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        """Per-layer ``(B, T, T)`` map kept from the hooks; override for other reductions."""
        return reduce_heads(edge_weight_fn(self.edge_weight)(attention, grad), self.head_reduction)

    def _token_scores(self, graph: CapturedGraph) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the shared flow ------------------------------------------------------------------------
    def _attribute(
        self,
        inputs: Tensor,
        target: TargetType,
        additional_forward_args: Any,
        attention_mask: Optional[Tensor],
        internal_batch_size: Optional[int],
    ) -> Tensor:
        if not isinstance(inputs, Tensor):
            raise PRXAIError(
                f"inputs must be a tensor of token ids (B, T) or input embeddings (B, T, D), got {type(inputs).__name__}."
            )
        is_ids = not inputs.is_floating_point()
        if (is_ids and inputs.dim() != 2) or (not is_ids and inputs.dim() != 3):
            raise PRXAIError(
                "inputs must be token ids of shape (B, T) or embeddings of shape (B, T, D); got "
                f"{'integer' if is_ids else 'floating-point'} tensor of shape {tuple(inputs.shape)}."
            )
        batch, length = inputs.shape[:2]
        if batch == 0 or length == 0:
            raise PRXAIError(f"inputs is empty (shape {tuple(inputs.shape)}); give at least one token.")
        self._check_length(length)
        extra = _format_additional_forward_args(additional_forward_args) or ()
        mask = _find_attention_mask(attention_mask, extra, batch, length, inputs.device)
        targets = _format_target(target, batch, inputs.device)

        self._check_memory(min(batch, internal_batch_size or batch), length, inputs.device)
        if internal_batch_size is None or internal_batch_size >= batch:
            scores = self._attribute_batch(inputs, targets, extra, mask)
        else:
            if internal_batch_size < 1:
                raise PRXAIError(f"internal_batch_size must be positive, got {internal_batch_size}.")
            chunks = []
            for start in range(0, batch, internal_batch_size):
                part = slice(start, start + internal_batch_size)
                chunk_extra = tuple(
                    a[part] if isinstance(a, Tensor) and a.dim() > 0 and a.shape[0] == batch else a for a in extra
                )
                chunk_targets = None if targets is None else targets[part]
                chunks.append(self._attribute_batch(inputs[part], chunk_targets, chunk_extra, mask[part]))
            scores = torch.cat(chunks)

        scores = scores * mask.to(scores.dtype)
        if not is_ids:
            scores = (scores / inputs.shape[-1]).unsqueeze(-1).expand_as(inputs)
        return scores

    def _attribute_batch(self, inputs: Tensor, targets: Optional[Tensor], extra: tuple, mask: Tensor) -> Tensor:
        graph = self._capture(inputs, targets, extra, mask)
        return self._token_scores(graph)

    def _capture(self, inputs: Tensor, targets: Optional[Tensor], extra: tuple, mask: Tensor) -> CapturedGraph:
        with_gradients = self._needs_gradients()
        causal_flags: list[bool] = []

        def keep(layer: int, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
            if not causal_flags:
                causal_flags.append(_is_causal(attention, mask))
            return self._layer_map(layer, attention, grad)

        recorder = AttentionRecorder(self.layers, keep, with_gradients=with_gradients, attention_fn=self.attention_fn,
                                     capture=self.capture, input_gradient=self._needs_input_gradient())
        with torch.enable_grad() if with_gradients else torch.no_grad():
            with recorder:
                output = self.forward_func(inputs, *extra)
                if isinstance(output, (tuple, list)):
                    output = output[0]
                if hasattr(output, "logits"):
                    output = output.logits
                selected = _select_target(output, targets, inputs.shape[0])
                if with_gradients:
                    recorder.backward(selected.sum())
        maps = recorder.collected()
        length = inputs.shape[1]
        for index, m in enumerate(maps):
            if m.shape[-1] != length:
                raise PRXAIError(
                    f"Layer {index} attends over {m.shape[-1]} positions but the input has {length} tokens; hook "
                    "self-attention layers over the input sequence only."
                )
        maps = [m * mask[:, None, :] * mask[:, :, None] for m in (m.to(torch.float32) if m.dtype in (torch.float16, torch.bfloat16) else m for m in maps)]
        causal = bool(causal_flags and causal_flags[0])
        return CapturedGraph(maps=maps, mask=mask, target_position=self._target_positions(mask, causal), causal=causal,
                             input_gradient=recorder.input_gradient)

    def _target_positions(self, mask: Tensor, causal: bool) -> Tensor:
        batch, length = mask.shape
        choice = self.target_position
        if choice == "auto":
            choice = "last" if causal else "first"
        if choice == "last":
            # last real token: works for left and right padding
            positions = torch.arange(length, device=mask.device).expand(batch, -1)
            return torch.where(mask, positions, torch.full_like(positions, -1)).amax(-1)
        if choice == "first":
            positions = torch.arange(length, device=mask.device).expand(batch, -1)
            return torch.where(mask, positions, torch.full_like(positions, length)).amin(-1)
        index = int(choice) % length
        return torch.full((batch,), index, dtype=torch.long, device=mask.device)

    def _check_memory(self, batch: int, length: int, device: torch.device) -> None:
        heads = max((getattr(getattr(layer, "config", None), "num_attention_heads", 0) or 0) for layer in self.layers)
        if not heads:
            return
        capture = "weights" if self.capture == "weights" or self.attention_fn is not None else "recompute"
        need = attention_memory_bytes(batch, length, len(self.layers), heads, capture=capture)
        free = available_memory_bytes(device)
        if free is not None and need > free:
            raise PRXAIError(
                f"Explaining {batch} sequence(s) of {length} tokens needs about {need / 2**30:.1f} GiB for the "
                f"attention maps of {len(self.layers)} layers x {heads} heads, but only {free / 2**30:.1f} GiB is "
                "available. Pass internal_batch_size=1, shorten the input, or explain it in windows "
                "(PageRankAttribution.attribute_long)."
            )

    def _check_length(self, length: int) -> None:
        for layer in self.layers:
            config = getattr(layer, "config", None)
            limit = max_input_length(config) if config is not None else None
            if limit is not None and length > limit:
                raise PRXAIError(
                    f"The input has {length} tokens but this {config.model_type} model accepts at most {limit}. "
                    "Truncate it (tokenizer(..., truncation=True, max_length="
                    f"{limit})) or explain it in windows."
                )
            return


def _is_causal(attention: Tensor, mask: Tensor) -> bool:
    """Whether each example's first real query attends to no later real key (a cheap ``(B, H, T)`` check).

    Looking at the first *real* row makes the check hold for left-padded
    batches, whose padding rows may attend anywhere.
    """
    length = attention.shape[-1]
    if int(mask.sum(-1).max()) < 2:
        return False
    positions = torch.arange(length, device=mask.device).expand_as(mask)
    first = torch.where(mask, positions, torch.full_like(positions, length)).amin(-1).clamp(max=length - 1)
    rows = attention[torch.arange(attention.shape[0], device=attention.device), :, first]  # (B, H, T)
    later = (positions > first[:, None]) & mask
    return bool((rows.masked_select(later[:, None, :].expand_as(rows)) == 0).all())


def _find_attention_mask(
    explicit: Optional[Tensor], extra: tuple, batch: int, length: int, device: torch.device
) -> Tensor:
    """The ``(B, T)`` padding mask: given explicitly, else the first 0/1 ``(B, T)`` tensor in ``extra``."""
    candidate = explicit
    if candidate is None:
        for value in extra:
            if (
                isinstance(value, Tensor)
                and value.dim() == 2
                and not value.is_floating_point()
                and (value.shape == (batch, length) or value.shape[0] == batch)
            ):
                candidate = value
                break
    if candidate is None:
        return torch.ones(batch, length, dtype=torch.bool, device=device)
    if candidate.shape != (batch, length):
        raise PRXAIError(
            f"The attention mask has shape {tuple(candidate.shape)} but the inputs have (B, T) = ({batch}, {length}); "
            "they must match."
        )
    if not ((candidate == 0) | (candidate == 1)).all():
        raise PRXAIError("The attention mask must hold only 0 (padding) and 1 (token).")
    mask = candidate.to(device=device).bool()
    if not mask.any(-1).all():
        raise PRXAIError("Some example of the batch has an all-zero attention mask; it has no token to explain.")
    return mask


def _format_target(target: TargetType, batch: int, device: torch.device) -> Optional[Tensor]:
    if target is None:
        return None
    if isinstance(target, int):
        return torch.full((batch,), target, dtype=torch.long, device=device)
    targets = torch.as_tensor(target, device=device)
    if targets.dim() == 0:
        targets = targets.expand(batch)
    if targets.dim() != 1 or targets.shape[0] != batch or targets.is_floating_point():
        raise PRXAIError(
            f"target must be an int, or one int per example ({batch}); got {tuple(targets.shape)} of {targets.dtype}."
        )
    return targets.long()


def _select_target(output: Tensor, targets: Optional[Tensor], batch: int) -> Tensor:
    """The scalar per example to explain. ``target=None`` explains the predicted class."""
    if not isinstance(output, Tensor):
        raise PRXAIError(f"forward_func must return a tensor of logits, got {type(output).__name__}.")
    if output.dim() == 1:
        if targets is not None:
            raise PRXAIError("forward_func returns one score per example, so target must be None.")
        return output
    if output.dim() != 2 or output.shape[0] != batch:
        raise PRXAIError(
            f"forward_func must return logits of shape (B, C) = ({batch}, C), got {tuple(output.shape)}."
        )
    classes = output.shape[1]
    if targets is None:
        targets = output.detach().argmax(-1)
    if (targets < 0).any() or (targets >= classes).any():
        bad = targets[(targets < 0) | (targets >= classes)][0].item()
        raise PRXAIError(f"target {bad} is out of range for a model with {classes} outputs (valid: 0..{classes - 1}).")
    return output.gather(1, targets.unsqueeze(1)).squeeze(1)
