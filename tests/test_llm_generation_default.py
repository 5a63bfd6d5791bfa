"""The generation default: recommended_spec(task="generation"), PageRankAttribution.for_task, and
LLMGraphAttribution running its rows with the generation spec of a method built with "auto" options."""

from __future__ import annotations

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")
from captum.attr import TextTokenInput  # noqa: E402

import captum_prxai as cp  # noqa: E402
from captum_prxai import recommended  # noqa: E402
from captum_prxai.exceptions import PRXAIError  # noqa: E402
from captum_prxai.llm import LLMGraphAttribution  # noqa: E402

from conftest import tiny_causal_lm, word_tokenizer  # noqa: E402

WORDS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(46)]
PROMPT = "w1 w2 w3 w4 w5 w6 w7"
TARGET = "w8 w9 w10"
#: a generation choice that differs from the decoders' classification default on every field it names
OTHER = {"walks": "positive", "propagation": "conservative"}


@pytest.fixture(scope="module")
def tok():
    return word_tokenizer(WORDS)


@pytest.fixture(scope="module")
def model():
    return tiny_causal_lm(len(WORDS), 2)


@pytest.fixture
def other_choice(monkeypatch):
    monkeypatch.setattr(recommended, "GENERATION_CHOICES", dict(OTHER))
    return OTHER


def test_an_unknown_task_is_refused(model):
    with pytest.raises(PRXAIError, match="task must be one of 'classification', 'generation'"):
        cp.recommended_spec(model, task="summarisation")
    pr = cp.PageRankAttribution(model, cp.attention_layers(model))
    with pytest.raises(PRXAIError, match="task must be one of"):
        pr.for_task("summarisation")


def test_generation_takes_its_choices_and_keeps_given_options(model, other_choice):
    classification = cp.recommended_spec(model)
    generation = cp.recommended_spec(model, task="generation")
    assert generation.as_dict() == classification.replace(**other_choice).as_dict()
    # an option given explicitly wins over the generation choice
    assert cp.recommended_spec(model, task="generation", walks="both").walks == "both"


def test_for_task_is_a_copy_that_resolves_for_its_task(model, other_choice):
    pr = cp.PageRankAttribution(model, cp.attention_layers(model))
    gen = pr.for_task("generation")
    assert gen is not pr and gen.spec.as_dict() == cp.recommended_spec(model, task="generation").as_dict()
    assert pr.spec.as_dict() == cp.recommended_spec(model).as_dict()  # the original is left as it is
    assert pr.resolve(task="generation").as_dict() == gen.spec.as_dict()
    assert gen.resolve(task="classification").as_dict() == pr.spec.as_dict()
    given = cp.PageRankAttribution(model, cp.attention_layers(model), spec=cp.GraphSpec())
    assert given.for_task("generation").spec.as_dict() == cp.GraphSpec().as_dict()  # a given spec is used as given
    assert copy.copy(gen).spec.as_dict() == gen.spec.as_dict()  # a copy keeps its task


def test_llm_rows_run_the_generation_spec_of_an_auto_method(model, tok, other_choice):
    inp = TextTokenInput(PROMPT, tok)
    auto = LLMGraphAttribution(cp.PageRankAttribution(model, cp.attention_layers(model)), tok)
    spec = cp.recommended_spec(model, task="generation")
    explicit = LLMGraphAttribution(cp.PageRankAttribution(model, cp.attention_layers(model), spec=spec), tok)
    classification = LLMGraphAttribution(
        cp.PageRankAttribution(model, cp.attention_layers(model), spec=cp.recommended_spec(model)), tok)
    rows = auto.attribute(inp, target=TARGET).token_attr
    assert torch.equal(rows, explicit.attribute(inp, target=TARGET).token_attr)
    assert not torch.allclose(rows, classification.attribute(inp, target=TARGET).token_attr)
    assert repr(spec) in auto.method_description()  # a saved result names the spec that ran
    # the per-token path runs the same spec
    assert torch.allclose(rows, auto.attribute(inp, target=TARGET, one_pass=False).token_attr, atol=1e-5)


def test_the_recorded_generation_choices_are_fields_of_the_spec():
    fields = {name for name in cp.GraphSpec.__dataclass_fields__ if not name.startswith("_")}
    assert set(recommended.GENERATION_CHOICES) <= fields
    cp.recommended_spec(causal=True, depth=30, task="generation")  # a complete, valid spec


def test_the_generation_default_runs_pr_ags_rows(model, tok):
    """The measured generation default is PR-AG's one walk: an auto PageRankAttribution's rows are the preset's,
    while the classification default of a decoder (two signed walks on PR-TAG's edges) differs."""
    assert recommended.GENERATION_CHOICES == {"edge_weight": "attention_gradient", "walks": "positive"}
    inp = TextTokenInput(PROMPT, tok)
    layers = cp.attention_layers(model)
    default = LLMGraphAttribution(cp.PageRankAttribution(model, layers), tok).attribute(inp, target=TARGET)
    pr_ag = LLMGraphAttribution(cp.PRAttentionGradient(model, layers), tok).attribute(inp, target=TARGET)
    assert torch.equal(default.token_attr, pr_ag.token_attr)
    assert bool((default.token_attr >= 0).all())  # one walk: unsigned scores
    classifier = cp.PageRankAttribution(model, layers).spec
    assert (classifier.edge_weight, classifier.walks) == ("tempered_attention_gradient", "both")
