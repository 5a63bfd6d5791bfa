"""Capture: one pass through the model, yielding the per-layer edge maps a graph is built from.

:func:`capture_graph` is the single place where a model is run for an
attention-graph attribution: it hooks the attention layers with an
:class:`~captum_prxai.hooks.AttentionRecorder`, runs ``forward_func`` (and,
when the edges need it, one backward pass that stops at the attention maps),
reduces each layer's per-head maps as they arrive, and returns a
:class:`CapturedGraph`: ``(B, T, T)`` maps in fp32 (or fp64) with padding
zeroed, the explained positions, the causal flag, the model's logits and the
explained targets. :func:`captum_prxai.graph.spec.build_graph` takes it from
there.
"""

from __future__ import annotations

import math
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import CheckpointError

from captum_prxai._attention_math import tile_bytes as _tile_bytes
from captum_prxai._checks import all_finite
from captum_prxai.conservative import check_propagation, conservative_propagation
from captum_prxai.exceptions import PRXAIError, PRXAIWarning
from captum_prxai.hooks import (
    CHECKPOINTING_MESSAGE,
    AttentionExtractor,
    AttentionRecorder,
    GradientOverflow,
    current_tile_bytes,
    resolve_capture_mode,
)

__all__ = [
    "CapturedGraph",
    "OBJECTIVES",
    "attention_memory_bytes",
    "available_memory_bytes",
    "capture_graph",
    "check_memory",
    "check_objective",
    "layers_are_causal",
    "log_probabilities",
    "loss_scale",
    "model_is_causal",
    "model_depth",
    "target_positions",
]

#: ``(layer index, A (B, H, T, T), dA or None) -> (B, T, T)``: one layer's head-reduced edge map.
EdgeMap = Callable[[int, Tensor, Optional[Tensor]], Tensor]
#: ``(edge map (B, T, T), mask (B, T), causal) -> (B, T, T)``: one layer's term of a graph summed over layers.
LayerTerm = Callable[[Tensor, Tensor, bool], Tensor]


@dataclass
class CapturedGraph:
    """What one pass through the model yields for graph building."""

    #: per layer, ``(B, T, T)`` head-reduced edge weights, padding zeroed; with :attr:`summed`, one map:
    #: the sum of the layers' terms (see ``layer_term`` of :func:`capture_graph`)
    maps: list[Tensor]
    mask: Tensor  #: ``(B, T)`` bool, real (non-padding) tokens
    target_position: Tensor  #: ``(B,)`` index of the token whose output is explained
    causal: bool  #: whether the attention was causal (decoder)
    input_gradient: Optional[Tensor] = None  #: ``(B, T)`` gradient x input at the first layer, when asked for
    logits: Optional[Tensor] = None  #: ``(B, C)`` the model's detached output (``(B,)`` for one score)
    target: Optional[Tensor] = None  #: ``(B,)`` the explained output index (``None`` for one score)
    summed: bool = False  #: whether :attr:`maps` holds the layers' summed terms instead of one map per layer


def attention_memory_bytes(
    batch: int,
    length: int,
    layers: int,
    heads: int,
    itemsize: int = 4,
    capture: str = "recompute",
    tile_bytes: Optional[int] = None,
    summed: bool = False,
) -> int:
    """Rough peak memory of the attention maps of one attribution pass (bytes).

    Two parts:

    * **Per-head maps.** With ``capture="recompute"`` (tiled, see
      :mod:`captum_prxai._attention_math`) one layer is computed at a time,
      in tiles of ``r`` query rows; about five ``(B, H, r, T)`` tensors exist
      at once (probabilities, their gradient, the softmax gradient, the edge
      weight and a temporary), ``r`` chosen by
      :func:`~captum_prxai._attention_math.tile_rows` so that one of them fits
      in ``tile_bytes`` (default: :func:`~captum_prxai.hooks.current_tile_bytes`,
      16 MiB). So this part is bounded by the budget, whatever the length.
      With ``capture="weights"`` autograd keeps the model's ``(B, H, T, T)``
      map of every layer for the backward pass, plus about three for the layer
      being computed: ``(L + 3)`` maps.
    * **Head-reduced maps.** The ``L`` ``(B, T, T)`` edge maps kept for the
      graph, plus about three more while the graph is built and PageRank runs
      (the summed adjacency, the masked copy and a temporary), in fp32:
      ``(L + 3) * B * T * T * 4`` bytes. With ``summed`` (the token graph:
      :func:`capture_graph` with ``layer_term``) only the running sum and
      the layer being written are kept, ``(2 + 3)`` maps whatever ``L``
      (``min(L, 2) + 3``). This part grows as ``T**2`` and dominates at long
      lengths.
    """
    kept = min(layers, 2) if summed else layers
    reduced = (kept + 3) * batch * length * length * 4
    if capture == "recompute":
        tile = _tile_bytes(batch, heads, length, length, itemsize,
                           current_tile_bytes() if tile_bytes is None else tile_bytes)
        return 5 * tile + reduced
    return (layers + 3) * batch * heads * length * length * itemsize + reduced


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


