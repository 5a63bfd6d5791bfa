"""Reliability of the core library and the command line, third round (issue 64).

Frozen models give the scores of unfrozen ones, a fp16 model's gradient methods agree with fp32, and the
inputs, options and situations below get a one-line error (a ``PRXAIError`` in the library; one line on
stderr and exit status 2 in the command line) instead of a traceback or a silently wrong result.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import captum_prxai as cp
from captum_prxai.exceptions import PRXAIError
from captum_prxai.methods import MethodContext, available_methods, build_method, make_forward_func
from conftest import ARCHITECTURES, VOCAB, _tiny, forward_for

#: cheap settings for the sampling methods, so that every registered method runs on a tiny model in seconds
_CHEAP = {"ig": {"n_steps": 8}, "shapley": {"n_samples": 2}, "kernel-shap": {"n_samples": 16},
          "lime": {"n_samples": 16}}


def _model(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return _tiny(kind).eval()


def _batch(batch: int = 2, length: int = 7):
    ids = torch.randint(2, VOCAB, (batch, length), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    ids[1, 5:] = 0
    special = torch.zeros_like(ids)
    special[:, 0] = 1
    return ids, mask, special, torch.tensor([1, 2])


def _scores(name: str, model: torch.nn.Module) -> torch.Tensor:
    ids, mask, special, target = _batch()
    explainer = build_method(name, model, make_forward_func(model),
                             MethodContext(pad_token_id=0, mask_token_id=3, options=_CHEAP))
    torch.manual_seed(5)  # the sampling methods draw from torch's generator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return explainer(ids, mask, special, target).detach()


# -- silent wrong result 1: frozen models ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["bert", "llama"])
@pytest.mark.parametrize("frozen", ["all", "embeddings"])
def test_frozen_parameters_give_the_scores_of_an_unfrozen_model_for_every_method(kind, frozen):
    """``model.requires_grad_(False)`` (an evaluation script) or frozen embeddings (a LoRA base) change nothing.

    The hidden states entering the first layer used to be detached from the residual path in a frozen model,
    so the gradient x input (the relevance weight, ``teleport="input_gradient"``) lost the residual's share.
    """
    model = _model(kind)
    unfrozen = {name: _scores(name, model) for name in available_methods()}
    parameters = model.parameters() if frozen == "all" else model.get_input_embeddings().parameters()
    flags_before = [(n, p.requires_grad) for n, p in model.named_parameters()]
    for parameter in parameters:
        parameter.requires_grad_(False)
    flags_frozen = [(n, p.requires_grad) for n, p in model.named_parameters()]
    try:
        for name in available_methods():
            assert torch.allclose(_scores(name, model), unfrozen[name], atol=1e-6, rtol=0), (kind, frozen, name)
        # the library left every flag as it found it
        assert [(n, p.requires_grad) for n, p in model.named_parameters()] == flags_frozen
    finally:
        for (_, flag), parameter in zip(flags_before, model.parameters()):
            parameter.requires_grad_(flag)
    assert [(n, p.requires_grad) for n, p in model.named_parameters()] == flags_before


@pytest.mark.parametrize("kind", ARCHITECTURES)
def test_a_frozen_model_gives_the_default_scores_on_every_architecture(kind):
    """The default (and PR-G) on each tiny architecture: post-norm encoders, MPNet's own attention, decoders."""
    from captum_prxai.methods import default_method

    model = _model(kind)
    names = (default_method(model), "pr-g")
    unfrozen = [_scores(name, model) for name in names]
    model.requires_grad_(False)
    try:
        for name, expected in zip(names, unfrozen):
            assert torch.allclose(_scores(name, model), expected, atol=1e-6, rtol=0), (kind, name)
    finally:
        model.requires_grad_(True)


