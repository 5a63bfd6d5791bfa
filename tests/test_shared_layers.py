"""Weight-shared attention (one module run at several depths): one graph layer per call, or a clear refusal."""

import pytest
import torch
from torch import nn

import captum_prxai as cp
from captum_prxai import PRXAIError
from conftest import eager_attentions_and_grads, recorded_attentions_and_grads


def _albert(groups: int = 1, inner: int = 1, depth: int = 4):
    from transformers import AlbertConfig, AlbertForSequenceClassification

    torch.manual_seed(0)
    config = AlbertConfig(vocab_size=60, embedding_size=16, hidden_size=32, num_hidden_layers=depth,
                          num_hidden_groups=groups, inner_group_num=inner, num_attention_heads=4,
                          intermediate_size=48, num_labels=2, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)
    return AlbertForSequenceClassification(config).eval()


def _ids():
    torch.manual_seed(1)
    return torch.randint(5, 60, (2, 7)), torch.ones(2, 7, dtype=torch.long)


@pytest.mark.parametrize("groups,inner,depth", [(1, 1, 4), (2, 1, 4), (1, 2, 3)])
def test_attention_layers_follows_albert_schedule(groups, inner, depth):
    model = _albert(groups, inner, depth)
    layers = cp.attention_layers(model)
    assert len(layers) == depth * inner
    assert len({id(m) for m in layers}) == groups * inner
    encoder = model.albert.encoder
    first = [m for m in encoder.albert_layer_groups[0].modules() if m in layers]
    assert layers[:inner] == first
    if groups == 2:  # depths 0-1 run group 0, depths 2-3 group 1
        second = [m for m in encoder.albert_layer_groups[1].modules() if m in layers]
        assert layers[2 * inner:3 * inner] == second and layers[inner:2 * inner] == first


@pytest.mark.parametrize("capture", ["recompute", "weights"])
def test_every_call_of_a_shared_module_is_its_own_layer(capture):
    """The maps of an ALBERT pass equal the eager attentions and gradients of each of its depths."""
    model = _albert(1, 1, 4)
    ids, mask = _ids()
    attentions, reference, _ = eager_attentions_and_grads(model, ids, mask, 1)
    assert len(attentions) == 4
    seen, _ = recorded_attentions_and_grads(model, ids, mask, 1, capture)
    assert sorted(seen) == [0, 1, 2, 3]
    for depth in range(4):
        attention, grad = seen[depth]
        assert torch.allclose(attention, attentions[depth], atol=1e-6)
        assert torch.allclose(grad, reference[depth], atol=1e-6)
    # the depths differ, so a graph built from one of them repeated would be wrong
    assert not torch.allclose(attentions[0], attentions[3], atol=1e-4)


def test_albert_scores_use_every_depth():
    model = _albert(1, 1, 4)
    ids, mask = _ids()
    forward = lambda x, m: model(input_ids=x, attention_mask=m).logits  # noqa: E731
    layers = cp.attention_layers(model)
    explained = cp.PRAttentionGradient(forward, layers, graph="layered").attribute_graph(
        ids, target=1, additional_forward_args=(mask,))
    assert explained.scores.shape == ids.shape and torch.isfinite(explained.scores).all()
    # one node layer per depth (plus the input layer), as for an unshared four-layer encoder
    assert int(explained.node_layer.max()) + 1 == 5
    token = cp.PRAttentionGradient(forward, layers).attribute(ids, target=1, additional_forward_args=(mask,))
    assert torch.allclose(token, cp.PRAttentionGradient(forward, layers).attribute_graph(
        ids, target=1, additional_forward_args=(mask,)).scores)


def test_a_shared_module_listed_fewer_times_than_it_runs_is_refused():
    model = _albert(1, 1, 4)
    ids, mask = _ids()
    forward = lambda x, m: model(input_ids=x, attention_mask=m).logits  # noqa: E731
    layer = cp.attention_layers(model)[0]
    for method in (cp.PRAttentionGradient, cp.PRAttention):
        with pytest.raises(PRXAIError, match=r"ran 4 times in one forward pass but is listed 1 time in layers"):
            method(forward, [layer]).attribute(ids, target=1, additional_forward_args=(mask,))
    # the hooks are gone after the refusal, and the model still runs
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.albert.encoder.modules())
    assert model(input_ids=ids).logits.shape == (2, 2)


class _Attention(nn.Module):
    """Single-head self-attention that returns ``(output, probabilities (B, 1, T, T))``."""

    def __init__(self, dim: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, h):
        q, k, v = (t[:, None] for t in self.qkv(h).chunk(3, dim=-1))  # (B, 1, T, D)
        probs = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
        return (probs @ v)[:, 0], probs  # the returned probabilities are the ones the output uses


class _Shared(nn.Module):
    """A toy encoder that runs one attention module three times (a hand-made weight-shared model)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(30, 16)
        self.attention = _Attention(16)
        self.head = nn.Linear(16, 2)

    def forward(self, ids):
        h = self.embed(ids)
        for _ in range(3):
            h = h + self.attention(h)[0]
        return self.head(h.mean(1))


def _weights(module, args, kwargs, output):
    return output[1]


def test_a_custom_shared_module_needs_one_entry_per_call():
    model = _Shared().eval()
    ids = torch.randint(0, 30, (1, 6))
    with pytest.raises(PRXAIError, match=r"ran 3 times .* listed 1 time .*layers = \[module\] \* 3"):
        cp.PRAttentionGradient(model, [model.attention], attention_fn=_weights).attribute(ids, target=0)
    scores = cp.PRAttentionGradient(model, [model.attention] * 3, attention_fn=_weights).attribute(ids, target=0)
    assert scores.shape == (1, 6) and torch.isfinite(scores).all() and (scores != 0).any()
    # listed more often than it runs: the missing layer is named
    with pytest.raises(PRXAIError, match=r"Layers \[3\] of 4 produced no attention map"):
        cp.PRAttentionGradient(model, [model.attention] * 4, attention_fn=_weights).attribute(ids, target=0)