def _heads(layer: nn.Module) -> int:
    """Attention heads of a layer: from the module itself, else from its config (0 if unknown)."""
    for owner in (layer, getattr(layer, "config", None)):
        for name in ("num_attention_heads", "num_heads", "n_heads", "n_head"):
            value = getattr(owner, name, None)
            if isinstance(value, int) and value > 0:
                return value
    return 0


def check_memory(layers: Sequence[nn.Module], batch: int, length: int, device: torch.device, capture: str,
                 attention_fn: Optional[AttentionExtractor], summed: bool = False) -> None:
    """Raise a clear :class:`PRXAIError` before a pass whose attention maps would not fit in memory.

    The capture mode is the one the recorder will use
    (:func:`~captum_prxai.hooks.resolve_capture_mode`), so layers that fall
    back to materialised weights (e.g. MPNet) are counted as such; recomputed
    layers are counted as tiles of the current budget
    (:func:`~captum_prxai.hooks.tile_budget`), see :func:`attention_memory_bytes`;
    ``summed``: the capture keeps only the running sum over layers.
    """
    heads = max(_heads(layer) for layer in layers)
    if not heads:
        return
    mode = resolve_capture_mode(layers, capture, attention_fn)
    need = attention_memory_bytes(batch, length, len(layers), heads, capture=mode, summed=summed)
    free = available_memory_bytes(device)
    if free is not None and need > free:
        raise PRXAIError(
            f"Explaining {batch} sequence(s) of {length} tokens needs about {need / 2**30:.1f} GiB for the "
            f"attention maps of {len(layers)} layers x {heads} heads, but only {free / 2**30:.1f} GiB is "
            "available. Pass internal_batch_size=1, shorten the input, or explain it in windows "
            "(PageRankAttribution.attribute_long)."
        )


def target_positions(mask: Tensor, causal: bool, choice: Union[str, int] = "auto") -> Tensor:
    """``(B,)`` index of the explained token: the last real token for causal models, the first otherwise.

    ``choice`` may force ``"first"``, ``"last"`` or a fixed index (which must
    be a real token of every example).
    """
    batch, length = mask.shape
    if choice == "auto":
        choice = "last" if causal else "first"
    positions = torch.arange(length, device=mask.device).expand(batch, -1)
    if choice == "last":  # last real token: works for left and right padding
        return torch.where(mask, positions, torch.full_like(positions, -1)).amax(-1)
    if choice == "first":
        return torch.where(mask, positions, torch.full_like(positions, length)).amin(-1)
    index = int(choice)
    if not -length <= index < length:
        raise PRXAIError(f"target_position={index} is outside the {length} input positions (0..{length - 1}).")
    index %= length
    if not bool(mask[:, index].all()):
        raise PRXAIError(f"target_position={index} is a padding position of some example; explain a real token.")
    return torch.full((batch,), index, dtype=torch.long, device=mask.device)


def model_is_causal(model: nn.Module) -> bool:
    """Whether ``model`` declares causal self-attention (a decoder, which explains its last real token).

    Read from the attention modules' ``is_causal`` attribute (Hugging Face
    decoders set it; encoders leave it unset or ``False``), before any pass
    through the model. :func:`capture_graph` decides from the captured maps
    instead (:attr:`CapturedGraph.causal`); this is for callers that need the
    answer without a capture, such as the faithfulness benchmark protecting
    the explained token (:func:`captum_prxai.metrics.protect_positions`).
    A model without recognised attention layers counts as an encoder
    (``False``).
    """
    return layers_are_causal(_found_layers(model))


