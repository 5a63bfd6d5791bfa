"""Removal-based faithfulness metrics for token attributions.

All metrics follow the same protocol (see ``docs/metrics.md``):

1. ``forward_func(input_ids, attention_mask) -> logits (B, C)`` is run on the
   full input; the *target* class is ``target`` or, if ``None``, the class the
   model predicts. Probabilities are ``softmax(logits)[target]``.
2. The top (or bottom) ``k`` real tokens by attribution score are removed with
   :func:`captum_prxai.metrics.masking.remove_top_k` (special tokens and
   padding are never removed; ``k`` is a fraction of each example's real
   tokens).
3. The perturbed inputs of all removal levels are stacked and run through the
   model in batches of ``batch_size`` under :func:`torch.no_grad`.

References:
    * DeYoung et al., "ERASER: A Benchmark to Evaluate Rationalized NLP
      Models", ACL 2020 (comprehensiveness, sufficiency, bins {1,5,10,20,50}%).
    * Samek et al., "Evaluating the Visualization of What a Deep Neural
      Network Has Learned", IEEE TNNLS 2017 (AOPC).
    * Shrikumar et al., "Learning Important Features Through Propagating
      Activation Differences", ICML 2017; Chen et al., "Generating
      Hierarchical Explanations on Text Classification via Feature Interaction
      Detection", ACL 2020 (log-odds).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Literal, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError
from captum_prxai.metrics.masking import RemovalMode, _check_2d, remove_top_k

#: ``forward_func(input_ids, attention_mask) -> logits (B, C)``
ForwardFunc = Callable[[Tensor, Tensor], Tensor]
TargetLike = Union[None, int, Sequence[int], Tensor]

#: ERASER removal bins (fractions of the real tokens).
ERASER_BINS: Tuple[float, ...] = (0.01, 0.05, 0.10, 0.20, 0.50)

__all__ = [
    "ERASER_BINS",
    "BinnedScore",
    "DeletionCurve",
    "comprehensiveness",
    "sufficiency",
    "deletion_curve",
    "aopc",
    "aopc_from_curve",
    "log_odds",
    "accuracy_after_removal",
    "evaluate_faithfulness",
]


class BinnedScore(NamedTuple):
    """A metric computed at several removal fractions.

    Attributes:
        mean: ``(B,)`` average over the bins.
        per_bin: ``(B, n_bins)`` value at each bin.
        bins: The removal fractions.
    """

    mean: Tensor
    per_bin: Tensor
    bins: Tuple[float, ...]


class DeletionCurve(NamedTuple):
    """Target-class probability while tokens are removed step by step.

    Attributes:
        fractions: ``(S + 1,)`` removal fractions ``0, 1/S, ..., 1``.
        probs: ``(B, S + 1)`` target probability after each removal step
            (column 0 is the unperturbed input).
        order: ``"most"`` (most relevant removed first) or ``"least"``.
    """

    fractions: Tensor
    probs: Tensor
    order: str


# --------------------------------------------------------------------- helpers
class _Setup(NamedTuple):
    input_ids: Tensor
    attention_mask: Tensor
    special_tokens_mask: Optional[Tensor]
    scores: Tensor
    target: Tensor  # (B,) long
    probs: Tensor  # (B, C) probabilities on the full input


def _forward_probs(forward_func: ForwardFunc, ids: Tensor, mask: Tensor, batch_size: int) -> Tensor:
    """Softmax probabilities ``(N, C)`` computed in chunks, without gradients.

    Identical rows are run once, rows are grouped by length, and each chunk is
    cut after its last attended column, so a chunk of short (deleted) inputs
    does not pay for the padding of the longest one. Only trailing columns that
    are padding in every row of the chunk are dropped, which a model that
    honours its attention mask cannot see.
    """
    if batch_size < 1:
        raise PRXAIError(f"batch_size must be a positive integer, got {batch_size}.")
    rows, inverse = torch.unique(torch.cat([ids, mask.to(ids.dtype)], dim=1), dim=0, return_inverse=True)
    u_ids, u_mask = rows[:, : ids.shape[1]], rows[:, ids.shape[1] :].to(mask.dtype)
    attended = u_mask != 0
    columns = torch.arange(1, ids.shape[1] + 1, device=ids.device)
    lengths = (attended * columns).amax(dim=1).clamp_min(1)
    order = torch.argsort(lengths, descending=True, stable=True)
    outs: List[Tensor] = []
    with torch.no_grad():
        for start in range(0, order.numel(), batch_size):
            chunk = order[start : start + batch_size]
            width = int(lengths[chunk].max())
            outs.append(_probabilities(forward_func(u_ids[chunk, :width], u_mask[chunk, :width])))
    probs = torch.empty(order.numel(), outs[0].shape[1], device=outs[0].device)
    probs[order.to(probs.device)] = torch.cat(outs, dim=0)
    return probs[inverse.to(probs.device)]


def _probabilities(output: object) -> Tensor:
    """``(batch, classes)`` float probabilities: the softmax of a forward function's logits (or of the ``.logits`` of
    a model output), checked to be two-dimensional."""
    logits = output if isinstance(output, Tensor) else getattr(output, "logits", output)
    if not isinstance(logits, Tensor) or logits.dim() != 2:
        raise PRXAIError(
            "forward_func must return logits of shape (batch, classes); got "
            f"{type(logits).__name__} {tuple(getattr(logits, 'shape', ()))}."
        )
    return torch.softmax(logits.detach().float(), dim=-1)


def _resolve_target(target: TargetLike, probs: Tensor) -> Tensor:
    batch = probs.shape[0]
    if target is None:
        return probs.argmax(dim=-1)
    t = torch.as_tensor(target, device=probs.device).long().reshape(-1)
    if t.numel() == 1:
        t = t.expand(batch)
    if t.numel() != batch:
        raise PRXAIError(
            f"target must be an int or have one entry per example ({batch}), got {t.numel()} entries."
        )
    if (t < 0).any() or (t >= probs.shape[1]).any():
        raise PRXAIError(
            f"target out of range: the model has {probs.shape[1]} classes, got {t.tolist()}."
        )
    return t.clone()


def _setup(
    forward_func: ForwardFunc,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike,
    batch_size: int,
) -> _Setup:
    _check_2d("input_ids", input_ids)
    _check_2d("attention_mask", attention_mask, input_ids.shape)
    if special_tokens_mask is not None:
        _check_2d("special_tokens_mask", special_tokens_mask, input_ids.shape)
    _check_2d("scores", scores, input_ids.shape)
    empty = (attention_mask == 0).all(dim=1)
    if bool(empty.any()):
        rows = empty.nonzero().flatten().tolist()
        raise PRXAIError(
            f"attention_mask row{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows[:10]))}"
            f"{', ...' if len(rows) > 10 else ''} {'are' if len(rows) > 1 else 'is'} all zero: an example with no "
            "token has no prediction to explain or remove tokens from. Drop it (or fix its mask: 1 for tokens, "
            "0 for padding)."
        )
    probs = _forward_probs(forward_func, input_ids, attention_mask, batch_size)
    return _Setup(input_ids, attention_mask, special_tokens_mask, scores.detach(),
                  _resolve_target(target, probs), probs)


def _variant_probs(
    forward_func: ForwardFunc,
    variants: Sequence[Tuple[Tensor, Tensor]],
    batch_size: int,
) -> Tensor:
    """Full probabilities ``(V, B, C)`` of ``V`` perturbed copies of the batch."""
    ids = torch.cat([v[0] for v in variants], dim=0)
    mask = torch.cat([v[1] for v in variants], dim=0)
    probs = _forward_probs(forward_func, ids, mask, batch_size)
    return probs.reshape(len(variants), variants[0][0].shape[0], -1)


def _pick(probs: Tensor, target: Tensor) -> Tensor:
    """Target probabilities from ``(V, B, C)`` -> ``(B, V)``."""
    idx = target.view(1, -1, 1).expand(probs.shape[0], -1, 1)
    return probs.gather(2, idx).squeeze(2).transpose(0, 1)


def _check_bins(bins: Sequence[float]) -> Tuple[float, ...]:
    bins = tuple(float(b) for b in bins)
    if not bins:
        raise PRXAIError("bins must contain at least one removal fraction, e.g. (0.01, 0.05, 0.1, 0.2, 0.5).")
    for b in bins:
        if not 0.0 < b <= 1.0:
            raise PRXAIError(f"every bin must be a fraction in (0, 1], got {b}; write 20% as 0.2.")
    return bins


def _perturb(s: _Setup, fraction: float, keep: bool, largest: bool, opts: Dict) -> Tuple[Tensor, Tensor]:
    return remove_top_k(s.input_ids, s.attention_mask, s.special_tokens_mask, s.scores,
                        fraction, keep=keep, largest=largest, **opts)


def _opts(mode: RemovalMode, replacement_id: Optional[int], pad_token_id: int) -> Dict:
    return {"mode": mode, "replacement_id": replacement_id, "pad_token_id": pad_token_id}


# --------------------------------------------------------------------- metrics
def comprehensiveness(
    forward_func: ForwardFunc,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike = None,
    bins: Sequence[float] = ERASER_BINS,
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    batch_size: int = 64,
) -> BinnedScore:
    r"""ERASER comprehensiveness: probability drop after removing the top-k% tokens.

    .. math:: \mathrm{comp} = \frac{1}{|\mathcal{B}|}\sum_{k\in\mathcal{B}}
              p(y\mid x) - p(y\mid x \setminus r_k)

    Higher is better (the removed tokens mattered).

    Args:
        forward_func: ``forward_func(input_ids, attention_mask) -> logits (B, C)``.
        input_ids: ``(B, T)`` token ids.
        attention_mask: ``(B, T)`` attention mask.
        special_tokens_mask: ``(B, T)`` special tokens (never removed) or ``None``.
        scores: ``(B, T)`` attribution scores, higher = more relevant.
        target: Class index (int or one per example); ``None`` = predicted class.
        bins: Removal fractions, default :data:`ERASER_BINS`.
        mode: ``"delete"`` or ``"replace"``.
        replacement_id: Token id for ``"replace"``.
        pad_token_id: Padding id for ``"delete"``.
        batch_size: Perturbed inputs per forward call.

    Returns:
        :class:`BinnedScore` (mean over bins and per-bin values, shape ``(B,)``
        and ``(B, n_bins)``).
    """
    bins = _check_bins(bins)
    s = _setup(forward_func, input_ids, attention_mask, special_tokens_mask, scores, target, batch_size)
    o = _opts(mode, replacement_id, pad_token_id)
    variants = [_perturb(s, b, keep=False, largest=True, opts=o) for b in bins]
    p = _pick(_variant_probs(forward_func, variants, batch_size), s.target)
    p0 = _pick(s.probs.unsqueeze(0), s.target)
    per_bin = p0 - p
    return BinnedScore(per_bin.mean(dim=1), per_bin, bins)


def sufficiency(
    forward_func: ForwardFunc,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike = None,
    bins: Sequence[float] = ERASER_BINS,
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    batch_size: int = 64,
) -> BinnedScore:
    r"""ERASER sufficiency: probability drop when *only* the top-k% tokens are kept.

    .. math:: \mathrm{suff} = \frac{1}{|\mathcal{B}|}\sum_{k\in\mathcal{B}}
              p(y\mid x) - p(y\mid r_k)

    Lower is better (the kept tokens suffice). Arguments as in
    :func:`comprehensiveness`.

    Returns:
        :class:`BinnedScore`.
    """
    bins = _check_bins(bins)
    s = _setup(forward_func, input_ids, attention_mask, special_tokens_mask, scores, target, batch_size)
    o = _opts(mode, replacement_id, pad_token_id)
    variants = [_perturb(s, b, keep=True, largest=True, opts=o) for b in bins]
    p = _pick(_variant_probs(forward_func, variants, batch_size), s.target)
    p0 = _pick(s.probs.unsqueeze(0), s.target)
    per_bin = p0 - p
    return BinnedScore(per_bin.mean(dim=1), per_bin, bins)


def _curve_fractions(steps: int) -> Tensor:
    if int(steps) != steps or steps < 1:
        raise PRXAIError(f"steps must be a positive integer, got {steps}.")
    return torch.linspace(0.0, 1.0, int(steps) + 1, dtype=torch.float64)


def _check_order(order: str) -> bool:
    if order not in ("most", "least"):
        raise PRXAIError(f'order must be "most" (most relevant first) or "least", got {order!r}.')
    return order == "most"


def deletion_curve(
    forward_func: ForwardFunc,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike = None,
    steps: int = 10,
    order: Literal["most", "least"] = "most",
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    batch_size: int = 64,
) -> DeletionCurve:
    """Target probability after removing ``0, 1/steps, ..., 100%`` of the real tokens.

    With ``order="most"`` the most relevant tokens go first (a faithful
    explanation makes the curve fall fast); with ``order="least"`` the least
    relevant go first (the curve should stay high).

    Args:
        steps: Number of removal steps (the curve has ``steps + 1`` points).
        order: ``"most"`` or ``"least"``.
        Other arguments as in :func:`comprehensiveness`.

    Returns:
        :class:`DeletionCurve`.
    """
    largest = _check_order(order)
    fractions = _curve_fractions(steps)
    s = _setup(forward_func, input_ids, attention_mask, special_tokens_mask, scores, target, batch_size)
    o = _opts(mode, replacement_id, pad_token_id)
    variants = [_perturb(s, float(f), keep=False, largest=largest, opts=o) for f in fractions[1:]]
    p = _pick(_variant_probs(forward_func, variants, batch_size), s.target)
    p0 = _pick(s.probs.unsqueeze(0), s.target)
    return DeletionCurve(fractions, torch.cat([p0, p], dim=1), order)


def aopc_from_curve(curve: Union[DeletionCurve, Tensor]) -> Tensor:
    r"""AOPC of a deletion curve: mean drop from the unperturbed probability.

    .. math:: \mathrm{AOPC} = \frac{1}{L+1}\sum_{k=0}^{L} p(y\mid x) - p(y\mid x^{(k)})

    Args:
        curve: A :class:`DeletionCurve` or its ``(B, L + 1)`` probabilities.

    Returns:
        ``(B,)`` tensor.
    """
    probs = curve.probs if isinstance(curve, DeletionCurve) else curve
    return (probs[:, :1] - probs).mean(dim=1)


def aopc(
    forward_func: ForwardFunc,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike = None,
    steps: int = 10,
    order: Literal["most", "least"] = "most",
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    batch_size: int = 64,
) -> Tensor:
    """Area over the perturbation curve (Samek et al. 2017) of :func:`deletion_curve`.

    Higher is better for ``order="most"``, lower for ``order="least"``.

    Returns:
        ``(B,)`` tensor.
    """
    return aopc_from_curve(
        deletion_curve(forward_func, input_ids, attention_mask, special_tokens_mask, scores,
                       target, steps, order, mode, replacement_id, pad_token_id, batch_size)
    )


def log_odds(
    forward_func: ForwardFunc,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike = None,
    fraction: float = 0.2,
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    batch_size: int = 64,
    eps: float = 1e-12,
) -> Tensor:
    r"""Log-odds: log-ratio of the target probability after/before removing the top ``fraction``.

    .. math:: \mathrm{LO} = \log p(y\mid x \setminus r_k) - \log p(y\mid x)

    Lower (more negative) is better.

    Returns:
        ``(B,)`` tensor.
    """
    s = _setup(forward_func, input_ids, attention_mask, special_tokens_mask, scores, target, batch_size)
    variant = _perturb(s, fraction, keep=False, largest=True, opts=_opts(mode, replacement_id, pad_token_id))
    p = _pick(_variant_probs(forward_func, [variant], batch_size), s.target)[:, 0]
    p0 = _pick(s.probs.unsqueeze(0), s.target)[:, 0]
    return torch.log(p.clamp_min(eps)) - torch.log(p0.clamp_min(eps))


def accuracy_after_removal(
    forward_func: ForwardFunc,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    labels: TargetLike = None,
    fraction: float = 0.2,
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    batch_size: int = 64,
) -> Tensor:
    """Whether the model is still right after removing the top ``fraction`` tokens.

    Args:
        labels: Gold labels (int or one per example). ``None`` compares with
            the model's own prediction on the full input (prediction retention).
        Other arguments as in :func:`comprehensiveness`.

    Returns:
        ``(B,)`` float tensor of 0/1; its mean is the accuracy. Lower is better.
    """
    s = _setup(forward_func, input_ids, attention_mask, special_tokens_mask, scores, labels, batch_size)
    variant = _perturb(s, fraction, keep=False, largest=True, opts=_opts(mode, replacement_id, pad_token_id))
    pred = _variant_probs(forward_func, [variant], batch_size)[0].argmax(dim=-1)
    return (pred == s.target).float()


def evaluate_faithfulness(
    forward_func: ForwardFunc,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike = None,
    labels: TargetLike = None,
    bins: Sequence[float] = ERASER_BINS,
    steps: int = 10,
    log_odds_fraction: float = 0.2,
    accuracy_fraction: float = 0.2,
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    batch_size: int = 64,
    eps: float = 1e-12,
) -> Dict[str, Tensor]:
    """All removal metrics at once, sharing one forward pass on the full input.

    Gives the same values as calling :func:`comprehensiveness`,
    :func:`sufficiency`, :func:`deletion_curve` (both orders), :func:`aopc`,
    :func:`log_odds` and :func:`accuracy_after_removal` separately, but runs
    every perturbed input in one batched pass.

    Args:
        target: Class explained (``None`` = predicted class).
        labels: Gold labels for ``accuracy`` (``None`` = the target class).
        Other arguments as in the individual metrics.

    Returns:
        Dict of per-example tensors: ``"comprehensiveness"``, ``"sufficiency"``
        (``(B,)``, averaged over bins), ``"comprehensiveness@<pct>"`` and
        ``"sufficiency@<pct>"`` per bin, ``"aopc_most"``, ``"aopc_least"``,
        ``"log_odds"``, ``"accuracy"``, ``"prob"`` (unperturbed target
        probability), ``"target"``, ``"curve_most"`` and ``"curve_least"``
        (``(B, steps + 1)``), and ``"curve_fractions"`` (``(steps + 1,)``).
    """
    bins = _check_bins(bins)
    fractions = _curve_fractions(steps)
    s = _setup(forward_func, input_ids, attention_mask, special_tokens_mask, scores, target, batch_size)
    gold = s.target if labels is None else _resolve_target(labels, s.probs)
    o = _opts(mode, replacement_id, pad_token_id)
    variants: List[Tuple[Tensor, Tensor]] = []
    variants += [_perturb(s, b, keep=False, largest=True, opts=o) for b in bins]
    variants += [_perturb(s, b, keep=True, largest=True, opts=o) for b in bins]
    variants += [_perturb(s, float(f), keep=False, largest=True, opts=o) for f in fractions[1:]]
    variants += [_perturb(s, float(f), keep=False, largest=False, opts=o) for f in fractions[1:]]
    variants.append(_perturb(s, log_odds_fraction, keep=False, largest=True, opts=o))
    variants.append(_perturb(s, accuracy_fraction, keep=False, largest=True, opts=o))
    full = _variant_probs(forward_func, variants, batch_size)
    p = _pick(full, s.target)
    p0 = _pick(s.probs.unsqueeze(0), s.target)  # (B, 1)
    nb, ns = len(bins), len(fractions) - 1
    comp = p0 - p[:, :nb]
    suff = p0 - p[:, nb : 2 * nb]
    curve_most = torch.cat([p0, p[:, 2 * nb : 2 * nb + ns]], dim=1)
    curve_least = torch.cat([p0, p[:, 2 * nb + ns : 2 * nb + 2 * ns]], dim=1)
    lo_p = p[:, 2 * nb + 2 * ns]
    acc_pred = full[-1].argmax(dim=-1)
    out: Dict[str, Tensor] = {
        "comprehensiveness": comp.mean(dim=1),
        "sufficiency": suff.mean(dim=1),
    }
    for i, b in enumerate(bins):
        out[f"comprehensiveness@{_pct(b)}"] = comp[:, i]
    for i, b in enumerate(bins):
        out[f"sufficiency@{_pct(b)}"] = suff[:, i]
    out["aopc_most"] = aopc_from_curve(curve_most)
    out["aopc_least"] = aopc_from_curve(curve_least)
    out["log_odds"] = torch.log(lo_p.clamp_min(eps)) - torch.log(p0[:, 0].clamp_min(eps))
    out["accuracy"] = (acc_pred == gold).float()
    out["prob"] = p0[:, 0]
    out["target"] = s.target
    out["curve_most"] = curve_most
    out["curve_least"] = curve_least
    out["curve_fractions"] = fractions
    return out


def _pct(fraction: float) -> str:
    """``0.05 -> "5"``, ``0.125 -> "12.5"``."""
    value = round(fraction * 100, 6)
    return str(int(value)) if value == int(value) else f"{value:g}"
