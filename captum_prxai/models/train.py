"""Fine-tune an encoder into a sequence classifier on one of the offline datasets.

The recipe is fully seeded (data order, initialisation, dropout), runs on CPU,
reports held-out accuracy on the dataset's test split and writes a JSON model
card next to the checkpoint in ``cache_dir("models", name)``. The card records
the CPU kernels that trained the model (:func:`~captum_prxai.models._cpu.cpu_numerics`):
repeated on one machine the weights are bit-identical; on other machines they
can round differently, because PyTorch picks its kernels by the CPU it finds.
``pin_kernels=True`` (``captum-prxai train --pin-kernels``) pins those choices
to AVX2 (``benchmarks/results/train_reproducibility.md``).
"""

from __future__ import annotations

import json
import platform
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from captum_prxai._cache import cache_dir
from captum_prxai.exceptions import PRXAIError


@dataclass
class TrainConfig:
    """Hyper-parameters of :func:`train_classifier`.

    Attributes:
        method: ``"lora"`` (low-rank updates of attention/MLP linears, full
            pooler and classifier) or ``"full"`` (all weights).
        epochs: Passes over the training split.
        batch_size: Examples per step.
        lr: Peak learning rate (linear warm-up then linear decay).
        weight_decay: AdamW weight decay (not applied to biases/LayerNorm/LoRA A/B).
        warmup: Fraction of steps used for warm-up.
        max_length: Wordpiece budget (longer texts are truncated); ``None`` picks
            the dataset's suggestion (64 sentences, 512 documents).
        lora_rank: Rank ``r`` of the low-rank updates.
        lora_alpha: Scale numerator (update is ``alpha / r * B A``).
        seed: Seed for data order, initialisation and dropout.
        max_train: Use only the first ``max_train`` training examples (``None``: all).
        max_test: Evaluate on the first ``max_test`` test examples (``None``: all).
        max_steps: Stop after this many optimisation steps (``None``: all epochs).
        threads: ``torch.set_num_threads`` value during training.
        pin_kernels: Refuse to train unless the CPU kernels are pinned to AVX2
            (:data:`~captum_prxai.models._cpu.PINNED_ENV`, set before the
            process starts), so that AVX-512 kernels play no part in the
            weights. ``captum-prxai train --pin-kernels`` sets the pins.
    """

    method: str = "lora"
    epochs: float = 2.0
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup: float = 0.06
    max_length: int | None = None
    lora_rank: int = 16
    lora_alpha: float = 32.0
    seed: int = 0
    max_train: int | None = None
    max_test: int | None = None
    max_steps: int | None = None
    threads: int = 2
    pin_kernels: bool = False

    def validate(self) -> None:
        """Raise :class:`~captum_prxai.exceptions.PRXAIError` for any setting training cannot use.

        Every numeric setting is checked here, before a model is loaded or a
        folder is written.
        """
        if self.method not in ("lora", "full"):
            raise PRXAIError(f"unknown method {self.method!r}; use 'lora' or 'full'")

        def whole(name: str, least: int, optional: bool = False) -> None:
            value = getattr(self, name)
            if value is None and optional:
                return
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise PRXAIError(f"{_setting(name)} must be a whole number of at least {least}, got {value!r}")

        def number(name: str, low: float, high: float = float("inf"), low_ok: bool = False) -> None:
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
            if not ok or not ((low <= value) if low_ok else (low < value)) or not value < high:
                if high == float("inf"):
                    want = f"a number {'>=' if low_ok else '>'} {low:g}"
                else:
                    want = f"a number in {'[' if low_ok else '('}{low:g}, {high:g})"
                raise PRXAIError(f"{_setting(name)} must be {want}, got {value!r}")

        number("epochs", 0.0)
        whole("batch_size", 1)
        number("lr", 0.0)
        number("weight_decay", 0.0, low_ok=True)
        number("warmup", 0.0, 1.0, low_ok=True)
        whole("max_length", 1, optional=True)
        whole("lora_rank", 1)
        number("lora_alpha", 0.0)
        whole("seed", 0)
        whole("max_train", 1, optional=True)
        whole("max_test", 1, optional=True)
        whole("max_steps", 1, optional=True)
        whole("threads", 1)
        if not isinstance(self.pin_kernels, bool):
            raise PRXAIError(f"pin_kernels must be True or False, got {self.pin_kernels!r}")


def _setting(name: str) -> str:
    """``"batch_size"`` -> ``"batch_size (--batch-size)"``: the setting and its command-line flag."""
    return f"{name} (--{name.replace('_', '-')})"


@dataclass
class TrainResult:
    """What :func:`train_classifier` produced."""

    path: Path
    accuracy: float
    card: dict = field(default_factory=dict)
    adapter_path: Path | None = None


def _seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _batches(lengths: Sequence[int], batch_size: int, generator, pool: int = 50) -> list[list[int]]:
    """Seeded shuffled batches of similar-length texts (less padding, same data per epoch).

    Indices are shuffled, cut into pools of ``pool`` batches, sorted by length
    inside each pool, batched, and the batches are shuffled again.
    """
    import torch

    n = len(lengths)
    order = torch.randperm(n, generator=generator).tolist()
    batches = []
    step = batch_size * pool
    for start in range(0, n, step):
        chunk = sorted(order[start : start + step], key=lambda i: lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    perm = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in perm]