def model_depth(model: nn.Module) -> int:
    """The number of attention layers of ``model`` (:func:`captum_prxai.attention_layers`), 0 when none is found.

    What ``attention_power="auto"`` reads
    (:func:`captum_prxai.graph.spec.auto_attention_power`), before any pass.
    """
    return len(_found_layers(model))


def _found_layers(model: nn.Module) -> list:
    """:func:`captum_prxai.attention_layers` of ``model``, or none where they are not recognised."""
    from captum_prxai.hooks import attention_layers

    try:
        return attention_layers(model)
    except PRXAIError:
        return []


def layers_are_causal(layers: Sequence[nn.Module]) -> bool:
    """Whether any of these attention modules declares causal attention (``is_causal``); see :func:`model_is_causal`."""
    return any(bool(getattr(layer, "is_causal", False)) for layer in layers)


def _is_causal(attention: Tensor, mask: Tensor) -> bool:
    """Whether each example's first real query attends to no later real key (a cheap ``(B, H, T)`` check).

    Looking at the first *real* row makes the check hold for left-padded
    batches, whose padding rows may attend anywhere.
    """
    if int(mask.sum(-1).max()) < 2:
        return False
    _, causal = _causal_rows(attention, mask, slice(0, attention.shape[-2]))
    return bool(causal.all())


def _causal_rows(attention: Tensor, mask: Tensor, rows: slice) -> tuple[Tensor, Tensor]:
    """:func:`_is_causal` on a tile of query ``rows``: ``(seen (B,), causal (B,))``, on the device.

    ``seen`` marks the examples whose first real query lies in the tile;
    ``causal`` is False only for those of them that attend to a later real key.
    """
    length = mask.shape[-1]
    positions = torch.arange(length, device=mask.device).expand_as(mask)
    first = torch.where(mask, positions, torch.full_like(positions, length)).amin(-1).clamp(max=length - 1)
    seen = (first >= rows.start) & (first < rows.stop)
    local = (first - rows.start).clamp(0, attention.shape[-2] - 1)
    picked = attention[torch.arange(attention.shape[0], device=attention.device), :, local]  # (B, H, T)
    later = (positions > first[:, None]) & mask
    attends_later = ((picked != 0) & later[:, None, :]).any(-1).any(-1)
    return seen, ~(seen & attends_later)


#: What the backward pass differentiates (``capture_graph``'s ``objective``): the target's output as returned
#: (its logit), or the target class's log-probability over the outputs.
OBJECTIVES = ("output", "log_probability")


def check_objective(objective: str, choices: Sequence[str] = OBJECTIVES) -> str:
    """``objective`` if it is one of ``choices`` (default :data:`OBJECTIVES`); else a :class:`PRXAIError` naming
    them."""
    if not isinstance(objective, str) or objective not in choices:
        raise PRXAIError(f"objective must be one of {', '.join(map(repr, choices))}, got {objective!r}.")
    return objective


def _is_distribution(output: Tensor) -> bool:
    """Whether every row of ``(B, C)`` ``output`` is a probability distribution (non-negative, summing to one)."""
    values = output.detach()
    return bool((values >= 0).all()) and bool(((values.sum(-1) - 1).abs() <= 1e-3).all())


def log_probabilities(output: Tensor) -> Tensor:
    """``(B, C)`` log-probabilities of ``(B, C)`` class outputs, differentiable: ``log_softmax`` over the classes
    of logits (or of log-probabilities, which it leaves as they are), ``log`` of outputs that are already
    probability distributions (rows non-negative and summing to one, e.g. a ``softmax`` inside ``forward_func``)."""
    if _is_distribution(output):
        return torch.log(output.clamp_min(torch.finfo(output.dtype).tiny))
    return torch.log_softmax(output, dim=-1)


