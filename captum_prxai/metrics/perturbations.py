"""Token perturbations for Captum's :func:`captum.metrics.infidelity` and
:func:`captum.metrics.sensitivity_max`.

Captum's default perturbations add Gaussian noise, which is meaningless for
integer token ids. The factories below perturb ids by *replacing* a random
subset of tokens with a replacement token (e.g. ``[MASK]``), never touching
protected ids (special tokens and padding: the perturbation functions see only
the ids, not the attention mask, so pass the pad id in ``protected_ids``).

Both Captum metrics call the perturbation function on a batch in which each
example is repeated ``n_perturb_samples`` times, inside :func:`torch.no_grad`.
Captum's gradient-based attribution methods (and the PR-XAI methods) enable
gradients themselves, so ``sensitivity_max`` works with them.

Example::

    >>> from captum.metrics import infidelity, sensitivity_max
    >>> from captum.attr import FeatureAblation
    >>> perturb = token_infidelity_perturb_func(
    ...     replacement_id=tok.mask_token_id, protected_ids=tok.all_special_ids, fraction=0.2)
    >>> infid = infidelity(probability_forward(forward_func), perturb, input_ids, scores,
    ...                    additional_forward_args=(attention_mask,), target=label)
    >>> sens = sensitivity_max(token_explanation_func(FeatureAblation(forward_func).attribute),
    ...     input_ids,
    ...     token_sensitivity_perturb_func(tok.mask_token_id, tok.all_special_ids),
    ...     target=label, additional_forward_args=(attention_mask,))
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError
from captum_prxai.metrics.masking import num_tokens_to_remove

__all__ = [
    "random_token_selection",
    "token_infidelity_perturb_func",
    "token_sensitivity_perturb_func",
    "probability_forward",
    "token_explanation_func",
]

TensorOrTuple = Union[Tensor, Tuple[Tensor, ...]]


def random_token_selection(
    input_ids: Tensor,
    protected_ids: Iterable[int] = (),
    fraction: Optional[float] = None,
    n_tokens: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    """Pick a uniformly random subset of the unprotected tokens of each row.

    Exactly one of ``fraction`` (rounded like the removal metrics, at least
    one token) or ``n_tokens`` gives the subset size; rows with fewer
    eligible tokens select all of them.

    Args:
        input_ids: ``(N, T)`` token ids.
        protected_ids: Token ids never selected (special tokens, padding).
        fraction: Fraction of eligible tokens per row, in ``(0, 1]``.
        n_tokens: Number of tokens per row.
        generator: Optional random generator (CPU) for reproducibility.

    Returns:
        ``(N, T)`` bool tensor.
    """
    if input_ids.dim() != 2:
        raise PRXAIError(f"input_ids must have shape (batch, tokens), got {tuple(input_ids.shape)}.")
    if (fraction is None) == (n_tokens is None):
        raise PRXAIError("give exactly one of fraction= or n_tokens= for the number of tokens to perturb.")
    protected = torch.tensor(sorted(set(int(i) for i in protected_ids)), dtype=input_ids.dtype,
                             device=input_ids.device)
    eligible = ~torch.isin(input_ids, protected) if protected.numel() else torch.ones_like(input_ids, dtype=torch.bool)
    n_eligible = eligible.sum(dim=1)
    if n_tokens is not None:
        if int(n_tokens) < 1:
            raise PRXAIError(f"n_tokens must be at least 1, got {n_tokens}.")
        k = torch.clamp(n_eligible, max=int(n_tokens))
    else:
        if not 0.0 < float(fraction) <= 1.0:
            raise PRXAIError(f"fraction must be in (0, 1], got {fraction}.")
        k = num_tokens_to_remove(n_eligible, float(fraction))
    noise = torch.rand(input_ids.shape, generator=generator).to(input_ids.device)
    noise = noise.masked_fill(~eligible, 2.0)
    rank = noise.argsort(dim=1).argsort(dim=1)
    return (rank < k.unsqueeze(1)) & eligible


def _replace(input_ids: Tensor, selected: Tensor, replacement: Sequence[int],
             generator: Optional[torch.Generator]) -> Tensor:
    if len(replacement) == 1:
        return input_ids.masked_fill(selected, int(replacement[0]))
    choices = torch.tensor(list(replacement), dtype=input_ids.dtype)
    pick = torch.randint(len(choices), input_ids.shape, generator=generator)
    return torch.where(selected, choices[pick].to(input_ids.device), input_ids)


def _as_list(replacement_id: Union[int, Sequence[int]]) -> Sequence[int]:
    ids = [int(replacement_id)] if isinstance(replacement_id, (int,)) or (
        isinstance(replacement_id, Tensor) and replacement_id.numel() == 1
    ) else [int(i) for i in replacement_id]
    if not ids:
        raise PRXAIError("replacement_id must be a token id or a non-empty list of token ids.")
    return ids


def _split(inputs: TensorOrTuple) -> Tuple[Tensor, Tuple[Tensor, ...], bool]:
    if isinstance(inputs, tuple):
        if not inputs:
            raise PRXAIError("perturbation function received an empty input tuple.")
        return inputs[0], tuple(inputs[1:]), True
    return inputs, (), False


def token_infidelity_perturb_func(
    replacement_id: Union[int, Sequence[int]],
    protected_ids: Iterable[int] = (),
    fraction: Optional[float] = 0.2,
    n_tokens: Optional[int] = None,
    seed: Optional[int] = None,
) -> Callable[[TensorOrTuple], Tuple[TensorOrTuple, TensorOrTuple]]:
    """Perturbation function for :func:`captum.metrics.infidelity` on token ids.

    Each call replaces a random subset of the unprotected tokens and returns
    ``(perturbation, perturbed_inputs)``, where ``perturbation`` is the binary
    float indicator of the replaced tokens. Infidelity then compares the
    summed attribution of the replaced tokens with the output change, i.e. the
    binary ("global attribution") form of Yeh et al., "On the (In)fidelity
    and Sensitivity of Explanations", NeurIPS 2019.

    If ``inputs`` is a tuple, only its first tensor (the ids) is perturbed;
    the others get zero perturbations.

    Args:
        replacement_id: Replacement token id, or a list to draw from at random.
        protected_ids: Ids never replaced (special tokens and the pad id).
        fraction: Fraction of eligible tokens replaced (default 20%).
        n_tokens: Replace this many tokens instead (set ``fraction=None``).
        seed: Seed for a private random generator (``None``: global RNG).

    Returns:
        ``perturb_func(inputs) -> (perturbations, perturbed_inputs)``.
    """
    replacement = _as_list(replacement_id)
    protected = tuple(int(i) for i in protected_ids)
    if n_tokens is not None:
        fraction = None
    generator = torch.Generator().manual_seed(seed) if seed is not None else None

    def perturb_func(inputs: TensorOrTuple) -> Tuple[TensorOrTuple, TensorOrTuple]:
        ids, rest, is_tuple = _split(inputs)
        selected = random_token_selection(ids, protected, fraction, n_tokens, generator)
        perturbed = _replace(ids, selected, replacement, generator)
        perturbation = selected.float()
        if not is_tuple:
            return perturbation, perturbed
        zeros = tuple(torch.zeros_like(r, dtype=torch.float32) for r in rest)
        return (perturbation,) + zeros, (perturbed,) + rest

    return perturb_func


def token_sensitivity_perturb_func(
    replacement_id: Union[int, Sequence[int]],
    protected_ids: Iterable[int] = (),
    n_tokens: Optional[int] = 1,
    fraction: Optional[float] = None,
    seed: Optional[int] = None,
) -> Callable[[TensorOrTuple], TensorOrTuple]:
    """Perturbation function for :func:`captum.metrics.sensitivity_max` on token ids.

    Each call replaces ``n_tokens`` (default one) random unprotected tokens per
    row and returns the perturbed inputs (a small, discrete neighbourhood of
    the input instead of Captum's L-infinity ball). The function takes one
    argument, so ``sensitivity_max``'s ``perturb_radius`` is not used.

    Args:
        replacement_id: Replacement token id, or a list to draw from at random.
        protected_ids: Ids never replaced (special tokens and the pad id).
        n_tokens: Tokens replaced per row (default 1).
        fraction: Replace this fraction instead (set ``n_tokens=None``).
        seed: Seed for a private random generator (``None``: global RNG).

    Returns:
        ``perturb_func(inputs) -> perturbed_inputs``.
    """
    replacement = _as_list(replacement_id)
    protected = tuple(int(i) for i in protected_ids)
    if fraction is not None:
        n_tokens = None
    generator = torch.Generator().manual_seed(seed) if seed is not None else None

    def perturb_func(inputs: TensorOrTuple) -> TensorOrTuple:
        ids, rest, is_tuple = _split(inputs)
        selected = random_token_selection(ids, protected, fraction, n_tokens, generator)
        perturbed = _replace(ids, selected, replacement, generator)
        return (perturbed,) + rest if is_tuple else perturbed

    return perturb_func


def probability_forward(forward_func: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """Wrap ``forward_func`` so it returns softmax probabilities instead of logits.

    Useful for :func:`captum.metrics.infidelity`, whose output differences are
    then on the same scale as the removal metrics.
    """

    def prob_forward(*args, **kwargs) -> Tensor:
        out = forward_func(*args, **kwargs)
        out = getattr(out, "logits", out)
        return torch.softmax(out, dim=-1)

    return prob_forward


def token_explanation_func(attribute: Callable[..., TensorOrTuple]) -> Callable[..., TensorOrTuple]:
    """Adapt an attribution function for :func:`captum.metrics.sensitivity_max`.

    ``sensitivity_max`` calls its ``explanation_func`` with the inputs as a
    *tuple* and expects a tuple back; it also compares explanations element
    by element. The returned function passes the token ids as a tensor to
    ``attribute`` (e.g. ``PRAttention(...).attribute`` or a Captum
    ``.attribute``), sums any trailing hidden dimension so scores are
    ``(B, T)``, and returns a tuple when it was given one.

    Args:
        attribute: ``attribute(input_ids, **kwargs) -> (B, T)`` or ``(B, T, H)``
            attributions (a tensor or a one-element tuple).

    Returns:
        ``explanation_func(inputs, **kwargs)``.
    """

    def explanation_func(inputs: TensorOrTuple, **kwargs) -> TensorOrTuple:
        ids, rest, is_tuple = _split(inputs)
        if rest:
            raise PRXAIError(
                "token_explanation_func expects the token ids as the only input; pass the "
                "attention mask through additional_forward_args."
            )
        out = attribute(ids, **kwargs)
        if isinstance(out, tuple):
            out = out[0]
        if out.dim() > 2:
            out = out.reshape(out.shape[0], out.shape[1], -1).sum(dim=-1)
        return (out,) if is_tuple else out

    return explanation_func
