import networkx as nx
import pytest
import torch

import captum_prxai as cp
from captum_prxai import PRXAIError
from captum_prxai.graph import layered_max_flow, layered_transitions
from conftest import forward_for


def _random_transitions(batch, layers, length, seed=0):
    g = torch.Generator().manual_seed(seed)
    maps = [torch.rand(batch, length, length, generator=g) ** 3 for _ in range(layers)]
    return [m / m.sum(-1, keepdim=True) for m in maps]


def _networkx_flow(maps, source, sink):
    """Reference: networkx maximum flow on the layered graph of one example."""
    graph = nx.DiGraph()
    n_layers, length = len(maps), maps[0].shape[0]
    for layer, m in enumerate(maps):
        for i in range(length):
            for j in range(length):
                graph.add_edge((layer + 1, i), (layer, j), capacity=float(m[i, j]))
    return nx.maximum_flow_value(graph, (n_layers, source), (0, sink))


def test_one_layer_flow_is_the_direct_edge():
    maps = _random_transitions(2, 1, 5)
    flow = layered_max_flow(maps, torch.ones(2, 5, dtype=torch.bool), torch.tensor([0, 3]))
    torch.testing.assert_close(flow[0], maps[0][0, 0], atol=2e-6, rtol=0)
    torch.testing.assert_close(flow[1], maps[0][1, 3], atol=2e-6, rtol=0)


def test_bottleneck_is_hand_computable_and_differs_from_rollout():
    top = torch.tensor([[[0.5, 0.5], [0.5, 0.5]]])
    bottom = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])
    flow = layered_max_flow([bottom, top], torch.ones(1, 2, dtype=torch.bool), torch.tensor([0]))
    # to token 0: min(0.5, 1.0) + min(0.5, 0.5) = 1.0; to token 1: min(0.5, 0) + min(0.5, 0.5) = 0.5
    torch.testing.assert_close(flow, torch.tensor([[1.0, 0.5]]))
    rollout = cp.graph.propagate(torch.tensor([[1.0, 0.0]]), [bottom, top])
    torch.testing.assert_close(rollout, torch.tensor([[0.75, 0.25]]))


def test_agrees_with_networkx_on_random_layered_graphs():
    maps = _random_transitions(1, 3, 6, seed=3)
    flow = layered_max_flow(maps, torch.ones(1, 6, dtype=torch.bool), torch.tensor([2]))
    for j in range(6):
        expected = _networkx_flow([m[0] for m in maps], source=2, sink=j)
        assert flow[0, j].item() == pytest.approx(expected, abs=1e-5)


def test_padding_takes_no_part_and_batch_equals_one_at_a_time():
    maps = _random_transitions(2, 2, 6, seed=5)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 4:] = False
    for m in maps:  # like real attention: nothing attends to padding
        m[1, :, 4:] = 0
        m[1] /= m[1].sum(-1, keepdim=True)
    padded = layered_transitions(maps, 0.5, mask)
    batched = layered_max_flow(padded, mask, torch.tensor([0, 0]))
    assert torch.equal(batched[1, 4:], torch.zeros(2))
    alone = layered_max_flow(layered_transitions([m[1:, :4, :4] for m in maps], 0.5, mask[1:, :4]),
                             mask[1:, :4], torch.tensor([0]))
    torch.testing.assert_close(batched[1, :4], alone[0])


def test_clear_errors():
    maps = _random_transitions(1, 1, 3)
    with pytest.raises(PRXAIError, match="source position 2 of example 0 is padding"):
        layered_max_flow(maps, torch.tensor([[True, True, False]]), torch.tensor([2]))
    with pytest.raises(PRXAIError, match="at least one layer"):
        layered_max_flow([], torch.ones(1, 3, dtype=torch.bool), torch.tensor([0]))
    maps[0][0, 0, 1] = -0.1
    with pytest.raises(PRXAIError, match="non-negative"):
        layered_max_flow(maps, torch.ones(1, 3, dtype=torch.bool), torch.tensor([0]))


def test_attention_flow_attribution_is_max_flow_over_the_rollout_graph(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    flow = cp.AttentionFlow(forward_for(model), layers).attribute(ids, additional_forward_args=(mask,))
    with cp.AttentionRecorder(layers, lambda i, a, g: a.mean(dim=1)) as rec:
        model(ids, attention_mask=mask)
    maps = [m.detach() for m in rec.maps]
    expected = layered_max_flow(layered_transitions(maps, 0.5, mask.bool()), mask.bool(), torch.tensor([0, 0]))
    torch.testing.assert_close(flow, expected, atol=1e-5, rtol=0)
    assert torch.equal(flow[1, 6:], torch.zeros(3))
    assert (flow <= 1 + 1e-6).all() and (flow > 0).any()  # the source sends at most one unit
