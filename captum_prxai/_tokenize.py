"""Tokenise one text for attribution, within the longest input the model accepts.

:func:`encode_text` turns a text into the ``(1, T)`` tensors every attribution
method takes (:class:`EncodedText`), refusing or truncating a text longer than
the model's limit; :func:`model_input_limit` (from the config and the
tokenizer) is that limit. The ``explain`` command, the explorer, the benchmark
and the attribution classes all read the limit from here.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

# Models whose position ids start after the padding index, so a few positions are unusable.
_PADDING_OFFSET_MODELS = ("roberta", "xlm-roberta", "camembert", "mpnet")


def max_input_length(config: Any, tokenizer: Any = None) -> Optional[int]:
    """Tokens (special tokens included) the model accepts, or ``None`` when nothing says.

    Uses ``max_position_embeddings`` (``n_positions`` for GPT-2), less the
    padding offset of RoBERTa-style position ids, and the tokenizer's
    ``model_max_length`` when it is a real limit.
    """
    limits = []
    positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if isinstance(positions, int) and positions > 0:
        if getattr(config, "model_type", "") in _PADDING_OFFSET_MODELS:
            positions -= (getattr(config, "pad_token_id", 1) or 0) + 1
        limits.append(positions)
    tokenizer_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(tokenizer_max, int) and 0 < tokenizer_max < 1_000_000:
        limits.append(tokenizer_max)
    return min(limits) if limits else None


def model_input_limit(model: Any, tokenizer: Any = None) -> Optional[int]:
    """Longest input of ``model`` (special tokens included), or ``None`` when nothing says.

    The same as :func:`max_input_length` on ``model.config``.
    """
    return max_input_length(getattr(model, "config", None), tokenizer)


class EncodedText(NamedTuple):
    """One text tokenised for attribution (a batch of one)."""

    input_ids: Any  #: ``(1, T)``
    attention_mask: Any  #: ``(1, T)``
    special_tokens_mask: Any  #: ``(1, T)``, 1 on special tokens
    tokens: list  #: the ``T`` token strings
    truncated: bool  #: whether the text was cut to the limit
    full_length: int  #: tokens before any truncation

    @property
    def key(self) -> tuple:
        """The token ids as a tuple (a hashable cache key)."""
        return tuple(int(i) for i in self.input_ids[0].tolist())


def encode_text(
    tokenizer: Any,
    text: str,
    limit: Optional[int],
    truncate: bool,
    too_long: Callable[[int, int], Exception],
) -> EncodedText:
    """Tokenise ``text``; if it exceeds ``limit``, truncate it or raise ``too_long(length, limit)``.

    transformers' own over-length warning is silenced: the caller reports
    over-long texts itself, in its own words.
    """
    import torch
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        enc = tokenizer(text, return_tensors="pt", truncation=False, return_special_tokens_mask=True)
        full = int(enc["input_ids"].shape[1])
        truncated = limit is not None and full > limit
        if truncated:
            if not truncate:
                raise too_long(full, limit)
            enc = tokenizer(text, return_tensors="pt", truncation=True, max_length=limit,
                            return_special_tokens_mask=True)
    finally:
        hf_logging.set_verbosity(verbosity)
    ids = enc["input_ids"]
    mask = enc.get("attention_mask")
    special = enc.get("special_tokens_mask")
    return EncodedText(
        ids,
        torch.ones_like(ids) if mask is None else mask,
        torch.zeros_like(ids) if special is None else special,
        [str(t) for t in tokenizer.convert_ids_to_tokens(ids[0].tolist())],
        truncated,
        full,
    )
