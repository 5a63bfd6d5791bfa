"""Conservative propagation (``propagation="conservative"``) and the relevance weight (``relevance_weight``)."""

import threading

import pytest
import torch

import captum_prxai as cp
from captum_prxai.conservative import conservative_propagation, is_conservative
from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.scoring import relevance_weighted
from captum_prxai.graph.spec import GraphSpec
from conftest import forward_for

ENCODERS = ["bert", "mpnet", "distilbert"]


def _query_key_value(layer):
    children = dict(layer.named_children())
    for names in (("query", "key", "value"), ("q", "k", "v"), ("q_lin", "k_lin", "v_lin")):
        if all(n in children for n in names):
            return [children[n] for n in names]
    raise AssertionError(f"no projections in {type(layer).__name__}")


@pytest.mark.parametrize("kind", ENCODERS)
def test_the_forward_pass_is_unchanged_and_no_gradient_reaches_the_queries_and_keys(tiny_model_factory, tiny_batch,
                                                                                   kind):
    """Inside the block the logits are the model's own while the backward pass sends nothing through the softmax's
    logits (the query and key projections) and still reaches the values; outside it the queries get gradient."""
    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    query, key, value = _query_key_value(cp.attention_layers(model)[0])
    plain = forward_for(model)(ids, mask)
    model.zero_grad(set_to_none=True)
    with conservative_propagation():
        assert is_conservative()
        held = forward_for(model)(ids, mask)
    assert not is_conservative()
    torch.testing.assert_close(held, plain, atol=1e-5, rtol=1e-5)
    held[:, 1].sum().backward()
    assert float(query.weight.grad.abs().max()) == 0.0 and float(key.weight.grad.abs().max()) == 0.0
    assert float(value.weight.grad.abs().max()) > 0
    model.zero_grad(set_to_none=True)
    plain[:, 1].sum().backward()
    assert float(query.weight.grad.abs().max()) > 0
    model.zero_grad(set_to_none=True)


def test_a_classifier_softmax_and_other_threads_are_left_alone():
    """Only softmaxes over three or more dimensions (attention rows) are held: a forward function that returns
    softmax probabilities keeps its gradient; the hold is the calling thread's only."""
    logits = torch.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
    with conservative_propagation():
        torch.softmax(logits, -1)[0, 0].backward()
        seen = []
        worker = threading.Thread(target=lambda: seen.append(is_conservative()))
        worker.start()
        worker.join()
    assert float(logits.grad.abs().max()) > 0
    assert seen == [False]
    rows = torch.randn(1, 2, 3, 3, requires_grad=True)
    with conservative_propagation():
        probs = torch.softmax(rows, -1)
    torch.testing.assert_close(probs, torch.softmax(rows, -1))
    probs[0, 0, 0, 0].backward()
    assert float(rows.grad.abs().max()) == 0.0


