"""More Hugging Face architectures: each is captured exactly as it runs, or refused with a message.

Each model is a tiny random one built from its config. On real query rows and
real keys, the attention ``A`` and ``dy/dA`` the recorder hands over must
equal the model's own eager attentions and autograd's gradient for them, in
both capture modes, and the capture must not change the model's logits.
"""

import pytest
import torch

import captum_prxai as cp
from captum_prxai import PRXAIError
from conftest import eager_attentions_and_grads, recorded_attentions_and_grads

V = 60
_BASE = dict(vocab_size=V, num_labels=2, pad_token_id=0)
_ENCODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)
_DECODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=48, max_position_embeddings=64)


def _build(kind: str):
    import transformers as tf

    torch.manual_seed(0)
    if kind == "deberta-v2":  # relative attention; passes output_attentions positionally
        return tf.DebertaV2ForSequenceClassification(tf.DebertaV2Config(
            **_BASE, **_ENCODER, relative_attention=True, pos_att_type=["p2c", "c2p"], max_relative_positions=16,
            position_buckets=8))
    if kind == "deberta":
        return tf.DebertaForSequenceClassification(tf.DebertaConfig(
            **_BASE, **_ENCODER, relative_attention=True, pos_att_type=["p2c", "c2p"], max_relative_positions=16))
    if kind == "falcon":  # its own attention code, which reads config._attn_implementation
        return tf.FalconForSequenceClassification(tf.FalconConfig(**_BASE, hidden_size=32, num_hidden_layers=2,
                                                                  num_attention_heads=4))
    if kind == "falcon-alibi":
        return tf.FalconForSequenceClassification(tf.FalconConfig(**_BASE, hidden_size=32, num_hidden_layers=2,
                                                                  num_attention_heads=4, alibi=True))
    if kind == "bloom":
        return tf.BloomForSequenceClassification(tf.BloomConfig(**_BASE, hidden_size=32, n_layer=2, n_head=4))
    if kind == "modernbert":  # local (sliding) and global layers
        return tf.ModernBertForSequenceClassification(tf.ModernBertConfig(
            **_BASE, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48,
            local_attention=4, global_attn_every_n_layers=2, max_position_embeddings=64, bos_token_id=1,
            eos_token_id=2, cls_token_id=1, sep_token_id=2))
    if kind == "phi3":
        return tf.Phi3ForSequenceClassification(tf.Phi3Config(**_BASE, **_DECODER, bos_token_id=1, eos_token_id=2))
    if kind == "qwen3":
        return tf.Qwen3ForSequenceClassification(tf.Qwen3Config(**_BASE, **_DECODER, head_dim=8))
    if kind == "gpt-neox":
        return tf.GPTNeoXForSequenceClassification(tf.GPTNeoXConfig(
            **_BASE, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
            max_position_embeddings=64))
    if kind == "opt":
        return tf.OPTForSequenceClassification(tf.OPTConfig(
            **_BASE, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=48,
            max_position_embeddings=64, word_embed_proj_dim=32))
    raise ValueError(kind)


KINDS = ["deberta-v2", "deberta", "falcon", "falcon-alibi", "bloom", "modernbert", "phi3", "qwen3", "gpt-neox", "opt"]
#: decoders pad on the left, encoders on the right
_LEFT = {"falcon", "falcon-alibi", "bloom", "phi3", "qwen3", "gpt-neox", "opt"}


def _batch(kind: str):
    torch.manual_seed(1)
    ids = torch.randint(3, V, (2, 9))
    mask = torch.ones_like(ids)
    if kind in _LEFT:
        mask[1, :3] = 0
    else:
        mask[1, 6:] = 0
    return ids.masked_fill(mask == 0, 0), mask


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("capture", ["recompute", "weights"])
def test_captured_as_the_model_runs(kind, capture):
    model = _build(kind).eval()
    ids, mask = _batch(kind)
    attentions, reference, eager_logits = eager_attentions_and_grads(model, ids, mask, 1)
    seen, logits = recorded_attentions_and_grads(model, ids, mask, 1, capture)
    assert sorted(seen) == list(range(len(attentions)))
    real = mask.bool()[:, None, :, None] & mask.bool()[:, None, None, :]
    for i, ref in enumerate(reference):
        attention, grad = seen[i]
        assert attention.shape == attentions[i].shape
        keep = real.expand_as(attention)
        assert torch.allclose(attention[keep], attentions[i][keep], atol=1e-6), i
        assert torch.allclose(grad[keep], ref[keep], atol=1e-6), i
    # capturing must not change what the model computes
    assert torch.allclose(logits, eager_logits, atol=1e-5)


