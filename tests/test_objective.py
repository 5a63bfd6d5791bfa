"""What the backward pass differentiates (``objective``): the logit, or the class's log-probability."""

import pytest
import torch

import captum_prxai as cp
from captum_prxai.capture import capture_graph, log_probabilities
from conftest import forward_for


def _setup(tiny_model_factory, tiny_batch, kind="bert"):
    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    return model, ids, mask, cp.attention_layers(model), dict(target=1, additional_forward_args=(mask,),
                                                               attention_mask=mask)


def _log_softmax_forward(model):
    forward = forward_for(model)
    return lambda ids, mask=None: torch.log_softmax(forward(ids, mask), dim=-1)


def _softmax_forward(model):
    forward = forward_for(model)
    return lambda ids, mask=None: torch.softmax(forward(ids, mask), dim=-1)


def test_the_log_probability_explains_log_softmax_of_the_logits(tiny_model_factory, tiny_batch):
    """On three classes the log-probability differs from the logit, and equals the logit objective on a forward
    function that returns log_softmax (or softmax) of the same logits: one definition, whatever the output holds."""
    model, ids, mask, layers, kw = _setup(tiny_model_factory, tiny_batch)
    logit = cp.PageRankAttribution(forward_for(model), layers, objective="output").attribute(ids, **kw)
    lp = cp.PageRankAttribution(forward_for(model), layers, objective="log_probability").attribute(ids, **kw)
    by_hand = cp.PageRankAttribution(_log_softmax_forward(model), layers, objective="output").attribute(ids, **kw)
    torch.testing.assert_close(lp, by_hand, atol=1e-6, rtol=0)
    assert (lp - logit).abs().max() > 1e-4
    # log_softmax is its own log-probability; softmax outputs are read as probabilities (their log)
    for forward in (_log_softmax_forward(model), _softmax_forward(model)):
        again = cp.PageRankAttribution(forward, layers, objective="log_probability").attribute(ids, **kw)
        torch.testing.assert_close(again, lp, atol=1e-5, rtol=0)


def test_the_log_probability_gradient_is_the_logits_minus_their_probability_weighted_mean():
    z = torch.tensor([[2.0, -1.0, 0.5]], requires_grad=True)
    log_probabilities(z)[0, 0].backward()
    p = torch.softmax(z.detach(), dim=-1)
    torch.testing.assert_close(z.grad, torch.eye(3)[:1] - p)


def test_one_output_per_example_is_explained_as_returned(tiny_model_factory, tiny_batch):
    """A single score (a regression, a sigmoid's logit) has no classes to normalise over: it is explained as
    returned, which for a sigmoid's logit gives the scores of its log-probability ``log σ(z)`` (the gradients differ
    by the positive factor ``1 − σ(z)``, which PageRank's normalisation removes)."""
    model, ids, mask, layers, _ = _setup(tiny_model_factory, tiny_batch)
    forward = forward_for(model)
    kw = dict(additional_forward_args=(mask,), attention_mask=mask)

    def score(i, m=None):
        return forward(i, m)[:, 1]

    lp = cp.PageRankAttribution(score, layers, objective="log_probability").attribute(ids, **kw)
    torch.testing.assert_close(lp, cp.PageRankAttribution(score, layers, objective="output").attribute(ids, **kw),
                               atol=0, rtol=0)
    log_sigmoid = cp.PageRankAttribution(lambda i, m=None: torch.nn.functional.logsigmoid(score(i, m)), layers,
                                         objective="output").attribute(ids, **kw)
    torch.testing.assert_close(lp, log_sigmoid, atol=1e-5, rtol=0)
    column = cp.PageRankAttribution(lambda i, m=None: forward(i, m)[:, 1:2], layers, objective="log_probability")
    torch.testing.assert_close(column.attribute(ids, target=0, **kw), lp, atol=0, rtol=0)


