r"""F-Fidelity (Zheng et al., 2025): removal metrics measured on a copy fine-tuned on random removals.

Removing tokens produces inputs the model never saw in training, so a
probability drop may reflect the shift of distribution rather than the
removed evidence. F-Fidelity first fine-tunes a **copy** of the model on
inputs with random tokens removed (at most a fraction ``mask_rate`` of each
example), then measures explanation-guided removal on that copy, removing no
more than ``mask_rate`` of the tokens at a time so that every perturbed input
stays within what the copy was trained on:

.. math::
    \mathrm{Fid}^{+}_\alpha(x) = \mathbb{E}_{S}\big[p_r(\hat y\mid x) - p_r(\hat y\mid x\setminus S)\big],
    \quad S \sim \mathcal{U}\{S\subseteq R_\alpha,\ |S| = \min(|R_\alpha|, k_\beta)\},

.. math::
    \mathrm{Fid}^{-}_\alpha(x) = \mathbb{E}_{S}\big[p_r(\hat y\mid x) - p_r(\hat y\mid x\setminus S)\big],
    \quad S \sim \mathcal{U}\{S\subseteq \bar R_\alpha,\ |S| = \min(|\bar R_\alpha|, k_\beta)\},

where :math:`p_r` is the fine-tuned copy, :math:`R_\alpha` the top
``alpha`` fraction of the real tokens by score, :math:`\bar R_\alpha` the
other real tokens and :math:`k_\beta` the number of tokens of the fraction
``beta = mask_rate`` (rounded as the other removal metrics). Fid+ (higher is
better) is the comprehensiveness analogue, Fid- (lower is better) the
sufficiency analogue; both are averaged over the fractions ``alpha``.

The user's model is never modified: it is deep-copied, and only the copy is
trained (its parameters made trainable, in training mode), then frozen and put
in evaluation mode.

Fine-tuning budget (defaults, chosen to be cheap and documented rather than
to match the paper's full fine-tuning): ``steps=30`` AdamW steps at
``lr=5e-5``, batches of ``train_batch_size=8`` examples, each with a random
share ``r ~ U(0, mask_rate)`` of its real tokens removed, ``mask_rate=0.1``;
cross-entropy against the given labels (default: the model's own predictions
on the unmasked inputs). Cost: ``steps`` forward and backward passes of a
batch, once; fine-tune once with :func:`random_mask_finetune` and pass the
copy as ``finetuned`` to compare several explanations on the same copy.
"""

from __future__ import annotations

import copy
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from captum_prxai.exceptions import PRXAIError
from captum_prxai.metrics._inputs import _check_fraction, _check_positive_int, _check_token_inputs
from captum_prxai.metrics.faithfulness import TargetLike, _forward_probs, _resolve_target
from captum_prxai.metrics.masking import (
    RemovalMode,
    _check_2d,
    num_tokens_to_remove,
    real_token_mask,
    remove_tokens,
    select_tokens,
)

#: ``forward_func(model, input_ids, attention_mask) -> logits (B, C)``
ModelForward = Callable[[nn.Module, Tensor, Tensor], Tensor]

#: Removal fractions alpha of :func:`f_fidelity`.
F_FIDELITY_FRACTIONS: Tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5)

__all__ = ["F_FIDELITY_FRACTIONS", "FFidelity", "ModelForward", "f_fidelity", "random_mask_finetune"]


class FFidelity(NamedTuple):
    """F-Fidelity scores.

    Attributes:
        fid_plus: ``(B,)`` Fid+ averaged over the fractions (higher is better).
        fid_minus: ``(B,)`` Fid- averaged over the fractions (lower is better).
        per_fraction_plus: ``(B, F)`` Fid+ at each fraction.
        per_fraction_minus: ``(B, F)`` Fid- at each fraction.
        fractions: The removal fractions ``alpha``.
    """

    fid_plus: Tensor
    fid_minus: Tensor
    per_fraction_plus: Tensor
    per_fraction_minus: Tensor
    fractions: Tuple[float, ...]


