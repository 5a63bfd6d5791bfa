"""Layer-hook helpers: find attention modules, capture attention maps and their gradients.

The flow of every attention-graph attribution is

    capture attention (this module) -> build graph (:mod:`captum_prxai.graph`)
    -> PageRank (:func:`captum_prxai.pagerank`) -> token scores.

:func:`attention_layers` finds the self-attention modules of Hugging Face
models. :class:`AttentionRecorder` hooks them for one forward (and backward)
pass and hands each layer's attention probabilities ``A`` of shape
``(B, H, T, T)``, together with ``dL/dA`` when asked, to a reduction callback,
so that per-head maps never outlive the layer they belong to. With a tile
budget (``tile_bytes``, :func:`tile_budget`; the capture of every PR-XAI
attribution uses one) recomputed layers are handed over in tiles of query
rows, ``(B, H, r, T)``, so that not even one layer's per-head maps exist at
once (see :mod:`captum_prxai._attention_math`). Custom models
plug in through an explicit ``attention_fn`` (a hook function that extracts
``A``) or through :func:`sdpa_attention`, which routes
:func:`torch.nn.functional.scaled_dot_product_attention` through an eager
implementation whose probabilities can be captured.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import threading
import weakref
from typing import Any, Callable, Iterator, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from captum_prxai._attention_math import (
    CPU_TILE_ROWS,
    CPU_WHOLE_TILE_BYTES,
    DEFAULT_TILE_BYTES,
    RecomputedAttention,
    attention_probs,
    default_scale,
    repeat_heads,
    tile_rows,
    tiled_attention,
)
from captum_prxai._checks import all_finite
from captum_prxai.conservative import held_constant, is_conservative
from captum_prxai.exceptions import PRXAIError

__all__ = [
    "RecomputedAttention",
    "AttentionExtractor",
    "AttentionRecorder",
    "GradientOverflow",
    "attention_layers",
    "eager_attention",
    "hf_attention_weights",
    "resolve_capture_mode",
    "sdpa_attention",
    "tile_budget",
    "current_tile_bytes",
]

#: ``(module, args, kwargs, output) -> (B, H, T, T)`` attention probabilities or ``None``.
AttentionExtractor = Callable[[nn.Module, tuple, dict, Any], Optional[Tensor]]

# Class names of the modules whose forward returns ``(output, attention_probs)``.
# Keys are the architectures we test; the suffix rule below catches their relatives.
_KNOWN_ATTENTION_CLASSES = {
    "BertSelfAttention": "BERT",
    "RobertaSelfAttention": "RoBERTa",
    "XLMRobertaSelfAttention": "XLM-RoBERTa",
    "ElectraSelfAttention": "ELECTRA",
    "DistilBertSelfAttention": "DistilBERT",
    "MultiHeadSelfAttention": "DistilBERT (older transformers)",
    "MPNetSelfAttention": "MPNet",
    "GPT2Attention": "GPT-2",
    "LlamaAttention": "Llama",
    "Qwen2Attention": "Qwen2",
    "Qwen3Attention": "Qwen3",
    "GemmaAttention": "Gemma",
    "Gemma2Attention": "Gemma 2",
    "Gemma3Attention": "Gemma 3",
    "MistralAttention": "Mistral",
}
_ATTENTION_SUFFIXES = ("SelfAttention", "Attention")
_CONTAINER_HINTS = ("CrossAttention", "AttentionOutput", "SelfOutput")


def _is_attention_module(module: nn.Module) -> bool:
    name = type(module).__name__
    if name in _KNOWN_ATTENTION_CLASSES:
        return True
    if any(hint in name for hint in _CONTAINER_HINTS):
        return False
    if not name.endswith(_ATTENTION_SUFFIXES):
        return False
    # The innermost module computing attention owns projections, not other attention modules.
    has_projection = any(isinstance(child, (nn.Linear,)) or type(child).__name__ == "Conv1D" for child in module.children())
    nested = any(_is_attention_name(type(child).__name__) for child in module.children())
    return has_projection and not nested


#: Module-path fragments of cross-attention (T5's EncDecAttention, BART's encoder_attn, BERT-decoder's crossattention).
_CROSS_ATTENTION_PATHS = ("encdecattention", "crossattention", "cross_attn", "encoder_attn", "cross_attention")


def _is_cross_attention(path: str) -> bool:
    return any(fragment in path.lower() for fragment in _CROSS_ATTENTION_PATHS)


def _is_attention_name(name: str) -> bool:
    return name in _KNOWN_ATTENTION_CLASSES or name.endswith(_ATTENTION_SUFFIXES)


def attention_layers(model: nn.Module) -> list[nn.Module]:
    r"""Find the self-attention modules of a Hugging Face transformer, in forward order.

    Supports BERT, RoBERTa, DistilBERT, ELECTRA, MPNet, GPT-2 and the Llama,
    Qwen, Gemma and Mistral families (every module whose forward returns
    ``(output, attention_probs)``); the tests also check DeBERTa, ModernBERT,
    ALBERT, T5 encoders, Falcon, BLOOM, OPT, GPT-NeoX and Phi-3. For other models, pass the modules
    yourself together with an ``attention_fn`` (see :class:`AttentionRecorder`).

    Args:
        model (nn.Module): The model (or any module containing its layers).

    Returns:
        list of nn.Module: One attention module per layer, first layer first.

    Cross-attention modules are never returned. Encoder-decoder models are
    refused with a message: pass their encoder (``model.get_encoder()``).

    A module that runs at several depths (ALBERT's shared layers) is listed
    once per call, in call order, from ALBERT's own schedule (its config's
    ``num_hidden_layers``, ``num_hidden_groups`` and ``inner_group_num``).
    For other weight-shared models, list the module once per call yourself:
    :class:`AttentionRecorder` refuses a pass in which a module runs more
    often than it is listed.

    Raises:
        PRXAIError: No attention module was found (the message names the
            classes that were looked for), or the model is an encoder-decoder.
    """
    if not isinstance(model, nn.Module):
        raise PRXAIError(f"attention_layers expects a torch.nn.Module, got {type(model).__name__}.")
    modules = [(name, m) for name, m in model.named_modules() if _is_attention_module(m)]
    if any(_is_cross_attention(name) for name, _ in modules):
        raise PRXAIError(
            f"{type(model).__name__} has cross-attention (an encoder-decoder model); its decoder's attention does "
            "not run over the input tokens alone. "
            "To explain the encoder's input, hook the encoder "
            "only: attention_layers(model.get_encoder()), with a forward_func that returns the logits."
        )
    found = _albert_schedule(model, [m for _, m in modules])
    if not found:
        tried = ", ".join(sorted(_KNOWN_ATTENTION_CLASSES))
        raise PRXAIError(
            f"No attention modules found in {type(model).__name__}. Looked for the classes {tried} and for "
            "innermost modules named '*Attention' that own linear projections. For a custom model, pass its "
            "attention modules as `layers` with an `attention_fn` that returns the (B, H, T, T) attention "
            "probabilities, or use `attention_fn=captum_prxai.hooks.sdpa_attention` if it calls "
            "torch.nn.functional.scaled_dot_product_attention."
        )
    return found


def hf_attention_weights(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Optional[Tensor]:
    """Default extractor: the attention probabilities a Hugging Face attention module returns.

    Hugging Face attention modules return ``(attn_output, attn_weights, ...)``;
    the weights are ``None`` under SDPA or flash attention, which is why
    :class:`AttentionRecorder` switches models to eager attention.
    """
    if isinstance(output, (tuple, list)):
        square = [item for item in output[1:]
                  if isinstance(item, Tensor) and item.dim() == 4 and item.shape[-1] == item.shape[-2]]
        if len(square) > 1:  # e.g. T5's (output, position_bias, weights): the weights are the one made of distributions
            square = [item for item in square if _are_distributions(item)] or square[-1:]
        return square[0] if square else None
    return None


def _are_distributions(tensor: Tensor) -> bool:
    """Whether every row of ``tensor`` is a probability distribution (or all zero, a fully masked query)."""
    with torch.no_grad():
        values = tensor.detach().float()
        if not bool(torch.isfinite(values).all()) or float(values.min()) < 0:
            return False
        sums = values.sum(-1)
        return bool(((sums - 1).abs() < 1e-3).logical_or(sums == 0).all())


# --------------------------------------------------------------------------------------------
# Eager attention for Hugging Face models
# --------------------------------------------------------------------------------------------


def _configs(layers: Sequence[nn.Module]) -> list[Any]:
    seen: dict[int, Any] = {}
    for layer in layers:
        config = getattr(layer, "config", None)
        if config is not None and hasattr(config, "_attn_implementation"):
            seen[id(config)] = config
    return list(seen.values())


@contextlib.contextmanager
def eager_attention(layers: Sequence[nn.Module], implementation: str = "eager") -> Iterator[None]:
    """Switch the Hugging Face configs behind ``layers`` to eager attention, and restore them on exit.

    SDPA and flash attention never materialise the attention probabilities,
    so they return none. The previous setting comes back even when the body
    raises. ``implementation`` names another registered attention function
    to switch to (the recorder's own, see :class:`AttentionRecorder`).
    """
    configs = _configs(layers)
    previous = [config._attn_implementation for config in configs]
    try:
        for config in configs:
            if config._attn_implementation != implementation:
                config._attn_implementation = implementation
        yield
    finally:
        for config, value in zip(configs, previous):
            if config._attn_implementation != value:
                config._attn_implementation = value


# --------------------------------------------------------------------------------------------
# SDPA models
# --------------------------------------------------------------------------------------------

_SDPA = F.scaled_dot_product_attention
_sdpa_state = threading.local()


def _eager_sdpa(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
) -> Tensor:
    """:func:`torch.nn.functional.scaled_dot_product_attention`, computed eagerly so its probabilities can be captured."""
    sink = getattr(_sdpa_state, "sink", None)
    if sink is None:
        return _SDPA(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                     enable_gqa=enable_gqa)
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key, value = repeat_heads(key, groups), repeat_heads(value, groups)
    probs = attention_probs(query, key, attn_mask, default_scale(query, scale), is_causal)
    probs = sink(probs)
    if dropout_p > 0:
        probs = F.dropout(probs, p=dropout_p)
    return torch.matmul(probs, value)


def sdpa_attention(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Optional[Tensor]:
    """Extractor for modules that call :func:`torch.nn.functional.scaled_dot_product_attention`.

    Pass it as ``attention_fn``: while the recorder is active, SDPA calls made
    inside the hooked modules run eagerly and their probabilities are
    captured (the last call inside the module wins). Gradients with respect
    to them flow as usual.
    """
    return getattr(module, "_prxai_sdpa_probs", None)


#: ``(id(module), name) -> [module, users]``: where SDPA is currently routed through :func:`_eager_sdpa`.
_sdpa_patches: dict[tuple[int, str], list[Any]] = {}
_sdpa_patch_lock = threading.Lock()


@contextlib.contextmanager
def _patched_sdpa(layers: Sequence[nn.Module]) -> Iterator[None]:
    """Route SDPA through :func:`_eager_sdpa`, in ``torch.nn.functional`` and in the layers' own modules.

    The patch is shared and reference-counted, so recorders in several threads
    may use it at once: the original function comes back when the last one exits.
    (Outside an active recorder :func:`_eager_sdpa` calls the original.)
    """
    targets = {id(F): F}
    for layer in layers:
        module = sys.modules.get(type(layer).__module__)
        if module is not None:
            targets[id(module)] = module
    mine: list[tuple[int, str]] = []
    with _sdpa_patch_lock:
        for target in targets.values():
            for name, value in list(vars(target).items()):
                if value is _SDPA or value is _eager_sdpa:
                    key = (id(target), name)
                    entry = _sdpa_patches.setdefault(key, [target, 0])
                    entry[1] += 1
                    setattr(target, name, _eager_sdpa)
                    mine.append(key)
    try:
        yield
    finally:
        with _sdpa_patch_lock:
            for key in mine:
                entry = _sdpa_patches[key]
                entry[1] -= 1
                if entry[1] == 0:
                    setattr(entry[0], key[1], _SDPA)
                    del _sdpa_patches[key]


# --------------------------------------------------------------------------------------------
# Recomputing attention for Hugging Face models
# --------------------------------------------------------------------------------------------

#: Name under which the recorder's attention function is registered with transformers.
CAPTURE_IMPLEMENTATION = "prxai_capture"
_registered = False
_register_lock = threading.Lock()
#: Per thread: the recorders active in it (innermost last). Each thread's forward pass only sees its own.
_thread_state = threading.local()


def _active_recorders() -> list["AttentionRecorder"]:
    stack = getattr(_thread_state, "recorders", None)
    if stack is None:
        stack = _thread_state.recorders = []
    return stack


def _recorder_for(module: nn.Module) -> tuple[Optional["AttentionRecorder"], Optional[int]]:
    """The active recorder of this thread that hooks ``module``, and the layer index of the module's current call."""
    for recorder in reversed(_active_recorders()):
        if id(module) in recorder._positions:
            return recorder, recorder._current.get(id(module))
    return None, None

#: Attention-function arguments the recomputing path does not model; layers using them
#: fall back to materialised weights.
_UNSUPPORTED_KWARGS = ("softcap", "s_aux", "sinks", "position_bias")


def _register_capture_implementation() -> None:
    """Register :func:`_capture_attention` (and SDPA-style masks) with transformers, once."""
    global _registered
    with _register_lock:
        if _registered:
            return
        from transformers import AttentionInterface, AttentionMaskInterface
        from transformers.masking_utils import sdpa_mask

        AttentionInterface.register(CAPTURE_IMPLEMENTATION, _capture_attention)
        AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, sdpa_mask)
        _registered = True


