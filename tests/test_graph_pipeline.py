"""The one graph pipeline: capture -> GraphSpec/build_graph -> score_graph, and every consumer of it."""

import contextlib
import itertools

import pytest
import torch

import captum_prxai as cp
from captum_prxai.capture import capture_graph
from captum_prxai.graph.build import build_graph, token_adjacency, token_layer
from captum_prxai.graph.scoring import score_graph
from captum_prxai.graph.spec import GraphSpec, layer_edge_map
from conftest import VOCAB, forward_for

PR_OPTIONS = [
    dict(edge_weight=e, graph=g, normalize_layers=n, teleport=t)
    for e, g, n, t in itertools.product(
        ["attention", "gradient", "attention_gradient", "gradient_abs", "tempered_attention_gradient"],
        ["token", "layered"], [False, True],
        ["target", "uniform", "input_gradient"],
    )
    if not (g == "layered" and n)
] + [
    dict(edge_weight="gradient", sink="drop", self_loops="drop"),
    dict(edge_weight="attention_gradient", damping=0.85, residual=0.3),
    dict(edge_weight="gradient", signed=True),
    dict(edge_weight="attention", graph="layered", residual=0.2, sink="drop"),
]


@pytest.mark.parametrize("kind", ["bert", "llama"])
@pytest.mark.parametrize("options", PR_OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_pagerank_of_the_returned_graph_reproduces_the_scores(kind, options, tiny_model_factory, tiny_batch):
    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    pr = cp.PageRankAttribution(forward_for(model), cp.attention_layers(model), **options)
    explanation = pr.attribute_graph(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
    scores = pr.attribute(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
    assert torch.allclose(explanation.scores, scores, atol=1e-6)
    assert torch.allclose(explanation.rescore(), scores, atol=1e-4)
    nodes = ids.shape[1] * (1 + explanation.built.num_layers)
    assert explanation.adjacency.shape == (2, nodes, nodes)
    assert explanation.node_position.shape == (nodes,) and explanation.node_layer.shape == (nodes,)
    # padding is no part of the drawn graph
    pad = ~explanation.node_mask
    assert explanation.adjacency[pad].abs().sum() == 0
    assert explanation.logits.shape == (2, 3) and explanation.target.tolist() == [1, 1]


def test_token_graph_is_the_sum_of_the_spec_edge_maps(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    spec = GraphSpec(edge_weight="attention_gradient")
    captured = capture_graph(forward_for(model), layers, ids, mask.bool(), lambda i, a, g: spec.edge_map(a, g),
                             targets=torch.tensor([1, 1]), additional_forward_args=(mask,))
    assert len(captured.maps) == 2 and captured.maps[0].shape == (2, 9, 9)
    assert captured.maps[0][1, 6:].abs().sum() == 0 and captured.maps[0][1, :, 6:].abs().sum() == 0
    built = build_graph(spec, captured)
    assert torch.allclose(built.adjacency, captured.maps[0] + captured.maps[1])
    assert torch.allclose(token_adjacency(spec, captured), built.adjacency)
    pr = cp.PRAttentionGradient(forward_for(model), layers)
    assert torch.allclose(score_graph(spec.replace(damping=pr.spec.damping), built) * mask,
                          pr.attribute(ids, target=1, attention_mask=mask, additional_forward_args=(mask,)), atol=1e-6)


SUMMED_SPECS = [
    dict(edge_weight="attention"),
    dict(edge_weight="tempered_attention_gradient"),
    dict(edge_weight="gradient", normalize_layers=True),
    dict(edge_weight="attention_gradient", residual=0.3, sink="drop", self_loops="drop"),
    dict(edge_weight=lambda a, g: a[:, 0]),  # a view of the attention: the running sum must not write into it
]


@pytest.mark.parametrize("kind", ["bert", "llama"])
@pytest.mark.parametrize("tile_bytes", [None, 64])
@pytest.mark.parametrize("options", SUMMED_SPECS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items())[:60])
def test_a_capture_that_sums_the_layers_as_they_arrive_gives_the_same_token_graph(kind, tile_bytes, options,
                                                                                tiny_model_factory, tiny_batch):
    """Only the running sum of the layers' terms is kept; the graph is the one of all L maps."""
    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    spec = GraphSpec(**options)
    common = dict(targets=torch.tensor([1, 2]), additional_forward_args=(mask,), tile_bytes=tile_bytes,
                  with_gradients=spec.needs_gradients)
    every = capture_graph(forward_for(model), layers, ids, mask.bool(), lambda i, a, g: spec.edge_map(a, g), **common)
    terms = []

    def term(m, real, causal):
        terms.append(causal)
        return token_layer(spec, m, real, causal)

    summed = capture_graph(forward_for(model), layers, ids, mask.bool(), lambda i, a, g: spec.edge_map(a, g),
                           layer_term=term, **common)
    assert not every.summed and len(every.maps) == 2
    assert summed.summed and len(summed.maps) == 1 and terms == [every.causal] * 2
    assert summed.causal is every.causal is (kind == "llama")
    torch.testing.assert_close(token_adjacency(spec, summed), token_adjacency(spec, every), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(score_graph(spec, build_graph(spec, summed)), score_graph(spec, build_graph(spec, every)),
                               atol=1e-6, rtol=0)
    with pytest.raises(cp.PRXAIError, match="the layered graph needs every layer's map"):
        build_graph(spec.replace(graph="layered"), summed)
    # the attribution sums for the token graph and keeps every map for the layered one
    pr = cp.PageRankAttribution(forward_for(model), layers, **options)
    assert pr._layer_term() is not None
    assert cp.PageRankAttribution(forward_for(model), layers, graph="layered", **options)._layer_term() is None


def test_the_running_sum_never_writes_into_a_map_the_edge_weight_returned(tiny_model_factory):
    model = tiny_model_factory("bert")
    ids = torch.randint(2, VOCAB, (1, 7), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    returned = []

    def edge(a, g):  # an already head-reduced map the caller keeps
        m = a.mean(1)
        returned.append(m)
        return m

    spec = GraphSpec(edge_weight=edge)
    captured = capture_graph(forward_for(model), cp.attention_layers(model), ids, mask.bool(),
                             lambda i, a, g: spec.edge_map(a, g), with_gradients=False, additional_forward_args=(mask,),
                             layer_term=lambda m, real, causal: token_layer(spec, m, real, causal))
    assert len(returned) == 2 and all(r.data_ptr() != captured.maps[0].data_ptr() for r in returned)
    torch.testing.assert_close(captured.maps[0], returned[0] + returned[1])


def _negative_tempered(attention, grad):
    return attention.clamp(min=0).sqrt() * (-grad).clamp(min=0)


def _walk_setup(model, batch):
    """A tiny model, its batch, its attention layers and the keyword arguments every walk test attributes with."""
    ids, mask = batch
    return model, ids, mask, cp.attention_layers(model), dict(target=1, additional_forward_args=(mask,),
                                                               attention_mask=mask)


@pytest.mark.parametrize("kind", ["bert", "llama"])
@pytest.mark.parametrize("tile_bytes", [None, 64])
def test_both_walks_are_the_positive_minus_the_negative_walk_from_one_pass(kind, tile_bytes, tiny_model_factory,
                                                                           tiny_batch):
    from captum_prxai.hooks import tile_budget

    model, ids, mask, layers, kw = _walk_setup(tiny_model_factory(kind), tiny_batch)
    both = cp.PRTemperedAttentionGradient(forward_for(model), layers, walks="both", negative_weight=1.0)
    positive = cp.PRTemperedAttentionGradient(forward_for(model), layers)
    negative = cp.PageRankAttribution(forward_for(model), layers, edge_weight=_negative_tempered, walks="positive",
                                      hub_power=0, objective="output", propagation="gradient",
                                      relevance_weight=0)
    passes = []
    handle = model.register_forward_hook(lambda *a: passes.append(1))
    try:
        with tile_budget(tile_bytes) if tile_bytes else contextlib.nullcontext():
            scores = both.attribute(ids, **kw)
    finally:
        handle.remove()
    assert len(passes) == 1  # one forward (and one backward) for both walks
    expected = positive.attribute(ids, **kw) - negative.attribute(ids, **kw)
    torch.testing.assert_close(scores, expected, atol=1e-6, rtol=0)
    assert torch.allclose(scores.sum(-1), torch.zeros(2), atol=1e-5) and (scores < 0).any()
    assert torch.equal(scores[1, 6:], torch.zeros(3))
    graph = both.attribute_graph(ids, **kw)
    assert graph.negative_adjacency is not None and graph.negative_adjacency.shape == graph.adjacency.shape
    torch.testing.assert_close(graph.scores, scores, atol=1e-6, rtol=0)
    torch.testing.assert_close(graph.rescore(), scores, atol=1e-4, rtol=0)
    # windows: one stitched graph per walk
    long = both.attribute_long(ids[:1], target=1, window=6, stride=3)
    reference = (positive.attribute_long(ids[:1], target=1, window=6, stride=3)
                 - negative.attribute_long(ids[:1], target=1, window=6, stride=3))
    torch.testing.assert_close(long, reference, atol=1e-6, rtol=0)


@pytest.mark.parametrize("weight", [0.0, 0.5])
def test_negative_weight_scales_the_negative_walk(weight, tiny_model_factory, tiny_batch):
    model, ids, mask, layers, kw = _walk_setup(tiny_model_factory("bert"), tiny_batch)
    weighted = cp.PRTemperedAttentionGradient(forward_for(model), layers, walks="both", negative_weight=weight)
    positive = cp.PRTemperedAttentionGradient(forward_for(model), layers)
    negative = cp.PageRankAttribution(forward_for(model), layers, edge_weight=_negative_tempered, walks="positive",
                                      hub_power=0, objective="output", propagation="gradient",
                                      relevance_weight=0)
    scores = weighted.attribute(ids, **kw)
    expected = positive.attribute(ids, **kw) - weight * negative.attribute(ids, **kw)
    torch.testing.assert_close(scores, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(scores.sum(-1), torch.full((2,), 1.0 - weight), atol=1e-5, rtol=0)
    graph = weighted.attribute_graph(ids, **kw)
    torch.testing.assert_close(graph.rescore(), scores, atol=1e-4, rtol=0)
    assert graph.gate_kept_positive is None  # no gate
    long = weighted.attribute_long(ids[:1], target=1, window=6, stride=3)
    reference = (positive.attribute_long(ids[:1], target=1, window=6, stride=3)
                 - weight * negative.attribute_long(ids[:1], target=1, window=6, stride=3))
    torch.testing.assert_close(long, reference, atol=1e-6, rtol=0)
    assert weighted.negative_weight == weight and weighted.spec.negative_weight == weight


def _pearson(a, b):
    a, b = a - a.mean(), b - b.mean()
    scale = float(a.norm() * b.norm())
    return float(a @ b) / scale if scale > 0 else 0.0


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_the_walk_gate_keeps_the_positive_walk_where_the_walks_correlate(kind, tiny_model_factory, tiny_batch):
    from captum_prxai.graph.scoring import walk_correlation

    model, ids, mask, layers, kw = _walk_setup(tiny_model_factory(kind), tiny_batch)
    positive = cp.PRTemperedAttentionGradient(forward_for(model), layers).attribute(ids, **kw)
    negative = cp.PageRankAttribution(forward_for(model), layers, edge_weight=_negative_tempered,
                                      walks="positive", hub_power=0, objective="output", propagation="gradient",
                                      relevance_weight=0).attribute(ids, **kw)
    # each example's correlation, by hand: real tokens only, the explained one (teleport target) left out
    explained = [0, 0] if kind == "bert" else [int(mask[b].sum()) - 1 for b in range(2)]
    corr = []
    for b in range(2):
        keep = [t for t in range(ids.shape[1]) if mask[b, t] and t != explained[b]]
        corr.append(_pearson(positive[b, keep].double(), negative[b, keep].double()))
    ordinary = mask.bool().clone()
    ordinary[torch.arange(2), torch.tensor(explained)] = False
    torch.testing.assert_close(walk_correlation(positive, negative, ordinary), torch.tensor(corr, dtype=torch.float64),
                               atol=1e-5, rtol=0)
    # a gate between the two examples' correlations keeps one walk on one example and two on the other
    gate = sum(corr) / 2
    assert abs(corr[0] - corr[1]) > 1e-3
    gated = cp.PRTemperedAttentionGradient(forward_for(model), layers, walks="both", negative_weight=0.25,
                                           walk_gate=gate)
    scores = gated.attribute(ids, **kw)
    for b in range(2):
        expected = positive[b] if corr[b] > gate else positive[b] - 0.25 * negative[b]
        torch.testing.assert_close(scores[b], expected, atol=1e-6, rtol=0)
    graph = gated.attribute_graph(ids, **kw)
    torch.testing.assert_close(graph.rescore(), scores, atol=1e-4, rtol=0)
    assert graph.walk_weights.tolist() == [0.0 if c > gate else 0.25 for c in corr]
    assert graph.gate_kept_positive.tolist() == [c > gate for c in corr]
    # the gate at its ends: -1 keeps one walk wherever the walks are not exactly opposed, 1 never does
    low = cp.PRTemperedAttentionGradient(forward_for(model), layers, walks="both", negative_weight=0.25, walk_gate=-1)
    torch.testing.assert_close(low.attribute(ids, **kw), positive, atol=1e-6, rtol=0)
    high = cp.PRTemperedAttentionGradient(forward_for(model), layers, walks="both", negative_weight=0.25, walk_gate=1)
    torch.testing.assert_close(high.attribute(ids, **kw), positive - 0.25 * negative, atol=1e-6, rtol=0)
    # windows: the gate reads the stitched graph's walks, the explained token left out the same way
    long_gate = cp.PRTemperedAttentionGradient(forward_for(model), layers, walks="both", negative_weight=0.25,
                                               walk_gate=-1)
    one = cp.PRTemperedAttentionGradient(forward_for(model), layers)
    torch.testing.assert_close(long_gate.attribute_long(ids[:1], target=1, window=6, stride=3),
                               one.attribute_long(ids[:1], target=1, window=6, stride=3), atol=1e-6, rtol=0)


def test_walk_correlation_is_zero_where_a_walk_is_flat():
    from captum_prxai.graph.scoring import walk_correlation

    flat = torch.tensor([[0.5, 0.25, 0.25, 0.0]])
    varied = torch.tensor([[0.5, 0.1, 0.4, 0.0]])
    ordinary = torch.tensor([[False, True, True, False]])
    assert walk_correlation(flat, varied, ordinary).tolist() == [0.0]
    # the left-out tokens do not count: over all four tokens the same walks correlate
    assert walk_correlation(flat, varied, torch.ones(1, 4, dtype=torch.bool)).item() > 0.5


@pytest.mark.parametrize("bad", [1.5, -2, float("nan"), True, "high"])
def test_walk_gate_is_checked(bad, tiny_model_factory):
    layers = cp.attention_layers(tiny_model_factory("bert"))
    with pytest.raises(cp.PRXAIError, match=r"^walk_gate must be None or a number in \[-1, 1\], got "):
        cp.PRTemperedAttentionGradient(forward_for(tiny_model_factory("bert")), layers, walks="both", walk_gate=bad)


@pytest.mark.parametrize("bad", [-0.5, float("nan"), True, "half"])
def test_negative_weight_is_checked(bad, tiny_model_factory):
    layers = cp.attention_layers(tiny_model_factory("bert"))
    with pytest.raises(cp.PRXAIError, match=r"^negative_weight must be a finite number >= 0, got "):
        cp.PRTemperedAttentionGradient(forward_for(tiny_model_factory("bert")), layers, walks="both",
                                       negative_weight=bad)


def test_both_walks_are_refused_where_there_is_no_negative_walk(tiny_model_factory):
    layers = cp.attention_layers(tiny_model_factory("bert"))
    forward = forward_for(tiny_model_factory("bert"))
    with pytest.raises(cp.PRXAIError, match="edge_weight='attention' does not have"):
        cp.PageRankAttribution(forward, layers, edge_weight="attention", walks="both")
    with pytest.raises(cp.PRXAIError, match="walks='both' is for the token graph"):
        cp.PRGradient(forward, layers, graph="layered", walks="both")
    with pytest.raises(cp.PRXAIError, match="already gives signed scores"):
        cp.PRGradient(forward, layers, signed=True, walks="both")
    with pytest.raises(cp.PRXAIError, match="walks must be one of"):
        cp.PRGradient(forward, layers, walks="negative")


def test_recommended_spec_is_the_one_recipe_the_class_and_the_apps_read(tiny_model_factory):
    from captum_prxai.methods import METHODS, default_method

    # the rules, by attention type and depth, without a model
    shallow, deep, decoder = (cp.recommended_spec(causal=False, depth=6), cp.recommended_spec(causal=False, depth=12),
                              cp.recommended_spec(causal=True, depth=30))
    for spec in (shallow, deep, decoder):
        assert (spec.edge_weight, spec.walks, spec.objective) == ("tempered_attention_gradient", "both",
                                                                  "log_probability")
    assert [s.attention_power for s in (shallow, deep, decoder)] == [0.5, 0.25, 0.5]
    assert [s.negative_weight for s in (shallow, deep, decoder)] == [0.25, 0.25, 1.0]
    assert [s.walk_gate for s in (shallow, deep, decoder)] == [None, 0.5, None]
    assert [s.hub_power for s in (shallow, deep, decoder)] == [0.5, 0.5, 0.0]
    assert [s.propagation for s in (shallow, deep, decoder)] == ["conservative", "conservative", "gradient"]
    assert [s.relevance_weight for s in (shallow, deep, decoder)] == [1.0, 1.0, 0.0]
    assert cp.recommended_spec().walk_gate is None and cp.recommended_spec(causal=False, depth=11).walk_gate is None
    # explicit options are kept, and the rules fill the rest consistently with them
    assert cp.recommended_spec(edge_weight="attention").walks == "positive"  # attention edges have no negative walk
    assert cp.recommended_spec(edge_weight="attention").relevance_weight == 0.0  # PR-A needs no backward pass
    assert cp.recommended_spec(graph="layered").walks == "positive"
    assert cp.recommended_spec(graph="layered").hub_power == 0.0
    assert cp.recommended_spec(signed=True).walks == "positive"
    assert cp.recommended_spec(edge_weight=lambda a, g: a).walks == "positive"  # a callable walks both when asked
    assert cp.recommended_spec(negative_weight=0.5, walks="auto").negative_weight == 0.5
    with pytest.raises(cp.PRXAIError, match=r"^unknown option\(s\) 'bogus'; the options are the fields of GraphSpec"):
        cp.recommended_spec(bogus=1)
    for kind, causal in [("bert", False), ("llama", True)]:
        model = tiny_model_factory(kind)
        assert cp.recommended_spec(model).as_dict() == cp.recommended_spec(causal=causal, depth=2).as_dict()
        pr = cp.PageRankAttribution(forward_for(model), cp.attention_layers(model))
        assert pr.resolve().as_dict() == cp.recommended_spec(model).as_dict()
        # the apps' registry name runs the class with all its defaults
        assert default_method(model) == "pr-xai"
        assert set(METHODS["pr-xai"].defaults().values()) >= {"auto"}


def test_the_constructor_stores_what_it_is_given_and_resolves_when_it_runs(tiny_model_factory, tiny_batch):
    import transformers as tf

    torch.manual_seed(0)
    deep = tf.BertForSequenceClassification(tf.BertConfig(
        hidden_size=16, num_hidden_layers=12, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=64, vocab_size=50, num_labels=3, pad_token_id=0)).eval()
    forward, layers = forward_for(deep), cp.attention_layers(deep)
    pr = cp.PageRankAttribution(forward, layers)
    # stored as given: every option "auto"; resolved into a GraphSpec the user can inspect
    assert pr.walks == pr.hub_power == pr.objective == pr.attention_power == "auto"
    spec = pr.resolve()
    assert (spec.attention_power, spec.walk_gate, spec.hub_power) == (0.25, 0.5, 0.5) and pr.spec is spec
    assert pr.get_params()["walks"] == "auto" and pr.get_params()["spec"] is None
    # setting an option re-resolves the others with it; nothing stale stays behind
    pr.graph = "layered"
    assert pr.graph == "layered" and pr.hub_power == "auto"
    assert (pr.spec.hub_power, pr.spec.walks) == (0.0, "positive")
    pr.graph = "auto"
    pr.walks = "positive"
    assert pr.spec.walks == "positive" and pr.walks == "positive"
    pr.walks = "auto"
    assert pr.spec.walks == "both"
    # a bad value is refused when set, and the attribution keeps its previous option
    with pytest.raises(cp.PRXAIError, match="walks must be one of"):
        pr.walks = "sideways"
    assert pr.walks == "auto"
    # the spec a result carries is the one that ran
    ids, mask = tiny_batch
    kw = dict(target=1, additional_forward_args=(mask,), attention_mask=mask)
    graph = pr.attribute_graph(ids, **kw)
    assert graph.spec is pr.resolve()
    # a given spec runs as it is: GraphSpec() is the paper's PR-AG
    plain = cp.PageRankAttribution(forward, layers, spec=cp.GraphSpec())
    assert plain.resolve() == plain.spec and plain.spec.edge_weight == "attention_gradient"
    torch.testing.assert_close(plain.attribute(ids, **kw), cp.PRAttentionGradient(forward, layers).attribute(ids, **kw),
                               atol=0, rtol=0)
    with pytest.raises(cp.PRXAIError, match="give either spec or options, not both"):
        cp.PageRankAttribution(forward, layers, spec=cp.GraphSpec(), walks="both")
    with pytest.raises(cp.PRXAIError, match=r"got unknown option\(s\) 'hubs'"):
        cp.PageRankAttribution(forward, layers, hubs=0.5)
    with pytest.raises(cp.PRXAIError, match="PRGradient fixes edge_weight='gradient'"):
        cp.PRGradient(forward, layers, edge_weight="attention")


def test_a_copy_has_its_own_options(tiny_model_factory):
    import copy

    model = tiny_model_factory("bert")
    pr = cp.PageRankAttribution(forward_for(model), cp.attention_layers(model))
    twin = copy.copy(pr)
    twin.walks = "positive"
    assert (pr.walks, pr.spec.walks) == ("auto", "both") and (twin.walks, twin.spec.walks) == ("positive", "positive")
    deep = copy.deepcopy(pr)
    deep.damping = 0.5
    assert pr.spec.damping == 0.7 and deep.spec.damping == 0.5


def test_graph_spec_defaults_are_the_papers_pr_ag():
    spec = cp.GraphSpec()
    assert (spec.edge_weight, spec.walks, spec.hub_power, spec.relevance_weight, spec.objective,
            spec.propagation, spec.walk_gate, spec.signed) == ("attention_gradient", "positive", 0.0, 0.0, "output",
                                                               "gradient", None, False)
    with pytest.raises(cp.PRXAIError, match="objective must be one of 'output', 'log_probability'"):
        cp.GraphSpec(objective="logit")
    with pytest.raises(cp.PRXAIError, match="propagation must be one of 'gradient', 'conservative'"):
        cp.GraphSpec(propagation="lrp")


def test_graph_spec_checks_every_option_before_any_pass():
    for bad, phrase in [
        (dict(edge_weight="bogus"), "Unknown edge_weight"),
        (dict(graph="tree"), "Unknown graph"),
        (dict(damping=1.0), "damping"),
        (dict(residual=1.5), "residual"),
        (dict(teleport="cls"), "Unknown teleport"),
        (dict(teleport=torch.tensor([-1.0, 1.0])), "non-negative"),
        (dict(tol=0), "tol must be a positive"),
        (dict(tol=-1e-3), "tol must be a positive"),
        (dict(max_iter=0), "max_iter"),
        (dict(sink="maybe"), "sink"),
        (dict(self_loops=1), "self_loops"),
        (dict(head_reduction="median"), "head_reduction"),
    ]:
        with pytest.raises(cp.PRXAIError, match=phrase):
            GraphSpec(**bad)
    assert GraphSpec(graph="layered").residual == 0.5 and GraphSpec().residual == 0.0
    assert GraphSpec().replace(graph="layered").residual == 0.5


def test_edge_weight_callable_shape_is_checked():
    attention = torch.rand(2, 3, 5, 5)
    for returned, phrase in [
        (lambda a, g: a.sum(-1), r"returned shape \(2, 3, 5\)"),
        (lambda a, g: None, "returned NoneType"),
        (lambda a, g: a[:, :, :4, :4], r"returned shape \(2, 3, 4, 4\)"),
    ]:
        with pytest.raises(cp.PRXAIError, match=phrase):
            layer_edge_map(returned)(attention, attention)
    assert layer_edge_map(lambda a, g: a)(attention, None).shape == (2, 5, 5)
    assert layer_edge_map(lambda a, g: a.mean(1))(attention, None).shape == (2, 5, 5)


def test_tempered_edges_span_pr_g_and_pr_ag(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)

    def scores(cls, **kwargs):
        return cls(forward_for(model), layers, **kwargs).attribute(ids, target=1, attention_mask=mask,
                                                                   additional_forward_args=(mask,))

    tag = cp.PRTemperedAttentionGradient
    assert torch.allclose(scores(tag, attention_power=0.0), scores(cp.PRGradient), atol=1e-6)
    assert torch.allclose(scores(tag, attention_power=1.0), scores(cp.PRAttentionGradient), atol=1e-6)
    quarter = scores(tag)
    assert not torch.allclose(quarter, scores(cp.PRGradient), atol=1e-4)
    assert not torch.allclose(quarter, scores(cp.PRAttentionGradient), atol=1e-4)
    with pytest.raises(cp.PRXAIError, match="attention_power"):
        tag(forward_for(model), layers, attention_power=-1)


def test_pr_options_are_one_spec(tiny_model_factory):
    model = tiny_model_factory("bert")
    pr = cp.PRGradient(forward_for(model), cp.attention_layers(model), damping=0.8)
    assert pr.spec.edge_weight == "gradient" and pr.damping == 0.8 == pr.spec.damping
    pr.damping = 0.6
    assert pr.spec.damping == 0.6
    pr.head_reduction = "max"
    assert pr.spec.head_reduction == "max" == pr.head_reduction
    with pytest.raises(cp.PRXAIError, match="damping"):
        pr.damping = 2.0
    assert cp.PageRankAttribution(forward_for(model), cp.attention_layers(model)).spec.edge_weight == (
        cp.recommended_spec().edge_weight
    )


# -- attribute_long: the same pipeline over windows ---------------------------------------------------


def test_attribute_long_applies_the_decoder_policy_and_teleports_to_the_last_token(tiny_model_factory):
    model = tiny_model_factory("llama")
    ids = torch.randint(2, VOCAB, (1, 12), generator=torch.Generator().manual_seed(3))
    pr = cp.PRGradient(forward_for(model), cp.attention_layers(model))
    whole = pr.attribute(ids, target=1)
    windowed = pr.attribute_long(ids, target=1, window=12)
    assert torch.allclose(whole, windowed, atol=1e-5)
    long_ids = torch.randint(2, VOCAB, (1, 90), generator=torch.Generator().manual_seed(4))
    scores = pr.attribute_long(long_ids, target=1, window=32)
    assert scores.shape == (1, 90) and torch.isclose(scores.sum(), torch.tensor(1.0), atol=1e-5)


def test_attribute_long_takes_a_padded_batch_a_mask_extra_args_and_returns_the_prediction(tiny_model_factory):
    model = tiny_model_factory("bert")
    gen = torch.Generator().manual_seed(5)
    ids = torch.randint(2, VOCAB, (2, 100), generator=gen)
    mask = torch.ones(2, 100, dtype=torch.long)
    ids[1, 70:], mask[1, 70:] = 0, 0
    seen = []

    def forward(input_ids, attention_mask, token_type_ids):
        seen.append((input_ids.shape, attention_mask.shape, token_type_ids.shape))
        return model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    types = torch.zeros_like(ids)
    pr = cp.PRAttentionGradient(forward, cp.attention_layers(model))
    scores, logits = pr.attribute_long(ids, target=[1, 2], window=40, additional_forward_args=(mask, types),
                                       attention_mask=mask, return_logits=True)
    assert scores.shape == (2, 100) and logits.shape == (2, 3)
    assert torch.equal(scores[1, 70:], torch.zeros(30))
    assert torch.allclose(scores.sum(-1), torch.ones(2), atol=1e-5)
    assert all(shape[0][1] == 40 and shape[1] == shape[0] == shape[2] for shape in seen)
    # the second text alone, unpadded, gets the same scores
    alone = pr.attribute_long(ids[1:, :70], target=2, window=40,
                              additional_forward_args=(mask[1:, :70], types[1:, :70]))
    assert torch.allclose(alone[0], scores[1, :70], atol=1e-5)


def test_attribute_long_refuses_bad_input_clearly(tiny_model_factory):
    model = tiny_model_factory("bert")
    pr = cp.PRGradient(forward_for(model), cp.attention_layers(model))
    ids = torch.randint(2, VOCAB, (1, 80))
    with pytest.raises(cp.PRXAIError, match="accepts at most 64"):
        pr.attribute_long(ids, window=128)
    with pytest.raises(cp.PRXAIError, match="integer token ids"):
        pr.attribute_long(ids.float(), window=32)
    with pytest.raises(cp.PRXAIError, match="window must be a positive int"):
        pr.attribute_long(ids, window=0)
    with pytest.raises(cp.PRXAIError, match="outside this model's vocabulary"):
        pr.attribute_long(ids + VOCAB, window=32)
    for stride in (0, -3, 2.5, True):  # never silently taken as the default stride
        with pytest.raises(cp.PRXAIError, match=r"^stride must be a positive int \(or None for half a window's "):
            pr.attribute_long(ids, window=32, stride=stride)


def test_attribute_long_checks_memory_before_its_passes(tiny_model_factory, monkeypatch):
    import captum_prxai.capture as capture

    model = tiny_model_factory("bert")
    pr = cp.PRGradient(forward_for(model), cp.attention_layers(model))
    monkeypatch.setattr(capture, "available_memory_bytes", lambda device: 1000)
    with pytest.raises(cp.PRXAIError, match="needs about"):
        pr.attribute_long(torch.randint(2, VOCAB, (1, 80)), window=32)


def test_attribute_long_shows_progress_when_asked(tiny_model_factory, capsys):
    model = tiny_model_factory("bert")
    pr = cp.PRGradient(forward_for(model), cp.attention_layers(model))
    ids = torch.randint(2, VOCAB, (2, 40))
    pr.attribute_long(ids, window=32, show_progress=True)
    assert "attribute_long" in capsys.readouterr().err
    pr.attribute_long(ids, window=32)
    assert "attribute_long" not in capsys.readouterr().err


def test_the_memory_estimate_counts_layers_that_fall_back_to_stored_weights(tiny_model_factory, monkeypatch):
    import captum_prxai.capture as capture
    from captum_prxai.capture import attention_memory_bytes
    from captum_prxai.hooks import resolve_capture_mode

    import transformers as tf

    def deep(config_cls, model_cls, **extra):  # 6 layers: stored weights (L + 3 maps) cost more than recomputing (5)
        torch.manual_seed(0)
        config = config_cls(hidden_size=16, num_hidden_layers=6, num_attention_heads=2, intermediate_size=32,
                            max_position_embeddings=66, vocab_size=VOCAB, num_labels=3, **extra)
        return model_cls(config).eval()

    bert = deep(tf.BertConfig, tf.BertForSequenceClassification, pad_token_id=0)
    mpnet = deep(tf.MPNetConfig, tf.MPNetForSequenceClassification, pad_token_id=1)
    assert resolve_capture_mode(cp.attention_layers(bert)) == "recompute"
    assert resolve_capture_mode(cp.attention_layers(mpnet), "recompute") == "weights"  # MPNet has its own attention
    recompute = attention_memory_bytes(2, 9, 6, 2, capture="recompute", summed=True)  # PR-G's token graph
    weights = attention_memory_bytes(2, 9, 6, 2, capture="weights", summed=True)
    assert weights > recompute
    # the token graph keeps the running sum and one layer: 2 + 3 maps instead of L + 3
    assert (attention_memory_bytes(2, 9, 6, 2, capture="recompute") - recompute) == 4 * 2 * 9 * 9 * 4
    monkeypatch.setattr(capture, "available_memory_bytes", lambda device: (recompute + weights) // 2)
    ids = torch.randint(2, VOCAB, (2, 9))
    cp.PRGradient(forward_for(bert), cp.attention_layers(bert)).attribute(ids, target=1)  # fits
    with pytest.raises(cp.PRXAIError, match="needs about"):
        cp.PRGradient(forward_for(mpnet), cp.attention_layers(mpnet)).attribute(ids, target=1)


def test_layered_node_ranks_sum_to_one_and_reduce_to_the_scores(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    explanation = cp.PRAttention(forward_for(model), cp.attention_layers(model), graph="layered").attribute_graph(
        ids, attention_mask=mask, additional_forward_args=(mask,))
    ranks = explanation.node_ranks()
    assert ranks.shape == (2, 27) and torch.allclose(ranks.sum(-1), torch.ones(2, dtype=ranks.dtype))
    tokens = ranks[:, :9] / ranks[:, :9].sum(-1, keepdim=True)
    assert torch.allclose(tokens.float(), explanation.scores, atol=1e-4)


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_hub_power_weighs_each_walk_by_its_graphs_global_pagerank(kind, tiny_model_factory, tiny_batch):
    model, ids, mask, layers, kw = _walk_setup(tiny_model_factory(kind), tiny_batch)
    settings = dict(walks="both", negative_weight=0.25, walk_gate=0.0)
    plain = cp.PRTemperedAttentionGradient(forward_for(model), layers, **settings).attribute_graph(ids, **kw)
    hubs = cp.PRTemperedAttentionGradient(forward_for(model), layers, hub_power=0.5, **settings)
    scores = hubs.attribute(ids, **kw)
    # by hand, from the plain graph: each walk's PageRank x times its graph's uniform-teleport PageRank g to 0.5,
    # renormalised, combined with the λ the gate decided on the walks' own PageRank
    real = mask.bool()
    weighted = []
    for adjacency in (plain.adjacency, plain.negative_adjacency):
        x = cp.pagerank(adjacency.double(), 0.7, personalization=plain.teleport.double(), node_mask=real,
                        tol=1e-12, max_iter=1000)
        g = cp.pagerank(adjacency.double(), 0.7, node_mask=real, tol=1e-12, max_iter=1000)
        w = x * g.sqrt() * real
        weighted.append(w / w.sum(-1, keepdim=True))
    expected = weighted[0] - plain.walk_weights[:, None] * weighted[1]
    torch.testing.assert_close(scores.double(), expected, atol=1e-5, rtol=0)
    assert (scores - plain.scores).abs().max() > 1e-3  # the hubs move the scores
    assert (scores[~real] == 0).all()
    graph = hubs.attribute_graph(ids, **kw)
    assert graph.walk_weights.tolist() == plain.walk_weights.tolist()  # the gate reads the raw walks
    torch.testing.assert_close(graph.rescore(), scores, atol=1e-5, rtol=0)
    torch.testing.assert_close(graph.walk_scores("negative"), weighted[1], atol=1e-5, rtol=0)
    torch.testing.assert_close(graph.node_ranks(), plain.node_ranks(), atol=1e-9, rtol=0)
    # windows score the stitched graph the same way: one window covering the input is attribute
    torch.testing.assert_close(hubs.attribute_long(ids[:1], target=1, window=ids.shape[1], stride=4)[0],
                               hubs.attribute(ids[:1], target=1)[0], atol=1e-5, rtol=0)
    # one walk: the scores are the weighted PageRank, summing to one
    single = cp.PRTemperedAttentionGradient(forward_for(model), layers, hub_power=1.0).attribute(ids, **kw)
    torch.testing.assert_close(single.double().sum(-1), torch.ones(2, dtype=torch.float64), atol=1e-6, rtol=0)


@pytest.mark.parametrize("bad", [-0.5, 2.5, float("nan"), True, "high"])
def test_hub_power_is_checked(bad, tiny_model_factory):
    layers = cp.attention_layers(tiny_model_factory("bert"))
    with pytest.raises(cp.PRXAIError, match=r"^hub_power must be a number in \[0, 2\], got "):
        cp.PRTemperedAttentionGradient(forward_for(tiny_model_factory("bert")), layers, hub_power=bad)
    with pytest.raises(cp.PRXAIError, match=r"^hub_power weighs the token graph's walks by its global PageRank; "
                                            r"the layered graph has none\. Use graph='token' or hub_power=0\.$"):
        cp.PRAttentionGradient(forward_for(tiny_model_factory("bert")), layers, graph="layered", hub_power=0.5)
