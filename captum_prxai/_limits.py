"""The longest input a model accepts, from its config (and tokenizer)."""

from __future__ import annotations

from typing import Any, Optional

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