def test_scaled_dot_product_attention_holds_its_queries_and_keys_however_they_are_passed():
    """SDPA never materialises its softmax's input: its queries and keys are held, given by position or by name,
    and its values still get gradient; the output is SDPA's own."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8, requires_grad=True) for _ in range(3))
    plain = F.scaled_dot_product_attention(q, k, v)
    calls = [lambda: F.scaled_dot_product_attention(q, k, v),
             lambda: F.scaled_dot_product_attention(q, key=k, value=v),
             lambda: F.scaled_dot_product_attention(query=q, key=k, value=v)]
    for call in calls:
        for t in (q, k, v):
            t.grad = None
        with conservative_propagation():
            out = call()
        torch.testing.assert_close(out, plain)
        out.sum().backward()
        assert float(q.grad.abs().max()) == 0.0 and float(k.grad.abs().max()) == 0.0
        assert float(v.grad.abs().max()) > 0


def test_layer_norm_scale_is_held_constant():
    """``F.layer_norm`` inside the block: the same value, and the gradient of ``w (x − mean) / σ`` with σ fixed."""
    norm = torch.nn.LayerNorm(4)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, 0.5, 1.0]))
    x = torch.tensor([[1.0, -2.0, 0.5, 3.0]], requires_grad=True)
    with conservative_propagation():
        y = norm(x)
    torch.testing.assert_close(y, norm(x))
    y[0, 2].backward()
    sigma = (x.detach().var(-1, unbiased=False) + norm.eps).sqrt()
    torch.testing.assert_close(x.grad[0], 0.5 * (torch.eye(4)[2] - 0.25) / sigma)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_held_norms_keep_torchs_values_in_every_dtype_and_shape_form(dtype):
    """The held layer_norm and rms_norm give torch's own values (statistics in fp32 for half precision, as torch's
    kernels take them), with ``normalized_shape`` as a tuple or an int, with and without an affine part."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    x = torch.randn(2, 3, 8).to(dtype).requires_grad_()
    weight, bias = torch.randn(8).to(dtype), torch.randn(8).to(dtype)
    tolerance = dict(atol=1e-6, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    with conservative_propagation():
        held = [F.layer_norm(x, (8,), weight, bias), F.layer_norm(x, (8,)), F.rms_norm(x, (8,), weight, 1e-6),
                F.rms_norm(x, (8,))]
    plain = [F.layer_norm(x, (8,), weight, bias), F.layer_norm(x, (8,)), F.rms_norm(x, (8,), weight, 1e-6),
             F.rms_norm(x, (8,))]
    for got, expected in zip(held, plain):
        assert got.dtype == dtype
        torch.testing.assert_close(got, expected, **tolerance)
    with conservative_propagation():
        torch.testing.assert_close(F.layer_norm(x, 8), F.layer_norm(x, (8,)))


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
@pytest.mark.parametrize("capture", ["recompute", "weights"])
def test_the_attribution_equals_a_pass_with_the_projections_and_norms_hooked_by_hand(tiny_model_factory, tiny_batch,
                                                                                  kind, capture):
    """An independent construction: forward hooks that hold the query and key projections' outputs and recompute
    every LayerNorm with its σ detached give the same scores as ``propagation="conservative"`` on both capture
    paths (the capture's own attention function and the model's eager softmax), and differ from the gradient's."""
    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    kw = dict(target=1, additional_forward_args=(mask,))

    def held(module, args, output):
        return output.detach() + 0 * output

    def norm(module, args, output):
        x = args[0]
        centred = x - x.mean(-1, keepdim=True)
        return centred / (centred.pow(2).mean(-1, keepdim=True) + module.eps).sqrt().detach() * module.weight \
            + module.bias

    handles = [p.register_forward_hook(held) for layer in layers for p in _query_key_value(layer)[:2]]
    handles += [m.register_forward_hook(norm) for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    options = dict(capture=capture, relevance_weight=0.0)
    try:
        by_hand = cp.PageRankAttribution(forward_for(model), layers, propagation="gradient", **options).attribute(
            ids, **kw)
    finally:
        for handle in handles:
            handle.remove()
    got = cp.PageRankAttribution(forward_for(model), layers, propagation="conservative", **options).attribute(
        ids, **kw)
    torch.testing.assert_close(got, by_hand, atol=1e-6, rtol=0)
    plain = cp.PageRankAttribution(forward_for(model), layers, propagation="gradient", **options).attribute(ids, **kw)
    assert (got - plain).abs().max() > 1e-4


def test_auto_rules_by_architecture_and_presets(tiny_model_factory):
    """``"auto"``: conservative with relevance weight 1 on encoders, the gradient and 0 on decoders; the presets
    keep the gradient and no weight unless given them; a bad value is refused with the choices."""
    encoder, decoder = tiny_model_factory("bert"), tiny_model_factory("llama")
    enc = cp.PageRankAttribution(forward_for(encoder), cp.attention_layers(encoder))
    dec = cp.PageRankAttribution(forward_for(decoder), cp.attention_layers(decoder))
    assert (enc.spec.propagation, enc.spec.relevance_weight) == ("conservative", 1.0)
    assert (dec.spec.propagation, dec.spec.relevance_weight) == ("gradient", 0.0)
    preset = cp.PRTemperedAttentionGradient(forward_for(encoder), cp.attention_layers(encoder))
    assert (preset.spec.propagation, preset.spec.relevance_weight) == ("gradient", 0.0)
    # attention-only edges need no backward pass, and "auto" adds none
    attention_only = cp.PageRankAttribution(forward_for(encoder), cp.attention_layers(encoder), edge_weight="attention")
    assert attention_only.spec.relevance_weight == 0.0 and not attention_only.spec.needs_gradients
    enc.propagation = "gradient"
    assert enc.propagation == enc.spec.propagation == "gradient"
    enc.propagation = "auto"
    assert enc.propagation == "auto" and enc.spec.propagation == "conservative"
    with pytest.raises(PRXAIError, match=r"propagation must be one of 'gradient', 'conservative', got 'lrp'"):
        cp.PageRankAttribution(forward_for(encoder), cp.attention_layers(encoder), propagation="lrp")
    with pytest.raises(PRXAIError, match=r"relevance_weight must be a number in \[0, 1\], got 2"):
        cp.PageRankAttribution(forward_for(encoder), cp.attention_layers(encoder), relevance_weight=2)


def test_relevance_weighted_scales_each_score_by_its_share_of_the_largest_relevance():
    """``scores ⊙ (1 + w R / max|R|)``: the most credited token doubled at w = 1, the most debited zeroed, padding's
    relevance ignored; w = 0 leaves the scores as they are."""
    scores = torch.tensor([[0.4, 0.3, 0.2, 0.1]])
    relevance = torch.tensor([[2.0, -4.0, 0.0, 9.0]])
    mask = torch.tensor([[True, True, True, False]])
    got = relevance_weighted(GraphSpec(relevance_weight=1.0), scores, relevance, mask)
    torch.testing.assert_close(got, torch.tensor([[0.4 * 1.5, 0.0, 0.2, 0.1]]))
    half = relevance_weighted(GraphSpec(relevance_weight=0.5), scores, relevance, mask)
    torch.testing.assert_close(half, torch.tensor([[0.4 * 1.25, 0.3 * 0.5, 0.2, 0.1]]))
    assert relevance_weighted(GraphSpec(), scores, None, mask) is scores


def test_the_default_weighs_the_walk_by_the_same_passs_gradient_x_input(tiny_model_factory, tiny_batch):
    """On an encoder the default is the conservative pass's walk times ``1 + R / max|R|`` with R that pass's
    gradient x input at the first layer: one pass, the graph the explanation shows is the scored one."""
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    default = cp.PageRankAttribution(forward_for(model), layers)
    out = default.attribute_graph(ids, target=1, additional_forward_args=(mask,))
    walk = cp.PageRankAttribution(forward_for(model), layers, relevance_weight=0.0).attribute_graph(
        ids, target=1, additional_forward_args=(mask,))
    relevance = out.built.input_gradient * mask
    expected = walk.scores * (1 + relevance / relevance.abs().amax(-1, keepdim=True))
    torch.testing.assert_close(out.scores, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.built.adjacency, walk.built.adjacency)
    torch.testing.assert_close(default.attribute(ids, target=1, additional_forward_args=(mask,)), out.scores)
