import pytest
import torch

import captum_prxai as cp
from captum_prxai.graph.windows import plan_windows, stitch_window_graphs
from conftest import VOCAB, forward_for


def test_windows_cover_every_token_with_special_tokens_repeated():
    plan = plan_windows(length=23, window=8, stride=3, prefix=1, suffix=1)
    seen = plan.positions[plan.mask]
    assert set(seen.tolist()) == set(range(23))
    assert (plan.positions[:, 0] == 0).all()  # [CLS] opens every window
    last = plan.mask.sum(1) - 1
    assert (plan.positions[torch.arange(len(last)), last] == 22).all()  # [SEP] closes every window
    assert plan.positions.shape[1] == 8


def test_stitching_maps_window_edges_to_global_positions():
    plan = plan_windows(length=6, window=4, stride=2, prefix=1, suffix=1)  # content 1..4, windows of 2
    graphs = torch.zeros(plan.positions.shape[0], 4, 4)
    graphs[:, 1, 2] = 1.0  # first content token -> second content token, in every window
    stitched = stitch_window_graphs(graphs, plan, 6)
    starts = plan.positions[:, 1].tolist()
    for start in starts:
        assert stitched[start, start + 1] >= 1.0
    assert stitched.sum() == len(starts)


def test_short_text_in_one_window_equals_attribute(tiny_model_factory):
    model = tiny_model_factory("bert")
    ids = torch.randint(2, VOCAB, (1, 12))
    pr = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model))
    whole = pr.attribute(ids, target=1)
    windowed = pr.attribute_long(ids, target=1, window=12)
    assert torch.allclose(whole, windowed, atol=1e-5)


def test_long_text_beyond_model_positions(tiny_model_factory):
    model = tiny_model_factory("bert")  # 64 positions
    ids = torch.randint(2, VOCAB, (1, 150), generator=torch.Generator().manual_seed(0))
    pr = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model))
    with pytest.raises(cp.PRXAIError, match="accepts at most 64"):
        pr.attribute(ids, target=1)
    scores = pr.attribute_long(ids, window=64, internal_batch_size=2)
    assert scores.shape == (1, 150) and torch.isclose(scores.sum(), torch.tensor(1.0), atol=1e-5)
    # tokens past the model's 64 positions are scored too (by the later windows)
    assert scores[0, 64:-1].sum() > 0.2 and (scores[0, 64:-1] > 0).sum() > 40
    with pytest.raises(cp.PRXAIError, match="graph='token' only"):
        cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model), graph="layered").attribute_long(ids)
