"""Reliability of the Python API: no silent wrong scores, clear errors, state always restored, thread safety.

The table below holds the API's bad inputs; the command line's and the files' live in
tests/test_cli_errors.py and tests/test_reliability_bench.py. Every row checks the error class, a phrase
of its message, and that the model is left exactly as it was (hooks, attention setting, grad mode,
parameters, train/eval mode, SDPA).
"""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
import torch.nn.functional as F

import captum_prxai as cp
from captum_prxai import hooks
from conftest import VOCAB, _tiny, forward_for


def snapshot(model: torch.nn.Module) -> dict:
    return dict(
        hooks=sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
                  + len(m._backward_pre_hooks) for m in model.modules()),
        impl=model.config._attn_implementation,
        grad=torch.is_grad_enabled(),
        params=[(n, p.requires_grad, float(p.detach().double().sum())) for n, p in model.named_parameters()],
        training=[m.training for m in model.modules()],
        sdpa=F.scaled_dot_product_attention is hooks._SDPA,
        recorders=len(hooks._active_recorders()),
    )


def _ids(batch=2, length=9, seed=0):
    return torch.randint(2, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def _pr(model, cls=None, **kwargs):
    return (cls or cp.PRGradient)(forward_for(model), cp.attention_layers(model), **kwargs)


def _nan_logits(model):
    def forward(input_ids, attention_mask=None):
        return model(input_ids, attention_mask=attention_mask).logits * float("nan")

    return forward


def _poisoned_edges(value):
    """An edge weight that is the attention everywhere but one entry, which is ``value``."""
    def edge(attention, grad):
        out = attention.clone()
        out[..., -1, -1] = value
        return out

    return edge


def _detached(model):
    def forward(input_ids, attention_mask=None):
        return model(input_ids, attention_mask=attention_mask).logits.detach()

    return forward


def _sentence_pair():
    ids = _ids()
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    return ids, types, torch.ones_like(ids)


def _in_inference_mode(model):
    with torch.inference_mode():
        _pr(model).attribute(_ids(), target=1)


def _meta_model(model):
    with torch.device("meta"):
        meta = _tiny("bert")
    cp.PRGradient(forward_for(meta), cp.attention_layers(meta)).attribute(_ids(), target=1)


ROWS = [
    # inputs
    ("inputs-list", lambda m: _pr(m).attribute([[2, 3, 4]]), "inputs must be a tensor"),
    ("inputs-1d", lambda m: _pr(m).attribute(torch.tensor([2, 3, 4])), "token ids of shape (B, T)"),
    ("inputs-empty", lambda m: _pr(m).attribute(torch.zeros(1, 0, dtype=torch.long)), "inputs is empty"),
    ("inputs-bool", lambda m: _pr(m).attribute(torch.ones(1, 4, dtype=torch.bool)), "token ids of shape"),
    ("ids-negative", lambda m: _pr(m).attribute(torch.tensor([[2, -1, 4]])), "outside this model's vocabulary"),
    ("ids-out-of-vocab", lambda m: _pr(m).attribute(torch.tensor([[2, VOCAB, 4]])), "outside this model's vocab"),
    ("too-long", lambda m: _pr(m).attribute(_ids(1, 70)), "accepts at most 64"),
    ("embeddings-4d", lambda m: _pr(m).attribute(torch.rand(1, 2, 3, 4)), "embeddings of shape (B, T, D)"),
    # targets
    ("target-string", lambda m: _pr(m).attribute(_ids(), target="positive"), "got the string 'positive'"),
    ("target-bool", lambda m: _pr(m).attribute(_ids(), target=True), "got the bool True"),
    ("target-float", lambda m: _pr(m).attribute(_ids(), target=torch.tensor([1.0, 0.0])), "one int per example"),
    ("target-out-of-range", lambda m: _pr(m).attribute(_ids(), target=5), "out of range"),
    ("target-negative", lambda m: _pr(m).attribute(_ids(), target=-1), "out of range"),
    ("target-wrong-length", lambda m: _pr(m).attribute(_ids(), target=[1, 1, 1]), "one int per example (2)"),
    ("target-list-of-str", lambda m: _pr(m).attribute(_ids(), target=["a", "b"]), "one int per example"),
    # masks
    ("mask-shape", lambda m: _pr(m).attribute(_ids(), attention_mask=torch.ones(2, 8)), "they must match"),
    ("mask-values", lambda m: _pr(m).attribute(_ids(), attention_mask=torch.full((2, 9), 2)), "only 0 (padding)"),
    ("mask-all-zero", lambda m: _pr(m).attribute(_ids(), attention_mask=torch.zeros(2, 9)), "no real token"),
    ("mask-not-tensor", lambda m: _pr(m).attribute(_ids(), attention_mask=[[1] * 9] * 2), "must be a tensor"),
    ("mask-ambiguous", lambda m: _pr(m).attribute(_sentence_pair()[0],
                                                  additional_forward_args=_sentence_pair()[1:]),
     "Several arguments could be the padding mask"),
    ("internal-batch-size-0", lambda m: _pr(m).attribute(_ids(), internal_batch_size=0), "internal_batch_size"),
    # options, all checked at construction
    ("edge-weight-name", lambda m: _pr(m, cp.PageRankAttribution, edge_weight="grad"), "Unknown edge_weight"),
    ("edge-weight-none", lambda m: _pr(m, cp.PageRankAttribution, edge_weight=lambda a, g: None).attribute(_ids()),
     "returned NoneType"),
    ("edge-weight-bht", lambda m: _pr(m, cp.PageRankAttribution, edge_weight=lambda a, g: a.sum(-1)).attribute(
        _ids()), "returned shape (2, 2, 9)"),
    ("damping-1", lambda m: _pr(m, damping=1.0), "damping"),
    ("damping-str", lambda m: _pr(m, damping="0.7"), "damping"),
    ("tol-0", lambda m: _pr(m, tol=0), "tol must be a positive"),
    ("tol-negative", lambda m: _pr(m, tol=-1.0), "tol must be a positive"),
    ("max-iter-0", lambda m: _pr(m, max_iter=0), "max_iter"),
    ("teleport-name", lambda m: _pr(m, teleport="cls"), "Unknown teleport"),
    ("teleport-negative", lambda m: _pr(m, teleport=torch.tensor([-1.0] * 9)), "non-negative"),
    ("teleport-shape", lambda m: _pr(m, teleport=torch.ones(5)).attribute(_ids()), "teleport tensor must have"),
    ("graph-name", lambda m: _pr(m, graph="tree"), "Unknown graph"),
    ("residual-1", lambda m: _pr(m, residual=1.0), "residual"),
    ("head-reduction", lambda m: _pr(m, head_reduction="median"), "head_reduction"),
    ("target-position-name", lambda m: _pr(m, target_position="middle"), "target_position must be"),
    ("target-position-bool", lambda m: _pr(m, target_position=True), "target_position must be"),
    ("target-position-99", lambda m: _pr(m, target_position=99).attribute(_ids()), "outside the 9 input positions"),
    ("capture-name", lambda m: _pr(m, capture="fast"), "capture must be"),
    ("sink-name", lambda m: _pr(m, sink="yes"), "sink must be"),
    ("pad-token-id-str", lambda m: _pr(m, pad_token_id="0"), "pad_token_id must be an int"),
    ("layers-empty", lambda m: cp.PRGradient(forward_for(m), []), "layers is empty"),
    ("layers-not-modules", lambda m: cp.PRGradient(forward_for(m), ["layer"]), "must be a torch.nn.Module"),
    ("forward-not-callable", lambda m: cp.PRGradient(m.config, cp.attention_layers(m)), "forward_func must be callable"),
    # the model's output
    ("inference-mode", _in_inference_mode, "inference_mode"),
    ("detached-logits", lambda m: cp.PRGradient(_detached(m), cp.attention_layers(m)).attribute(_ids(), target=1),
     "do not depend on the attention maps"),
    ("nan-logits-pr", lambda m: cp.PRGradient(_nan_logits(m), cp.attention_layers(m)).attribute(_ids(), target=1),
     "NaN or infinite logits"),
    ("nan-logits-raw", lambda m: cp.RawAttention(_nan_logits(m), cp.attention_layers(m)).attribute(_ids(), target=1),
     "NaN or infinite logits"),
    ("nan-logits-rollout", lambda m: cp.AttentionRollout(_nan_logits(m), cp.attention_layers(m)).attribute(
        _ids(), target=1), "NaN or infinite logits"),
    ("nan-logits-gae", lambda m: cp.GradientWeightedRollout(_nan_logits(m), cp.attention_layers(m)).attribute(
        _ids(), target=1), "NaN or infinite logits"),
    # edge weights that return NaN or infinities: refused, through the running sum and the per-layer maps
    *[(f"edge-{name}-{graph}", lambda m, v=value, g=graph: cp.PageRankAttribution(
        forward_for(m), cp.attention_layers(m), edge_weight=_poisoned_edges(v), graph=g).attribute(_ids(), target=1),
       "The captured attention maps contain NaN or infinite values")
      for name, value in (("nan", float("nan")), ("inf", float("inf")), ("minus-inf", float("-inf")))
      for graph in ("token", "layered")],
    ("forward-returns-str", lambda m: cp.PRGradient(lambda x: "logits", cp.attention_layers(m)).attribute(_ids()),
     "must return a tensor of logits"),
    ("forward-returns-3d", lambda m: cp.PRGradient(lambda x: m(x).logits[:, None], cp.attention_layers(m)).attribute(
        _ids()), "must return logits of shape"),
    ("meta-device", _meta_model, "meta device"),
    # long texts
    ("long-float-ids", lambda m: _pr(m).attribute_long(_ids(1, 80).float(), window=32), "integer token ids"),
    ("long-window-too-big", lambda m: _pr(m).attribute_long(_ids(1, 80), window=128), "accepts at most 64"),
    ("long-layered", lambda m: _pr(m, graph="layered").attribute_long(_ids(1, 80), window=32), "graph='token' only"),
    ("long-stride", lambda m: _pr(m).attribute_long(_ids(1, 80), window=32, stride=100), "stride must be between"),
]


@pytest.mark.parametrize("name,call,phrase", ROWS, ids=[r[0] for r in ROWS])
def test_bad_api_input_gives_a_clear_error_and_leaves_the_model_as_it_was(name, call, phrase, tiny_model_factory):
    model = tiny_model_factory("bert")
    before = snapshot(model)
    with pytest.raises(cp.PRXAIError) as info:
        call(model)
    assert phrase in str(info.value)
    assert snapshot(model) == before


def test_the_table_is_large():
    assert len(ROWS) >= 40


def test_encoder_decoder_models_are_refused_with_the_way_out():
    import transformers as tf

    config = tf.T5Config(d_model=16, d_kv=8, num_heads=2, num_layers=1, d_ff=32, vocab_size=VOCAB,
                         decoder_start_token_id=0)
    model = tf.T5ForSequenceClassification(config)
    with pytest.raises(cp.PRXAIError, match=r"get_encoder\(\)"):
        cp.attention_layers(model)
    assert len(cp.attention_layers(model.get_encoder())) == 1  # self-attention only, no cross-attention


# -- masks: never guessed by position ---------------------------------------------------------------


def test_token_type_ids_before_the_mask_are_not_taken_for_padding(tiny_model_factory):
    model = tiny_model_factory("bert")

    def forward(input_ids, token_type_ids, attention_mask):
        return model(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask).logits

    ids, types, mask = _sentence_pair()
    pr = cp.PRGradient(forward, cp.attention_layers(model))
    explicit = pr.attribute(ids, target=1, additional_forward_args=(types, mask), attention_mask=mask)
    assert (explicit[:, :5] > 0).all() and pr.mask_source_ == "attention_mask"  # first segment, [CLS] included
    # a single sentence: token_type_ids all zero cannot be a mask, so the real mask is found
    single = pr.attribute(ids, target=1, additional_forward_args=(torch.zeros_like(ids), mask))
    assert pr.mask_source_ == "additional_forward_args[1]" and torch.isclose(single.sum(-1), torch.ones(2)).all()


def test_a_float_mask_is_honoured(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    pr = _pr(model)
    scores = pr.attribute(ids, target=1, additional_forward_args=(mask.float(),))
    assert torch.equal(scores[1, 6:], torch.zeros(3)) and pr.mask_source_ == "additional_forward_args[0]"
    assert torch.allclose(scores, pr.attribute(ids, target=1, additional_forward_args=(mask,)))


def test_pad_ids_without_a_mask_warn_or_become_the_mask(tiny_model_factory, tiny_batch):
    model = tiny_model_factory("bert")
    ids, mask = tiny_batch  # example 1 is padded with id 0, the config's pad id

    def closure(input_ids):  # the mask lives in the closure and never reaches the attribution
        return model(input_ids, attention_mask=mask).logits

    with pytest.warns(cp.PRXAIWarning, match="pad id 0 at 3 position"):
        leaky = cp.PRGradient(closure, cp.attention_layers(model)).attribute(ids, target=1)
    assert leaky[1, 6:].sum() > 0  # what the warning is about
    fixed = cp.PRGradient(closure, cp.attention_layers(model), pad_token_id=0).attribute(ids, target=1)
    assert torch.equal(fixed[1, 6:], torch.zeros(3))
    reference = _pr(model).attribute(ids, target=1, additional_forward_args=(mask,))
    assert torch.allclose(fixed, reference, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cp.PRGradient(closure, cp.attention_layers(model)).attribute(ids[:1], target=1)  # no pad id: no warning


def test_training_mode_warns(tiny_model_factory):
    model = _tiny("bert").train()
    with pytest.warns(cp.PRXAIWarning, match="training mode"):
        _pr(model).attribute(_ids(), target=1)
    assert model.training


# -- threads --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["bert", "mpnet", "llama"])
def test_four_threads_on_one_model_give_the_serial_results(kind, tiny_model_factory):
    model = tiny_model_factory(kind)
    layers = cp.attention_layers(model)
    inputs = [_ids(2, 10, seed) for seed in range(10)]
    shared = cp.PRGradient(forward_for(model), layers)
    serial = [shared.attribute(x, target=1) for x in inputs]
    before = snapshot(model)
    results: dict = {}
    errors: list = []

    def work(thread: int) -> None:
        try:  # half the threads share one attribution, the others have their own
            method = shared if thread % 2 == 0 else cp.PRAttentionGradient(forward_for(model), layers)
            for i, x in enumerate(inputs):
                results[thread, i] = (method.attribute(x, target=1), method.edge_weight)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(repr(err))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    other = [cp.PRAttentionGradient(forward_for(model), layers).attribute(x, target=1) for x in inputs]
    for (thread, i), (scores, edge) in results.items():
        assert torch.allclose(scores, serial[i] if edge == "gradient" else other[i], atol=1e-6)
    assert len(results) == 40
    assert snapshot(model) == before


def test_threads_on_different_models_do_not_see_each_others_hooks(tiny_model_factory):
    bert, llama = tiny_model_factory("bert"), tiny_model_factory("llama")
    x = _ids(2, 10)
    expected = {"bert": _pr(bert).attribute(x, target=1), "llama": _pr(llama).attribute(x, target=1)}
    got: dict = {}

    def work(name, model):
        got[name] = [_pr(model).attribute(x, target=1) for _ in range(5)]

    threads = [threading.Thread(target=work, args=item) for item in (("bert", bert), ("llama", llama))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in expected:
        assert all(torch.allclose(s, expected[name], atol=1e-6) for s in got[name])


@pytest.mark.parametrize("kind", ["bert", "mpnet", "llama"])
@pytest.mark.parametrize("where", ["forward", "backward"])
def test_an_interrupt_mid_pass_leaves_the_model_as_it_was(kind, where, tiny_model_factory):
    model = tiny_model_factory(kind)
    before = snapshot(model)
    calls = {"n": 0}

    def forward(input_ids):
        logits = model(input_ids).logits
        if where == "forward":
            raise KeyboardInterrupt
        calls["n"] += 1

        def boom(grad):
            raise KeyboardInterrupt

        logits.register_hook(boom)
        return logits

    with pytest.raises(KeyboardInterrupt):
        cp.PRGradient(forward, cp.attention_layers(model)).attribute(_ids(), target=1)
    assert snapshot(model) == before
    assert torch.allclose(_pr(model).attribute(_ids(), target=1).sum(-1), torch.ones(2), atol=1e-5)