def test_a_frozen_pass_leaves_the_callers_embeddings_unflagged():
    """The flag a frozen pass needs is put on the model's own tensor, never on the caller's inputs."""
    model = _model("bert")
    model.requires_grad_(False)
    try:
        ids, mask, _, target = _batch()
        embeddings = model.get_input_embeddings()(ids).detach()

        def forward(inputs_embeds, attention_mask):
            return model(inputs_embeds=inputs_embeds, attention_mask=attention_mask).logits

        attribution = cp.PageRankAttribution(forward, cp.attention_layers(model), teleport="input_gradient")
        attribution.attribute(embeddings, target=target, additional_forward_args=(mask,), attention_mask=mask)
        assert not embeddings.requires_grad
    finally:
        model.requires_grad_(True)


# -- silent wrong result 5: fp16 gradients -----------------------------------------------------------------

#: fp16 vs fp32 tolerance on scores that sum to 1 per example: fp16 keeps 11 significant bits, so each rounding
#: of the forward pass moves an activation by up to u = 2**-11 (about 4.9e-4) of itself; the gradient-free PR-A
#: differs by about 3e-5 on these models, the gradient methods by at most 7e-4 (seven tiny architectures) once the
#: backward pass no longer underflows. 4u (about 2e-3) bounds that with room, and is 60 to 130 times below the
#: differences an underflowing backward pass gave (0.12 for the default, 0.26 for PR-G on the tiny BERT).
_FP16_TOLERANCE = 4 * 2.0**-11


@pytest.mark.parametrize("kind", ["bert", "llama"])
@pytest.mark.parametrize("name", ["pr-xai", "pr-a", "pr-g", "pr-ag", "pr-tag", "gae"])
def test_fp16_scores_agree_with_fp32_on_a_small_logit_model(kind, name):
    model = _model(kind)
    ids, mask, _, _ = _batch()
    with torch.no_grad():  # small logits: the case that underflowed
        assert float(model(ids, attention_mask=mask).logits.abs().max()) < 0.1
    half = copy.deepcopy(model).half()
    full, low = _scores(name, model), _scores(name, half)
    assert torch.isfinite(low).all()
    assert float((full - low.float()).abs().max()) <= _FP16_TOLERANCE, name


@pytest.mark.parametrize("kind", ARCHITECTURES)
def test_fp16_default_scores_agree_with_fp32_on_every_architecture(kind):
    from captum_prxai.methods import default_method

    model = _model(kind)
    name = default_method(model)
    low = _scores(name, copy.deepcopy(model).half())
    assert float((_scores(name, model) - low.float()).abs().max()) <= _FP16_TOLERANCE


def test_the_loss_scale_brings_small_logits_up_and_leaves_fp32_and_bf16_alone():
    from captum_prxai.capture import LOSS_SCALE_TARGET, loss_scale

    model = _model("bert")
    layers = cp.attention_layers(model)
    ids = torch.zeros(1, 3, dtype=torch.long)
    logits = torch.tensor([[0.01, -0.003]])
    assert loss_scale(logits, layers, ids) == 1.0  # fp32
    assert loss_scale(logits.bfloat16(), layers, ids) == 1.0  # bf16: fp32's exponent range
    half = copy.deepcopy(model).half()
    scale = loss_scale(logits.half(), cp.attention_layers(half), ids)
    assert 2.0 ** (LOSS_SCALE_TARGET - 1) <= scale * 0.01 <= 2.0**LOSS_SCALE_TARGET
    assert loss_scale(torch.tensor([[1000.0]]).half(), cp.attention_layers(half), ids) == 1.0  # never below 1


