"""Generalized attention flow: the barrier max-flow solver against networkx, and the attribution on a tiny model."""

import networkx as nx
import numpy as np
import pytest
import torch

import captum_prxai
from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.flow import barrier_max_flow, layered_barrier_flow

#: relative agreement with networkx: the barrier stops at a duality gap of 1e-7 of the flow value
REL_TOL = 1e-5


def random_dag(rng, n):
    m = min(int(rng.integers(n, 3 * n)), n * (n - 1) // 2)
    edges = set()
    while len(edges) < m:
        u, v = sorted(rng.choice(n, 2, replace=False).tolist())
        edges.add((u, v))
    edges = sorted(edges)
    tail = np.array([u for u, _ in edges])
    head = np.array([v for _, v in edges])
    return tail, head, rng.random(len(edges))


def nx_value(tail, head, cap, n, source, sink):
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    for u, v, c in zip(tail.tolist(), head.tolist(), cap.tolist()):
        if np.isfinite(c):
            graph.add_edge(u, v, capacity=c)
        else:
            graph.add_edge(u, v)  # no capacity attribute: unbounded in networkx
    return nx.maximum_flow_value(graph, source, sink)


@pytest.mark.parametrize("seed", range(4))
def test_barrier_max_flow_agrees_with_networkx_on_random_dags(seed):
    rng = np.random.default_rng(seed)
    for _ in range(8):
        n = int(rng.integers(4, 12))
        tail, head, cap = random_dag(rng, n)
        flow, value = barrier_max_flow(tail, head, cap, n, 0, n - 1)
        expected = nx_value(tail, head, cap, n, 0, n - 1)
        assert value == pytest.approx(expected, rel=REL_TOL, abs=1e-9)
        assert (flow >= 0).all() and (flow <= cap + 1e-12).all()
        net = np.bincount(head, flow, minlength=n) - np.bincount(tail, flow, minlength=n)
        assert np.abs(net[1:-1]).max() < 1e-6 * max(expected, 1e-3)
        assert net[-1] == pytest.approx(value, rel=1e-6, abs=1e-9)


def random_layered(rng, n_layers, n, batch=2):
    maps = []
    for _ in range(n_layers):
        m = torch.from_numpy(rng.random((batch, n, n)))
        m = m * torch.from_numpy(rng.random((batch, n, n)) > 0.3)  # some zero capacities
        maps.append(m)
    return maps


def layered_nx_value(caps, real, sink_nodes):
    """networkx max flow of the GAF graph: source -> every input token, up the layers, chosen outputs -> sink."""
    graph = nx.DiGraph()
    n_layers = len(caps)
    for l, m in enumerate(caps):
        for i in real:
            for j in real:
                if m[i, j] > 0:
                    graph.add_edge((l, j), (l + 1, i), capacity=float(m[i, j]))
    for j in real:
        graph.add_edge("s", (0, j))
    for i in sink_nodes:
        graph.add_edge((n_layers, i), "t")
    return nx.maximum_flow_value(graph, "s", "t")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("sink", ["all", "target"])
def test_layered_barrier_flow_sums_to_the_networkx_maximum_flow(seed, sink):
    rng = np.random.default_rng(10 + seed)
    n_layers, n = int(rng.integers(1, 4)), int(rng.integers(2, 6))
    maps = random_layered(rng, n_layers, n)
    mask = torch.ones(2, n, dtype=torch.bool)
    mask[1, -1] = False  # padding in the second example
    target = torch.tensor([0, n - 2])
    scores = layered_barrier_flow(maps, mask, target, sink=sink)
    assert scores.shape == (2, n)
    assert scores[1, -1] == 0
    for b in range(2):
        real = mask[b].nonzero().flatten().tolist()
        outputs = real if sink == "all" else [int(target[b])]
        expected = layered_nx_value([m[b].numpy() for m in maps], real, outputs)
        assert float(scores[b].sum()) == pytest.approx(expected, rel=REL_TOL, abs=1e-9)
        assert (scores[b] >= 0).all()


def test_layered_barrier_flow_gives_interchangeable_tokens_equal_scores():
    """Tokens 1 and 2 play the same part; a max flow may split them any way, the barrier's limit splits evenly."""
    m = torch.tensor([[[0.6, 0.2, 0.2],
                       [0.1, 0.45, 0.45],
                       [0.1, 0.45, 0.45]]], dtype=torch.float64)
    scores = layered_barrier_flow([m, m], torch.ones(1, 3, dtype=torch.bool), torch.tensor([0]), sink="target")
    assert float(scores[0, 1]) == pytest.approx(float(scores[0, 2]), rel=1e-5)
    expected = layered_nx_value([m[0].numpy(), m[0].numpy()], [0, 1, 2], [0])
    assert float(scores.sum()) == pytest.approx(expected, rel=REL_TOL)


def test_the_newton_step_callback_counts_each_step_and_changes_nothing():
    m = torch.tensor([[[0.6, 0.2, 0.2], [0.1, 0.45, 0.45], [0.1, 0.45, 0.45]]], dtype=torch.float64)
    args = ([m, m], torch.ones(1, 3, dtype=torch.bool), torch.tensor([0]))
    steps = []
    counted = layered_barrier_flow(*args, on_newton_step=lambda: steps.append(1))
    assert len(steps) > 0
    torch.testing.assert_close(counted, layered_barrier_flow(*args), atol=0, rtol=0)
    with pytest.raises(PRXAIError, match="did not converge"):  # the steps counted are those the limit counts
        layered_barrier_flow(*args, max_newton=len(steps) - 1)


def test_barrier_max_flow_refuses_bad_graphs():
    with pytest.raises(PRXAIError) as err:
        barrier_max_flow(np.array([0, 1, 2]), np.array([1, 2, 1]), np.ones(3), 4, 0, 3)
    assert str(err.value) == "barrier_max_flow needs an acyclic graph (a layered attention graph is one)."
    with pytest.raises(PRXAIError) as err:
        barrier_max_flow(np.array([0]), np.array([1]), np.array([-1.0]), 2, 0, 1)
    assert str(err.value) == "barrier_max_flow capacities must be non-negative numbers (inf for unbounded)."
    with pytest.raises(PRXAIError) as err:
        barrier_max_flow(np.array([0]), np.array([1]), np.ones(2), 2, 0, 1)
    assert str(err.value) == "tail, head and capacity must have one entry per edge, got sizes 1, 1, 2."
    flow, value = barrier_max_flow(np.array([1]), np.array([2]), np.ones(1), 3, 0, 2)  # no path
    assert value == 0.0 and flow.tolist() == [0.0]
    with pytest.raises(PRXAIError) as err:
        layered_barrier_flow([torch.full((1, 2, 2), float("nan"))], torch.ones(1, 2, dtype=torch.bool),
                             torch.tensor([0]))
    assert str(err.value) == "generalized attention flow capacities must be finite and non-negative."
    with pytest.raises(PRXAIError) as err:
        layered_barrier_flow([torch.ones(1, 2, 2)], torch.ones(1, 2, dtype=torch.bool), torch.tensor([0]),
                             sink="cls")
    assert str(err.value) == 'sink must be "all" (every output token) or "target" (the explained token), got \'cls\'.'


def _with_residual(m):
    rows = m.sum(-1, keepdim=True)
    return 0.5 * m / rows + 0.5 * torch.eye(m.shape[-1], dtype=m.dtype)


def test_gaf_on_a_tiny_bert_matches_networkx_on_its_attention(tiny):
    model, tokenizer = tiny
    enc = tokenizer(["good fine film", "bad plot"], return_tensors="pt", padding=True)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    forward = lambda i, m: model(i, attention_mask=m).logits  # noqa: E731
    gaf = captum_prxai.GeneralizedAttentionFlow(forward, captum_prxai.attention_layers(model),
                                                information="attention")
    scores = gaf.attribute(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
    assert scores.shape == ids.shape
    assert (scores[mask == 0] == 0).all() and (scores >= 0).all()
    with torch.no_grad():
        attentions = model(ids, attention_mask=mask, output_attentions=True).attentions
    for b in range(2):
        real = mask[b].nonzero().flatten()
        caps = [_with_residual(a[b].mean(0).double()[real][:, real]).numpy() for a in attentions]
        expected = layered_nx_value(caps, list(range(len(real))), list(range(len(real))))
        assert float(scores[b].sum()) == pytest.approx(expected, rel=1e-4)
    for information in ("attention_gradient", "gradient"):
        agf = captum_prxai.GeneralizedAttentionFlow(forward, captum_prxai.attention_layers(model), sink="target",
                                                    information=information)
        grad_scores = agf.attribute(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
        assert torch.isfinite(grad_scores).all() and (grad_scores[mask == 0] == 0).all()
        assert (grad_scores.sum(dim=1) > 0).all()


def test_gaf_is_registered_as_an_attention_baseline(tiny):
    from captum_prxai.methods import MethodContext, build_method, make_forward_func, resolve_method

    spec = resolve_method("gaf")
    assert (spec.name, spec.family, spec.label) == ("gaf", "attention", "Generalized attention flow")
    model, tokenizer = tiny
    enc = tokenizer(["good fine film"], return_tensors="pt", return_special_tokens_mask=True)
    explainer = build_method("gaf", model, make_forward_func(model), MethodContext.from_tokenizer(tokenizer))
    assert isinstance(explainer.attribution, captum_prxai.GeneralizedAttentionFlow)
    scores = explainer(enc["input_ids"], enc["attention_mask"], enc["special_tokens_mask"], torch.tensor([0]))
    assert scores.shape == enc["input_ids"].shape and torch.isfinite(scores).all() and float(scores.sum()) > 0
    with pytest.raises(PRXAIError) as err:
        captum_prxai.GeneralizedAttentionFlow(lambda i: model(i).logits, captum_prxai.attention_layers(model),
                                              information="value")
    assert str(err.value) == ("information must be one of attention, gradient, attention_gradient; "
                              "got 'value'.")