def _capture_attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Optional[Tensor],
    dropout: float = 0.0,
    scaling: Optional[float] = None,
    is_causal: Optional[bool] = None,
    **kwargs: Any,
) -> tuple[Tensor, Optional[Tensor]]:
    """A transformers attention function that feeds the active :class:`AttentionRecorder`.

    Returns ``(output (B, T, H, D), weights)``, as transformers expects. For a
    hooked layer the weights are ``None`` and the recorder gets the
    head-reduced map directly: in forward for attention-only maps, in backward
    (recomputed, see :class:`~captum_prxai._attention_math.RecomputedAttention`)
    when gradients are needed. Layers with features this path does not model
    (dropout in training mode, logit soft-capping, sinks, position biases) get
    eager attention with materialised weights instead.
    """
    recorder, index = _recorder_for(module)
    if is_conservative():  # conservative propagation: no gradient through the softmax's logits
        query, key = held_constant(query), held_constant(key)
    scale = default_scale(query, scaling)
    groups = query.shape[1] // key.shape[1]
    causal = bool(query.shape[2] > 1 and attention_mask is None and (is_causal if is_causal is not None
                                                                       else getattr(module, "is_causal", False)))
    if index is not None and any(kwargs.get(name) is not None for name in _UNSUPPORTED_KWARGS):
        raise PRXAIError(
            f"{type(module).__name__} uses logit soft-capping, attention sinks or a position bias, which "
            "capture='recompute' does not model; pass capture='weights' to use the model's own eager attention."
        )
    if recorder is None or index is None or dropout > 0:
        probs = attention_probs(query, repeat_heads(key, groups), attention_mask, scale, causal)
        if dropout > 0:
            probs = F.dropout(probs, p=dropout, training=True)
        out = torch.matmul(probs, repeat_heads(value, groups))
        return out.transpose(1, 2).contiguous(), probs
    batch, length = query.shape[0], query.shape[2]
    rows = recorder.rows_per_tile(query, key)
    # per-example tiles (CPU batches past the cache): their rows are those of one example
    example_rows = recorder.rows_per_tile(query, key, per_example=True) \
        if recorder.tiles_per_example(query, key) else None

    def sink(probs: Tensor, grad: Optional[Tensor], part: slice, examples: Optional[slice] = None,
             index: int = index) -> None:
        recorder._store(index, probs, grad, part, length, examples, batch)

    if recorder.with_gradients and torch.is_grad_enabled():
        recorder._anchor(index, query)
        capture_only = index == 0 and not recorder.input_gradient_wanted
        out = RecomputedAttention.apply(query, key, value, attention_mask, scale, causal, groups, sink, capture_only,
                                        rows, example_rows)
    else:
        out = tiled_attention(query, key, value, attention_mask, scale, causal, groups, sink,
                              rows if example_rows is None else example_rows, example_rows is not None)
    return out.transpose(1, 2).contiguous(), None


