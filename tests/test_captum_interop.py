"""PR-XAI next to Captum: its metrics, its visualisation and its own attribution methods."""

import pytest
import torch
from captum.attr import LayerIntegratedGradients, NoiseTunnel
from captum.metrics import infidelity, sensitivity_max

import captum_prxai as cp
from captum_prxai.metrics import (
    comprehensiveness,
    probability_forward,
    token_explanation_func,
    token_infidelity_perturb_func,
    token_sensitivity_perturb_func,
)
from captum_prxai.viz.records import to_visualization_records
from conftest import VOCAB, forward_for

MASK_ID, PAD_ID = 3, 0


@pytest.fixture
def setup(tiny_model_factory):
    model = tiny_model_factory("bert")
    torch.manual_seed(5)
    ids = torch.randint(4, VOCAB, (2, 10))
    mask = torch.ones_like(ids)
    return model, forward_for(model), ids, mask


def test_infidelity_and_sensitivity_run_on_prxai_under_no_grad(setup):
    model, forward, ids, mask = setup
    pr = cp.PRAttentionGradient(forward, cp.attention_layers(model))
    scores = pr.attribute(ids, target=1, additional_forward_args=(mask,))
    infid = infidelity(probability_forward(forward), token_infidelity_perturb_func(MASK_ID, [PAD_ID], seed=0),
                       ids, scores, additional_forward_args=(mask,), target=1, n_perturb_samples=4)
    assert infid.shape == (2,) and torch.isfinite(infid).all() and (infid >= 0).all()
    sens = sensitivity_max(token_explanation_func(pr.attribute), ids,
                           perturb_func=token_sensitivity_perturb_func(MASK_ID, [PAD_ID], seed=0),
                           n_perturb_samples=3, target=1, additional_forward_args=(mask,))
    assert sens.shape == (2,) and torch.isfinite(sens).all() and (sens > 0).all()
    # the perturbations replace tokens, they never produce non-integer ids
    _, perturbed = token_infidelity_perturb_func(MASK_ID, [PAD_ID], seed=1)(ids)
    assert perturbed.dtype == ids.dtype and ((perturbed == ids) | (perturbed == MASK_ID)).all()


def test_captum_lig_and_prxai_through_the_same_metric(setup):
    model, forward, ids, mask = setup
    lig = LayerIntegratedGradients(forward, model.get_input_embeddings())
    lig_scores = lig.attribute(ids, baselines=torch.full_like(ids, PAD_ID), target=1,
                               additional_forward_args=(mask,), n_steps=8).sum(-1)
    pr_scores = cp.PRAttentionGradient(forward, cp.attention_layers(model)).attribute(
        ids, target=1, additional_forward_args=(mask,))
    special = torch.zeros_like(ids)
    special[:, 0] = 1
    oracle = torch.zeros_like(pr_scores)
    results = {}
    for name, scores in (("lig", lig_scores), ("pr-ag", pr_scores)):
        result = comprehensiveness(forward, ids, mask, special, scores, target=1)
        assert result[0].shape == (2,) and torch.isfinite(result[0]).all()
        results[name] = result[0]
    # with every score equal the removal order is arbitrary but the metric is still defined
    assert torch.isfinite(comprehensiveness(forward, ids, mask, special, oracle, target=1)[0]).all()
    assert not torch.allclose(results["lig"], results["pr-ag"])


def test_attribute_is_log_usage_wrapped_for_noise_tunnel(setup):
    model, forward, ids, mask = setup
    for method in (cp.PRAttentionGradient, cp.PRAttention, cp.GradientWeightedRollout, cp.AttentionRollout):
        assert hasattr(method.attribute, "__wrapped__")
    # NoiseTunnel calls attribute.__wrapped__; with embeddings as inputs the noise is meaningful
    embeds = model.get_input_embeddings()(ids).detach()

    def embeds_forward(inputs_embeds, attention_mask):
        return model(inputs_embeds=inputs_embeds, attention_mask=attention_mask).logits

    nt = NoiseTunnel(cp.PRAttentionGradient(embeds_forward, cp.attention_layers(model)))
    out = nt.attribute(embeds, nt_samples=2, stdevs=0.01, target=1, additional_forward_args=(mask,))
    assert out.shape == embeds.shape and torch.isfinite(out).all()


def test_visualization_records_render_through_captum(setup):
    from captum.attr import visualization as viz

    model, forward, ids, mask = setup
    scores = cp.PRAttentionGradient(forward, cp.attention_layers(model)).attribute(
        ids, target=1, additional_forward_args=(mask,))
    tokens = ["[CLS]"] + [f"t{i}" for i in ids[0, 1:].tolist()]
    records = to_visualization_records(tokens, scores[0], pred_class="positive", pred_prob=0.9)
    assert len(records) == 1
    rescaled = torch.as_tensor(records[0].word_attributions, dtype=torch.float32)
    # rescaled by the largest non-special score, so the top word reads 1.0
    assert torch.isclose(rescaled[1:].max(), torch.tensor(1.0)) and rescaled[1:].argmax() == scores[0, 1:].argmax()
    html = viz.visualize_text(records)
    assert "positive" in html.data and "t" in html.data
