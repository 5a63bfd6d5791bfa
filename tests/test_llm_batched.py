"""LLMGraphAttribution's rows from batched backward passes, and the method's spec honoured on the generation path.

A tiny random Llama causal LM built from a config and a word-level tokenizer built in memory.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
from captum.attr import TextTokenInput  # noqa: E402

import captum_prxai as cp  # noqa: E402
from captum_prxai.llm import LLMGraphAttribution  # noqa: E402

from conftest import tiny_causal_lm, word_tokenizer  # noqa: E402

WORDS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(46)]
PROMPT = "w1 w2 w3 w4 w5 w6 w7"
TARGET = "w8 w9 w10 w11 w12"
METHODS = {
    "pr-g": cp.PRGradient,
    "pr-ag": cp.PRAttentionGradient,
    "pr-a": cp.PRAttention,
    "default": cp.PageRankAttribution,
}


def _tokenizer():
    return word_tokenizer(WORDS)


def _llama(layers: int = 3):
    return tiny_causal_lm(len(WORDS), layers)


@pytest.fixture(scope="module")
def tok():
    return _tokenizer()


@pytest.fixture(scope="module")
def model():
    return _llama()


def _attr(model, tok, cls, **options):
    return LLMGraphAttribution(cls(model, cp.attention_layers(model), **options), tok)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_batched_rows_equal_the_per_row_result(model, tok, name):
    llm = _attr(model, tok, METHODS[name])
    inp = TextTokenInput(PROMPT, tok)
    batched = llm.attribute(inp, target=TARGET)  # all rows in one chunk: one forward + one backward
    per_row = llm.attribute(inp, target=TARGET, one_pass=False)  # the method's own attribute, one prefix at a time
    one_at_a_time = llm.attribute(inp, target=TARGET, internal_batch_size=1)
    chunks_of_two = llm.attribute(inp, target=TARGET, internal_batch_size=2)
    assert batched.token_attr.shape == (5, 8)
    assert batched.token_attr.abs().sum() > 0
    for other in (per_row, one_at_a_time, chunks_of_two):
        torch.testing.assert_close(batched.token_attr, other.token_attr, atol=1e-5, rtol=0)
        torch.testing.assert_close(batched.output_probs, other.output_probs, atol=1e-5, rtol=1e-5)


def test_the_default_chunk_holds_every_row_of_a_short_sequence(model, tok):
    llm = _attr(model, tok, cp.PRGradient)
    assert llm._row_chunk(length=96, n_out=32) == 32


def _prefix_rows_by_hand(model, tok, cls, **options):
    """Row k by hand: the core attribution on the prefix ``prompt + t_<k``, explaining log p(t_k) at its end."""
    prompt_ids = tok.encode(PROMPT, return_tensors="pt")
    target_ids = torch.tensor(tok.encode(TARGET, add_special_tokens=False))

    def forward(ids):
        return torch.log_softmax(model(ids).logits[:, -1], dim=-1)

    method = cls(forward, cp.attention_layers(model), **options)
    rows = []
    for k in range(len(target_ids)):
        ids = torch.cat([prompt_ids, target_ids[:k].unsqueeze(0)], dim=1)
        rows.append(method.attribute(ids, target=int(target_ids[k]))[0, : prompt_ids.shape[1]])
    return torch.stack(rows)


@pytest.mark.parametrize("cls", [cp.PRGradient, cp.PRAttentionGradient])
def test_conservative_propagation_is_honoured_and_equals_a_construction_by_hand(model, tok, cls):
    inp = TextTokenInput(PROMPT, tok)
    conservative = _attr(model, tok, cls, propagation="conservative")
    assert conservative.attr_method.spec.propagation == "conservative"
    rows = conservative.attribute(inp, target=TARGET).token_attr
    gradient_rows = _attr(model, tok, cls).attribute(inp, target=TARGET).token_attr
    # holding the softmax and the normalisers constant changes dA, so the rows change
    assert (rows - gradient_rows).abs().max() > 1e-4
    by_hand = _prefix_rows_by_hand(model, tok, cls, propagation="conservative")
    torch.testing.assert_close(rows, by_hand.to(rows.dtype), atol=1e-5, rtol=0)
    # and the gradient rows are the by-hand gradient rows (the option, not something else, made the difference)
    torch.testing.assert_close(gradient_rows, _prefix_rows_by_hand(model, tok, cls).to(rows.dtype), atol=1e-5, rtol=0)


def test_conservative_propagation_leaves_attention_only_rows_unchanged(model, tok):
    inp = TextTokenInput(PROMPT, tok)
    plain = _attr(model, tok, cp.PRAttention).attribute(inp, target=TARGET).token_attr
    conservative = _attr(model, tok, cp.PRAttention, propagation="conservative").attribute(inp, target=TARGET)
    torch.testing.assert_close(conservative.token_attr, plain, atol=0, rtol=0)


def test_other_spec_options_reach_the_rows(model, tok):
    inp = TextTokenInput(PROMPT, tok)
    base = _attr(model, tok, cp.PRAttentionGradient).attribute(inp, target=TARGET).token_attr
    for options in ({"teleport": "input_gradient"}, {"walks": "both"}, {"graph": "layered"}):
        rows = _attr(model, tok, cp.PRAttentionGradient, **options).attribute(inp, target=TARGET).token_attr
        assert (rows - base).abs().max() > 1e-4, options
        by_hand = _prefix_rows_by_hand(model, tok, cp.PRAttentionGradient, **options)
        torch.testing.assert_close(rows, by_hand.to(rows.dtype), atol=1e-5, rtol=0)