# --------------------------------------------------------------------------------------------
# Capture mode and per-model locks
# --------------------------------------------------------------------------------------------

_interface_cache: dict[type, bool] = {}


def _uses_attention_interface(layer: nn.Module) -> bool:
    """Whether a module computes attention through transformers' attention functions (so it can be recomputed).

    Modules with their own attention code (MPNet, custom models) always hand
    over materialised weights instead.
    """
    cls = type(layer)
    if cls not in _interface_cache:
        try:
            source = inspect.getsource(cls.forward)
        except (OSError, TypeError):
            source = ""
        _interface_cache[cls] = "ALL_ATTENTION_FUNCTIONS" in source or "attention_interface" in source
    return _interface_cache[cls]


def resolve_capture_mode(layers: Sequence[nn.Module], capture: str = "auto",
                         attention_fn: Optional[AttentionExtractor] = None) -> str:
    """The capture mode a recorder actually uses: ``"recompute"`` or ``"weights"``.

    ``"auto"`` recomputes unless a custom ``attention_fn`` is given or the
    model uses logit soft-capping. Whatever was asked, if some layer does not
    go through transformers' attention functions (e.g. MPNet), that layer
    materialises its weights, and the result is ``"weights"``: the memory
    estimate (:func:`captum_prxai.capture.check_memory`) then counts one map
    per layer.
    """
    layers = list(layers)
    capture = _asked_mode(layers, capture, attention_fn)
    if capture == "recompute" and not all(_uses_attention_interface(layer) for layer in layers):
        return "weights"
    return capture