def test_a_gradient_that_overflows_under_the_scale_runs_the_pass_again_with_a_smaller_one():
    """Tiny outputs with large gradients: the first scale overflows fp16; a smaller one gives fp32's scores."""
    model = _model("bert")
    half = copy.deepcopy(model).half()
    ids, mask, _, target = _batch()
    calls = []

    def steep(network):
        def forward(input_ids, attention_mask):
            calls.append(1)
            logits = network(input_ids, attention_mask=attention_mask).logits
            # values of 2**-10 (so a large scale), gradients 2**14 times the logits' (so that scale overflows)
            return 2.0**14 * (logits - logits.detach()) + 2.0**-10

        return forward

    def pr_g(network):
        attribution = cp.PRGradient(steep(network), cp.attention_layers(network))
        return attribution.attribute(ids, target=target, additional_forward_args=(mask,), attention_mask=mask)

    expected = pr_g(model)
    calls.clear()
    scores = pr_g(half)
    assert len(calls) >= 2  # the first pass overflowed and was run again, with smaller scales
    assert torch.isfinite(scores).all()
    assert float((scores - expected).abs().max()) <= _FP16_TOLERANCE


# -- the library's unclear errors --------------------------------------------------------------------------


def _snapshot(model: torch.nn.Module) -> dict:
    from test_reliability import snapshot

    return snapshot(model)


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_gradient_checkpointing_in_train_mode_is_one_clear_error(kind):
    """Hugging Face checkpoints its layers in training mode: the backward pass would run each layer again."""
    model = _tiny(kind)
    (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    model.train()
    before = _snapshot(model)
    ids, mask, _, target = _batch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dropout in training mode warns, as it should
        with pytest.raises(PRXAIError, match="gradient checkpointing") as caught:
            cp.PRGradient(forward_for(model), cp.attention_layers(model)).attribute(
                ids, target=target, additional_forward_args=(mask,), attention_mask=mask)
        assert "model.eval()" in str(caught.value)
        assert _snapshot(model) == before
        model.eval()  # the advice works
        scores = cp.PRGradient(forward_for(model), cp.attention_layers(model)).attribute(
            ids, target=target, additional_forward_args=(mask,), attention_mask=mask)
    assert torch.isfinite(scores).all()


def test_a_layer_run_without_gradients_in_training_mode_names_both_causes():
    """The first pass of a re-entrant checkpoint runs the layers under no_grad, as no_grad in forward_func does."""
    model = _tiny("bert").train()

    def forward(input_ids, attention_mask=None):
        with torch.no_grad():
            return model(input_ids, attention_mask=attention_mask).logits

    ids, mask, _, target = _batch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(PRXAIError, match="ran without gradients: gradient checkpointing") as caught:
            cp.PRGradient(forward, cp.attention_layers(model)).attribute(ids, target=target, attention_mask=mask)
    assert "torch.no_grad() inside forward_func" in str(caught.value)


def _embeddings_forward(model):
    def forward(inputs, attention_mask=None):
        if inputs.is_floating_point():
            return model(inputs_embeds=inputs, attention_mask=attention_mask).logits
        return model(input_ids=inputs, attention_mask=attention_mask).logits

    return forward


@pytest.mark.parametrize("case, phrase", [
    ("uint8-ids", "Token ids of dtype torch.uint8 cannot index"),
    ("fp64-embeddings", "are torch.float64 but the model's weights are torch.float32"),
    ("narrow-embeddings", "are 12 wide but this model's input embeddings are 16 wide"),
])
def test_inputs_the_model_cannot_take_are_one_clear_error(case, phrase):
    model = _model("bert")
    ids, mask, _, target = _batch()
    inputs = {
        "uint8-ids": ids.to(torch.uint8),
        "fp64-embeddings": model.get_input_embeddings()(ids).detach().double(),
        "narrow-embeddings": torch.rand(2, ids.shape[1], 12),
    }[case]
    before = _snapshot(model)
    with pytest.raises(PRXAIError, match=phrase):
        cp.PRGradient(_embeddings_forward(model), cp.attention_layers(model)).attribute(
            inputs, target=target, additional_forward_args=(mask,), attention_mask=mask)
    assert _snapshot(model) == before


def test_a_forward_func_that_converts_its_inputs_itself_is_not_refused():
    """The checks above speak only once the model has failed: ``make_forward_func`` casts ids to long."""
    model = _model("bert")
    ids, mask, _, target = _batch()
    attribution = cp.PRGradient(make_forward_func(model), cp.attention_layers(model))
    small = attribution.attribute(ids.to(torch.uint8), target=target, additional_forward_args=(mask,),
                                  attention_mask=mask)
    assert torch.equal(small, attribution.attribute(ids, target=target, additional_forward_args=(mask,),
                                                    attention_mask=mask))


def test_attribute_inside_forward_func_is_refused_as_re_entrant_use():
    model, other = _model("bert"), _model("llama")
    ids, mask, _, target = _batch()
    inner_same = cp.PRGradient(forward_for(model), cp.attention_layers(model))
    inner_other = cp.PRGradient(forward_for(other), cp.attention_layers(other))
    inner = []

    def nested(attribution):
        def forward(input_ids, attention_mask=None):
            inner.append(attribution.attribute(input_ids, target=1, attention_mask=attention_mask))
            return model(input_ids, attention_mask=attention_mask).logits

        return forward

    before = _snapshot(model)
    with pytest.raises(PRXAIError, match="re-entrant use") as caught:
        cp.PRGradient(nested(inner_same), cp.attention_layers(model)).attribute(
            ids, target=target, additional_forward_args=(mask,), attention_mask=mask)
    assert "ALBERT" not in str(caught.value)
    assert _snapshot(model) == before
    # another model inside forward_func is no re-entrant use
    scores = cp.PRGradient(nested(inner_other), cp.attention_layers(model)).attribute(
        ids, target=target, additional_forward_args=(mask,), attention_mask=mask)
    assert torch.isfinite(scores).all() and len(inner) == 1
    assert torch.equal(scores, cp.PRGradient(forward_for(model), cp.attention_layers(model)).attribute(
        ids, target=target, additional_forward_args=(mask,), attention_mask=mask))


@pytest.mark.parametrize("metric", ["comprehensiveness", "sufficiency", "deletion_curve", "aopc", "log_odds",
                                    "accuracy_after_removal", "evaluate_faithfulness"])
def test_deletion_metrics_refuse_an_example_with_no_token(metric):
    from captum_prxai import metrics

    model = _model("bert")
    ids, mask, special, _ = _batch()
    mask[1] = 0  # the second example has no token at all
    scores = torch.rand(ids.shape)
    with pytest.raises(PRXAIError, match="attention_mask row 1 is all zero"):
        getattr(metrics, metric)(make_forward_func(model), ids, mask, special, scores, torch.tensor([1, 2]))


# -- the command line's unclear errors ---------------------------------------------------------------------


def _cli(capsys, *argv):
    from captum_prxai.cli import main

    code = main([*map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_line(code: int, err: str, command: str, phrase: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"captum-prxai {command}: error: ")
    assert phrase in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def cpu_only_torch(monkeypatch):
    """PyTorch as a CPU-only build sees it, whatever this machine has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "texts.csv"
    path.write_text("text\na good film\na dull film\n", encoding="utf-8")
    return path


def _device_argv(command: str, device: str, corpus, out) -> list:
    if command == "attribute-dataset":
        return [command, corpus, "-o", out, "--model", "/nonexistent", "--device", device]
    if command == "benchmark":
        return [command, "--model", "/nonexistent", "--out", out, "--device", device]
    return [command, "--device", device]


@pytest.mark.parametrize("command", ["attribute-dataset", "benchmark", "bench-speed"])
@pytest.mark.parametrize("device, phrase", [
    ("cuda", "device 'cuda' was asked for, but this PyTorch"),
    ("cuda:1", "device 'cuda:1' was asked for"),
    ("tpu", "unknown device 'tpu'; use cpu, cuda"),
    ("gpu0", "unknown device 'gpu0'"),
])
def test_a_device_this_torch_cannot_use_is_one_line_before_any_work(capsys, tmp_path, corpus, cpu_only_torch,
                                                                     command, device, phrase):
    out = tmp_path / "out"
    code, _, err = _cli(capsys, *_device_argv(command, device, corpus, out))
    line = _one_line(code, err, command, phrase)
    assert "use cpu" in line
    assert not out.exists()


def test_check_device_accepts_the_devices_this_torch_has():
    from captum_prxai._checks import check_device

    assert check_device("cpu") == torch.device("cpu")
    if torch.cuda.is_available():
        assert check_device("cuda").type == "cuda"
    else:
        with pytest.raises(PRXAIError, match="use cpu"):
            check_device("cuda")


@pytest.mark.parametrize("stride", ["0", "-4"])
def test_window_stride_below_one_is_one_line(capsys, tmp_path, corpus, stride):
    out = tmp_path / "out"
    code, _, err = _cli(capsys, "attribute-dataset", corpus, "-o", out, "--model", "/nonexistent",
                        "--long", "windows", "--window-stride", stride)
    _one_line(code, err, "attribute-dataset", f"--window-stride must be a positive number of tokens, got {stride}")
    assert not out.exists()


def test_a_model_that_is_a_file_is_not_offered_a_training_command(capsys, tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    code, _, err = _cli(capsys, "explain", "a good film", "--model", passwd)
    line = _one_line(code, err, "explain", f"no model '{passwd}': it is a file, not a checkpoint folder")
    assert "--name" not in line and "Train one" not in line


def test_a_model_folder_or_path_that_is_not_a_checkpoint_says_what_is_missing(capsys, tmp_path):
    code, _, err = _cli(capsys, "explain", "a good film", "--model", tmp_path)
    line = _one_line(code, err, "explain", "the folder has no config.json, so it is not a checkpoint")
    assert "--name" not in line
    (tmp_path / "config.json").write_text("{}")
    code, _, err = _cli(capsys, "explain", "a good film", "--model", tmp_path)
    _one_line(code, err, "explain", "the folder has no weights (model.safetensors or pytorch_model.bin)")
    code, _, err = _cli(capsys, "explain", "a good film", "--model", tmp_path / "missing" / "model")
    line = _one_line(code, err, "explain", "no such folder")
    assert "--name" not in line


def test_an_unknown_model_name_is_offered_the_training_command_on_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no folder of that name here
    code, _, err = _cli(capsys, "explain", "a good film", "--model", "my-sentiment")
    _one_line(code, err, "explain", "Train one with: captum-prxai train --encoder minilm --dataset movie-sentences "
                                    "--name my-sentiment")


def test_control_bytes_and_nul_in_an_error_are_escaped_not_echoed(capsys, tmp_path):
    # a text whose bytes the terminal could not decode (Python's surrogateescape), with an escape sequence
    code, _, err = _cli(capsys, "explain", "good \udcff\x1b[31m film", "--model", tmp_path / "unused")
    line = _one_line(code, err, "explain", "the text is not valid in the terminal's encoding")
    assert "\x1b" not in err and "\\x1b[31m" in line and "\\xff" in line
    # a path with an escape sequence and one with NUL, quoted by the messages as given
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file")
    code, _, err = _cli(capsys, "explain", "a good film", "--html", f"{blocker}/\x1b[2J\x07/why.html")
    line = _one_line(code, err, "explain", "cannot make its folder")
    assert "\x1b" not in err and "\x07" not in err and "\\x1b[2J\\x07" in line
    code, _, err = _cli(capsys, "explain", "a good film", "--json", tmp_path / "a\x00b.json")
    line = _one_line(code, err, "explain", "a file name cannot hold a NUL byte")
    assert "\x00" not in err and "a\\x00b.json" in line


def test_printable_escapes_only_what_a_terminal_would_act_on():
    from captum_prxai.commands._output import printable

    assert printable("café — naïve 🙂 ok") == "café — naïve 🙂 ok"
    assert printable("a\x00b\x1b[0m\r\n\t\x7f\x9b\udcfe") == "a\\x00b\\x1b[0m\\x0d\\x0a\\x09\\x7f\\x9b\\xfe"
    assert printable("line one\nline two", newlines=True) == "line one\nline two"
