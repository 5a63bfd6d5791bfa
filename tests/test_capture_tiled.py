"""Tiled capture equals whole-layer capture; PageRank's sparse host checks change no result.

Tiles of query rows are forced with :func:`captum_prxai.hooks.tile_budget`: on the tiny models of
conftest (B=2, H=2, T=9, fp32) one query row of one layer's per-head tensor is 2 * 2 * 9 * 4 = 144
bytes, so a budget of ``r * 144`` bytes gives tiles of ``r`` rows.
"""

import pytest
import torch
import torch.nn.functional as F

import captum_prxai as cp
from captum_prxai._attention_math import RecomputedAttention, attention_probs, tile_rows, tiled_attention
from captum_prxai.capture import attention_memory_bytes, capture_graph, check_memory
from captum_prxai.graph.pagerank import CHECK_EVERY
from captum_prxai.graph.spec import GraphSpec
from captum_prxai.hooks import AttentionRecorder, current_tile_bytes, tile_budget
from conftest import VOCAB, forward_for

ROW_BYTES = 2 * 2 * 9 * 4  # one query row of a (B=2, H=2, T=9, S=9) fp32 tile
WHOLE = 2**40  # a budget larger than any layer: one tile, the capture as it was before tiling


def _left_padded_batch():
    torch.manual_seed(3)
    ids = torch.randint(2, VOCAB, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :3] = 0
    ids[1, :3] = 0
    return ids, mask


def _capture(model, ids, mask, spec, budget, seen_rows=None):
    layers = cp.attention_layers(model)

    def edge_map(layer, attention, grad):
        if seen_rows is not None:
            seen_rows.add(attention.shape[-2])
        return spec.edge_map(attention, grad)

    return capture_graph(forward_for(model), layers, ids, mask.bool(), edge_map, targets=torch.tensor([1, 2]),
                         additional_forward_args=(mask,), with_gradients=spec.needs_gradients,
                         input_gradient=spec.needs_input_gradient, tile_bytes=budget)


@pytest.mark.parametrize("kind", ["bert", "llama", "gpt2", "mpnet"])
@pytest.mark.parametrize("rows", [1, 2, 4, 5])  # 2, 4 and 5 do not divide T = 9
@pytest.mark.parametrize("edge_weight", ["attention", "gradient", "attention_gradient"])
def test_tiled_capture_equals_whole_layer_capture(kind, rows, edge_weight, tiny_model_factory, tiny_batch):
    model = tiny_model_factory(kind)
    ids, mask = _left_padded_batch() if kind in ("llama", "gpt2") else tiny_batch
    spec = GraphSpec(edge_weight=edge_weight, signed=True)  # signed: gradient x input needs dq, dk, dv below
    whole = _capture(model, ids, mask, spec, WHOLE)
    seen_rows: set[int] = set()
    tiled = _capture(model, ids, mask, spec, rows * ROW_BYTES, seen_rows)
    if kind == "mpnet":  # its own attention: weights handed over whole, unchanged
        assert seen_rows == {9}
    else:
        assert max(seen_rows) == rows and (9 % rows == 0 or 9 % rows in seen_rows)
    assert len(tiled.maps) == len(whole.maps) == 2
    for a, b in zip(tiled.maps, whole.maps):
        assert a.shape == b.shape == (2, 9, 9)
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5)
    assert torch.allclose(tiled.input_gradient, whole.input_gradient, atol=1e-6, rtol=1e-5)
    assert torch.allclose(tiled.logits, whole.logits, atol=1e-6)
    assert tiled.causal == whole.causal == (kind in ("llama", "gpt2"))
    assert torch.equal(tiled.target_position, whole.target_position)