@pytest.mark.parametrize("kind", ["falcon", "deberta-v2"])
def test_default_attribution_runs_and_keeps_the_prediction(kind):
    model = _build(kind).eval()
    ids, mask = _batch(kind)
    forward = lambda x, m: model(input_ids=x, attention_mask=m).logits  # noqa: E731
    explained = cp.PageRankAttribution(forward, cp.attention_layers(model)).attribute_graph(
        ids, additional_forward_args=(mask,))
    assert torch.isfinite(explained.scores).all()
    assert torch.equal(explained.scores[mask == 0], torch.zeros(int((mask == 0).sum())))
    with torch.no_grad():
        assert torch.allclose(explained.logits, forward(ids, mask), atol=1e-5)


def test_encoder_decoder_models_are_refused_with_the_way_out():
    import transformers as tf

    model = tf.BartForSequenceClassification(tf.BartConfig(
        **_BASE, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=64))
    with pytest.raises(PRXAIError, match=r"attention_layers\(model.get_encoder\(\)\)"):
        cp.attention_layers(model)


def test_t5_encoder_hands_over_its_weights_not_its_position_bias():
    """T5's attention returns ``(output, position_bias, weights)``: two square 4-d tensors; the weights are taken."""
    import transformers as tf

    from captum_prxai.hooks import resolve_capture_mode

    torch.manual_seed(0)
    encoder = tf.T5EncoderModel(tf.T5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4,
                                            pad_token_id=0)).eval()
    head = torch.nn.Linear(32, 2)

    def forward(ids, mask):
        return head(encoder(input_ids=ids, attention_mask=mask).last_hidden_state.mean(1))

    ids, mask = _batch("t5")
    layers = cp.attention_layers(encoder)
    # its position bias is not modelled by the recomputing path, so "auto" uses the model's own weights
    assert resolve_capture_mode(layers, "auto") == "weights"
    previous = encoder.config._attn_implementation
    encoder.config._attn_implementation = "eager"
    try:
        out = encoder(ids, attention_mask=mask, output_attentions=True)
        logits = head(out.last_hidden_state.mean(1))
        reference = torch.autograd.grad(logits[:, 1].sum(), out.attentions)
    finally:
        encoder.config._attn_implementation = previous
    seen = {}

    def reduce(layer, attention, grad):
        seen[layer] = (attention.clone(), grad.clone())
        return grad.sum(1)

    with cp.AttentionRecorder(layers, reduce, with_gradients=True) as rec:
        again = forward(ids, mask)
        rec.backward(again[:, 1].sum())
    for i in range(2):
        assert torch.allclose(seen[i][0], out.attentions[i], atol=1e-6)
        assert torch.allclose(seen[i][1], reference[i], atol=1e-6)
    assert torch.allclose(again, logits, atol=1e-5)
    scores = cp.PageRankAttribution(forward, layers).attribute(ids, additional_forward_args=(mask,))
    assert torch.isfinite(scores).all() and torch.equal(scores[mask == 0], torch.zeros(int((mask == 0).sum())))


def test_banded_attention_is_refused_with_its_shape():
    """Longformer returns (B, T, H, window) banded weights: no token-to-token map, and the error says so."""
    import transformers as tf

    torch.manual_seed(0)
    model = tf.LongformerForSequenceClassification(tf.LongformerConfig(
        vocab_size=V, num_labels=2, pad_token_id=1, **_ENCODER, attention_window=[4, 4],
        max_position_embeddings=70)).eval()
    ids = torch.randint(3, V, (1, 8))
    forward = lambda x: model(input_ids=x).logits  # noqa: E731
    with pytest.raises(PRXAIError, match=r"LongformerSelfAttention returned a tensor of shape \(1, 8, 4, \d+\).*"
                                         r"banded or pooled attention"):
        cp.PRAttentionGradient(forward, cp.attention_layers(model)).attribute(ids, target=0)
