r"""Soft comprehensiveness and sufficiency (Zhao & Aletras, 2023).

Hard removal deletes the top-k% tokens whatever their scores beyond the
ranking. The soft metrics perturb every real token's *embedding* instead, by
an element-wise Bernoulli mask whose keep-probability follows the token's
normalised importance ``a_i`` (min-max over the example's real tokens, so the
most relevant token has ``a = 1`` and the least ``a = 0``):

* soft comprehensiveness keeps each embedding element of token ``i`` with
  probability ``1 - a_i`` (important tokens are mostly erased);
* soft sufficiency keeps it with probability ``a_i`` (only important tokens
  mostly survive).

Special tokens and padding are never perturbed. The model is called on
embeddings: ``forward_func(inputs_embeds, attention_mask) -> logits (B, C)``
(for a Hugging Face model, ``lambda e, m: model(inputs_embeds=e,
attention_mask=m).logits``).
"""

from __future__ import annotations

from typing import Callable, List, Optional

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError
from captum_prxai.metrics._inputs import _check_positive_int, _check_token_inputs
from captum_prxai.metrics.faithfulness import TargetLike, _probabilities, _resolve_target

#: ``forward_func(inputs_embeds, attention_mask) -> logits (B, C)``
EmbeddingForward = Callable[[Tensor, Tensor], Tensor]

__all__ = ["EmbeddingForward", "normalized_importance", "soft_comprehensiveness", "soft_sufficiency"]


def normalized_importance(scores: Tensor, real: Tensor) -> Tensor:
    """Min-max normalised scores over each example's real tokens.

    Args:
        scores: ``(B, T)`` finite attribution scores, higher = more relevant.
        real: ``(B, T)`` bool, the tokens that may be perturbed.

    Returns:
        ``(B, T)`` float64 tensor in ``[0, 1]`` on real tokens (an example
        whose real tokens all score the same gets ``0.5`` everywhere), ``0``
        elsewhere.
    """
    s = scores.detach().to(torch.float64)
    low = s.masked_fill(~real, float("inf")).amin(dim=1, keepdim=True)
    high = s.masked_fill(~real, float("-inf")).amax(dim=1, keepdim=True)
    span = high - low
    flat = span <= 0
    a = (s - low) / torch.where(flat, torch.ones_like(span), span)
    a = torch.where(flat, torch.full_like(a, 0.5), a)
    return a.clamp(0.0, 1.0) * real


def _embed_probs(forward_func: EmbeddingForward, embeds: Tensor, mask: Tensor, batch_size: int) -> Tensor:
    outs: List[Tensor] = []
    with torch.no_grad():
        for start in range(0, embeds.shape[0], batch_size):
            outs.append(_probabilities(forward_func(embeds[start : start + batch_size], mask[start : start + batch_size])))
    return torch.cat(outs, dim=0)


def _soft(
    metric: str,
    keep_important: bool,
    forward_func: EmbeddingForward,
    inputs_embeds: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike,
    n_samples: int,
    seed: int,
    normalize: bool,
    batch_size: int,
) -> Tensor:
    if not isinstance(inputs_embeds, Tensor) or inputs_embeds.dim() != 3:
        raise PRXAIError(
            f"{metric}: inputs_embeds must be a (batch, tokens, hidden) tensor, got "
            f"{tuple(getattr(inputs_embeds, 'shape', ()))}; embed the token ids first "
            "(e.g. model.get_input_embeddings()(input_ids))."
        )
    n_samples = _check_positive_int("n_samples", n_samples)
    batch_size = _check_positive_int("batch_size", batch_size)
    real = _check_token_inputs(metric, inputs_embeds[..., 0], attention_mask, special_tokens_mask, scores)
    embeds = inputs_embeds.detach()
    p_full = _embed_probs(forward_func, embeds, attention_mask, batch_size)
    y = _resolve_target(target, p_full)
    rows = torch.arange(embeds.shape[0], device=p_full.device)
    p0 = p_full[rows, y]
    a = normalized_importance(scores.to(real.device), real)
    keep = a if keep_important else 1.0 - a
    keep = torch.where(real, keep, torch.ones_like(keep)).to(embeds.device)  # protected tokens stay whole
    generator = torch.Generator().manual_seed(int(seed))
    drops = []
    for _ in range(n_samples):
        draw = torch.rand(embeds.shape, generator=generator, dtype=torch.float64).to(embeds.device)
        perturbed = embeds * (draw < keep.unsqueeze(-1)).to(embeds.dtype)
        p = _embed_probs(forward_func, perturbed, attention_mask, batch_size)[rows, y]
        drops.append((p0 - p).clamp_min(0.0))
    drop = torch.stack(drops).mean(dim=0)
    value = drop if not keep_important else 1.0 - drop
    if not normalize:
        return value
    null = embeds * (~real).to(embeds.dtype).unsqueeze(-1).to(embeds.device)
    p_null = _embed_probs(forward_func, null, attention_mask, batch_size)[rows, y]
    s_null = 1.0 - (p0 - p_null).clamp_min(0.0)
    room = 1.0 - s_null
    safe = torch.where(room > 0, room, torch.ones_like(room))
    out = (value - s_null) / safe if keep_important else value / safe
    return torch.where(room > 0, out, torch.full_like(out, float("nan")))