@pytest.mark.parametrize("kind", ["bert", "llama", "gpt2", "mpnet"])
@pytest.mark.parametrize("method", ["PRAttention", "PRGradient", "PRAttentionGradient"])
def test_scores_are_the_same_with_any_tile_size(kind, method, tiny_model_factory, tiny_batch):
    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    pr = getattr(cp, method)(forward_for(model), cp.attention_layers(model))
    with tile_budget(WHOLE):
        expected = pr.attribute(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
    for rows in (1, 3, 4):
        with tile_budget(rows * ROW_BYTES):
            assert current_tile_bytes() == rows * ROW_BYTES
            scores = pr.attribute(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
        assert torch.allclose(scores, expected, atol=1e-6), rows
    assert current_tile_bytes() != ROW_BYTES  # the budget is restored on exit


@pytest.mark.parametrize("kind", ["bert", "llama", "gpt2"])
@pytest.mark.parametrize("edge_weight", ["attention", "attention_gradient"])
def test_per_example_tiles_equal_whole_layer_capture(kind, edge_weight, tiny_model_factory, tiny_batch,
                                                     monkeypatch):
    """CPU batches past the cache are tiled one example at a time: the same maps, causal flag and scores."""
    import captum_prxai.hooks as hooks

    model = tiny_model_factory(kind)
    ids, mask = _left_padded_batch() if kind in ("llama", "gpt2") else tiny_batch
    spec = GraphSpec(edge_weight=edge_weight, signed=True)
    whole = _capture(model, ids, mask, spec, WHOLE)
    batches = []
    monkeypatch.setattr(hooks, "CPU_WHOLE_TILE_BYTES", 0)  # every batch is past the "cache"
    layers = cp.attention_layers(model)

    def edge_map(layer, attention, grad):
        batches.append(attention.shape[0])
        return spec.edge_map(attention, grad)

    tiled = capture_graph(forward_for(model), layers, ids, mask.bool(), edge_map, targets=torch.tensor([1, 2]),
                          additional_forward_args=(mask,), with_gradients=spec.needs_gradients,
                          input_gradient=spec.needs_input_gradient, tile_bytes=4 * ROW_BYTES)
    assert 1 in batches  # tiles of one example were taken
    for a, b in zip(tiled.maps, whole.maps):
        assert a.shape == b.shape == (2, 9, 9)
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(tiled.input_gradient, whole.input_gradient, atol=1e-6, rtol=1e-5)
    assert tiled.causal == whole.causal == (kind in ("llama", "gpt2"))
    # the attributions, with the running sum and both walks
    for pr in (cp.PageRankAttribution(forward_for(model), layers),
               cp.PageRankAttribution(forward_for(model), layers, walks="both"),
               cp.PRAttention(forward_for(model), layers)):
        with tile_budget(WHOLE):
            expected = pr.attribute(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
        with tile_budget(4 * ROW_BYTES):
            scores = pr.attribute(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
        torch.testing.assert_close(scores, expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("fused_backward", [True, False], ids=["fused-dqkv", "hand-dqkv"])
def test_recomputed_attention_per_example_tiles(fused_backward, monkeypatch):
    """With example_rows the fused backward reports (1, H, r, S) tiles of every example; the hand-written one
    keeps whole-batch tiles. Either way the gradients and tiles are exact."""
    import captum_prxai._attention_math as am

    monkeypatch.setattr(am, "_fused_backward_available",
                        (lambda *args: True) if fused_backward else (lambda *args: False))
    torch.manual_seed(1)
    batch, heads, length, dim = 3, 2, 7, 4
    query, key, value = (torch.randn(batch, heads, length, dim, dtype=torch.float64, requires_grad=True)
                         for _ in range(3))
    mask = torch.ones(batch, 1, length, length, dtype=torch.bool)
    mask[2, :, :, 5:] = False
    weight = torch.randn(batch, heads, length, dim, dtype=torch.float64)
    out_ref, probs_ref, grad_ref, expected = _reference(query, key, value, mask, False, 1, weight)
    tiles = []

    def sink(a, g, part, examples=slice(0, batch)):
        tiles.append((examples, part, a.clone(), g.clone()))

    out = RecomputedAttention.apply(query, key, value, mask, 0.4, False, 1, sink, False, 3, 2)
    (out * weight).sum().backward()
    for got, want in zip((query.grad, key.grad, value.grad), expected):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
    if fused_backward:
        assert [(e.start, p.start) for e, p, _, _ in tiles] == [(b, r) for b in range(3) for r in (0, 2, 4, 6)]
    else:
        assert [(e, p.start) for e, p, _, _ in tiles] == [(slice(0, batch), r) for r in (0, 3, 6)]
    for examples, part, a, g in tiles:
        torch.testing.assert_close(a, probs_ref[examples, :, part], atol=1e-12, rtol=0)
        torch.testing.assert_close(g, grad_ref[examples, :, part], atol=1e-10, rtol=0)
    # attention-only capture: per-example tiles, and A v of the whole layer
    seen = []
    with torch.no_grad():
        out_tiled = tiled_attention(query, key, value, mask, 0.4, False, 1,
                                    lambda a, g, part, examples: seen.append((examples, part, a.clone())), 2, True)
    torch.testing.assert_close(out_tiled, out_ref.detach())
    assert len(seen) == 3 * 4 and all(a.shape[0] == 1 for _, _, a in seen)
    assert all(torch.allclose(a, probs_ref[e, :, p]) for e, p, a in seen)


def _eager(query, key, value, mask, scale, causal, groups):
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    probs = attention_probs(query, key, mask, scale, causal)
    return torch.matmul(probs, value), probs


def _reference(query, key, value, mask, causal, groups, weight):
    """Autograd through eager attention: ``(out, A, dA, [dq, dk, dv])`` of ``(out * weight).sum()``; grads reset."""
    out_ref, probs_ref = _eager(query, key, value, mask, 0.4, causal, groups)
    probs_ref.retain_grad()
    (out_ref * weight).sum().backward()
    expected = [t.grad.clone() for t in (query, key, value)]
    for t in (query, key, value):
        t.grad = None
    return out_ref, probs_ref.detach(), probs_ref.grad, expected


@pytest.mark.parametrize("rows", [1, 3, 7, 16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("fused_backward", [True, False], ids=["fused-dqkv", "hand-dqkv"])
def test_recomputed_attention_gradients_and_tiles_are_exact(rows, causal, groups, fused_backward, monkeypatch):
    """dq, dk, dv and every (A, dA) tile of the tiled backward equal autograd through eager attention.

    Both ways of getting dq, dk, dv are checked: from the fused kernel's own backward (where SDPA picks a fused
    kernel) and from the hand-written tiled backward (the fallback when it picks the math path).
    """
    import captum_prxai._attention_math as am

    chosen = []
    real = am._fused_backward_available

    def spy(*args):
        chosen.append(real(*args) if fused_backward else False)
        return chosen[-1]

    monkeypatch.setattr(am, "_fused_backward_available", spy)
    torch.manual_seed(0)
    batch, heads, length, dim = 2, 4, 7, 5
    query = torch.randn(batch, heads, length, dim, dtype=torch.float64, requires_grad=True)
    key = torch.randn(batch, heads // groups, length, dim, dtype=torch.float64, requires_grad=True)
    value = torch.randn(batch, heads // groups, length, dim, dtype=torch.float64, requires_grad=True)
    mask = None if causal else torch.ones(batch, 1, length, length, dtype=torch.bool)
    if mask is not None:
        mask[1, :, :, 5:] = False  # padded keys of example 1
    weight = torch.randn(batch, heads, length, dim, dtype=torch.float64)
    out_ref, probs_ref, grad_ref, expected = _reference(query, key, value, mask, causal, groups, weight)
    tiles = []
    out = RecomputedAttention.apply(query, key, value, mask, 0.4, causal, groups,
                                    lambda a, g, part: tiles.append((part, a.clone(), g.clone())), False, rows)
    assert torch.allclose(out, out_ref)
    assert chosen == [fused_backward]
    (out * weight).sum().backward()
    for got, want in zip((query.grad, key.grad, value.grad), expected):
        assert torch.allclose(got, want, atol=1e-10)
    assert [p.start for p, _, _ in tiles] == list(range(0, length, rows))
    for part, a, g in tiles:
        assert torch.allclose(a, probs_ref[:, :, part], atol=1e-12)
        assert torch.allclose(g, grad_ref[:, :, part], atol=1e-10)
    # attention-only capture: the same tiles, and A v of the whole layer
    seen = []
    with torch.no_grad():
        out_tiled = tiled_attention(query, key, value, mask, 0.4, causal, groups,
                                    lambda a, g, part: seen.append((part, a.clone(), g)), rows)
    assert torch.allclose(out_tiled, out_ref.detach())
    assert all(g is None and torch.allclose(a, probs_ref[:, :, p]) for p, a, g in seen)


def test_tile_rows_follow_the_budget():
    assert tile_rows(1, 12, 4096, 4096, 4, 16 * 2**20) == 85  # 16 MiB / (12 * 4096 * 4 bytes per row)
    assert tile_rows(1, 12, 512, 512, 4, 16 * 2**20) == 512  # one example at 512 tokens: one tile
    assert tile_rows(64, 12, 4096, 4096, 4, 1) == 1  # at least one row
    assert tile_rows(1, 1, 10, 10, 4, 2**40) == 10  # at most the whole layer


def test_a_reduction_that_drops_the_rows_is_refused_with_tiles(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    with pytest.raises(cp.PRXAIError, match="second-last axis holds the tile's rows"):
        with AttentionRecorder(cp.attention_layers(model), lambda i, a, g, rows: a.mean((1, 2)),
                               tile_bytes=2 * ROW_BYTES):
            model(ids, attention_mask=mask)
    with pytest.raises(cp.PRXAIError, match="tile_bytes must be a positive int"):
        AttentionRecorder(cp.attention_layers(model), lambda i, a, g: a, tile_bytes=0)
    with pytest.raises(cp.PRXAIError, match="tile_budget takes a positive number"):
        with tile_budget(-5):
            pass


def test_memory_estimate_is_tiled_and_no_longer_refuses_what_fits(tiny_model_factory, monkeypatch):
    import captum_prxai.capture as capture

    layers = cp.attention_layers(tiny_model_factory("bert"))  # 2 layers, 2 heads
    length = 4096
    whole_layer = 2 * length * length * 4
    estimate = attention_memory_bytes(1, length, 2, 2)
    # per-head part bounded by five tiles of the budget; head-reduced part (L + 3) (T, T) fp32 maps
    assert estimate == 5 * 16 * 2**20 + 5 * length * length * 4
    assert estimate < 5 * whole_layer  # the untiled estimate
    assert attention_memory_bytes(1, length, 2, 2, tile_bytes=4 * 2**20) < estimate
    monkeypatch.setattr(capture, "available_memory_bytes", lambda device: (estimate + 5 * whole_layer) // 2)
    check_memory(layers, 1, length, torch.device("cpu"), "auto", None)  # fits now
    monkeypatch.setattr(capture, "available_memory_bytes", lambda device: estimate // 2)
    with pytest.raises(cp.PRXAIError, match="needs about"):
        check_memory(layers, 1, length, torch.device("cpu"), "auto", None)


# -- PageRank: host checks every k iterations, per-graph stopping -------------------------------------------


def _reference_pagerank(adjacency, damping, personalization, node_mask, tol, max_iter):
    """The solver as it was: masked copy, transition matrix, host check every iteration."""
    valid = node_mask.to(adjacency.dtype)
    adjacency = adjacency * valid.unsqueeze(-1) * valid.unsqueeze(-2)
    p = personalization * valid
    p = p / p.sum(-1, keepdim=True)
    x = valid / valid.sum(-1, keepdim=True)
    out_weight = adjacency.sum(-1, keepdim=True)
    is_dangling = (out_weight.squeeze(-1) == 0) & node_mask
    transition = adjacency / torch.where(out_weight == 0, torch.ones_like(out_weight), out_weight)
    threshold = node_mask.sum(-1).to(adjacency.dtype) * tol
    active = torch.ones(adjacency.shape[0], dtype=torch.bool)
    iterations = torch.zeros(adjacency.shape[0], dtype=torch.long)
    for _ in range(max_iter):
        dangling_mass = (x * is_dangling).sum(-1, keepdim=True)
        x_new = damping * (torch.bmm(x.unsqueeze(1), transition).squeeze(1) + dangling_mass * p) + (1 - damping) * p
        step_err = (x_new - x).abs().sum(-1)
        x = torch.where(active.unsqueeze(-1), x_new, x)
        iterations += active.long()
        active = active & ~(step_err < threshold)
        if not active.any():
            return x, iterations
    raise AssertionError("reference did not converge")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("check_every", [1, 3, CHECK_EVERY])
def test_pagerank_with_sparse_host_checks_equals_the_per_iteration_solver(dtype, check_every):
    g = torch.Generator().manual_seed(11)
    batch, n = 5, 12
    adjacency = torch.rand(batch, n, n, generator=g, dtype=dtype)
    adjacency = adjacency * (torch.rand(batch, n, n, generator=g) < 0.4)
    adjacency[0] *= 1e-3  # graphs of the batch converge after different numbers of iterations
    adjacency[1, 3] = 0  # a dangling node
    adjacency[2] = torch.eye(n, dtype=dtype)  # converges at once
    teleport = torch.rand(batch, n, generator=g, dtype=dtype)
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[3, 9:] = False  # padding
    for damping in (0.7, 0.95):
        expected, iterations = _reference_pagerank(adjacency, damping, teleport, mask, 1e-6, 200)
        assert iterations.unique().numel() > 1  # the per-graph stopping rule is exercised
        ours = cp.pagerank(adjacency, damping, personalization=teleport, node_mask=mask, max_iter=200,
                           check_every=check_every)
        assert ours.dtype == dtype
        assert torch.allclose(ours, expected, atol=1e-6 if dtype == torch.float32 else 1e-12)
        assert (ours[3, 9:] == 0).all()
        # a graph gets the same scores alone as inside the batch
        for b in range(batch):
            alone = cp.pagerank(adjacency[b:b + 1], damping, personalization=teleport[b:b + 1],
                                node_mask=mask[b:b + 1], max_iter=200, check_every=check_every)
            assert torch.allclose(alone[0], ours[b], atol=1e-7 if dtype == torch.float32 else 1e-14)


def test_pagerank_sparse_checks_still_report_non_convergence_and_bad_arguments():
    adjacency = torch.rand(2, 6, 6, generator=torch.Generator().manual_seed(0))
    with pytest.raises(cp.ConvergenceError, match="did not converge in 5 iterations"):
        cp.pagerank(adjacency, 0.99, tol=1e-12, max_iter=5, check_every=CHECK_EVERY)
    with pytest.raises(cp.PRXAIError, match="check_every must be a positive int"):
        cp.pagerank(adjacency, check_every=0)
    bad = adjacency.clone()
    bad[1, 2, 3] = float("nan")
    with pytest.raises(cp.PRXAIError, match="NaN or infinite"):
        cp.pagerank(bad)
    bad[1, 2, 3] = -0.5
    with pytest.raises(cp.PRXAIError, match=r"negative weights \(min -0.5\)"):
        cp.pagerank(bad)


def test_pagerank_gradient_flows_through_the_vector_normalised_iteration():
    g = torch.Generator().manual_seed(2)
    adjacency = torch.rand(2, 5, 5, generator=g, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    teleport = torch.rand(2, 5, generator=g, dtype=torch.float64)

    def fn(a):
        return cp.pagerank(a, 0.7, personalization=teleport, node_mask=mask, tol=1e-13, max_iter=500)[:, 0]

    assert torch.autograd.gradcheck(fn, (adjacency,), atol=1e-6)


def test_cpu_tiles_are_capped_in_rows_and_other_devices_follow_the_budget_alone(tiny_model_factory):
    """On CPU a tile holds at most CPU_TILE_ROWS query rows (cache-sized); elsewhere only the budget counts."""
    from captum_prxai._attention_math import CPU_TILE_ROWS, CPU_WHOLE_TILE_BYTES
    from captum_prxai.hooks import AttentionRecorder

    assert tile_rows(1, 12, 4096, 4096, 4, 16 * 2**20, max_rows=CPU_TILE_ROWS) == CPU_TILE_ROWS
    assert tile_rows(1, 12, 4096, 4096, 4, 16 * 2**20) == 85
    assert tile_rows(1, 12, 20, 20, 4, 16 * 2**20, max_rows=CPU_TILE_ROWS) == 20
    model = tiny_model_factory("bert")
    recorder = AttentionRecorder(cp.attention_layers(model), lambda i, a, g, rows=None: a.mean(1),
                                 tile_bytes=16 * 2**20)
    for device in ("cpu", "meta"):
        query = torch.empty(1, 12, 4096, 32, device=device)
        rows = recorder.rows_per_tile(query, query)
        assert rows == (CPU_TILE_ROWS if device == "cpu" else 85)
    # a layer that fits in CPU_WHOLE_TILE_BYTES stays one tile
    small = torch.empty(1, 12, 128, 32)
    assert 12 * 128 * 128 * 4 <= CPU_WHOLE_TILE_BYTES and recorder.rows_per_tile(small, small) == 128