def _asked_mode(layers: Sequence[nn.Module], capture: str, attention_fn: Optional[AttentionExtractor]) -> str:
    if capture not in ("auto", "recompute", "weights"):
        raise PRXAIError(f"capture must be 'auto', 'recompute' or 'weights', got {capture!r}.")
    if capture != "auto":
        return capture
    softcapped = any(getattr(c, "attn_logit_softcapping", None) for c in _configs(layers))
    # a position bias passed into the attention (T5 and its kin) is not modelled by the recomputing path
    biased = any(_parameter_position(layer.forward, "position_bias") is not None for layer in _unique(layers))
    return "weights" if attention_fn is not None or softcapped or biased else "recompute"


_locks_guard = threading.Lock()
_model_locks: "weakref.WeakKeyDictionary[Any, threading.RLock]" = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def _exclusive(layers: Sequence[nn.Module]) -> Iterator[None]:
    """Hold the locks of these layers and of their configs for one capture.

    A capture registers hooks on the layers and switches their configs'
    attention implementation; two threads doing that on one model at once
    would see each other's hooks and restore each other's settings. Each
    module and config has a re-entrant lock, taken in a fixed order, so
    captures on one model run one after another (and give the serial
    results), while captures on different models run in parallel.
    """
    owners: dict[int, Any] = {}
    for owner in list(layers) + _configs(layers):
        owners[id(owner)] = owner
    with _locks_guard:
        locks = []
        for key in sorted(owners):
            owner = owners[key]
            try:
                lock = _model_locks.get(owner)
                if lock is None:
                    lock = _model_locks[owner] = threading.RLock()
            except TypeError:  # not weak-referenceable: no lock needed beyond the layers'
                continue
            locks.append(lock)
    with contextlib.ExitStack() as stack:
        for lock in locks:
            lock.acquire()
            stack.callback(lock.release)
        yield


@contextlib.contextmanager
def _not_reentrant(layers: Sequence[nn.Module]) -> Iterator[None]:
    """Refuse a capture of layers that a capture in this thread already hooks (``attribute`` inside ``forward_func``).

    The locks of :func:`_exclusive` are re-entrant, so a nested capture on the
    same model would get through them, and each recorder would count the
    other's calls.
    """
    hooked = getattr(_thread_state, "hooked", None)
    if hooked is None:
        hooked = _thread_state.hooked = set()
    keys = {id(layer) for layer in layers}
    if keys & hooked:
        raise PRXAIError(
            "An attribution was started from inside the forward_func of another attribution on the same model "
            "(re-entrant use): each would see the other's pass through the hooked layers. Run them one after "
            "the other; forward_func should only run the model."
        )
    hooked.update(keys)
    try:
        yield
    finally:
        hooked.difference_update(keys)


#: What a capture says when the model recomputes its layers for the backward pass.
CHECKPOINTING_MESSAGE = (
    "The model recomputes its layers during the backward pass (gradient checkpointing, which Hugging Face models "
    "apply in training mode), so each hooked layer would run twice and the captured maps would not be those of "
    "one pass. Call model.eval() first (in training mode dropout also makes the scores random), or "
    "model.gradient_checkpointing_disable()."
)

#: What a capture says when a hooked layer of a model in training mode runs without gradients.
_NO_GRAD_TRAINING_MESSAGE = (
    "A hooked layer of a model in training mode ran without gradients: gradient checkpointing (which Hugging Face "
    "models apply in training mode) runs the layers without gradients and again during the backward pass, and "
    "torch.no_grad() inside forward_func detaches them. Call model.eval() first (in training mode dropout also "
    "makes the scores random), or model.gradient_checkpointing_disable(), and let forward_func keep gradients."
)


def _in_backward() -> bool:
    """Whether this thread is running a backward pass (a module called now is being recomputed for it)."""
    task = getattr(torch._C, "_current_graph_task_id", None)
    return task is not None and task() != -1


# --------------------------------------------------------------------------------------------
# Tile budget
# --------------------------------------------------------------------------------------------

_tile_state = threading.local()


def current_tile_bytes() -> int:
    """The memory budget of one per-head attention tile for captures in this thread (bytes).

    :data:`~captum_prxai._attention_math.DEFAULT_TILE_BYTES` (16 MiB) unless
    changed by :func:`tile_budget`.
    """
    return getattr(_tile_state, "budget", None) or DEFAULT_TILE_BYTES


