r"""Normalised AOPC (Edin et al., 2024): each example's AOPC placed between its own bounds.

The AOPC of a token ordering :math:`\pi` of an example with :math:`n` real
tokens, removing one token per step,

.. math:: \mathrm{AOPC}(\pi) = \frac{1}{n+1}\sum_{k=0}^{n} p(\hat y\mid x) - p(\hat y\mid x\setminus\pi_{1..k}),

depends on the model and on the example's length as much as on the
explanation: a short text, or a model whose probability collapses after one
deletion, gives every ordering a similar AOPC. Normalised AOPC divides out
that range,

.. math:: \mathrm{NAOPC}(\pi) = \frac{\mathrm{AOPC}(\pi) - \min_{\sigma}\mathrm{AOPC}(\sigma)}
                                     {\max_{\sigma}\mathrm{AOPC}(\sigma) - \min_{\sigma}\mathrm{AOPC}(\sigma)},

so that ``1`` is the best ordering of that example and ``0`` the worst,
whatever the model and length.

The exact bounds need a search over the :math:`n!` orderings. As in the paper,
they are approximated by beam search: orderings are grown one token at a
time, keeping the ``beam_width`` prefixes with the largest (upper bound) or
smallest (lower bound) accumulated probability drop; prefixes that removed the
same set keep the better sum. With ``beam_width >= n!`` (or any width when the
model is additive in the tokens) the bounds are exact. The explanation's own
ordering is a valid ordering, so the bounds are widened to contain its AOPC
and NAOPC stays in ``[0, 1]``.
"""

from __future__ import annotations

from typing import Dict, List, Literal, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError
from captum_prxai.metrics._inputs import _check_positive_int, _check_token_inputs
from captum_prxai.metrics.faithfulness import (
    ForwardFunc,
    TargetLike,
    _check_order,
    _forward_probs,
    _resolve_target,
)
from captum_prxai.metrics.masking import RemovalMode, remove_tokens

__all__ = ["NormalizedAOPC", "normalized_aopc"]


class NormalizedAOPC(NamedTuple):
    """Normalised AOPC and its parts, one value per example.

    Attributes:
        naopc: ``(B,)`` normalised AOPC in ``[0, 1]`` (``nan`` where every
            ordering gives the same AOPC, e.g. one real token).
        aopc: ``(B,)`` AOPC of the explanation's ordering (one token per step).
        lower: ``(B,)`` lower bound used (beam search, widened to contain ``aopc``).
        upper: ``(B,)`` upper bound used.
    """

    naopc: Tensor
    aopc: Tensor
    lower: Tensor
    upper: Tensor


def _probs_of_sets(forward_func: ForwardFunc, ids: Tensor, mask: Tensor, removed: Tensor, target: int,
                   opts: Dict, batch_size: int) -> Tensor:
    """Target probability of one example with each row of ``removed`` (``(C, T)`` bool) taken out."""
    count = removed.shape[0]
    new_ids, new_mask = remove_tokens(ids.expand(count, -1), mask.expand(count, -1), removed, **opts)
    return _forward_probs(forward_func, new_ids, new_mask, batch_size)[:, target].double()


def _beam_bound(forward_func: ForwardFunc, ids: Tensor, mask: Tensor, positions: List[int], target: int,
                largest_drop: bool, beam_width: int, opts: Dict, batch_size: int) -> float:
    """Smallest (``largest_drop``) or largest sum of ``p_1 .. p_n`` over the orderings the beam keeps."""
    length = ids.shape[1]
    beams: List[Tuple[frozenset, float]] = [(frozenset(), 0.0)]
    for _ in positions:
        candidates: Dict[frozenset, float] = {}
        expansions: List[Tuple[frozenset, float]] = []
        for removed, total in beams:
            for pos in positions:
                if pos not in removed:
                    expansions.append((removed | {pos}, total))
        unique = list(dict.fromkeys(s for s, _ in expansions))
        rows = torch.zeros(len(unique), length, dtype=torch.bool)
        for r, s in enumerate(unique):
            rows[r, list(s)] = True
        probs = dict(zip(unique, _probs_of_sets(forward_func, ids, mask, rows.to(ids.device), target, opts,
                                                  batch_size).tolist()))
        for s, total in expansions:
            value = total + probs[s]
            best = candidates.get(s)
            if best is None or (value < best if largest_drop else value > best):
                candidates[s] = value
        ranked = sorted(candidates.items(), key=lambda kv: kv[1], reverse=not largest_drop)
        beams = ranked[:beam_width]
    return beams[0][1]


