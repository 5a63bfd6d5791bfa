"""The token that replaces removed tokens in ``mode="replace"`` deletion.

Every removal metric of :mod:`captum_prxai.metrics` takes ``mode="replace"``
and a ``replacement_id``: removed tokens are overwritten in place instead of
deleted, so positions and length are unchanged. :func:`replacement_token_id`
picks that token for a tokenizer:

* **encoders** (a tokenizer with a mask token, BERT, RoBERTa, ...): the mask
  token, ``[MASK]`` / ``<mask>``, which the model was pre-trained to read as
  "a token is missing here";
* **decoders** (no mask token, or ``causal=True``): a single space, the id
  the tokenizer gives ``" "`` when that is one token (GPT-2's ``Ġ``,
  SentencePiece's ``▁``): it carries no content and is an ordinary token of
  running text, unlike an end-of-text or padding token, which a causal model
  reads as a document boundary. Tokenizers that split a space into several ids
  fall back to the unknown token, then to the end-of-sequence token.

Example::

    >>> rid = replacement_token_id(tokenizer)
    >>> comprehensiveness(forward, ids, mask, special, scores, mode="replace", replacement_id=rid)
"""

from __future__ import annotations

from typing import Any, Optional

from captum_prxai.exceptions import PRXAIError

__all__ = ["replacement_token_id"]


def replacement_token_id(tokenizer: Any, causal: Optional[bool] = None) -> int:
    """The replacement token for ``mode="replace"`` removal: ``[MASK]`` for encoders, a space for decoders.

    Args:
        tokenizer: A Hugging Face tokenizer (anything with ``mask_token_id``,
            ``encode`` or ``__call__``, ``unk_token_id``, ``eos_token_id``).
        causal: ``True`` for a decoder (never the mask token), ``False`` for an
            encoder (the mask token is required), ``None`` = decide by whether
            the tokenizer has a mask token.

    Returns:
        The token id.

    Raises:
        PRXAIError: An encoder without a mask token, or a tokenizer with none
            of the fallbacks.
    """
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if causal is None:
        causal = mask_id is None
    if not causal:
        if mask_id is None:
            raise PRXAIError(
                "replacement_token_id: causal=False but the tokenizer has no mask token; pass causal=True "
                "for a decoder, or give replacement_id yourself."
            )
        return int(mask_id)
    encode = getattr(tokenizer, "encode", None)
    if callable(encode):
        try:
            space = encode(" ", add_special_tokens=False)
        except TypeError:
            space = encode(" ")
        if len(space) == 1:
            return int(space[0])
    for name in ("unk_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    raise PRXAIError(
        "replacement_token_id: the tokenizer encodes a space as several tokens and has neither an unknown nor "
        "an end-of-sequence token; give replacement_id yourself."
    )