def soft_comprehensiveness(
    forward_func: EmbeddingForward,
    inputs_embeds: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike = None,
    n_samples: int = 20,
    seed: int = 0,
    normalize: bool = True,
    batch_size: int = 64,
) -> Tensor:
    r"""Soft (normalised) comprehensiveness: Soft-NC of Zhao & Aletras (2023).

    Each embedding element of real token ``i`` is kept with probability
    ``1 - a_i`` (``a`` the min-max normalised scores), giving ``x'``; then

    .. math::
        \mathrm{Soft\text{-}C}(x) = \mathbb{E}_{x'}\big[\max(0,\ p(\hat y\mid x) - p(\hat y\mid x'))\big],
        \qquad
        \mathrm{Soft\text{-}NC}(x) = \frac{\mathrm{Soft\text{-}C}(x)}{1 - S(x, \hat y, 0)},

    where :math:`S(x, \hat y, 0) = 1 - \max(0,\ p(\hat y\mid x) - p(\hat y\mid 0))`
    is the sufficiency of the input with every real token's embedding zeroed.
    The expectation is a mean over ``n_samples`` masks drawn from a private
    generator seeded with ``seed`` (same seed, same value). Higher is better.

    Args:
        forward_func: ``forward_func(inputs_embeds, attention_mask) -> logits (B, C)``.
        inputs_embeds: ``(B, T, D)`` input embeddings.
        attention_mask: ``(B, T)``, 1 for tokens, 0 for padding.
        special_tokens_mask: ``(B, T)``, 1 for special tokens (never perturbed), or ``None``.
        scores: ``(B, T)`` attribution scores, higher = more relevant.
        target: Class explained (int or one per example); ``None`` = predicted class.
        n_samples: Bernoulli masks averaged per example (cost: ``n_samples + 2``
            forward passes of the batch).
        seed: Seed of the masks.
        normalize: Divide by ``1 - S(x, ŷ, 0)`` (Soft-NC, the paper's metric);
            ``False`` returns Soft-C. An example whose all-zero input already
            predicts ``ŷ`` at least as strongly gets ``nan`` (nothing to normalise by).
        batch_size: Inputs per forward call.

    Returns:
        ``(B,)`` float tensor.

    Raises:
        PRXAIError: Inconsistent shapes, an example with no real token, or
            non-finite scores on real tokens.

    References:
        Z. Zhao, N. Aletras. *Incorporating Attribution Importance for Improving
        Faithfulness Metrics.* ACL 2023.
    """
    return _soft("soft_comprehensiveness", False, forward_func, inputs_embeds, attention_mask,
                 special_tokens_mask, scores, target, n_samples, seed, normalize, batch_size)


def soft_sufficiency(
    forward_func: EmbeddingForward,
    inputs_embeds: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike = None,
    n_samples: int = 20,
    seed: int = 0,
    normalize: bool = True,
    batch_size: int = 64,
) -> Tensor:
    r"""Soft (normalised) sufficiency: Soft-NS of Zhao & Aletras (2023).

    Each embedding element of real token ``i`` is kept with probability
    ``a_i`` (the min-max normalised scores), giving ``x'``; then

    .. math::
        \mathrm{Soft\text{-}S}(x) = 1 - \mathbb{E}_{x'}\big[\max(0,\ p(\hat y\mid x) - p(\hat y\mid x'))\big],
        \qquad
        \mathrm{Soft\text{-}NS}(x) = \frac{\mathrm{Soft\text{-}S}(x) - S(x, \hat y, 0)}{1 - S(x, \hat y, 0)},

    with :math:`S(x, \hat y, 0)` as in :func:`soft_comprehensiveness`. Higher
    is better (the important tokens alone keep the prediction). Arguments,
    errors and ``nan`` rule as in :func:`soft_comprehensiveness`.

    Returns:
        ``(B,)`` float tensor.

    References:
        Z. Zhao, N. Aletras. *Incorporating Attribution Importance for Improving
        Faithfulness Metrics.* ACL 2023.
    """
    return _soft("soft_sufficiency", True, forward_func, inputs_embeds, attention_mask,
                 special_tokens_mask, scores, target, n_samples, seed, normalize, batch_size)
