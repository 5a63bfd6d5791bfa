"""benchmarks/research_methods.py: the research variants the tables name, registered by the benchmarks."""

from __future__ import annotations

import pytest
import torch

import captum_prxai as cp


def forward_for(model):
    return lambda input_ids, attention_mask=None: model(input_ids, attention_mask=attention_mask).logits


@pytest.fixture(scope="module")
def research(benchmark_script):
    return benchmark_script("research_methods.py")


def test_the_library_registry_is_small_and_the_research_variants_are_the_benchmarks(research):
    from captum_prxai.methods import FEATURED_METHODS, METHODS

    assert len(FEATURED_METHODS) <= 8 and FEATURED_METHODS[0] == "pr-xai"
    pr_xai = [name for name, spec in METHODS.items() if spec.family == "pr-xai"]
    research_names = set(research.RESEARCH_VARIANTS)
    # registered now (the module registers on import), and never by the library itself
    assert research_names <= set(METHODS)
    assert {"pr-xai", "pr-a", "pr-g", "pr-ag", "pr-tag"} <= set(pr_xai)
    import captum_prxai.methods.builtin as builtin

    source = open(builtin.__file__).read()
    assert not any(f'"{name}"' in source for name in research_names)


@pytest.mark.parametrize("causal,depth,name", [(False, 6, "pr-tag-pm0.25-hubs0.5-lp-cp-rel"),
                                               (False, 12, "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp-rel"),
                                               (True, 30, "pr-tag-pm-lp")])
def test_research_default_names_the_variant_equal_to_the_recommended_spec(research, causal, depth, name):
    assert research.research_default(causal=causal, depth=depth) == name
    spec = cp.recommended_spec(causal=causal, depth=depth)
    for key, value in research.RESEARCH_VARIANTS[name].items():
        assert getattr(spec, key) == value, key


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_the_default_column_scores_equal_the_library_default(research, kind, tiny_model_factory, tiny_batch):
    """The matrix records the default under the research name; the library's ``pr-xai`` gives the same scores."""
    from captum_prxai.methods import build_method, make_forward_func

    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    special, target = torch.zeros_like(ids, dtype=torch.bool), torch.tensor([1, 2])
    name = research.research_default(model)
    ours = build_method("pr-xai", model, make_forward_func(model))(ids, mask, special, target)
    theirs = build_method(name, model, make_forward_func(model))(ids, mask, special, target)
    torch.testing.assert_close(ours, theirs, atol=0, rtol=0)


def test_registry_pr_tag_pm_quarter_is_the_weighted_two_way_walk(research, tiny_model_factory, tiny_batch):
    from captum_prxai.methods import build_method, make_forward_func

    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    special = torch.zeros_like(ids, dtype=torch.bool)
    target = torch.tensor([1, 1])
    got = build_method("pr-tag-pm0.25", model, make_forward_func(model))(ids, mask, special, target)
    core = cp.PRTemperedAttentionGradient(forward_for(model), layers, walks="both", negative_weight=0.25)
    expected = core.attribute(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
    torch.testing.assert_close(got.to(expected.dtype), expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(expected.sum(-1), torch.full((2,), 0.75), atol=1e-5, rtol=0)


def _only(settings: dict, *keys: str) -> dict:
    return {k: v for k, v in settings.items() if k not in keys}


@pytest.mark.parametrize("name,base,changed", [
    ("pr-tag-pm0.25-hubs0.5", "pr-tag-pm0.25", ("hub_power",)),
    ("pr-tag0.25-pm0.25-gate0.5-hubs0.5", "pr-tag0.25-pm0.25-gate0.5", ("hub_power",)),
    ("pr-tag-pm0.25-hubs0.5-lp", "pr-tag-pm0.25-hubs0.5", ("objective",)),
    ("pr-tag-pm-lp", "pr-tag-pm", ("objective",)),
    ("pr-tag-pm0.25-hubs0.5-lp-cp", "pr-tag-pm0.25-hubs0.5-lp", ("propagation",)),
    ("pr-tag-pm0.25-hubs0.5-lp-cp-rel", "pr-tag-pm0.25-hubs0.5-lp", ("propagation", "relevance_weight")),
    ("pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp-rel", "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp",
     ("propagation", "relevance_weight")),
])
def test_each_variant_differs_from_its_base_in_the_named_options_alone(research, name, base, changed):
    from captum_prxai.methods import METHODS

    variant, plain = research.RESEARCH_VARIANTS[name], research.RESEARCH_VARIANTS[base]
    assert _only(variant, *changed) == _only(plain, *changed)
    assert all(variant[k] != plain[k] for k in changed)
    # the registry runs them with exactly these options
    defaults = METHODS[name].defaults()
    assert all(defaults[k] == v for k, v in variant.items() if k != "edge_weight")
