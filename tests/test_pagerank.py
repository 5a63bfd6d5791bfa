import networkx as nx
import pytest
import torch

from captum_prxai import ConvergenceError, PRXAIError, layered_pagerank, pagerank


def _nx_scores(weights, personalization=None, dangling=None, damping=0.85):
    n = weights.shape[0]
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    for i in range(n):
        for j in range(n):
            if weights[i, j] > 0:
                graph.add_edge(i, j, weight=float(weights[i, j]))
    as_dict = (lambda v: None if v is None else {i: float(v[i]) for i in range(n)})
    ref = nx.pagerank(graph, alpha=damping, personalization=as_dict(personalization), dangling=as_dict(dangling),
                      tol=1e-12, max_iter=1000)
    return torch.tensor([ref[i] for i in range(n)], dtype=torch.float64)


@pytest.mark.parametrize("seed", range(5))
def test_matches_networkx_with_dangling_nodes_and_personalization(seed):
    g = torch.Generator().manual_seed(seed)
    batch, n = 4, 9
    weights = torch.rand(batch, n, n, generator=g, dtype=torch.float64)
    weights = weights * (torch.rand(batch, n, n, generator=g) < 0.35)
    weights[:, seed % n] = 0.0  # a dangling node in every graph
    pers = torch.rand(batch, n, generator=g, dtype=torch.float64)
    dang = torch.rand(batch, n, generator=g, dtype=torch.float64)
    for kwargs in ({}, {"personalization": pers}, {"personalization": pers, "dangling": dang}):
        ours = pagerank(weights, tol=1e-12, max_iter=1000, **kwargs)
        for b in range(batch):
            ref = _nx_scores(weights[b], *(kwargs.get(k, None) if kwargs.get(k) is None else kwargs[k][b]
                                          for k in ("personalization", "dangling")))
            assert torch.allclose(ours[b], ref, atol=1e-6), (kwargs.keys(), b)


def test_default_tolerance_agrees_with_networkx_to_1e6():
    g = torch.Generator().manual_seed(7)
    weights = torch.rand(12, 12, generator=g, dtype=torch.float64) * (torch.rand(12, 12, generator=g) < 0.3)
    weights[3] = 0
    assert torch.allclose(pagerank(weights), _nx_scores(weights), atol=1e-6)


def test_single_graph_and_dtype_preserved():
    w = torch.rand(5, 5, dtype=torch.float32)
    out = pagerank(w)
    assert out.shape == (5,) and out.dtype == torch.float32
    assert torch.isclose(out.sum(), torch.tensor(1.0))


def test_node_mask_equals_the_smaller_graph():
    g = torch.Generator().manual_seed(3)
    w = torch.rand(1, 8, 8, generator=g, dtype=torch.float64)
    mask = torch.tensor([[True] * 5 + [False] * 3])
    padded = pagerank(w + 0.0, node_mask=mask)
    small = pagerank(w[:, :5, :5])
    assert torch.equal(padded[0, 5:], torch.zeros(3, dtype=torch.float64))
    assert torch.allclose(padded[0, :5], small[0], atol=1e-12)


def test_differentiable():
    w = torch.rand(2, 6, 6, dtype=torch.float64, requires_grad=True)
    pers = torch.zeros(2, 6, dtype=torch.float64)
    pers[:, 0] = 1
    out = pagerank(w, personalization=pers, tol=1e-10, max_iter=500)
    out[:, 2].sum().backward()
    assert w.grad is not None and torch.isfinite(w.grad).all() and w.grad.abs().sum() > 0
    # finite-difference check of one partial derivative
    eps = 1e-6
    w2 = w.detach().clone()
    w2[0, 0, 2] += eps
    num = (pagerank(w2, personalization=pers, tol=1e-14, max_iter=2000)[0, 2] - out[0, 2].detach()) / eps
    assert torch.isclose(num, w.grad[0, 0, 2], rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize(
    "weights, message",
    [
        (-torch.ones(1, 3, 3), "negative weights"),
        (torch.full((1, 3, 3), float("nan")), "NaN or infinite"),
        (torch.ones(2, 3, 4), "shape (B, N, N)"),
        (torch.ones(1, 0, 0), "empty"),
        (torch.ones(3, 3, dtype=torch.long), "floating-point"),
    ],
)
def test_bad_input_errors(weights, message):
    with pytest.raises(PRXAIError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pagerank(weights)


def test_bad_damping_and_personalization():
    with pytest.raises(PRXAIError, match="damping"):
        pagerank(torch.ones(3, 3), damping=1.0)
    with pytest.raises(PRXAIError, match="personalization must have shape"):
        pagerank(torch.ones(1, 3, 3), personalization=torch.ones(4))


def test_non_convergence_reports_error_reached():
    w = torch.tensor([[0.0, 1.0], [1.0, 0.0]])  # periodic: power iteration oscillates from a skewed start
    with pytest.raises(ConvergenceError, match=r"did not converge in 3 iterations: graph 0 reached an L1 change of"):
        pagerank(w, damping=0.99, max_iter=3, nstart=torch.tensor([1.0, 0.0]))


def test_layered_pagerank_equals_pagerank_on_the_full_graph():
    g = torch.Generator().manual_seed(11)
    layers, tokens, batch = 3, 5, 2
    transitions = [torch.rand(batch, tokens, tokens, generator=g, dtype=torch.float64) for _ in range(layers)]
    transitions[1][0, 2] = 0  # an intermediate dangling node
    pers = torch.rand(batch, layers + 1, tokens, generator=g, dtype=torch.float64)
    full = torch.zeros(batch, (layers + 1) * tokens, (layers + 1) * tokens, dtype=torch.float64)
    for level, w in enumerate(transitions):
        full[:, (level + 1) * tokens:(level + 2) * tokens, level * tokens:(level + 1) * tokens] = w
    expected = pagerank(full, personalization=pers.reshape(batch, -1), tol=1e-13, max_iter=2000)
    assert torch.allclose(layered_pagerank(transitions, 0.85, pers).reshape(batch, -1), expected, atol=1e-9)


def test_value_range_and_all_finite_see_every_non_finite_value():
    from captum_prxai._checks import all_finite, value_range

    x = torch.rand(3, 5, 5, generator=torch.Generator().manual_seed(0))
    assert value_range(x) == (float(x.min()), float(x.max())) and all_finite(x)
    assert all_finite(torch.empty(0))
    for bad in (float("nan"), float("inf"), float("-inf")):
        y = x.clone()
        y[2, 4, 4] = bad
        assert not all_finite(y)