def _select_target(output: Any, targets: Optional[Tensor], batch: int,
                   objective: str = "output") -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """``(objective per example, logits, targets)``. ``targets=None`` explains the predicted class.

    ``objective="log_probability"`` differentiates the target class's log-probability
    (:func:`log_probabilities`) instead of its output; with one output per example (or one class) the output
    itself, which for a sigmoid's logit ``z`` gives the same scores as ``log σ(z)``: the two gradients differ by the
    positive factor ``1 − σ(z)``, which PageRank's normalisation removes."""
    if isinstance(output, (tuple, list)):
        output = output[0]
    if hasattr(output, "logits"):
        output = output.logits
    if not isinstance(output, Tensor):
        raise PRXAIError(f"forward_func must return a tensor of logits, got {type(output).__name__}.")
    if not torch.isfinite(output).all():
        raise PRXAIError(
            "forward_func returned NaN or infinite logits, so no attribution is defined; check the inputs "
            "(e.g. NaN embeddings) and the model's weights."
        )
    if output.dim() == 1:
        if targets is not None:
            raise PRXAIError("forward_func returns one score per example, so target must be None.")
        return output, output, None
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
    scores = log_probabilities(output) if objective == "log_probability" and classes >= 2 else output
    return scores.gather(1, targets.unsqueeze(1)).squeeze(1), output, targets


def _has_active_dropout(layer: nn.Module) -> bool:
    if not layer.training:
        return False
    if any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in layer.modules()):
        return True
    return any(isinstance(getattr(layer, name, None), float) and getattr(layer, name) > 0
               for name in ("attention_dropout", "dropout", "attn_dropout"))


def _warn_if_training(layers: Sequence[nn.Module]) -> None:
    if any(_has_active_dropout(layer) for layer in layers):
        warnings.warn(
            "The model is in training mode, so dropout makes the scores random; call model.eval() first.",
            PRXAIWarning,
            stacklevel=4,
        )


def capture_graph(
    forward_func: Callable,
    layers: Sequence[nn.Module],
    inputs: Tensor,
    mask: Tensor,
    edge_map: EdgeMap,
    *,
    targets: Optional[Tensor] = None,
    additional_forward_args: tuple = (),
    with_gradients: bool = True,
    input_gradient: bool = False,
    attention_fn: Optional[AttentionExtractor] = None,
    capture: str = "auto",
    target_position: Union[str, int] = "auto",
    tile_bytes: Optional[int] = None,
    layer_term: Optional[LayerTerm] = None,
    objective: str = "output",
    propagation: str = "gradient",
) -> CapturedGraph:
    """Run one forward (and backward) pass and return the per-layer edge maps.

    Args:
        forward_func (Callable): Called as ``forward_func(inputs, *additional_forward_args)``;
            returns logits ``(B, C)`` or one score per example ``(B,)``.
        layers (sequence of nn.Module): Attention modules, first layer first.
        inputs (Tensor): Token ids ``(B, T)`` or embeddings ``(B, T, D)``.
        mask (Tensor): ``(B, T)`` bool, real tokens.
        edge_map (callable): ``(layer, A, dA) -> (B, T, T)`` per-layer map, e.g.
            ``lambda layer, a, g: spec.edge_map(a, g)`` for a
            :class:`~captum_prxai.graph.spec.GraphSpec`.
        targets (Tensor, optional): ``(B,)`` output indices; ``None``: predicted class.
        additional_forward_args (tuple): Further arguments of ``forward_func``.
        with_gradients (bool): Back-propagate the target to the attention maps.
        input_gradient (bool): Also return gradient x input at the first layer.
        attention_fn, capture: See :class:`~captum_prxai.hooks.AttentionRecorder`.
        target_position: See :func:`target_positions`.
        tile_bytes (int, optional): Budget of one per-head attention tile
            (see :func:`~captum_prxai.hooks.tile_budget`); default: the
            current budget, 16 MiB. ``edge_map`` is called once per tile of
            query rows, ``(layer, A (B, H, r, T), dA) -> (B, r, T)``, so it
            must be elementwise or row-wise (the built-in edge weights are).
            On CPU a batch whose whole tile would leave the cache is tiled
            one example at a time (``B = 1`` per call; see
            :class:`~captum_prxai.hooks.AttentionRecorder`'s ``batch_tiles``).
        layer_term (callable, optional): ``(map (B, T, T), mask, causal) -> (B, T, T)``,
            one layer's term of a graph that is a sum over layers (the token graph:
            :func:`~captum_prxai.graph.spec.token_layer`). Given, each layer's map is
            turned into its term as soon as the layer is complete and added to a
            running sum, so one layer's map is kept instead of ``L``; the result
            holds the sum as its one map (:attr:`CapturedGraph.summed`). The causal
            flag comes from the first layer to arrive, which is complete before the
            first term is taken.
        objective (str): What the backward pass differentiates: ``"output"``
            (default) the target's entry of the output as returned (its logit),
            ``"log_probability"`` the target class's log-probability
            (:func:`log_probabilities`; :data:`OBJECTIVES`). The returned
            logits are the output as returned either way.
        propagation (str): How the backward pass propagates: ``"gradient"``
            (default) the model's own gradient, ``"conservative"`` with every
            attention softmax and normaliser scale held constant in the
            backward pass, the forward values unchanged (CP-LRP's backward
            pass, Ali et al. 2022; :mod:`captum_prxai.conservative`), so the
            edges' ``dA`` and the gradient x input are those of the network
            with its attention weights and normalisers fixed.

    Returns:
        CapturedGraph: maps in at least fp32, zero on padding rows and columns.

    For a fp16 model the backward pass differentiates the objective times a
    power of two, so that small gradients do not underflow, and the
    gradients are divided by it in fp32 (:func:`loss_scale`); in the rare
    case that a gradient overflows under that scale, the whole pass runs
    again with a smaller one, so ``forward_func`` is called more than once.
    """
    _warn_if_training(layers)
    if with_gradients and torch.is_inference_mode_enabled():
        raise PRXAIError(
            "attribute() was called under torch.inference_mode(), which forbids the backward pass gradient-based "
            "edges need; call it outside inference_mode (PR-A, edge_weight='attention', needs no gradients)."
        )
    if with_gradients and not inputs.requires_grad and inputs.is_floating_point():
        # a frozen model's pass flags the tensor entering its first layer; never the caller's own tensor
        inputs = inputs.detach()
    options = dict(targets=targets, additional_forward_args=additional_forward_args, with_gradients=with_gradients,
                   input_gradient=input_gradient, attention_fn=attention_fn, capture=capture,
                   target_position=target_position, tile_bytes=tile_bytes, layer_term=layer_term,
                   objective=objective, propagation=propagation)
    most = MAX_LOSS_SCALE
    while True:
        try:
            return _capture_pass(forward_func, layers, inputs, mask, edge_map, most, **options)
        except GradientOverflow as overflow:  # only raised for a scale above 1: run again with a smaller one
            most = max(1.0, overflow.scale / 2**LOSS_SCALE_BACKOFF)


