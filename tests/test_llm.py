"""PR-XAI for text generation through Captum's LLM API (captum_prxai.llm).

Tiny random causal LMs (Llama, GPT-2, Qwen2, Gemma 3 configs) and a word-level tokenizer built in memory; one
test loads the packaged SmolLM2-135M (GGUF) end to end.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from captum.attr import (  # noqa: E402
    LayerIntegratedGradients,
    LLMAttributionResult,
    LLMGradientAttribution,
    TextTemplateInput,
    TextTokenInput,
)

import captum_prxai as cp  # noqa: E402
from captum_prxai.exceptions import PRXAIError  # noqa: E402
from captum_prxai.llm import DEFAULT_GEN_ARGS, LLMGraphAttribution  # noqa: E402

WORDS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(46)]
VOCAB = len(WORDS)
ARCHS = ["llama", "gpt2", "qwen2", "gemma3"]
PR_METHODS = {"pr-a": cp.PRAttention, "pr-g": cp.PRGradient, "pr-ag": cp.PRAttentionGradient}
BASELINES = {"raw": cp.RawAttention, "rollout": cp.AttentionRollout, "gae": cp.GradientWeightedRollout}
# options whose per-row inputs differ: the layered graph and signs, the gradient x input teleport, per-layer
# normalisation, a uniform teleport over the causal prefix, and the capture of materialised weights
VARIANTS = {
    "pr-g-layered-signed": functools.partial(cp.PageRankAttribution, edge_weight="gradient", graph="layered",
                                             signed=True),
    "pr-ag-input-gradient-normalized": functools.partial(cp.PageRankAttribution, edge_weight="attention_gradient",
                                                         teleport="input_gradient", normalize_layers=True),
    "pr-a-uniform": functools.partial(cp.PageRankAttribution, edge_weight="attention", teleport="uniform"),
    "attention-flow": cp.AttentionFlow,
    "pr-ag-materialised-weights": functools.partial(cp.PRAttentionGradient, capture="weights"),
    "pr-tag-both-walks": functools.partial(cp.PRTemperedAttentionGradient, walks="both"),
    "default": cp.PageRankAttribution,  # on a causal LM: PR-TAG±, both walks, λ = 1
}
PROMPT = "w1 w2 w3 w4 w5 w6"
TARGET = "w7 w8 w9 w10"


def _tokenizer(bos: bool = True):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    if bos:
        backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                                pad_token="<pad>", unk_token="<unk>")


def _lm(kind: str) -> torch.nn.Module:
    tf = transformers
    common = dict(vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    small = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                 intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    if kind == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**small, **common))
    elif kind == "gpt2":
        model = tf.GPT2LMHeadModel(tf.GPT2Config(n_embd=16, n_layer=2, n_head=2, n_positions=64, **common))
    elif kind == "qwen2":
        model = tf.Qwen2ForCausalLM(tf.Qwen2Config(**small, **common))
    elif kind == "gemma3":
        model = tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(**small, head_dim=8, sliding_window=4, **common))
    else:
        raise ValueError(kind)
    return model.eval()


@pytest.fixture(scope="module")
def tok():
    return _tokenizer()


@pytest.fixture(scope="module")
def lms():
    cache: dict[str, torch.nn.Module] = {}

    def make(kind: str) -> torch.nn.Module:
        if kind not in cache:
            cache[kind] = _lm(kind)
        return cache[kind]

    return make


def _wrap(model, cls, tok, **kwargs):
    return LLMGraphAttribution(cls(model, cp.attention_layers(model), **kwargs), tok)


def _target_log_probs(model, tok, prompt: str, target: str) -> torch.Tensor:
    """log p(t_k | prompt, t_<k), computed here with plain teacher forcing."""
    prompt_ids = tok.encode(prompt, return_tensors="pt")
    target_ids = torch.tensor(tok.encode(target, add_special_tokens=False))
    out = []
    for k in range(len(target_ids)):
        ids = torch.cat([prompt_ids, target_ids[:k].unsqueeze(0)], dim=1)
        with torch.no_grad():
            out.append(torch.log_softmax(model(ids).logits[0, -1], -1)[target_ids[k]])
    return torch.stack(out)


# -- result type, shapes, semantics ----------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(PR_METHODS))
def test_result_is_captums_with_the_right_shapes_and_probabilities(lms, tok, arch, name):
    model = lms(arch)
    llm = _wrap(model, PR_METHODS[name], tok)
    assert isinstance(llm, LLMGradientAttribution)
    inp = TextTokenInput(PROMPT, tok, skip_tokens=["<s>"])
    result = llm.attribute(inp, target=TARGET)
    assert type(result) is LLMAttributionResult
    assert result.input_tokens == PROMPT.split() and result.output_tokens == TARGET.split()
    assert result.token_attr.shape == (4, 6) and result.seq_attr.shape == (6,)
    assert torch.allclose(result.seq_attr, result.token_attr.sum(0))
    assert (result.token_attr >= 0).all() and torch.isfinite(result.token_attr).all()
    # PageRank mass: at most one per row over the prompt (the rest sits on <s> and earlier outputs)
    assert (result.token_attr.sum(1) <= 1 + 1e-5).all() and (result.token_attr.sum(1) > 0).all()
    expected = _target_log_probs(model, tok, PROMPT, TARGET).exp()
    assert torch.allclose(result.output_probs, expected, atol=1e-5), (result.output_probs, expected)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(PR_METHODS) + sorted(BASELINES))
def test_one_pass_matrix_equals_the_per_token_path(lms, tok, arch, name):
    _check_one_pass_equals_per_token(lms(arch), tok, {**PR_METHODS, **BASELINES}[name])


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_one_pass_equals_per_token_for_other_options(lms, tok, name):
    _check_one_pass_equals_per_token(lms("llama"), tok, VARIANTS[name])


def _check_one_pass_equals_per_token(model, tok, cls):
    llm = _wrap(model, cls, tok)
    inp = TextTokenInput(PROMPT, tok)
    one = llm.attribute(inp, target=TARGET, include_generated=True)
    per_token = llm.attribute(inp, target=TARGET, include_generated=True, one_pass=False)
    assert one.token_attr.abs().max() > 0
    torch.testing.assert_close(one.token_attr, per_token.token_attr, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(one.output_probs, per_token.output_probs, atol=1e-5, rtol=1e-4)
    chunked = llm.attribute(inp, target=TARGET, include_generated=True, internal_batch_size=3)
    torch.testing.assert_close(one.token_attr, chunked.token_attr, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("cls", [cp.PRGradient, cp.PRAttention, cp.PageRankAttribution])
def test_each_row_is_the_core_attribution_of_its_prefix(lms, tok, cls):
    """Row k equals the core attribute (resolved for generation) on ids prompt + t_<k with the log-prob of t_k as
    target."""
    model = lms("llama")
    result = _wrap(model, cls, tok).attribute(TextTokenInput(PROMPT, tok), target=TARGET, include_generated=True)
    prompt_ids = tok.encode(PROMPT, return_tensors="pt")
    target_ids = torch.tensor(tok.encode(TARGET, add_special_tokens=False))

    def next_token_log_probs(ids):
        return torch.log_softmax(model(ids).logits[:, -1], -1)

    # the rows resolve "auto" options for generation (PageRankAttribution.for_task; the presets fix theirs)
    core = cls(next_token_log_probs, cp.attention_layers(model)).for_task("generation")
    for k in range(len(target_ids)):
        ids = torch.cat([prompt_ids, target_ids[:k].unsqueeze(0)], dim=1)
        row = core.attribute(ids, target=int(target_ids[k]))[0]
        torch.testing.assert_close(result.token_attr[k, : ids.shape[1]], row, atol=1e-5, rtol=1e-4)
        assert (result.token_attr[k, ids.shape[1]:] == 0).all()  # t_k and later cannot be sources of t_k


def test_include_generated_rows_are_distributions_over_the_causal_prefix(lms, tok):
    llm = _wrap(lms("qwen2"), cp.PRGradient, tok)
    result = llm.attribute(TextTokenInput(PROMPT, tok), target=TARGET, include_generated=True)
    n_in = 7  # <s> + 6 words
    assert result.input_tokens == ["<s>"] + PROMPT.split() + TARGET.split()
    assert result.token_attr.shape == (4, n_in + 4)
    torch.testing.assert_close(result.token_attr.sum(1), torch.ones(4), atol=1e-5, rtol=0)
    generated = result.token_attr[:, n_in:]
    assert torch.equal(generated, generated.tril(-1))  # row k scores t_0 .. t_{k-1} only
    assert (generated.diagonal(-1) > 0).all()  # t_{k-1} is the explained position of row k


def test_the_decoders_classification_default_gives_signed_rows_summing_to_zero(lms, tok):
    """A decoder's classification default walks both ways with λ = 1 (PR-TAG±); given as a spec to the generation
    path, each row is the positive walk's PageRank minus the negative walk's over the causal prefix, so it sums to
    zero and has both signs. (The generation default itself is PR-AG's one walk: test_llm_generation_default.py.)"""
    model = lms("llama")
    method = cp.PageRankAttribution(model, cp.attention_layers(model), spec=cp.recommended_spec(model))
    assert method.spec.walks == "both" and method.spec.negative_weight == 1.0
    result = LLMGraphAttribution(method, tok).attribute(TextTokenInput(PROMPT, tok), target=TARGET,
                                                        include_generated=True)
    torch.testing.assert_close(result.token_attr.sum(1), torch.zeros(4), atol=1e-5, rtol=0)
    assert (result.token_attr > 0).any(dim=1).all() and (result.token_attr < 0).any(dim=1).all()


def test_target_as_tensor_equals_target_as_string(lms, tok):
    llm = _wrap(lms("gpt2"), cp.PRAttentionGradient, tok)
    inp = TextTokenInput(PROMPT, tok)
    ids = torch.tensor(tok.encode(TARGET, add_special_tokens=False))
    a, b = llm.attribute(inp, target=TARGET), llm.attribute(inp, target=ids)
    assert a.output_tokens == b.output_tokens and torch.equal(a.token_attr, b.token_attr)


def test_target_none_generates_with_captums_default_arguments(lms, tok):
    model = lms("llama")
    llm = _wrap(model, cp.PRAttention, tok)
    inp = TextTokenInput(PROMPT, tok)
    result = llm.attribute(inp)
    assert len(result.output_tokens) == DEFAULT_GEN_ARGS["max_new_tokens"] == result.token_attr.shape[0]
    prompt_ids = tok.encode(PROMPT, return_tensors="pt")
    with torch.no_grad():
        greedy = model.generate(prompt_ids, attention_mask=torch.ones_like(prompt_ids), max_new_tokens=25,
                                do_sample=False, pad_token_id=0)[0, prompt_ids.shape[1]:]
    assert result.output_tokens == tok.convert_ids_to_tokens(greedy.tolist())
    short = llm.attribute(inp, gen_args={"max_new_tokens": 3, "do_sample": False})
    assert short.output_tokens == result.output_tokens[:3]
    torch.testing.assert_close(short.token_attr, result.token_attr[:3])  # row k depends only on its prefix


# -- interpretable inputs ------------------------------------------------------------------------------


def test_skip_tokens_remove_columns_but_not_graph_nodes(lms, tok):
    llm = _wrap(lms("llama"), cp.PRGradient, tok)
    full = llm.attribute(TextTokenInput(PROMPT, tok), target=TARGET)
    skipped = llm.attribute(TextTokenInput(PROMPT, tok, skip_tokens=["<s>", "w3"]), target=TARGET)
    assert full.input_tokens == ["<s>"] + PROMPT.split()
    assert skipped.input_tokens == ["w1", "w2", "w4", "w5", "w6"]
    keep = [1, 2, 4, 5, 6]
    assert torch.equal(skipped.token_attr, full.token_attr[:, keep])  # same graph, columns selected as Captum does
    assert torch.allclose(skipped.seq_attr, full.seq_attr[keep])


def test_template_values_sum_their_tokens_and_masks_share_scores(lms, tok):
    llm = _wrap(lms("gemma3"), cp.PRAttentionGradient, tok)
    text = "w1 w2 w3 w4 w5 w6"
    tokens = llm.attribute(TextTokenInput(text, tok), target=TARGET).token_attr  # columns: <s> w1 .. w6
    template = TextTemplateInput("{} w3 {} {}", values=["w1 w2", "w4", "w5 w6"])
    result = llm.attribute(template, target=TARGET)
    assert result.input_tokens == ["w1 w2", "w4", "w5 w6"] and result.token_attr.shape == (4, 3)
    expected = torch.stack([tokens[:, 1] + tokens[:, 2], tokens[:, 4], tokens[:, 5] + tokens[:, 6]], dim=1)
    torch.testing.assert_close(result.token_attr, expected)
    grouped = llm.attribute(TextTemplateInput("{} w3 {} {}", values=["w1 w2", "w4", "w5 w6"], mask=[0, 1, 0]),
                            target=TARGET)
    shared = expected[:, 0] + expected[:, 2]
    torch.testing.assert_close(grouped.token_attr, torch.stack([shared, expected[:, 1], shared], dim=1))
    named = llm.attribute(TextTemplateInput("{a} w3 {b} {c}", values={"a": "w1 w2", "b": "w4", "c": "w5 w6"}),
                          target=TARGET)
    torch.testing.assert_close(named.token_attr, expected)


def test_template_whose_value_is_missing_from_the_text_is_refused(lms, tok):
    llm = _wrap(lms("llama"), cp.PRGradient, tok)
    inp = TextTemplateInput(lambda a, b: f"{a} w3", values=["w1", "w2"])
    with pytest.raises(PRXAIError, match="exactly once"):
        llm.attribute(inp, target=TARGET)


# -- plots, model state ---------------------------------------------------------------------------------


def test_captums_plots_run_on_the_result(lms, tok):
    result = _wrap(lms("gpt2"), cp.PRGradient, tok).attribute(TextTokenInput(PROMPT, tok), target=TARGET)
    fig, ax = result.plot_token_attr()
    assert [t.get_text() for t in ax.get_yticklabels()] == TARGET.split()
    assert len(ax.get_xticklabels()) == len(result.input_tokens)
    plt.close(fig)
    fig, ax = result.plot_seq_attr()
    assert len(ax.patches) == 2 * len(result.input_tokens)  # one positive and one negative bar per token
    plt.close(fig)


@pytest.mark.parametrize("name", ["pr-a", "pr-ag"])
@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_model_state_is_unchanged(lms, tok, name, implementation):
    model = _lm("qwen2")
    model.config._attn_implementation = implementation
    before = {k: v.clone() for k, v in model.state_dict().items()}
    llm = _wrap(model, PR_METHODS[name], tok)
    llm.attribute(TextTokenInput(PROMPT, tok), target=TARGET)
    llm.attribute(TextTokenInput(PROMPT, tok), target=TARGET, one_pass=False)
    assert model.config._attn_implementation == implementation
    assert not model.training
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks and not module._backward_hooks
    assert all(p.grad is None for p in model.parameters())
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_real_first_token_silenced_by_the_sink_rule_is_reported(lms):
    no_bos = _tokenizer(bos=False)
    llm = LLMGraphAttribution(cp.PRGradient(lms("llama"), cp.attention_layers(lms("llama"))), no_bos, add_bos=False)
    with pytest.warns(UserWarning, match="first prompt token 'w1'"):
        result = llm.attribute(TextTokenInput(PROMPT, no_bos), target=TARGET)
    assert (result.token_attr[:, 0] == 0).all()
    kept = LLMGraphAttribution(cp.PRGradient(lms("llama"), cp.attention_layers(lms("llama")), sink="keep"), no_bos,
                               add_bos=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (kept.attribute(TextTokenInput(PROMPT, no_bos), target=TARGET).token_attr[:, 0] > 0).all()


def test_a_bos_is_added_where_the_tokenizer_adds_none(lms, tok):
    """SmolLM2's tokenizer adds no BOS: the BOS goes in front, so the first real token keeps its score."""
    no_bos = _tokenizer(bos=False)
    llm = _wrap(lms("llama"), cp.PRGradient, no_bos)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = llm.attribute(TextTokenInput(PROMPT, no_bos), target=TARGET)
    assert result.input_tokens == PROMPT.split()  # the added BOS has no column
    assert (result.token_attr[:, 0] > 0).all()
    # the same rows as the prompt that the BOS-adding tokenizer encodes, without its BOS column
    with_bos = _wrap(lms("llama"), cp.PRGradient, tok).attribute(TextTokenInput(PROMPT, tok), target=TARGET)
    torch.testing.assert_close(result.token_attr, with_bos.token_attr[:, 1:], atol=1e-6, rtol=0)


def test_add_bos_is_checked(lms, tok):
    with pytest.raises(PRXAIError, match="add_bos must be"):
        LLMGraphAttribution(cp.PRGradient(lms("llama"), cp.attention_layers(lms("llama"))), tok, add_bos="yes")


# -- bad input ------------------------------------------------------------------------------------------------


def test_encoder_models_are_refused(tiny_model_factory, tok):
    bert = tiny_model_factory("bert")  # BertForSequenceClassification
    with pytest.raises(PRXAIError, match="not a causal language model"):
        LLMGraphAttribution(cp.PRGradient(bert, cp.attention_layers(bert)), tok)
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=64, is_decoder=False)
    bidirectional = transformers.BertLMHeadModel(cfg).eval()  # an LM head, but its attention looks both ways
    llm = LLMGraphAttribution(cp.PRAttention(bidirectional, cp.attention_layers(bidirectional)), tok)
    with pytest.raises(PRXAIError, match="not causal"):
        llm.attribute(TextTokenInput(PROMPT, tok), target=TARGET)


def test_unsupported_methods_and_forward_functions_are_refused(lms, tok):
    model = lms("llama")
    with pytest.raises(PRXAIError, match="LayerIntegratedGradients"):
        LLMGraphAttribution(LayerIntegratedGradients(model, model.get_input_embeddings()), tok)
    with pytest.raises(PRXAIError, match="the Hugging Face causal LM itself"):
        LLMGraphAttribution(cp.PRGradient(lambda ids: model(ids).logits[:, -1], cp.attention_layers(model)), tok)


def test_bad_inputs_and_targets_get_clear_errors(lms, tok):
    llm = _wrap(lms("llama"), cp.PRGradient, tok)
    inp = TextTokenInput(PROMPT, tok)
    with pytest.raises(PRXAIError, match=r"takes captum.attr.TextTokenInput or TextTemplateInput \(or a list of "
                                         r"them, or of prompt strings, for a batch\), got str"):
        llm.attribute(PROMPT, target=TARGET)
    with pytest.raises(PRXAIError, match="not both"):
        llm.attribute(inp, target=TARGET, gen_args={"max_new_tokens": 2})
    with pytest.raises(PRXAIError, match="encodes to no tokens"):
        llm.attribute(inp, target="")
    with pytest.raises(PRXAIError, match="target tensor is empty"):
        llm.attribute(inp, target=torch.tensor([], dtype=torch.long))
    with pytest.raises(PRXAIError, match="integer token ids"):
        llm.attribute(inp, target=torch.tensor([1.0, 2.0]))
    with pytest.raises(PRXAIError, match="outside the model's vocabulary"):
        llm.attribute(inp, target=torch.tensor([5, VOCAB]))
    with pytest.raises(PRXAIError, match="must be None, a string or a tensor"):
        llm.attribute(inp, target=7)
    with pytest.raises(PRXAIError, match="accepts at most 64"):
        llm.attribute(inp, target=" ".join(["w9"] * 60))
    with pytest.raises(PRXAIError, match="internal_batch_size must be a positive int"):
        llm.attribute(inp, target=TARGET, internal_batch_size=0)
    with torch.inference_mode(), pytest.raises(PRXAIError, match="inference_mode"):
        llm.attribute(inp, target=TARGET)


def test_empty_prompts_are_refused(lms, tok):
    llm = _wrap(lms("llama"), cp.PRGradient, tok)
    with pytest.raises(PRXAIError, match="no interpretable feature"):
        llm.attribute(TextTokenInput("", tok, skip_tokens=["<s>"]), target=TARGET)
    no_bos = _tokenizer(bos=False)
    with pytest.raises(PRXAIError, match="The prompt is empty"):
        _wrap(lms("llama"), cp.PRGradient, no_bos).attribute(TextTokenInput("", no_bos), target=TARGET)


class _NoGenerate(torch.nn.Module):
    """A causal LM behind a plain module: forward works, generate does not exist."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm
        self.config = lm.config

    def forward(self, input_ids, attention_mask=None, use_cache=False):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask, use_cache=use_cache)


def test_target_none_needs_a_model_that_can_generate(lms, tok):
    wrapper = _NoGenerate(lms("llama"))
    llm = LLMGraphAttribution(cp.PRGradient(wrapper, cp.attention_layers(wrapper)), tok)
    with pytest.raises(PRXAIError, match="has no generate"):
        llm.attribute(TextTokenInput(PROMPT, tok))
    result = llm.attribute(TextTokenInput(PROMPT, tok), target=TARGET)  # with a target it works
    direct = _wrap(lms("llama"), cp.PRGradient, tok).attribute(TextTokenInput(PROMPT, tok), target=TARGET)
    torch.testing.assert_close(result.token_attr, direct.token_attr)


# -- the packaged SmolLM2-135M, end to end ----------------------------------------------------------------


def test_packaged_smollm2_end_to_end():
    pytest.importorskip("gguf", reason="the GGUF decoders need the 'decoder' extra (gguf, accelerate)")
    pytest.importorskip("accelerate", reason="the GGUF decoders need the 'decoder' extra (gguf, accelerate)")
    from captum_prxai.models.decoder import load_decoder

    model, tok = load_decoder("smollm2")
    llm = LLMGraphAttribution(cp.PageRankAttribution(model, cp.attention_layers(model)), tok)  # README's: PR-TAG±
    inp = TextTokenInput("The capital of France is", tok)
    with warnings.catch_warnings():  # SmolLM2's tokenizer adds no BOS: the wrapper puts one in front, so no warning
        warnings.filterwarnings("error", message="The first prompt token")
        result = llm.attribute(inp, gen_args={"max_new_tokens": 4, "do_sample": False})
        per_token = llm.attribute(inp, target=" Paris.", one_pass=False)
    assert result.output_tokens[:2] == ["Paris", "."]
    # signed rows; the BOS in front is the attention sink, so "The" keeps a score
    assert result.token_attr.shape == (4, 5) and (result.token_attr != 0).all()
    assert torch.isfinite(result.token_attr).all()
    assert per_token.output_tokens == ["Paris", "."]
    # rows depend only on their prefix, so the first two rows of the generated continuation are these
    torch.testing.assert_close(result.token_attr[:2], per_token.token_attr, atol=1e-4, rtol=1e-3)
    torch.testing.assert_close(result.output_probs[:2], per_token.output_probs, atol=1e-4, rtol=1e-3)
    # the README's older form (the BOS typed and skipped) gives the same rows
    typed = llm.attribute(TextTokenInput("<|im_start|>The capital of France is", tok, skip_tokens=["<|im_start|>"]),
                          target=" Paris.")
    torch.testing.assert_close(typed.token_attr, per_token.token_attr, atol=1e-4, rtol=1e-3)
    assert model.config._attn_implementation == "eager"