@contextlib.contextmanager
def tile_budget(nbytes: int) -> Iterator[None]:
    """Capture attention in tiles whose per-head tensors hold at most ``nbytes`` bytes, in this thread.

    The capture of :func:`captum_prxai.capture.capture_graph` (and so every
    PR-XAI attribution) computes each layer's ``(B, H, r, T)`` attention
    probabilities and gradients ``r`` query rows at a time, with ``r`` chosen
    so that one such tensor fits in the budget (at least one row); about five
    of them exist at once. A larger budget means fewer, larger tiles (less
    per-tile overhead on GPUs), a smaller one less memory. The memory check of
    ``attribute`` (:func:`captum_prxai.capture.check_memory`) uses the same
    budget. Example::

        >>> with tile_budget(256 * 2**20):
        ...     scores = PRGradient(forward, attention_layers(model)).attribute(ids)
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise PRXAIError(f"tile_budget takes a positive number of bytes, got {nbytes!r}.")
    previous = getattr(_tile_state, "budget", None)
    _tile_state.budget = nbytes
    try:
        yield
    finally:
        _tile_state.budget = previous


# --------------------------------------------------------------------------------------------
# The recorder
# --------------------------------------------------------------------------------------------

#: ``(layer_index, attention (B, H, T, T), gradient (B, H, T, T) or None) -> reduced map``; with tiles,
#: ``(layer_index, A (B, H, r, T), dA or None, rows) -> map whose second-last axis holds those r rows``.
AttentionReducer = Callable[..., Tensor]


class AttentionRecorder:
    r"""Capture each layer's attention probabilities, and optionally their gradients, for one pass.

    Use it as a context manager around a forward call. For every hooked layer
    the ``reduce`` callback receives the attention probabilities ``A`` of
    shape ``(B, H, T, T)`` and, when ``with_gradients`` is set, ``dy/dA`` once
    :meth:`backward` has run; what it returns (typically a head-reduced
    ``(B, T, T)`` edge map) is stored in :attr:`maps`, in layer order. The
    per-head tensors are not kept by the recorder: autograd already holds
    ``A`` for the backward pass, and each gradient is reduced as soon as it
    arrives.

    On entry the recorder switches Hugging Face models to eager attention,
    asks modules that take ``output_attentions`` to return their weights, and
    makes sure the attention maps are part of the autograd graph even when
    the model's parameters are frozen. On exit it removes every hook and
    restores the attention implementation, also when the forward raises.

    Args:
        layers (sequence of nn.Module): The attention modules, first layer
            first, e.g. from :func:`attention_layers`.
        reduce (callable): ``reduce(layer_index, A, dA)`` returning the map to keep.
        with_gradients (bool): Also capture ``dy/dA`` (needs :meth:`backward`).
        attention_fn (callable, optional): ``(module, args, kwargs, output) ->
            A`` extracting the attention probabilities from a hooked module.
            Default: :func:`hf_attention_weights`. Use :func:`sdpa_attention`
            for modules built on ``scaled_dot_product_attention``.
        capture (str): How Hugging Face attention is captured. ``"recompute"``
            swaps in an attention function whose forward is fused SDPA and
            whose backward recomputes one layer's ``A`` at a time, so no
            ``L x H x T x T`` maps are ever held; ``"weights"`` switches the
            model to its own eager attention and reads the weights it returns.
            ``"auto"`` (default) recomputes unless the model uses logit
            soft-capping or a custom ``attention_fn`` is given. Modules that do
            not go through transformers' attention functions (e.g. MPNet)
            always use their returned weights.
        input_gradient (bool): Also compute gradient x input at the first
            layer's input during :meth:`backward` (:attr:`input_gradient`).
        tile_bytes (int, optional): Hand the recomputed attention to
            ``reduce`` in tiles of query rows whose ``(B, H, r, T)`` per-head
            tensors hold at most this many bytes (at least one row; see
            :func:`~captum_prxai._attention_math.tile_rows`). ``reduce`` is
            then called as ``reduce(layer_index, A, dA, rows)`` once per tile,
            ``rows`` being the slice of query rows the tile covers, and must
            return a map whose second-last axis holds those rows (e.g. the
            head-reduced ``(B, r, T)`` edge map); the recorder writes the tiles
            into one ``(B, T, T)`` map per layer. Edge weights must therefore
            be elementwise or row-wise in ``A`` and ``dA`` (the built-in ones
            are). Layers that hand over their own weights (``"weights"``, MPNet)
            are reduced whole, with ``rows`` covering every row. Default:
            ``None``, whole layers and ``reduce(layer_index, A, dA)``.
        batch_tiles (bool): With ``tile_bytes``, on CPU, also split a batch
            into per-example tiles ``(1, H, r, T)`` once the whole batch's tile
            would leave the cache (more than
            :data:`~captum_prxai._attention_math.CPU_WHOLE_TILE_BYTES`); the
            rows per tile are then those of one example. ``reduce`` is then
            called as ``reduce(layer_index, A, dA, rows, examples)``,
            ``examples`` being the slice of the batch the tile covers, and
            returns ``(..., 1, r, T)`` for it. Default: ``False``, tiles span
            the batch (the contract above). Only where ``dq, dk, dv`` come from
            the fused kernel (or are not needed): the hand-written backward
            keeps whole-batch tiles.

    Example::

        >>> with AttentionRecorder(attention_layers(model), lambda i, a, g: (a * g).mean(1),
        ...                        with_gradients=True) as rec:
        ...     logits = model(input_ids).logits
        ...     rec.backward(logits[:, 1].sum())
        >>> edges = rec.maps  # L tensors of shape (B, T, T)
    """

    def __init__(
        self,
        layers: Sequence[nn.Module],
        reduce: AttentionReducer,
        with_gradients: bool = False,
        attention_fn: Optional[AttentionExtractor] = None,
        capture: str = "auto",
        input_gradient: bool = False,
        tile_bytes: Optional[int] = None,
        batch_tiles: bool = False,
    ) -> None:
        layers = list(layers)
        if not layers:
            raise PRXAIError("No attention layers were given; pass e.g. captum_prxai.attention_layers(model).")
        for layer in layers:
            if not isinstance(layer, nn.Module):
                raise PRXAIError(f"Every layer must be a torch.nn.Module, got {type(layer).__name__}.")
        self.layers = layers
        self.reduce = reduce
        self.with_gradients = with_gradients
        self.attention_fn = attention_fn or hf_attention_weights
        #: ``"recompute"`` or ``"weights"``, as :func:`resolve_capture_mode` resolves it: a model with a layer
        #: that does not go through transformers' attention functions (MPNet, Falcon) runs its own eager attention,
        #: since its masks are built for the attention implementation its config names
        self.capture = resolve_capture_mode(layers, capture, attention_fn)
        self.maps: list[Optional[Tensor]] = [None] * len(layers)
        self._anchors: list[Optional[Tensor]] = [None] * len(layers)
        #: ``id(module) -> its indices in layers``: a module listed k times (weight sharing) fills k slots, one per
        #: call, in call order
        self._positions: dict[int, list[int]] = {}
        for i, layer in enumerate(layers):
            self._positions.setdefault(id(layer), []).append(i)
        #: per module: the calls seen in this pass, and the layer index of the call running now (None: no slot left)
        self._calls: dict[int, int] = {}
        self._current: dict[int, Optional[int]] = {}
        #: the first hooked module that returned a tensor other than (B, H, T, T) weights: (class name, shape)
        self._unusable: Optional[tuple[str, tuple[int, ...]]] = None
        self.input_gradient_wanted = input_gradient
        if tile_bytes is not None and (isinstance(tile_bytes, bool) or not isinstance(tile_bytes, int)
                                       or tile_bytes < 1):
            raise PRXAIError(f"tile_bytes must be a positive int or None, got {tile_bytes!r}.")
        #: per-head tile budget in bytes, or ``None`` for whole layers
        self.tile_bytes = tile_bytes
        self.batch_tiles = bool(batch_tiles)
        #: ``(B, T)`` gradient x input at the first layer's input, after :meth:`backward` (``input_gradient=True``)
        self.input_gradient: Optional[Tensor] = None
        self._first_input: Optional[Tensor] = None
        #: tensors whose ``requires_grad`` flag the pass switched on (frozen models), switched off again on exit
        self._flagged: list[Tensor] = []
        #: the scale of the objective during :meth:`backward` (gradients are divided by it as they arrive)
        self._scale = 1.0
        self._handles: list[Any] = []
        self._stack: contextlib.ExitStack | None = None

    # -- context management -------------------------------------------------------------
    def __enter__(self) -> "AttentionRecorder":
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(_exclusive(self.layers))
            stack.enter_context(_not_reentrant(self.layers))
            if self.capture == "recompute":
                _register_capture_implementation()
                stack.enter_context(eager_attention(self.layers, CAPTURE_IMPLEMENTATION))
                active = _active_recorders()
                active.append(self)
                stack.callback(active.remove, self)
            else:
                stack.enter_context(eager_attention(self.layers))
            if self.attention_fn is sdpa_attention:
                stack.enter_context(_patched_sdpa(self.layers))
            self._calls, self._current, self._unusable = {}, {}, None
            for layer in _unique(self.layers):  # one pair of hooks per module, however often it is listed
                self._handles.append(layer.register_forward_pre_hook(self._pre_hook(layer), with_kwargs=True))
                self._handles.append(layer.register_forward_hook(self._post_hook(), with_kwargs=True))
        except BaseException:
            self._remove_hooks()
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._remove_hooks()
        self._anchors = [None] * len(self.layers)
        self._first_input = None
        for tensor in self._flagged:
            tensor.requires_grad_(False)
        self._flagged.clear()
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        _sdpa_state.sink = None
        if exc_info[0] is None:
            self._check_calls()

    def _check_calls(self) -> None:
        """Refuse a pass in which a hooked module ran more often than it is listed in ``layers``.

        Its later calls would have no layer of their own, so the graph would
        silently miss layers: with weight sharing (ALBERT), one listed module
        runs at every depth.
        """
        over = [(self._positions[key], calls) for key, calls in self._calls.items()
                if calls > len(self._positions[key])]
        if not over:
            return
        positions, calls = over[0]
        name = type(self.layers[positions[0]]).__name__
        listed = len(positions)
        raise PRXAIError(
            f"The attention module {name} at layers {positions} ran {calls} times in one forward pass but is listed "
            f"{listed} time{'s' if listed != 1 else ''} in layers, so {calls - listed} of its calls would have no "
            "layer in the graph. A model that reuses one attention module at several depths (weight sharing, "
            "as in ALBERT) needs it listed once per call, in call order (e.g. layers = [module] * "
            f"{calls}); attention_layers(model) does this for Hugging Face ALBERT models. If forward_func runs the "
            "model more than once, capture one run per call."
        )

    def _take_slot(self, module: nn.Module) -> Optional[int]:
        """The layer index of this call of ``module``: its next listed position (``None`` once all are taken)."""
        key = id(module)
        calls = self._calls.get(key, 0)
        self._calls[key] = calls + 1
        positions = self._positions[key]
        slot = positions[calls] if calls < len(positions) else None
        self._current[key] = slot
        return slot

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    # -- hooks ------------------------------------------------------------------------------
    def _pre_hook(self, layer: nn.Module) -> Callable:
        flag_position = _parameter_position(layer.forward, "output_attentions")

        def hook(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
            if self.with_gradients and _in_backward():
                raise PRXAIError(CHECKPOINTING_MESSAGE)
            if self.with_gradients and module.training and not torch.is_grad_enabled():
                raise PRXAIError(_NO_GRAD_TRAINING_MESSAGE)
            index = self._take_slot(module)
            if index is None:  # more calls than listed positions: refused once the pass is over
                return args, kwargs
            if flag_position is not None:
                # set the flag where the caller put it: DeBERTa passes it positionally, most models by keyword
                if flag_position < len(args):
                    args = args[:flag_position] + (True,) + args[flag_position + 1:]
                else:
                    kwargs = {**kwargs, "output_attentions": True}
            if self.with_gradients and torch.is_grad_enabled():
                args, kwargs, hidden = _require_grad_on_hidden_states(args, kwargs, self._flagged)
                if index == 0 and self.input_gradient_wanted:
                    self._first_input = hidden
            if self.attention_fn is sdpa_attention:
                module._prxai_sdpa_probs = None

                def sink(probs: Tensor) -> Tensor:
                    module._prxai_sdpa_probs = probs
                    return probs

                _sdpa_state.sink = sink
            return args, kwargs

        return hook

    def _post_hook(self) -> Callable:
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            index = self._current.get(id(module))
            if index is None:
                return
            if self.attention_fn is sdpa_attention:
                _sdpa_state.sink = None
            attention = self.attention_fn(module, args, kwargs, output)
            if self.attention_fn is sdpa_attention:
                module._prxai_sdpa_probs = None
            if attention is None:
                if self._unusable is None and isinstance(output, (tuple, list)):
                    shapes = [tuple(t.shape) for t in output[1:] if isinstance(t, Tensor) and t.dim() >= 3]
                    self._unusable = (type(module).__name__, shapes[0]) if shapes else None
                return
            if attention.dim() == 3:
                attention = attention.unsqueeze(1)
            if attention.dim() != 4 or attention.shape[-1] != attention.shape[-2]:
                raise PRXAIError(
                    f"The attention_fn of layer {index} returned shape {tuple(attention.shape)}; expected "
                    "(B, H, T, T) attention probabilities."
                )
            if not self.with_gradients:
                self._store(index, attention, None)
                return
            if not attention.requires_grad:
                raise PRXAIError(
                    f"The attention of layer {index} is not part of the autograd graph, so its gradient cannot be "
                    "taken. Call attribute() with gradients enabled and make sure the attention probabilities "
                    "are computed from the layer's inputs."
                )
            self._anchor(index, attention)
            # The hook must not hold `attention` itself: tensor -> autograd node -> hook -> tensor is a
            # reference cycle through C++ that Python's collector cannot see, so every pass would leak
            # its whole graph. A detached view shares the storage without the cycle.
            probs = attention.detach()
            attention.register_hook(lambda grad, index=index, probs=probs: self._store(index, probs, grad))

        return hook

    def _anchor(self, index: int, tensor: Tensor) -> None:
        """Remember a tensor whose gradient needs layer ``index``'s attention backward."""
        self._anchors[index] = tensor

    def tiles_per_example(self, query: Tensor, key: Tensor) -> bool:
        """Whether one layer's tiles hold one example each (``batch_tiles``, on CPU, a batch past the cache)."""
        if self.tile_bytes is None or not self.batch_tiles or query.shape[0] < 2 or query.device.type != "cpu":
            return False
        whole = query.shape[0] * query.shape[1] * query.shape[-2] * key.shape[-2] * query.element_size()
        return whole > CPU_WHOLE_TILE_BYTES

    def rows_per_tile(self, query: Tensor, key: Tensor, per_example: bool = False) -> int:
        """Query rows per tile for one layer's ``query (B, H, T, D)`` and ``key (B, Hkv, S, D)``.

        ``per_example``: the rows of a tile that holds one example (see :meth:`tiles_per_example`).
        """
        length = query.shape[-2]
        if self.tile_bytes is None:
            return length
        batch = 1 if per_example else query.shape[0]
        heads, keys = query.shape[1], key.shape[-2]
        whole = batch * heads * length * keys * query.element_size()
        max_rows = CPU_TILE_ROWS if query.device.type == "cpu" and whole > CPU_WHOLE_TILE_BYTES else None
        return tile_rows(batch, heads, length, keys, query.element_size(), self.tile_bytes, max_rows)

    def _store(self, index: int, attention: Tensor, grad: Optional[Tensor], rows: Optional[slice] = None,
               length: Optional[int] = None, examples: Optional[slice] = None, batch: Optional[int] = None) -> None:
        """Reduce one layer's maps, or one tile of ``rows`` of its ``length`` query rows, into :attr:`maps`.

        ``examples`` (per-example tiles) is the slice of the ``batch`` examples the tile covers. A gradient of a
        scaled objective (:meth:`backward`'s ``scale``) is unscaled here, in at least fp32, and the attention is cast
        to the same dtype.
        """
        with torch.no_grad():
            if grad is not None and self._scale != 1:  # the edge weight is then computed in fp32 throughout
                grad = _unscaled(grad, self._scale)
                attention = attention.to(grad.dtype)
            if self.tile_bytes is None:
                self.maps[index] = self.reduce(index, attention.detach(), grad)
                return
            length = attention.shape[-2] if length is None else length
            rows = slice(0, length) if rows is None else rows
            if examples is None:
                out = self.reduce(index, attention.detach(), grad, rows)
            else:
                out = self.reduce(index, attention.detach(), grad, rows, examples)
            count = rows.stop - rows.start
            if not isinstance(out, Tensor) or out.dim() < 2 or out.shape[-2] != count:
                shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
                raise PRXAIError(
                    f"The reduction of layer {index} returned {shape} for a tile of {count} query rows; with "
                    "tiles it must return a map whose second-last axis holds the tile's rows, e.g. (B, rows, T)."
                )
            if examples is None:
                if count == length:
                    self.maps[index] = out
                    return
                full = self.maps[index]
                if full is None or rows.start == 0:
                    full = self.maps[index] = out.new_empty(out.shape[:-2] + (length,) + out.shape[-1:])
                full[..., rows, :] = out
                return
            full = self.maps[index]
            if full is None or (rows.start == 0 and examples.start == 0):
                full = self.maps[index] = out.new_empty(out.shape[:-3] + (batch, length) + out.shape[-1:])
            full[..., examples, rows, :] = out

    # -- backward ---------------------------------------------------------------------------
    def backward(self, objective: Tensor, scale: float = 1.0) -> None:
        """Back-propagate ``objective`` to the captured attention maps only.

        Parameter gradients are never computed: autograd only walks the paths
        that lead to the earliest captured attention map, and the gradients
        of the later maps are reduced by their hooks on the way.

        Args:
            objective (Tensor): The scalar to differentiate.
            scale (float): Differentiate ``scale * objective`` and divide every
                gradient handed to ``reduce`` (and the input gradient) by
                ``scale``, in at least fp32: a power of two that keeps a
                half-precision backward pass out of fp16's subnormal range,
                where small gradients lose their digits or vanish. A
                gradient that overflows to infinity raises
                :class:`GradientOverflow` (only when ``scale != 1``), so the
                caller can run the pass again with a smaller scale.
        """
        self._check_calls()
        captured = [a for a in self._anchors if a is not None]
        if not captured:
            raise self.missing_error()
        inputs = [captured[0]]
        if self.input_gradient_wanted and self._first_input is not None:
            inputs.append(self._first_input)
        self._scale = scale
        try:
            grads = torch.autograd.grad(objective * scale if scale != 1 else objective, inputs=inputs,
                                        retain_graph=False, allow_unused=True)
            if len(inputs) == 2 and grads[1] is not None:
                grad = _unscaled(grads[1], scale) if scale != 1 else grads[1]
                first = self._first_input.detach()
                self.input_gradient = (grad * first.to(grad.dtype)).sum(-1)
        finally:
            self._scale = 1.0
            self._anchors = [None] * len(self.layers)
            self._first_input = None

    def missing_error(self) -> PRXAIError:
        names = sorted({type(layer).__name__ for layer in self.layers})
        return PRXAIError(
            f"No attention probabilities were captured from the {len(self.layers)} hooked layers ({', '.join(names)})."
            f"{self._unusable_note()} Check that forward_func runs these modules, that they return attention weights "
            "(Hugging Face models do with eager attention, which is switched on automatically), or give an attention_fn "
            "(for models calling scaled_dot_product_attention: attention_fn=captum_prxai.hooks.sdpa_attention)."
        )

    def _unusable_note(self) -> str:
        """A sentence on the first module that returned something other than (B, H, T, T) weights, or ""."""
        if self._unusable is None:
            return ""
        name, shape = self._unusable
        return (f" {name} returned a tensor of shape {shape} where (B, H, T, T) attention probabilities were "
                "expected: banded or pooled attention (e.g. Longformer, Funnel) has no token-to-token map over the "
                "whole input, and is not supported.")

    def collected(self) -> list[Tensor]:
        """The reduced maps in layer order; raises if any layer produced none, or a module ran unlisted calls."""
        self._check_calls()
        missing = [i for i, m in enumerate(self.maps) if m is None]
        if len(missing) == len(self.maps):
            raise self.missing_error()
        if missing:
            raise PRXAIError(
                f"Layers {missing} of {len(self.maps)} produced no attention map (or no gradient reached them)."
                f"{self._unusable_note()} Pass only the attention modules that forward_func runs, in forward order."
            )
        return [m for m in self.maps if m is not None]