def evaluate(model, tokenizer, texts: Sequence[str], labels: Sequence[int], max_length: int,
             batch_size: int = 64) -> float:
    """Accuracy of ``model`` on ``texts`` (truncated to ``max_length`` wordpieces)."""
    import torch

    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            enc = tokenizer(list(texts[i : i + batch_size]), padding=True, truncation=True,
                            max_length=max_length, return_tensors="pt")
            pred = model(**enc).logits.argmax(-1)
            correct += int((pred == torch.tensor(labels[i : i + batch_size])).sum())
    return correct / max(len(texts), 1)


def _resolve_data(dataset):
    """``dataset`` is a name or a ``(train, test)`` pair of TextDataset."""
    from captum_prxai.data import load_dataset, suggested_max_length

    if isinstance(dataset, str):
        return dataset, load_dataset(dataset, "train"), load_dataset(dataset, "test"), \
            suggested_max_length(dataset)
    train, test = dataset
    return train.name, train, test, 64


def train_classifier(
    encoder: str | Path,
    dataset,
    name: str | None = None,
    config: TrainConfig | None = None,
    export_default: bool = False,
    progress: bool = True,
    out_dir: Path | None = None,
    overwrite: bool = False,
    **overrides,
) -> TrainResult:
    """Fine-tune ``encoder`` on ``dataset`` and save it as a sequence classifier.

    Args:
        encoder: Encoder name (``"minilm"``) or local folder with a BERT-like model.
        dataset: Dataset name (see :func:`captum_prxai.data.list_datasets`) or a
            ``(train, test)`` pair of :class:`~captum_prxai.data.TextDataset`.
        name: Folder name under ``cache_dir("models")`` (default ``<encoder>-<dataset>``).
        config: Hyper-parameters; keyword ``overrides`` replace single fields.
        export_default: Also write the low-rank adapter and model card into the
            package folder ``captum_prxai/models/default`` (needs ``method="lora"``).
        progress: Show a tqdm progress bar.
        out_dir: Save here instead of ``cache_dir("models", name)``.
        overwrite: Replace a model already saved in that folder (otherwise
            refused before training starts).

    The model is written into a temporary folder next to its destination and
    moved into place only once complete, so a failed or interrupted run
    leaves neither an empty folder nor a half-written model, and the model it
    replaces stays intact until then.

    Returns:
        :class:`TrainResult` with the checkpoint folder, held-out accuracy and card.

    Raises:
        PRXAIError: A bad setting, empty data, a ``max_length`` the encoder
            cannot take, an existing model without ``overwrite``, or
            ``pin_kernels`` without pinned kernels; all before training starts.
    """
    import torch

    from captum_prxai.models import _cpu, _lowrank
    from captum_prxai.models.load import DEFAULT_DIR, build_classifier, encoder_path

    cfg = config or TrainConfig()
    for key, value in overrides.items():
        if not hasattr(cfg, key):
            raise PRXAIError(f"unknown training setting {key!r}")
        setattr(cfg, key, value)
    cfg.validate()
    if export_default and cfg.method != "lora":
        raise PRXAIError("--export-default needs --method lora (the package ships a low-rank adapter)")
    if cfg.pin_kernels:
        problem = _cpu.pinning_problem()
        if problem:
            raise PRXAIError(problem)

    base_dir = encoder_path(encoder)
    ds_name, train, test, suggested = _resolve_data(dataset)
    max_length = cfg.max_length or suggested
    if cfg.max_train is not None:
        train = train[: cfg.max_train]
    if cfg.max_test is not None:
        test = test[: cfg.max_test]
    if len(train) == 0 or len(test) == 0:
        raise PRXAIError("empty training or test data")
    enc_name = str(encoder) if str(encoder) in _encoder_names() else Path(encoder).name
    name = name or f"{enc_name}-{ds_name}"
    if not out_dir and (not name.strip() or any(c in name for c in "/\\") or name in (".", "..")):
        raise PRXAIError(f"invalid model name {name!r}: use a plain folder name, without '/'")
    out = Path(out_dir) if out_dir else cache_dir("models", create=False) / name
    _check_destination(out, overwrite)

    old_threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    _seed_all(cfg.seed)
    t0 = time.time()
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
        _check_max_length(max_length, base_dir, tokenizer)
        model = build_classifier(base_dir, list(train.label_names))
        if cfg.method == "lora":
            _lowrank.add_lowrank(model, cfg.lora_rank, cfg.lora_alpha)
        trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        no_decay = ("bias", "LayerNorm", "lora_")
        groups = [
            {"params": [p for n, p in trainable if not any(k in n for k in no_decay)],
             "weight_decay": cfg.weight_decay},
            {"params": [p for n, p in trainable if any(k in n for k in no_decay)], "weight_decay": 0.0},
        ]
        opt = torch.optim.AdamW(groups, lr=cfg.lr)
        gen = torch.Generator().manual_seed(cfg.seed)
        steps_per_epoch = -(-len(train) // cfg.batch_size)
        total = int(round(cfg.epochs * steps_per_epoch))
        if cfg.max_steps is not None:
            total = min(total, cfg.max_steps)
        total = max(total, 1)
        warm = max(1, int(cfg.warmup * total))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))
        )
        from tqdm.auto import tqdm

        lengths = [len(t) for t in train.texts]
        bar = tqdm(total=total, desc=f"train {name}", disable=not progress, mininterval=2.0)
        step, loss_ema = 0, None
        model.train()
        while step < total:
            for idx in _batches(lengths, cfg.batch_size, gen):
                if step >= total:
                    break
                enc = tokenizer([train.texts[i] for i in idx], padding=True, truncation=True,
                                max_length=max_length, return_tensors="pt")
                y = torch.tensor([train.labels[i] for i in idx])
                loss = torch.nn.functional.cross_entropy(model(**enc).logits, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_([p for _, p in trainable], 1.0)
                opt.step()
                sched.step()
                step += 1
                lv = float(loss.detach())
                loss_ema = lv if loss_ema is None else 0.95 * loss_ema + 0.05 * lv
                bar.set_postfix(loss=f"{loss_ema:.3f}", refresh=False)
                bar.update(1)
        bar.close()
        train_seconds = time.time() - t0

        adapter_state = None
        if cfg.method == "lora":
            adapter_state = _lowrank.adapter_state(model)
            _lowrank.merge_lowrank(model)
        model.eval()
        accuracy = evaluate(model, tokenizer, test.texts, test.labels, max_length)
    finally:
        torch.set_num_threads(old_threads)

    import transformers

    card = {
        "name": name,
        "encoder": enc_name,
        "encoder_path": str(base_dir),
        "dataset": ds_name,
        "train_split": train.split,
        "eval_split": test.split,
        "n_train": len(train),
        "n_eval": len(test),
        "label_names": list(train.label_names),
        "max_length": max_length,
        "accuracy": round(accuracy, 4),
        "train_seconds": round(train_seconds, 1),
        "steps": total,
        "hyperparameters": asdict(cfg),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "cpu": _cpu.cpu_numerics(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    _save(model, tokenizer, card, out)
    result = TrainResult(path=out, accuracy=accuracy, card=card)

    if export_default:
        from safetensors.torch import save_file

        DEFAULT_DIR.mkdir(parents=True, exist_ok=True)
        adapter = DEFAULT_DIR / "adapter.safetensors"
        save_file(adapter_state, str(adapter),
                  metadata={"captum_prxai": json.dumps({"encoder": enc_name, "dataset": ds_name})})
        from captum_prxai.models.load import load_default

        model2, tok2 = load_default()
        card["exported_accuracy"] = round(
            evaluate(model2, tok2, test.texts, test.labels, max_length), 4)
        card["adapter_bytes"] = adapter.stat().st_size
        (DEFAULT_DIR / "model_card.json").write_text(json.dumps(card, indent=2))
        (out / "model_card.json").write_text(json.dumps(card, indent=2))
        result.adapter_path = adapter
    return result


def _has_model(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def _check_destination(out: Path, overwrite: bool) -> None:
    """Refuse to replace a saved model without ``overwrite``, and a destination that is not a folder."""
    if out.exists() and not out.is_dir():
        raise PRXAIError(f"cannot save the model to {out}: it is a file")
    if _has_model(out) and not overwrite:
        raise PRXAIError(f"a model is already saved in {out}; pass --overwrite (overwrite=True) to replace it, "
                         "or choose another --name")


def _check_max_length(max_length: int, base_dir: Path, tokenizer) -> None:
    """The wordpiece budget must keep one real token and fit the encoder's positions."""
    from transformers import AutoConfig

    from captum_prxai._tokenize import max_input_length

    least = tokenizer.num_special_tokens_to_add(pair=False) + 1
    if max_length < least:
        raise PRXAIError(f"max_length {max_length} is too short: inputs need at least {least} tokens "
                         "(the special tokens and one word)")
    limit = max_input_length(AutoConfig.from_pretrained(str(base_dir), local_files_only=True), tokenizer)
    if limit is not None and max_length > limit:
        raise PRXAIError(f"max_length {max_length} is more than the encoder accepts ({limit} tokens)")


def _save(model, tokenizer, card: dict, out: Path) -> None:
    """Write the model, tokenizer and card into a temporary folder beside ``out``, then move it into place."""
    import shutil
    import tempfile

    from captum_prxai.models.load import _quiet_transformers

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    old = out.parent / f".{out.name}.replaced"
    try:
        with _quiet_transformers():  # no "Writing model shards" bar
            model.save_pretrained(str(tmp))
            tokenizer.save_pretrained(str(tmp))
        (tmp / "model_card.json").write_text(json.dumps(card, indent=2))
        if out.exists():
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out.exists():
            old.rename(out)  # put back the model this run was to replace
        raise
    shutil.rmtree(old, ignore_errors=True)


def _encoder_names() -> list[str]:
    from captum_prxai.models.load import ENCODERS

    return list(ENCODERS)
