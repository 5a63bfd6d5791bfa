"""LLMGraphAttribution's inputs: batches of prompts, chat templates, BOS, and the clear errors on bad input.

A tiny random Llama causal LM built from a config and a word-level tokenizer built in memory.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
from captum.attr import TextTemplateInput, TextTokenInput  # noqa: E402

import captum_prxai as cp  # noqa: E402
from captum_prxai.exceptions import PRXAIError  # noqa: E402
from captum_prxai.llm import LLMGraphAttribution, chat_input  # noqa: E402

from conftest import tiny_causal_lm, word_tokenizer  # noqa: E402

WORDS = ["<pad>", "<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "user", "assistant"] + [
    f"w{i}" for i in range(42)]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")
GEN = {"max_new_tokens": 3, "do_sample": False}


def _tokenizer(bos: bool = True):
    return word_tokenizer(WORDS, bos=bos, chat_template=CHAT_TEMPLATE, specials=("<|im_start|>", "<|im_end|>"))


def _llama():
    return tiny_causal_lm(len(WORDS))


@pytest.fixture(scope="module")
def tok():
    return _tokenizer()


@pytest.fixture(scope="module")
def model():
    return _llama()


@pytest.fixture(scope="module")
def llm(model, tok):
    return LLMGraphAttribution(cp.PRGradient(model, cp.attention_layers(model)), tok)


# -- batches of prompts ------------------------------------------------------------------------------------------


def test_a_batch_of_prompts_gives_one_result_per_prompt_equal_to_single_calls(llm, tok):
    prompts = ["w1 w2 w3", "w4 w5 w6 w7 w8 w9", "w10"]
    results = llm.attribute(prompts, gen_args=GEN)
    assert isinstance(results, list) and len(results) == 3
    for prompt, result in zip(prompts, results):
        single = llm.attribute(TextTokenInput(prompt, tok), gen_args=GEN)
        assert result.output_tokens == single.output_tokens  # left-padded generation = unpadded generation
        assert result.input_tokens == single.input_tokens
        torch.testing.assert_close(result.token_attr, single.token_attr, atol=1e-6, rtol=0)


def test_a_batch_takes_one_target_per_prompt(llm, tok):
    results = llm.attribute([TextTokenInput("w1 w2 w3", tok), "w4 w5"], target=["w6 w7", "w8"])
    assert [r.token_attr.shape for r in results] == [(2, 4), (1, 3)]
    with pytest.raises(PRXAIError, match="a list of 2 targets"):
        llm.attribute(["w1 w2", "w3"], target="w4")


def test_a_text_token_input_holding_several_prompts_points_to_the_list_form(llm, tok):
    with pytest.raises(PRXAIError, match=r"For a batch, pass a list"):
        llm.attribute(TextTokenInput(["w1 w2", "w3 w4"], tok), target="w5")


def test_bad_batches_get_clear_errors(llm, tok):
    with pytest.raises(PRXAIError, match="Prompt 1 of the batch is empty"):
        llm.attribute(["w1 w2", "  "], gen_args=GEN)
    with pytest.raises(PRXAIError, match="include_generated=True is not supported with a batch"):
        llm.attribute(["w1 w2", "w3"], target=["w4", "w5"], include_generated=True)
    with pytest.raises(PRXAIError, match="batch of prompts is empty"):
        llm.attribute([])
    with pytest.raises(PRXAIError, match="Prompt 0 of the batch must be"):
        llm.attribute([3], target=["w1"])


# -- targets, chat templates, models ------------------------------------------------------------------------------


def test_a_target_of_special_tokens_only_is_refused(llm, tok):
    with pytest.raises(PRXAIError, match="only special tokens"):
        llm.attribute(TextTokenInput("w1 w2", tok), target="</s> <|im_end|>")
    with pytest.raises(PRXAIError, match="only special tokens"):
        llm.attribute(TextTokenInput("w1 w2", tok), target=torch.tensor([2]))


def test_a_chat_template_without_a_generation_prompt_is_refused(llm, tok):
    messages = [{"role": "user", "content": "w1 w2 w3"}]
    finished = tok.apply_chat_template(messages, tokenize=False)
    with pytest.raises(PRXAIError, match="no generation prompt"):
        llm.attribute(TextTokenInput(finished, tok), target="w4")
    with pytest.raises(PRXAIError, match="no generation prompt"):
        chat_input(messages, tok, add_generation_prompt=False)


def test_chat_input_skips_the_template_tokens(llm, tok):
    messages = [{"role": "user", "content": "w1 w2 w3"}]
    inp = chat_input(messages, tok)
    assert isinstance(inp, TextTemplateInput)
    assert inp.to_model_input() == tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    result = llm.attribute(inp, target="w4 w5")
    assert [t.strip() for t in result.input_tokens] == ["w1", "w2", "w3"]  # the template's tokens: no column
    # each content token's column is its column in the plain token input of the same text
    plain = llm.attribute(TextTokenInput(inp.to_model_input(), tok), target="w4 w5", skip_special_tokens=False)
    words = inp.to_model_input().split()
    columns = [i + 1 for i, w in enumerate(words) if w in ("w1", "w2", "w3")]  # +1: the tokenizer's BOS
    torch.testing.assert_close(result.token_attr, plain.token_attr[:, columns], atol=1e-6, rtol=0)


def test_special_tokens_of_a_chat_prompt_string_get_no_column_by_default(llm, tok):
    text = tok.apply_chat_template([{"role": "user", "content": "w1 w2"}], tokenize=False,
                                   add_generation_prompt=True)
    result = llm.attribute(TextTokenInput(text, tok), target="w3")
    assert "<|im_start|>" not in result.input_tokens and "<|im_end|>" not in result.input_tokens
    assert "w1" in result.input_tokens
    kept = llm.attribute(TextTokenInput(text, tok), target="w3", skip_special_tokens=False)
    assert "<|im_start|>" in kept.input_tokens


def test_a_model_without_causal_attention_is_refused(tok):
    from captum_prxai.hooks import attention_layers

    model = _llama()
    for layer in attention_layers(model):
        layer.is_causal = False  # every query attends to every key

    def full_mask(*args, **kwargs):
        return None

    import transformers.models.llama.modeling_llama as llama

    original = llama.create_causal_mask
    llama.create_causal_mask = full_mask
    try:
        llm = LLMGraphAttribution(cp.PRGradient(model, attention_layers(model)), tok)
        with pytest.raises(PRXAIError, match="is not causal"):
            llm.attribute(TextTokenInput("w1 w2 w3", tok), target="w4")
    finally:
        llama.create_causal_mask = original


def test_a_method_built_on_a_forward_function_is_refused(model, tok):
    def forward(ids):
        return model(ids).logits[:, -1]

    with pytest.raises(PRXAIError, match="must be the Hugging Face causal LM itself"):
        LLMGraphAttribution(cp.PRGradient(forward, cp.attention_layers(model)), tok)


# -- save and load ------------------------------------------------------------------------------------------------


def test_a_result_saved_and_loaded_keeps_its_tokens_scores_method_and_model(llm, tok, tmp_path):
    from captum_prxai.llm import load_result, save_result

    result = llm.attribute(TextTokenInput("w1 w2 w3", tok), target="w4 w5")
    path = tmp_path / "result.json"
    save_result(result, path)
    loaded = load_result(path)
    assert loaded.input_tokens == result.input_tokens and loaded.output_tokens == result.output_tokens
    torch.testing.assert_close(loaded.token_attr, result.token_attr.double(), atol=1e-7, rtol=0)
    torch.testing.assert_close(loaded.seq_attr, result.seq_attr.double(), atol=1e-7, rtol=0)
    torch.testing.assert_close(loaded.output_probs, result.output_probs.double(), atol=1e-7, rtol=0)
    assert loaded.method.startswith("PRGradient(GraphSpec(") and "edge_weight='gradient'" in loaded.method
    assert loaded.model_name == "LlamaForCausalLM"  # a model built from a config has no name or path
    # readable without the model or torch's pickles: plain JSON
    import json

    payload = json.loads(path.read_text(encoding="utf-8"))
    assert payload["format"] == "captum-prxai/generation-result" and payload["token_attr"] == loaded.token_attr.tolist()


def test_loading_something_else_is_a_clear_error(tmp_path):
    from captum_prxai.llm import load_result, save_result

    with pytest.raises(PRXAIError, match="No such file"):
        load_result(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(PRXAIError, match="not readable JSON"):
        load_result(bad)
    bad.write_text('{"format": "other"}', encoding="utf-8")
    with pytest.raises(PRXAIError, match="not a saved generation result"):
        load_result(bad)
    with pytest.raises(PRXAIError, match="LLMAttributionResult"):
        save_result("scores", tmp_path / "x.json")