class GradientOverflow(ArithmeticError):
    """A gradient of a scaled objective overflowed (see :meth:`AttentionRecorder.backward`); ``scale`` is the
    scale that was used."""

    def __init__(self, scale: float) -> None:
        super().__init__(f"a gradient overflowed with the objective scaled by {scale:g}")
        self.scale = scale


def _unscaled(grad: Tensor, scale: float) -> Tensor:
    """``grad / scale`` in at least fp32; :class:`GradientOverflow` if ``grad`` holds an infinity or NaN."""
    if not all_finite(grad):
        raise GradientOverflow(scale)
    return grad.to(torch.promote_types(grad.dtype, torch.float32)) / scale


def _albert_schedule(model: nn.Module, found: list[nn.Module]) -> list[nn.Module]:
    """``found`` with each ALBERT encoder's shared attention modules repeated in the order its forward calls them.

    ``AlbertTransformer`` runs layer group ``int(i / (L / G))`` at depth ``i``
    of ``L = num_hidden_layers`` (``G = num_hidden_groups``), and each group
    runs its ``inner_group_num`` layers in order.
    """
    encoders = [m for m in model.modules() if type(m).__name__ == "AlbertTransformer"
                and hasattr(m, "albert_layer_groups") and hasattr(getattr(m, "config", None), "num_hidden_groups")]
    if not encoders:
        return found
    order: list[nn.Module] = []
    listed = {id(m) for m in found}
    for encoder in encoders:
        config = encoder.config
        for depth in range(config.num_hidden_layers):
            group = encoder.albert_layer_groups[int(depth / (config.num_hidden_layers / config.num_hidden_groups))]
            order.extend(m for m in group.modules() if id(m) in listed)
    scheduled = {id(m) for m in order}
    return order + [m for m in found if id(m) not in scheduled]


