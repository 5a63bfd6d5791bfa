"""Shared machinery of the attention-graph attributions.

:class:`AttentionGraphAttribution` checks the inputs once for all methods
(Captum's conventions: token ids or embeddings, ``target``,
``additional_forward_args``, the padding mask, ``internal_batch_size``),
runs one pass through the model with :func:`captum_prxai.capture.capture_graph`
and hands the :class:`~captum_prxai.capture.CapturedGraph` to the subclass,
which turns it into token scores.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Callable, Optional, Sequence, Union

import torch
from captum._utils.common import _format_additional_forward_args
from captum.attr import GradientAttribution
from captum.log import log_usage
from torch import Tensor, nn

from captum_prxai._tokenize import max_input_length
from captum_prxai.capture import (  # noqa: F401  (re-exported for existing imports)
    CapturedGraph,
    LayerTerm,
    attention_memory_bytes,
    available_memory_bytes,
    capture_graph,
    check_memory,
)
from captum_prxai.exceptions import PRXAIError, PRXAIWarning
from captum_prxai.graph.spec import layer_edge_map
from captum_prxai.hooks import AttentionExtractor, resolve_capture_mode

TargetType = Union[None, int, Sequence[int], Tensor]

_log = logging.getLogger("captum_prxai")


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
        pad_token_id (int, optional): The tokenizer's padding id. When no
            attention mask reaches :meth:`attribute`, positions holding this
            id are treated as padding. Default: ``None`` (then ids equal to
            the model config's ``pad_token_id`` only raise a warning).

    Thread safety: one instance (or several on the same model) may be used
    from several threads; passes through the same model run one at a time,
    and the model is always left as it was found (see docs/reliability.md).
    """

    #: edge weight used on each layer's attention (name or callable ``(A, dA) -> W``)
    edge_weight: Any = "attention"
    #: what the backward pass differentiates (:data:`captum_prxai.capture.OBJECTIVES`): the target's output as
    #: returned; :class:`~captum_prxai.PageRankAttribution` takes it as an option
    objective: str = "output"
    #: how the backward pass propagates (:data:`captum_prxai.conservative.PROPAGATIONS`): the model's own gradient;
    #: :class:`~captum_prxai.PageRankAttribution` takes it as an option
    propagation: str = "gradient"

    def __init__(
        self,
        forward_func: Callable,
        layers: Union[nn.Module, Sequence[nn.Module]],
        attention_fn: Optional[AttentionExtractor] = None,
        head_reduction: str = "mean",
        target_position: Union[str, int] = "auto",
        capture: str = "auto",
        pad_token_id: Optional[int] = None,
    ) -> None:
        if not callable(forward_func):
            raise PRXAIError(f"forward_func must be callable, got {type(forward_func).__name__}.")
        super().__init__(forward_func)
        if isinstance(layers, nn.Module):
            layers = [layers]
        self.layers = list(layers)
        if not self.layers:
            raise PRXAIError("layers is empty; pass the attention modules, e.g. captum_prxai.attention_layers(model).")
        for layer in self.layers:
            if not isinstance(layer, nn.Module):
                raise PRXAIError(f"Every layer must be a torch.nn.Module, got {type(layer).__name__}.")
        self.attention_fn = attention_fn
        layer_edge_map("attention", head_reduction)  # validates the name
        self.head_reduction = head_reduction
        if isinstance(target_position, bool) or not (
            isinstance(target_position, int) or target_position in ("auto", "first", "last")
        ):
            raise PRXAIError(f"target_position must be 'auto', 'first', 'last' or an int, got {target_position!r}.")
        self.target_position = target_position
        resolve_capture_mode(self.layers, capture, attention_fn)  # validates the name
        self.capture = capture
        if pad_token_id is not None and (isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int)):
            raise PRXAIError(f"pad_token_id must be an int or None, got {pad_token_id!r}.")
        self.pad_token_id = pad_token_id
        #: where the padding mask of the last call came from (``"attention_mask"``,
        #: ``"additional_forward_args[i]"``, ``"pad_token_id"`` or ``"none"``)
        self.mask_source_: Optional[str] = None

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
            attention_mask (Tensor, optional): ``(B, T)`` padding mask of 0/1
                (integer, bool or float). Recommended. If omitted, a mask is
                taken from ``additional_forward_args`` only when exactly one
                of them can be one (a ``(B, T)`` tensor of 0/1 with a 1 in
                every row); when several can (e.g. ``token_type_ids`` and
                ``attention_mask``), a :class:`PRXAIError` asks for it. Else
                every token is real, unless ``pad_token_id`` was given. The
                choice is recorded in :attr:`mask_source_`.
            internal_batch_size (int, optional): Process the batch in chunks
                of this size.

        Returns:
            Tensor: ``(B, T)`` float scores for token ids, exactly zero on
            padding; for embeddings, a tensor of the input's shape whose sum
            over the last axis is the token score. PageRank scores sum to one
            per example (their absolute values, with ``signed=True``). Scores
            are fp32 (fp64 for a fp64 model) whatever the model's dtype:
            PageRank's power iteration is run in at least fp32 so its
            tolerance is met.

        Examples::

            >>> pr = PRGradient(forward, attention_layers(model))
            >>> scores = pr.attribute(input_ids, target=1, additional_forward_args=(attention_mask,),
            ...                       attention_mask=attention_mask)
        """
        prepared = self._prepare(inputs, target, additional_forward_args, attention_mask, internal_batch_size)
        scores = torch.cat([self._token_scores(self._capture(*chunk)) for chunk in self._chunks(*prepared)])
        return self._finish(scores, inputs, prepared[3])

    # -- subclass hooks -------------------------------------------------------------------------
    def _needs_gradients(self) -> bool:
        return self.edge_weight != "attention" or self._needs_input_gradient()

    def _needs_input_gradient(self) -> bool:
        return False

    def _layer_map(self, layer: int, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        """Per-layer ``(B, T, T)`` map kept from the hooks; override for other reductions."""
        return layer_edge_map(self.edge_weight, self.head_reduction)(attention, grad)

    def _token_scores(self, graph: CapturedGraph) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the shared flow ------------------------------------------------------------------------
    def _prepare(
        self,
        inputs: Tensor,
        target: TargetType,
        additional_forward_args: Any,
        attention_mask: Optional[Tensor],
        internal_batch_size: Optional[int],
    ) -> tuple[Tensor, Optional[Tensor], tuple, Tensor, int]:
        """Check the inputs; return ``(inputs, targets, extra, mask, chunk size)``."""
        _check_inputs(inputs, self.layers)
        batch, length = inputs.shape[:2]
        self._check_length(length)
        if internal_batch_size is not None and (
            isinstance(internal_batch_size, bool) or not isinstance(internal_batch_size, int) or internal_batch_size < 1
        ):
            raise PRXAIError(f"internal_batch_size must be a positive int, got {internal_batch_size!r}.")
        extra = _format_additional_forward_args(additional_forward_args) or ()
        mask, source = _find_attention_mask(attention_mask, extra, inputs, self._pad_token_id())
        self.mask_source_ = source
        if source != "attention_mask":
            _log.info("captum_prxai: padding mask from %s", source)
        if source == "none" and not inputs.is_floating_point():
            self._warn_if_pad_ids(inputs)
        targets = _format_target(target, batch, inputs.device)
        step = min(batch, internal_batch_size or batch)
        check_memory(self.layers, step, length, inputs.device, self.capture, self.attention_fn,
                     summed=self._layer_term() is not None)
        return inputs, targets, extra, mask, step

    def _chunks(self, inputs: Tensor, targets: Optional[Tensor], extra: tuple, mask: Tensor, step: int):
        """``(inputs, targets, extra, mask)`` per chunk of ``step`` examples."""
        batch = inputs.shape[0]
        for start in range(0, batch, step):
            part = slice(start, start + step)
            if step >= batch:
                yield inputs, targets, extra, mask
                return
            chunk_extra = tuple(
                a[part] if isinstance(a, Tensor) and a.dim() > 0 and a.shape[0] == batch else a for a in extra
            )
            yield inputs[part], None if targets is None else targets[part], chunk_extra, mask[part]

    def _finish(self, scores: Tensor, inputs: Tensor, mask: Tensor) -> Tensor:
        scores = scores * mask.to(scores.dtype)
        if inputs.is_floating_point():
            scores = (scores / inputs.shape[-1]).unsqueeze(-1).expand_as(inputs)
        return scores

    def _capture(self, inputs: Tensor, targets: Optional[Tensor], extra: tuple, mask: Tensor) -> CapturedGraph:
        objective, propagation = self._backward_options()
        return capture_graph(
            self.forward_func,
            self.layers,
            inputs,
            mask,
            self._layer_map,
            targets=targets,
            additional_forward_args=extra,
            with_gradients=self._needs_gradients(),
            input_gradient=self._needs_input_gradient(),
            attention_fn=self.attention_fn,
            capture=self.capture,
            target_position=self.target_position,
            layer_term=self._layer_term(),
            objective=objective,
            propagation=propagation,
        )

    def _backward_options(self) -> tuple[str, str]:
        """``(objective, propagation)`` of the backward pass."""
        return self.objective, self.propagation

    def _layer_term(self) -> Optional[LayerTerm]:
        """One layer's term, when the method's graph is a sum over layers (then only the sum is kept)."""
        return None

    def _pad_token_id(self) -> Optional[int]:
        return self.pad_token_id

    def _warn_if_pad_ids(self, ids: Tensor) -> None:
        config = getattr(self.layers[0], "config", None)
        pad = getattr(config, "pad_token_id", None)
        if isinstance(pad, int) and bool((ids == pad).any()):
            count = int((ids == pad).sum())
            warnings.warn(
                f"The input ids contain the model's pad id {pad} at {count} position(s), but no attention mask "
                "reached the attribution, so they are scored as tokens. Pass attention_mask=..., or "
                f"pad_token_id={pad} to the attribution's constructor to treat them as padding.",
                PRXAIWarning,
                stacklevel=4,
            )

    def _check_length(self, length: int) -> None:
        config = getattr(self.layers[0], "config", None)
        limit = max_input_length(config) if config is not None else None
        if limit is not None and length > limit:
            raise PRXAIError(
                f"The input has {length} tokens but this {getattr(config, 'model_type', '')} model accepts at most "
                f"{limit}. Truncate it (tokenizer(..., truncation=True, max_length={limit})) or explain it in "
                "windows (PageRankAttribution.attribute_long)."
            )


def _check_inputs(inputs: Any, layers: Sequence[nn.Module]) -> None:
    if not isinstance(inputs, Tensor):
        raise PRXAIError(
            f"inputs must be a tensor of token ids (B, T) or input embeddings (B, T, D), got {type(inputs).__name__}."
        )
    is_ids = not inputs.is_floating_point()
    if inputs.dtype == torch.bool or (is_ids and inputs.dim() != 2) or (not is_ids and inputs.dim() != 3):
        raise PRXAIError(
            "inputs must be token ids of shape (B, T) or embeddings of shape (B, T, D); got "
            f"{'integer' if is_ids else 'floating-point'} tensor of shape {tuple(inputs.shape)} ({inputs.dtype})."
        )
    if inputs.shape[0] == 0 or inputs.shape[1] == 0:
        raise PRXAIError(f"inputs is empty (shape {tuple(inputs.shape)}); give at least one token.")
    if inputs.device.type == "meta" or any(p.device.type == "meta" for layer in layers for p in layer.parameters()):
        raise PRXAIError(
            "The inputs or the model's weights are on the meta device (no data). Load the weights (e.g. "
            "from_pretrained without device_map='meta'/low_cpu_mem_usage tricks) and move the model to a real device."
        )
    if is_ids:
        config = getattr(layers[0], "config", None)
        vocab = getattr(config, "vocab_size", None)
        low, high = int(inputs.min()), int(inputs.max())
        if low < 0 or (isinstance(vocab, int) and high >= vocab):
            bad = low if low < 0 else high
            limit = f"0..{vocab - 1}" if isinstance(vocab, int) else "non-negative"
            raise PRXAIError(
                f"Token id {bad} is outside this model's vocabulary ({limit}); encode the text with the model's own "
                "tokenizer."
            )


def _mask_values_ok(value: Tensor) -> bool:
    return bool(((value == 0) | (value == 1)).all())


def _find_attention_mask(
    explicit: Optional[Tensor], extra: tuple, inputs: Tensor, pad_token_id: Optional[int]
) -> tuple[Tensor, str]:
    """The ``(B, T)`` bool padding mask, and where it came from.

    Never guessed by position: the explicit ``attention_mask``; else the one
    tensor of ``extra`` that can be a padding mask (``(B, T)``, values 0/1,
    a 1 in every row); else ids different from ``pad_token_id``; else all
    tokens. Several different candidates are an error, not a guess.
    """
    batch, length = inputs.shape[:2]
    device = inputs.device
    if explicit is not None:
        if not isinstance(explicit, Tensor):
            raise PRXAIError(f"attention_mask must be a tensor, got {type(explicit).__name__}.")
        if explicit.shape != (batch, length):
            raise PRXAIError(
                f"The attention mask has shape {tuple(explicit.shape)} but the inputs have (B, T) = "
                f"({batch}, {length}); they must match."
            )
        if not _mask_values_ok(explicit):
            raise PRXAIError("The attention mask must hold only 0 (padding) and 1 (token).")
        candidate, source = explicit, "attention_mask"
    else:
        found = [
            (index, value)
            for index, value in enumerate(extra)
            if isinstance(value, Tensor)
            and value.shape == (batch, length)
            and _mask_values_ok(value)
            and bool((value != 0).any(-1).all())
        ]
        distinct = [found[0]] if found else []
        for index, value in found[1:]:
            if not any(torch.equal(value.to(other.dtype).to(other.device), other) for _, other in distinct):
                distinct.append((index, value))
        if len(distinct) > 1:
            where = ", ".join(f"additional_forward_args[{i}]" for i, _ in distinct)
            raise PRXAIError(
                f"Several arguments could be the padding mask ({where}; e.g. attention_mask and token_type_ids), "
                "so none is guessed. Pass it explicitly: attribute(..., attention_mask=attention_mask)."
            )
        if distinct:
            candidate, source = distinct[0][1], f"additional_forward_args[{distinct[0][0]}]"
        elif pad_token_id is not None and not inputs.is_floating_point():
            candidate, source = inputs != pad_token_id, "pad_token_id"
        else:
            return torch.ones(batch, length, dtype=torch.bool, device=device), "none"
    mask = candidate.to(device=device) != 0
    if not bool(mask.any(-1).all()):
        raise PRXAIError(
            f"Some example of the batch has no real token according to the padding mask (from {source}); it has "
            "nothing to explain."
        )
    return mask, source


def _format_target(target: TargetType, batch: int, device: torch.device) -> Optional[Tensor]:
    if target is None:
        return None
    if isinstance(target, str):
        raise PRXAIError(
            f"target must be a class index (int), got the string {target!r}; map label names to indices with "
            "model.config.label2id."
        )
    if isinstance(target, bool):
        raise PRXAIError(f"target must be a class index (int), got the bool {target!r}.")
    if isinstance(target, int):
        return torch.full((batch,), target, dtype=torch.long, device=device)
    if isinstance(target, (list, tuple)) and any(isinstance(t, (bool, str)) or not isinstance(t, int) for t in target):
        raise PRXAIError(f"target must be an int, or one int per example ({batch}); got {target!r}.")
    try:
        targets = torch.as_tensor(target, device=device)
    except (TypeError, ValueError, RuntimeError):
        raise PRXAIError(f"target must be an int, or one int per example ({batch}); got {target!r}.") from None
    if targets.dim() == 0:
        targets = targets.expand(batch)
    if targets.dim() != 1 or targets.shape[0] != batch or targets.is_floating_point() or targets.dtype == torch.bool:
        raise PRXAIError(
            f"target must be an int, or one int per example ({batch}); got {tuple(targets.shape)} of {targets.dtype}."
        )
    return targets.long()