def _default_forward(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    out = model(input_ids=input_ids, attention_mask=attention_mask)
    return getattr(out, "logits", out)


def _logits(forward_func: ModelForward, model: nn.Module, ids: Tensor, mask: Tensor) -> Tensor:
    out = forward_func(model, ids, mask)
    out = getattr(out, "logits", out)
    if not isinstance(out, Tensor) or out.dim() != 2:
        raise PRXAIError(
            "forward_func must return logits of shape (batch, classes); got "
            f"{type(out).__name__} {tuple(getattr(out, 'shape', ()))}."
        )
    return out


def _random_subset(candidates: Tensor, size: Tensor, generator: torch.Generator) -> Tensor:
    """Per row, ``size`` uniformly random positions among the True ones of ``candidates`` (``(N, T)`` bool)."""
    noise = torch.rand(candidates.shape, generator=generator).to(candidates.device)
    noise = noise.masked_fill(~candidates, 2.0)
    rank = noise.argsort(dim=1).argsort(dim=1)
    return (rank < size.unsqueeze(1)) & candidates


def random_mask_finetune(
    model: nn.Module,
    train_ids: Tensor,
    train_mask: Tensor,
    train_labels: Optional[Tensor] = None,
    special_tokens_mask: Optional[Tensor] = None,
    forward_func: Optional[ModelForward] = None,
    steps: int = 30,
    lr: float = 5e-5,
    mask_rate: float = 0.1,
    train_batch_size: int = 8,
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    seed: int = 0,
) -> nn.Module:
    """A copy of ``model`` fine-tuned on inputs with random tokens removed (F-Fidelity's first stage).

    Each step draws ``train_batch_size`` examples (with replacement), removes
    a random share ``r ~ U(0, mask_rate)`` of each one's real tokens (special
    tokens and padding are kept), and takes one AdamW step on the
    cross-entropy against ``train_labels``. The model passed in is never
    modified: parameters, ``requires_grad`` flags and training mode are its
    own, untouched (only a deep copy is trained).

    Args:
        model: The model to copy (a :class:`torch.nn.Module`).
        train_ids: ``(N, T)`` token ids to fine-tune on.
        train_mask: ``(N, T)`` their attention mask.
        train_labels: ``(N,)`` class labels; ``None`` = the model's own
            predictions on the unmasked inputs (self-distillation).
        special_tokens_mask: ``(N, T)`` special tokens (never removed) or ``None``.
        forward_func: ``forward_func(model, input_ids, attention_mask) -> logits``;
            default ``model(input_ids=..., attention_mask=...).logits``.
        steps: Optimiser steps (``0`` returns an untrained, frozen copy).
        lr: AdamW learning rate.
        mask_rate: Largest share of real tokens removed per example, in ``(0, 1]``.
        train_batch_size: Examples per step.
        mode, replacement_id, pad_token_id: How tokens are removed
            (see :func:`~captum_prxai.metrics.remove_tokens`).
        seed: Seed of the batches, the masks and the copy's dropout.

    Returns:
        The fine-tuned copy, in evaluation mode with ``requires_grad=False``.

    References:
        X. Zheng, F. Shirani, Z. Chen, C. Lin, W. Cheng, W. Guo, D. Luo.
        *F-Fidelity: A Robust Framework for Faithfulness Evaluation of
        Explainable AI.* ICLR 2025.
    """
    if not isinstance(model, nn.Module):
        raise PRXAIError(f"model must be a torch.nn.Module (it is copied and fine-tuned), got {type(model).__name__}.")
    _check_2d("train_ids", train_ids)
    _check_2d("train_mask", train_mask, train_ids.shape)
    if special_tokens_mask is not None:
        _check_2d("special_tokens_mask", special_tokens_mask, train_ids.shape)
    real = real_token_mask(train_mask, special_tokens_mask)
    if not bool(real.any(dim=1).all()):
        rows = (~real.any(dim=1)).nonzero().flatten().tolist()
        raise PRXAIError(f"random_mask_finetune: training rows {rows[:10]} have no real token (all padding or "
                         "special tokens); drop them.")
    if isinstance(steps, bool) or int(steps) != steps or steps < 0:
        raise PRXAIError(f"steps must be a non-negative integer, got {steps!r}.")
    if not float(lr) > 0:
        raise PRXAIError(f"lr must be positive, got {lr!r}.")
    mask_rate = _check_fraction("mask_rate", mask_rate)
    train_batch_size = _check_positive_int("train_batch_size", train_batch_size)
    forward_func = forward_func or _default_forward
    opts = {"mode": mode, "replacement_id": replacement_id, "pad_token_id": pad_token_id,
            "special_tokens_mask": None}
    tuned = copy.deepcopy(model)
    tuned.eval()
    for p in tuned.parameters():
        p.requires_grad_(False)
    if train_labels is None:
        with torch.no_grad():
            train_labels = _logits(forward_func, tuned, train_ids, train_mask).argmax(dim=-1)
    labels = torch.as_tensor(train_labels, device=train_ids.device).long().reshape(-1)
    if labels.numel() != train_ids.shape[0]:
        raise PRXAIError(f"train_labels must hold one label per training example ({train_ids.shape[0]}), "
                         f"got {labels.numel()}.")
    if int(steps) == 0:
        return tuned
    params = [p for p in tuned.parameters() if p.is_floating_point()]
    for p in params:
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW(params, lr=float(lr))
    generator = torch.Generator().manual_seed(int(seed))
    n_real = real.sum(dim=1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        tuned.train()
        for _ in range(int(steps)):
            pick = torch.randint(train_ids.shape[0], (train_batch_size,), generator=generator).to(train_ids.device)
            rates = torch.rand(train_batch_size, generator=generator, dtype=torch.float64) * mask_rate
            size = torch.floor(n_real[pick].cpu().double() * rates).long().to(train_ids.device)
            removed = _random_subset(real[pick], size, generator)
            ids, mask = remove_tokens(train_ids[pick], train_mask[pick], removed, **opts)
            loss = nn.functional.cross_entropy(_logits(forward_func, tuned, ids, mask).float(), labels[pick])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    tuned.eval()
    for p in tuned.parameters():
        p.requires_grad_(False)
    return tuned


def f_fidelity(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike = None,
    fractions: Sequence[float] = F_FIDELITY_FRACTIONS,
    mask_rate: float = 0.1,
    n_samples: int = 10,
    finetuned: Optional[nn.Module] = None,
    train_ids: Optional[Tensor] = None,
    train_mask: Optional[Tensor] = None,
    train_labels: Optional[Tensor] = None,
    train_special_tokens_mask: Optional[Tensor] = None,
    forward_func: Optional[ModelForward] = None,
    steps: int = 30,
    lr: float = 5e-5,
    train_batch_size: int = 8,
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    seed: int = 0,
    batch_size: int = 64,
) -> FFidelity:
    r"""F-Fidelity's Fid+ and Fid- (Zheng et al., 2025) of token attributions.

    See the module docstring for the formulas and the fine-tuning budget.
    The copy is fine-tuned with :func:`random_mask_finetune` unless
    ``finetuned`` is given; by default on the evaluated inputs themselves with
    the model's own predictions as labels (pass ``train_ids`` / ``train_mask``
    / ``train_labels`` to fine-tune on training data instead, as the paper does).

    Args:
        model: The user's model (never modified).
        input_ids: ``(B, T)`` token ids.
        attention_mask: ``(B, T)`` attention mask.
        special_tokens_mask: ``(B, T)`` special tokens (never removed) or ``None``.
        scores: ``(B, T)`` attribution scores, higher = more relevant.
        target: Class explained; ``None`` = the fine-tuned copy's prediction.
        fractions: The fractions ``alpha`` of top tokens, each in ``(0, 1]``.
        mask_rate: ``beta``, the largest share of tokens removed at once
            (the fine-tuning's rate too).
        n_samples: Random subsets averaged per example and fraction.
        finetuned: A copy already fine-tuned by :func:`random_mask_finetune`.
        train_ids, train_mask, train_labels, train_special_tokens_mask: Data
            to fine-tune on (default: the evaluated inputs).
        forward_func: ``forward_func(model, input_ids, attention_mask) -> logits``.
        steps, lr, train_batch_size: Fine-tuning budget.
        mode, replacement_id, pad_token_id: How tokens are removed.
        seed: Seed of the fine-tuning and of the random subsets.
        batch_size: Inputs per forward call of the evaluation.

    Returns:
        :class:`FFidelity`.

    Raises:
        PRXAIError: Inconsistent shapes, an example with no real token,
            non-finite scores on real tokens, or a bad setting.

    References:
        X. Zheng, F. Shirani, Z. Chen, C. Lin, W. Cheng, W. Guo, D. Luo.
        *F-Fidelity: A Robust Framework for Faithfulness Evaluation of
        Explainable AI.* ICLR 2025.
    """
    real = _check_token_inputs("f_fidelity", input_ids, attention_mask, special_tokens_mask, scores)
    fractions = tuple(_check_fraction("every fraction", f) for f in fractions)
    if not fractions:
        raise PRXAIError("fractions must contain at least one removal fraction, e.g. (0.1, 0.2, 0.3, 0.4, 0.5).")
    mask_rate = _check_fraction("mask_rate", mask_rate)
    n_samples = _check_positive_int("n_samples", n_samples)
    batch_size = _check_positive_int("batch_size", batch_size)
    forward_func = forward_func or _default_forward
    if finetuned is None:
        if train_ids is None:
            train_ids, train_mask, train_special_tokens_mask = input_ids, attention_mask, special_tokens_mask
        elif train_mask is None:
            raise PRXAIError("train_ids needs train_mask (the attention mask of the training inputs).")
        finetuned = random_mask_finetune(model, train_ids, train_mask, train_labels, train_special_tokens_mask,
                                         forward_func, steps, lr, mask_rate, train_batch_size, mode,
                                         replacement_id, pad_token_id, seed)
    elif finetuned is model:
        raise PRXAIError("finetuned is the user's model itself; pass the copy returned by random_mask_finetune.")

    def probs_of(ids: Tensor, mask: Tensor) -> Tensor:
        return _forward_probs(lambda i, m: _logits(forward_func, finetuned, i, m), ids, mask, batch_size)

    p_full = probs_of(input_ids, attention_mask)
    y = _resolve_target(target, p_full)
    rows = torch.arange(input_ids.shape[0], device=p_full.device)
    p0 = p_full[rows, y]
    n_real = real.sum(dim=1)
    k_beta = num_tokens_to_remove(n_real, mask_rate)
    generator = torch.Generator().manual_seed(int(seed) + 1)
    plus: List[Tensor] = []
    minus: List[Tensor] = []
    opts = {"mode": mode, "replacement_id": replacement_id, "pad_token_id": pad_token_id,
            "special_tokens_mask": special_tokens_mask}
    for alpha in fractions:
        top = select_tokens(scores, attention_mask, special_tokens_mask, alpha, largest=True)
        rest = real & ~top
        for group, out in ((top, plus), (rest, minus)):
            size = torch.minimum(group.sum(dim=1), k_beta)
            drops = []
            for _ in range(n_samples):
                removed = _random_subset(group, size, generator)
                ids, mask = remove_tokens(input_ids, attention_mask, removed, **opts)
                drops.append(p0 - probs_of(ids, mask)[rows, y])
            out.append(torch.stack(drops).mean(dim=0))
    per_plus, per_minus = torch.stack(plus, dim=1), torch.stack(minus, dim=1)
    return FFidelity(per_plus.mean(dim=1), per_minus.mean(dim=1), per_plus, per_minus, fractions)