def test_auto_explains_the_log_probability_on_encoders_and_decoders(tiny_model_factory, tiny_batch):
    assert {cp.recommended_spec(causal=c, depth=d).objective for c, d in ((False, 6), (False, 12), (True, 30))} == {
        "log_probability"}
    for kind, expected in (("bert", "log_probability"), ("llama", "log_probability")):
        model, ids, mask, layers, kw = _setup(tiny_model_factory, tiny_batch, kind)
        default = cp.PageRankAttribution(forward_for(model), layers)
        assert default.objective == "auto" and default.spec.objective == expected
        explicit = cp.PageRankAttribution(forward_for(model), layers, objective=expected)
        torch.testing.assert_close(default.attribute(ids, **kw), explicit.attribute(ids, **kw), atol=0, rtol=0)
        # the presets explain the logit unless asked, on every architecture; an explicit value wins
        assert cp.PRTemperedAttentionGradient(forward_for(model), layers).spec.objective == "output"
        assert cp.PRGradient(forward_for(model), layers, objective="log_probability").spec.objective == (
            "log_probability")


def test_the_same_objective_reaches_every_consumer_of_the_pass(tiny_model_factory, tiny_batch):
    """attribute_graph and attribute_long explain what attribute explains; the returned logits stay the output."""
    model, ids, mask, layers, kw = _setup(tiny_model_factory, tiny_batch)
    lp = cp.PageRankAttribution(forward_for(model), layers, objective="log_probability")
    by_hand = cp.PageRankAttribution(_log_softmax_forward(model), layers, objective="output")
    graph = lp.attribute_graph(ids, **kw)
    torch.testing.assert_close(graph.scores, lp.attribute(ids, **kw), atol=1e-6, rtol=0)
    torch.testing.assert_close(graph.logits, forward_for(model)(ids, mask).detach(), atol=1e-6, rtol=0)
    long = lp.attribute_long(ids[:1], target=1, window=6, stride=3)
    torch.testing.assert_close(long, by_hand.attribute_long(ids[:1], target=1, window=6, stride=3), atol=1e-6, rtol=0)
    captured = capture_graph(forward_for(model), layers, ids, mask.bool(), lambda i, a, g: g.mean(1),
                             targets=torch.tensor([1, 1]), additional_forward_args=(mask,),
                             objective="log_probability")
    reference = capture_graph(_log_softmax_forward(model), layers, ids, mask.bool(), lambda i, a, g: g.mean(1),
                              targets=torch.tensor([1, 1]), additional_forward_args=(mask,))
    for got, want in zip(captured.maps, reference.maps):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("bad", ["logit", "probability", "", 1, None])
def test_objective_is_checked(bad, tiny_model_factory):
    model = tiny_model_factory("bert")
    with pytest.raises(cp.PRXAIError, match=r"^objective must be one of 'output', 'log_probability', got "):
        cp.PageRankAttribution(forward_for(model), cp.attention_layers(model), objective=bad)


def test_objective_can_be_set_and_is_checked_again(tiny_model_factory):
    model = tiny_model_factory("bert")
    pr = cp.PageRankAttribution(forward_for(model), cp.attention_layers(model), objective="output")
    assert pr.objective == "output"
    pr.objective = "auto"  # stored as given, resolved by the layers when it runs: an encoder
    assert pr.objective == "auto" and pr.spec.objective == "log_probability"
    with pytest.raises(cp.PRXAIError, match=r"^objective must be one of 'output', 'log_probability', got "):
        pr.objective = "logits"
    assert pr.objective == "auto" and pr.spec.objective == "log_probability"  # a refused value changes nothing
    with pytest.raises(cp.PRXAIError, match=r"^objective must be one of 'output', 'log_probability', got 'auto'"):
        capture_graph(forward_for(model), cp.attention_layers(model), torch.tensor([[2, 3, 4]]),
                      torch.ones(1, 3, dtype=torch.bool), lambda i, a, g: a.mean(1), objective="auto")