#: The largest scale of the objective of a fp16 backward pass, and (as a power of two) the magnitude the scale
#: brings the largest logit to (see :func:`loss_scale`).
MAX_LOSS_SCALE = 2.0**24
LOSS_SCALE_TARGET = 8
#: After a gradient overflowed, the pass runs again with the scale divided by ``2**LOSS_SCALE_BACKOFF``.
LOSS_SCALE_BACKOFF = 6


def loss_scale(logits: Tensor, layers: Sequence[nn.Module], inputs: Tensor, most: float = MAX_LOSS_SCALE) -> float:
    """The power of two the backward pass of a fp16 model multiplies its objective by (1 for other dtypes).

    fp16's smallest normal number is about 6e-5 and its smallest subnormal
    6e-8. A model with small logits (a tiny or barely trained classifier,
    logits of order 0.01) has small output weights, so its gradients with
    respect to the attention probabilities are of order 1e-8 or less: in
    fp16 they lose their digits or become 0, and the gradient-based edges and
    the gradient x input differ from fp32's. As in mixed-precision training,
    the objective is multiplied by a power of two ``s`` and the recorder
    divides every gradient by ``s`` in fp32 as it arrives
    (:meth:`~captum_prxai.hooks.AttentionRecorder.backward`); multiplying by a
    power of two is exact, so only the underflow goes away. ``s`` brings the
    largest logit's magnitude to about ``2**LOSS_SCALE_TARGET`` (256): the
    gradient of the objective (a logit or a log-probability) with respect to
    the logits is at most 1 in magnitude, so the logits' magnitude, not the
    objective's, tracks how small the gradients behind them are. A gradient
    that overflows makes :func:`capture_graph` run the pass again with ``s``
    divided by ``2**LOSS_SCALE_BACKOFF``. bf16 has fp32's exponent range and
    is not scaled.

    Args:
        logits (Tensor): The model's output, ``(B, C)`` or ``(B,)``.
        layers (sequence of nn.Module): The hooked attention modules.
        inputs (Tensor): The inputs (ids or embeddings).
        most (float): The largest scale allowed.

    Returns:
        float: ``s``, a power of two in ``[1, most]``.
    """
    half = inputs.dtype == torch.float16 or logits.dtype == torch.float16 or any(
        parameter.dtype == torch.float16 for layer in layers for parameter in layer.parameters())
    if not half or most <= 1:
        return 1.0
    largest = float(logits.detach().abs().max()) if logits.numel() else 0.0
    if not math.isfinite(largest):
        return 1.0
    exponent = LOSS_SCALE_TARGET - math.log2(max(largest, 2.0**-24))
    return float(2.0 ** min(max(math.floor(exponent), 0), math.log2(most)))