def normalized_aopc(
    forward_func: ForwardFunc,
    input_ids: Tensor,
    attention_mask: Tensor,
    special_tokens_mask: Optional[Tensor],
    scores: Tensor,
    target: TargetLike = None,
    order: Literal["most", "least"] = "most",
    beam_width: int = 5,
    mode: RemovalMode = "delete",
    replacement_id: Optional[int] = None,
    pad_token_id: int = 0,
    batch_size: int = 64,
) -> NormalizedAOPC:
    r"""Normalised AOPC (Edin et al., 2024) of token-by-token removal.

    .. math:: \mathrm{NAOPC} = \frac{\mathrm{AOPC}(\pi) - \mathrm{AOPC}_{\min}}
                                    {\mathrm{AOPC}_{\max} - \mathrm{AOPC}_{\min}}

    with :math:`\pi` the explanation's ordering (most relevant first for
    ``order="most"``, least relevant first for ``"least"``; ties by position)
    and the bounds found by beam search over orderings (see the module
    docstring). Higher is better for ``"most"``, lower for ``"least"``.

    Cost per example with ``n`` real tokens: ``n`` forward rows for the
    explanation and at most ``beam_width * n (n + 1) / 2`` for each bound
    (identical inputs are run once), i.e. quadratic in the length: about
    ``5 n^2`` rows with the default width.

    Args:
        forward_func: ``forward_func(input_ids, attention_mask) -> logits (B, C)``.
        input_ids: ``(B, T)`` token ids.
        attention_mask: ``(B, T)`` attention mask.
        special_tokens_mask: ``(B, T)`` special tokens (never removed) or ``None``.
        scores: ``(B, T)`` attribution scores, higher = more relevant.
        target: Class explained (int or one per example); ``None`` = predicted class.
        order: ``"most"`` or ``"least"``.
        beam_width: Orderings kept per step by the bound search (1 = greedy).
        mode: ``"delete"`` or ``"replace"`` (see :func:`~captum_prxai.metrics.remove_tokens`).
        replacement_id: Token id for ``"replace"``.
        pad_token_id: Padding id for ``"delete"``.
        batch_size: Inputs per forward call.

    Returns:
        :class:`NormalizedAOPC`.

    Raises:
        PRXAIError: Inconsistent shapes, an example with no real token,
            non-finite scores on real tokens, or a bad ``order`` / ``beam_width``.

    References:
        J. Edin, A. G. Motzfeldt, C. L. Christensen, T. Ruotsalo, L. Maaløe,
        M. Maistro. *Normalized AOPC: Fixing Misleading Faithfulness Metrics
        for Feature Attribution Explainability.* 2024.
    """
    largest = _check_order(order)
    beam_width = _check_positive_int("beam_width", beam_width)
    batch_size = _check_positive_int("batch_size", batch_size)
    real = _check_token_inputs("normalized_aopc", input_ids, attention_mask, special_tokens_mask, scores)
    if mode == "replace" and replacement_id is None:
        raise PRXAIError('mode="replace" needs replacement_id (e.g. tokenizer.mask_token_id); or use mode="delete".')
    if mode not in ("delete", "replace"):
        raise PRXAIError(f'mode must be "delete" or "replace", got {mode!r}.')
    opts = {"mode": mode, "replacement_id": replacement_id, "pad_token_id": pad_token_id}
    p_full = _forward_probs(forward_func, input_ids, attention_mask, batch_size)
    targets = _resolve_target(target, p_full)
    batch = input_ids.shape[0]
    out = {k: torch.zeros(batch, dtype=torch.float64) for k in ("naopc", "aopc", "lower", "upper")}
    values = scores.detach().to("cpu", torch.float64)
    for b in range(batch):
        ids, mask = input_ids[b : b + 1], attention_mask[b : b + 1]
        y = int(targets[b])
        p0 = float(p_full[b, y])
        positions = real[b].nonzero().flatten().tolist()
        n = len(positions)
        row = values[b].tolist()
        ranked = sorted(positions, key=lambda pos: (-row[pos] if largest else row[pos], pos))
        prefixes = torch.zeros(n, ids.shape[1], dtype=torch.bool)
        for k in range(n):
            prefixes[k:, ranked[k]] = True
        own = float(_probs_of_sets(forward_func, ids, mask, prefixes.to(ids.device), y, opts, batch_size).sum())
        low_sum = _beam_bound(forward_func, ids, mask, positions, y, True, beam_width, opts, batch_size)
        high_sum = _beam_bound(forward_func, ids, mask, positions, y, False, beam_width, opts, batch_size)
        aopc = p0 - (p0 + own) / (n + 1)
        upper = max(p0 - (p0 + low_sum) / (n + 1), aopc)
        lower = min(p0 - (p0 + high_sum) / (n + 1), aopc)
        span = upper - lower
        out["aopc"][b], out["lower"][b], out["upper"][b] = aopc, lower, upper
        out["naopc"][b] = (aopc - lower) / span if span > 1e-12 else float("nan")
    return NormalizedAOPC(out["naopc"], out["aopc"], out["lower"], out["upper"])
