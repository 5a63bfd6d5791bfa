"""A tokenizer that wraps each text in a decoder classifier's prompt, for text-level tools.

The benchmark, ``explain`` and the explorer tokenize a text and attribute its
tokens. A prompted decoder (:class:`~captum_prxai.models.decoder.LabelWordClassifier`)
must see the whole prompt, yet only the text's own tokens may be scored,
removed or shown as evidence. :class:`PromptTokenizer` tokenizes the full
prompt and marks every prompt token outside the text as *special*
(``special_tokens_mask == 1``), which all those tools already leave alone.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from captum_prxai.exceptions import PRXAIError

__all__ = ["PromptTokenizer"]


class PromptTokenizer:
    """Callable like a Hugging Face tokenizer on one text; prompt tokens come back as special tokens.

    Args:
        classifier: A :class:`~captum_prxai.models.decoder.LabelWordClassifier`
            (anything with ``tokenizer``, ``prompt(text)`` and ``chat``).
    """

    def __init__(self, classifier: Any) -> None:
        self.classifier = classifier
        self.tokenizer = classifier.tokenizer
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "right"
        if not getattr(self.tokenizer, "is_fast", False):
            raise PRXAIError("PromptTokenizer needs a fast tokenizer (character offsets).")

    # attributes the tools read from tokenizers
    @property
    def pad_token_id(self) -> Optional[int]:
        return self.tokenizer.pad_token_id

    @property
    def eos_token_id(self) -> Optional[int]:
        return self.tokenizer.eos_token_id

    mask_token_id = None

    @property
    def model_max_length(self) -> int:
        return self.tokenizer.model_max_length

    def convert_ids_to_tokens(self, ids: Any) -> Any:
        return self.tokenizer.convert_ids_to_tokens(ids)

    def decode(self, ids: Any, **kwargs: Any) -> str:
        return self.tokenizer.decode(ids, **kwargs)

    def __call__(
        self,
        text: str,
        truncation: bool = False,
        max_length: Optional[int] = None,
        return_special_tokens_mask: bool = False,
        return_tensors: Optional[str] = None,
        **_: Any,
    ) -> dict:
        if not isinstance(text, str):
            raise PRXAIError("PromptTokenizer takes one text at a time.")
        prompt = self.classifier.prompt(text)
        start = prompt.find(text)
        end = start + len(text)
        enc = self.tokenizer(prompt, add_special_tokens=not self.classifier.chat, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        special = [0 if (start >= 0 and s < end and e > start and e > s) else 1 for s, e in offsets]
        if truncation and max_length is not None and len(ids) > max_length:
            # cut the text, never the prompt: drop text tokens from the end of the text span
            excess = len(ids) - max_length
            text_positions = [i for i, flag in enumerate(special) if flag == 0]
            if excess > len(text_positions):
                raise PRXAIError(f"max_length={max_length} is shorter than the prompt itself.")
            drop = set(text_positions[len(text_positions) - excess:])
            ids = [t for i, t in enumerate(ids) if i not in drop]
            special = [f for i, f in enumerate(special) if i not in drop]
        out = {"input_ids": ids, "attention_mask": [1] * len(ids)}
        if return_special_tokens_mask:
            out["special_tokens_mask"] = special
        if return_tensors == "pt":
            out = {k: torch.tensor([v]) for k, v in out.items()}
        return out