def _capture_pass(
    forward_func: Callable,
    layers: Sequence[nn.Module],
    inputs: Tensor,
    mask: Tensor,
    edge_map: EdgeMap,
    most_scale: float,
    *,
    targets: Optional[Tensor],
    additional_forward_args: tuple,
    with_gradients: bool,
    input_gradient: bool,
    attention_fn: Optional[AttentionExtractor],
    capture: str,
    target_position: Union[str, int],
    tile_bytes: Optional[int],
    layer_term: Optional[LayerTerm],
    objective: str,
    propagation: str,
) -> CapturedGraph:
    """One forward (and backward) pass of :func:`capture_graph`, the objective scaled by at most ``most_scale``."""
    # the causal check runs on the first layer whose maps arrive, tile by tile: (layer, seen, causal)
    causal_state: list[Any] = []
    length = inputs.shape[1]
    keep_mask = None if bool(mask.all()) else mask[:, None, :] & mask[:, :, None]

    # layer_term: the running sum, the layer whose map is being written (folded once the next one starts), and
    # the causal flag, final once the first layer to arrive is complete (taken once: it costs host syncs)
    running: dict[str, Any] = {"sum": None, "open": None, "causal": None}

    def is_causal() -> bool:
        if running["causal"] is None:
            running["causal"] = bool(causal_state) and int(mask.sum(-1).max()) >= 2 and bool(
                (causal_state[1] & causal_state[2]).all())
        return running["causal"]

    def fold(index: int) -> None:
        stored = recorder.maps[index]
        recorder.maps[index] = _FOLDED
        term = layer_term(_checked_map(stored, index, length, keep_mask), mask, is_causal())
        if running["sum"] is None:  # the sum is added to in place: never let it be the stored map itself
            same = term.untyped_storage().data_ptr() == stored.untyped_storage().data_ptr()
            running["sum"] = term.clone() if same else term
        else:
            running["sum"].add_(term)

    def keep(layer: int, attention: Tensor, grad: Optional[Tensor], rows: Optional[slice] = None,
             examples: slice = slice(None)) -> Tensor:
        if layer_term is not None and running["open"] is not None and running["open"] != layer:
            fold(running["open"])  # that layer is complete: its last tile was stored before this call
        running["open"] = layer
        if not causal_state:
            causal_state.extend([layer, torch.zeros(mask.shape[0], dtype=torch.bool, device=mask.device),
                                 torch.ones(mask.shape[0], dtype=torch.bool, device=mask.device)])
        if causal_state[0] == layer:
            seen, causal = _causal_rows(attention, mask[examples],
                                        slice(0, attention.shape[-2]) if rows is None else rows)
            causal_state[1][examples] |= seen
            causal_state[2][examples] &= causal
        return edge_map(layer, attention, grad)

    recorder = AttentionRecorder(layers, keep, with_gradients=with_gradients, attention_fn=attention_fn,
                                 capture=capture, input_gradient=input_gradient,
                                 tile_bytes=current_tile_bytes() if tile_bytes is None else tile_bytes,
                                 batch_tiles=True)
    with torch.enable_grad() if with_gradients else torch.no_grad():
        with recorder:
            with conservative_propagation() if check_propagation(propagation) == "conservative" else nullcontext():
                output = _run_forward(forward_func, inputs, additional_forward_args, layers)
            objective_values, logits, chosen = _select_target(output, targets, inputs.shape[0],
                                                              check_objective(objective))
            if with_gradients:
                if not objective_values.requires_grad:
                    raise PRXAIError(
                        "The logits returned by forward_func do not depend on the attention maps through autograd "
                        "(are they detached, or computed under torch.no_grad()/inference_mode inside forward_func?); "
                        "gradient-based edges need them. Return the model's logits as they are."
                    )
                try:
                    recorder.backward(objective_values.sum(), loss_scale(logits, layers, inputs, most_scale))
                except CheckpointError:  # the recorder refuses recomputed layers; this is torch's own word for it
                    raise PRXAIError(CHECKPOINTING_MESSAGE) from None
    recorder.collected()  # raises if a layer produced no map
    if layer_term is not None:
        for index, m in enumerate(recorder.maps):
            if m is not _FOLDED:
                fold(index)
        maps = [running["sum"]]
    else:
        maps = list(recorder.maps)
        # one map at a time, so that at most one extra (B, T, T) map exists (the recorder lets go of its own)
        recorder.maps = [None] * len(recorder.maps)
        for index in range(len(maps)):
            maps[index] = _checked_map(maps[index], index, length, keep_mask)
    causal = is_causal()
    return CapturedGraph(
        maps=maps,
        mask=mask,
        target_position=target_positions(mask, causal, target_position),
        causal=causal,
        input_gradient=recorder.input_gradient,
        logits=logits.detach(),
        target=chosen,
        summed=layer_term is not None,
    )