def _parameter_position(function: Callable, name: str) -> Optional[int]:
    """Where ``name`` sits among ``function``'s positional parameters (10**9 if keyword-only: never positional).

    ``None`` if ``function`` has no such parameter.
    """
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for position, parameter in enumerate(positional):
        if parameter.name == name:
            return position
    if any(p.name == name for p in parameters):
        return 10**9  # keyword-only: always passed by keyword
    return None


def _unique(modules: Sequence[nn.Module]) -> list[nn.Module]:
    """``modules`` without repeats, in order of first appearance."""
    seen: dict[int, nn.Module] = {}
    for module in modules:
        seen.setdefault(id(module), module)
    return list(seen.values())


def _require_grad_on_hidden_states(args: tuple, kwargs: dict,
                                   flagged: list[Tensor]) -> tuple[tuple, dict, Optional[Tensor]]:
    """Make the first floating-point input require grad, so the attention joins the autograd graph.

    Returns the (possibly replaced) arguments and that input tensor. When the
    model's parameters are frozen (``model.requires_grad_(False)``) the
    hidden states have no autograd history; the flag is then switched on the
    tensor itself, not on a detached copy, so that its other uses (the
    residual connection around the attention) join the graph exactly as in
    an unfrozen model, and the gradient x input at the first layer is the
    same. Such tensors are appended to ``flagged``, for the recorder to switch
    the flag off again once the pass is over.
    """
    for position, value in enumerate(args):
        if isinstance(value, Tensor) and value.is_floating_point():
            joined = _join_graph(value, flagged)
            if joined is not value:
                args = args[:position] + (joined,) + args[position + 1 :]
            return args, kwargs, joined
    for name in ("hidden_states", "x", "query"):
        value = kwargs.get(name)
        if isinstance(value, Tensor) and value.is_floating_point():
            joined = _join_graph(value, flagged)
            if joined is not value:
                kwargs = {**kwargs, name: joined}
            return args, kwargs, joined
    return args, kwargs, None


def _join_graph(value: Tensor, flagged: list[Tensor]) -> Tensor:
    """``value`` requiring grad: itself, flagged in place where it can be (:func:`_require_grad_on_hidden_states`)."""
    if value.requires_grad:
        return value
    if value.is_leaf and value._base is None:
        value.requires_grad_()
        flagged.append(value)
        return value
    return value.detach().requires_grad_()  # a view: only its own uses join the graph