def _run_forward(forward_func: Callable, inputs: Tensor, additional_forward_args: tuple,
                 layers: Sequence[nn.Module]) -> Any:
    """``forward_func(inputs, *additional_forward_args)``; an error that the inputs explain becomes a
    :class:`PRXAIError` saying so (see :func:`_input_problem`), any other error is left as it is."""
    try:
        return forward_func(inputs, *additional_forward_args)
    except PRXAIError:
        raise
    except (RuntimeError, TypeError, ValueError, IndexError) as error:
        problem = _input_problem(inputs, layers)
        if problem is None:
            raise
        raise PRXAIError(problem) from error


def _input_problem(inputs: Tensor, layers: Sequence[nn.Module]) -> Optional[str]:
    """Why the model cannot take ``inputs``, when it is one of the usual mistakes; else ``None``.

    Asked only once ``forward_func`` has failed, so a ``forward_func`` that
    converts its inputs itself (``ids.long()``, a projection of its own) is
    never refused: ids of a dtype ``nn.Embedding`` does not index with,
    embeddings of another dtype than the model's weights (outside autocast),
    or of another width than the model's input embeddings (its config's
    ``embedding_size``, else ``hidden_size``).
    """
    if not inputs.is_floating_point():
        if inputs.dtype not in (torch.int64, torch.int32):
            return (f"Token ids of dtype {inputs.dtype} cannot index the model's embeddings, which take torch.long "
                    "(or torch.int32); pass input_ids.long().")
        return None
    weight = next((p for layer in layers for p in layer.parameters() if p.is_floating_point()), None)
    if weight is not None and inputs.dtype != weight.dtype and not torch.is_autocast_enabled(inputs.device.type):
        return (f"The input embeddings are {inputs.dtype} but the model's weights are {weight.dtype}; cast them with "
                f"inputs.to({weight.dtype}) (or the model with model.to({inputs.dtype})).")
    config = getattr(layers[0], "config", None)
    for name in ("embedding_size", "hidden_size"):
        width = getattr(config, name, None)
        if isinstance(width, int) and width > 0:
            if inputs.shape[-1] != width:
                return (f"The input embeddings are {inputs.shape[-1]} wide but this model's input embeddings are "
                        f"{width} wide (config.{name}); pass the model's own, "
                        "model.get_input_embeddings()(input_ids).")
            break
    return None


#: what a layer's slot in the recorder holds once ``layer_term`` has taken its map
_FOLDED = torch.empty(0)


def _checked_map(m: Tensor, index: int, length: int, keep_mask: Optional[Tensor]) -> Tensor:
    """Layer ``index``'s captured map, checked (square over the input, finite), in at least fp32, padding zeroed."""
    if m.shape[-1] != length or m.shape[-2] != length:
        raise PRXAIError(
            f"Layer {index} attends over {m.shape[-1]} positions but the input has {length} tokens; hook "
            "self-attention layers over the input sequence only (not cross-attention)."
        )
    if m.dtype in (torch.float16, torch.bfloat16):
        m = m.float()
    if keep_mask is not None:
        m = torch.where(keep_mask, m, torch.zeros((), dtype=m.dtype, device=m.device))
    if not all_finite(m):
        raise PRXAIError(
            "The captured attention maps contain NaN or infinite values (check the inputs, e.g. NaN embeddings, "
            "and the model's weights)."
        )
    return m
