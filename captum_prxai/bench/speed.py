"""Speed and memory of PR-XAI next to one forward, one forward + backward, and Integrated Gradients.

Every measurement runs in this one process, on the same model and inputs:

* ``forward``: one plain forward pass (the model's default attention, no gradients);
* ``forward+backward``: forward and ``backward()`` with parameter gradients, as in training;
* the attribution methods, by their benchmark names (``pr-ag``, ``pr-a``, ``gae``, ``ig`` = LIG-50,
  its interpolation steps run in chunks of about 8k tokens).

For each sequence length and batch size it reports the median wall time over
``repeats`` runs (after one warm-up), the ratio to ``forward+backward``, and the
peak memory above the starting level (:class:`~captum_prxai.bench._memory.PeakMemory`).
Settings whose attention maps would not fit in memory are reported as skipped,
with the estimate, instead of being run.
"""

from __future__ import annotations

import gc
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
from torch import nn

from captum_prxai._cache import write_atomic
from captum_prxai.attr._base import attention_memory_bytes, available_memory_bytes
from captum_prxai.bench._memory import PeakMemory, peak_rss_bytes, reset_peak_rss, rss_bytes
from captum_prxai.methods import IG_DEFAULTS, MethodContext, build_method, make_forward_func

__all__ = ["SpeedRow", "SpeedSettings", "run_speed_benchmark", "speed_table"]

BASELINES = ("forward", "forward+backward")


@dataclass
class SpeedSettings:
    lengths: Sequence[int] = (128, 512, 2048, 4096)
    batch_sizes: Sequence[int] = (1, 16)
    methods: Sequence[str] = ("pr-ag", "pr-a", "gae", "ig")
    repeats: int = 3
    ig_steps: int = IG_DEFAULTS["n_steps"]
    #: skip a method when one call is predicted to take longer than this (seconds)
    max_seconds_per_call: float = 300.0
    device: str = "cpu"
    #: measure CPU peak memory in a fresh process per cell (RSS sampling in one process misses reuse)
    memory_subprocess: bool = True


@dataclass
class SpeedRow:
    model: str
    length: int
    batch: int
    method: str
    median_s: Optional[float]
    peak_mib: Optional[float]
    note: str = ""
    ratio: Optional[float] = field(default=None)


#: The architectures :func:`config_model` builds: the shapes of MiniLM-L6 and of MPNet-base.
CONFIG_ARCHITECTURES = ("minilm", "mpnet")


def config_model(architecture: str, length: int) -> nn.Module:
    """A randomly initialised classifier of MiniLM-L6's or MPNet-base's shape, with positions for ``length`` tokens.

    For speed and memory only (the weights are random): MiniLM is a BERT of 6
    layers, 384 wide, 12 heads; MPNet 12 layers, 768 wide, 12 heads. The
    position limit is lifted to ``length`` on the config (at least the
    models' own 512), so long inputs run without their weights files.
    """
    from transformers import BertConfig, BertForSequenceClassification, MPNetConfig, MPNetForSequenceClassification

    torch.manual_seed(0)
    if architecture == "minilm":
        config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                            intermediate_size=1536, max_position_embeddings=max(length, 512), num_labels=2)
        return BertForSequenceClassification(config).eval()
    if architecture == "mpnet":  # MPNet offsets its positions by the padding index + 1
        config = MPNetConfig(vocab_size=30527, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                             intermediate_size=3072, max_position_embeddings=max(length, 512) + 2, num_labels=2)
        return MPNetForSequenceClassification(config).eval()
    raise ValueError(f"architecture must be one of {CONFIG_ARCHITECTURES}, got {architecture!r}")


def _long_config_model(length: int) -> nn.Module:
    """A MiniLM-sized BERT (6 layers, 384 wide, 12 heads) with enough positions, randomly initialised."""
    return config_model("minilm", length)


def _minilm() -> nn.Module:
    from transformers import AutoModelForSequenceClassification

    from captum_prxai.models import encoder_path

    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_pretrained(str(encoder_path("minilm")), num_labels=2).eval()


def time_call(fn: Callable[[], object], repeats: int, device: torch.device) -> tuple[float, float]:
    fn()  # warm-up
    times, peak = [], 0
    for _ in range(repeats):
        with PeakMemory(device) as memory:
            start = time.perf_counter()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - start)
        peak = max(peak, memory.peak_bytes)
    return statistics.median(times), peak / 2**20


def method_calls(length: int, batch: int, settings: SpeedSettings, model: Optional[nn.Module] = None):
    """Model, inputs and the callable of every method, for one (length, batch) cell."""
    device = torch.device(settings.device)
    if model is None:
        model = (_minilm() if length <= 512 else _long_config_model(max(max(settings.lengths), length))).to(device)
    forward = make_forward_func(model)
    # LIG expands every example into ig_steps copies; chunk them to about 8k tokens per pass so long
    # inputs fit in memory (all 50 steps of a 2048-token input at once need > 16 GB)
    ig_chunk = max(1, 8192 // length)
    context = MethodContext(pad_token_id=0, mask_token_id=103,
                            options={"ig": {"n_steps": settings.ig_steps, "internal_batch_size": ig_chunk}})
    generator = torch.Generator().manual_seed(length + batch)
    ids = torch.randint(1000, 29000, (batch, length), generator=generator).to(device)
    ids[:, 0], ids[:, -1] = 101, 102
    mask = torch.ones_like(ids)
    special = torch.zeros_like(ids)
    special[:, 0] = special[:, -1] = 1
    target = torch.ones(batch, dtype=torch.long, device=device)

    def plain_forward() -> object:
        with torch.no_grad():
            return model(ids, attention_mask=mask).logits

    def forward_backward() -> object:
        model.zero_grad(set_to_none=True)
        model(ids, attention_mask=mask).logits[:, 1].sum().backward()
        model.zero_grad(set_to_none=True)
        return None

    calls: dict[str, Callable[[], object]] = {"forward": plain_forward, "forward+backward": forward_backward}
    for method in settings.methods:
        explainer = build_method(method, model, forward, context)
        calls[method] = lambda e=explainer: e(ids, mask, special, target)
    return model, calls


def child_peak_memory(method: str, length: int, batch: int, threads: int = 1) -> int:
    """Peak resident memory above the level before one call of ``method``, in a process of its own.

    ``ru_maxrss`` only grows, so each measurement needs a fresh process: the
    model and inputs are built first, then one call runs.
    """
    torch.set_num_threads(threads)
    settings = SpeedSettings(lengths=(length,), batch_sizes=(batch,),
                             methods=tuple(m for m in (method,) if m not in BASELINES))
    _, calls = method_calls(length, batch, settings)
    gc.collect()
    reset_peak_rss()
    before = rss_bytes() or 0
    calls[method]()
    return max(0, peak_rss_bytes() - before)


def peak_in_subprocess(method: str, length: int, batch: int, threads: int = 1) -> tuple[Optional[float], str]:
    """:func:`child_peak_memory` in a fresh Python process: ``(peak MiB or None, why it failed or "")``.

    The child imports the very ``captum_prxai`` this process runs (its folder
    goes first on the child's path), not whichever copy the current folder or
    ``PYTHONPATH`` would give it, so a before/after comparison measures the
    package it names.
    """
    import captum_prxai

    root = str(Path(captum_prxai.__file__).resolve().parent.parent)
    code = (f"import sys; sys.path.insert(0, {root!r}); from captum_prxai.bench.speed import child_peak_memory; "
            f"print(child_peak_memory({method!r}, {int(length)}, {int(batch)}, {int(threads)}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit status {done.returncode}"
        return None, f"failed: {why if len(why) <= 500 else why[:499] + '…'}"
    return int(done.stdout.strip().splitlines()[-1]) / 2**20, ""


def run_speed_benchmark(settings: SpeedSettings, progress: Callable[[str], None] = print) -> list[SpeedRow]:
    """Time every (length, batch, method) of ``settings``; returns one row each."""
    device = torch.device(settings.device)
    rows: list[SpeedRow] = []
    models: dict[str, nn.Module] = {}
    for length in settings.lengths:
        name = "minilm-l6" if length <= 512 else "bert-config-l6"
        for batch in settings.batch_sizes:
            model, calls = method_calls(length, batch, settings, models.get(name))
            models = {name: model}
            layers = sum(1 for _ in model.modules() if type(_).__name__ == "BertSelfAttention")
            need = attention_memory_bytes(batch, length, layers, model.config.num_attention_heads, 4)
            free = available_memory_bytes(device)
            base_time: Optional[float] = None
            for method in (*BASELINES, *settings.methods):
                label = f"T={length} B={batch} {method}"
                if method in ("pr-ag", "pr-a", "pr-g", "gae", "rollout", "raw-attention") and free is not None \
                        and need > 0.8 * free:
                    rows.append(SpeedRow(name, length, batch, method, None, None,
                                         f"skipped: attention maps need ~{need / 2**30:.1f} GiB, "
                                         f"{free / 2**30:.1f} GiB available"))
                    progress(f"{label}: {rows[-1].note}")
                    continue
                if method == "ig" and base_time is not None:
                    predicted = base_time * settings.ig_steps * 1.3
                    if predicted > settings.max_seconds_per_call:
                        rows.append(SpeedRow(name, length, batch, method, None, None,
                                             f"skipped: predicted {predicted:.0f} s per call"))
                        progress(f"{label}: {rows[-1].note}")
                        continue
                repeats = 1 if method == "ig" else settings.repeats
                median, peak = time_call(calls[method], repeats, device)
                if settings.memory_subprocess and device.type == "cpu":
                    peak, _why = peak_in_subprocess(method, length, batch, torch.get_num_threads())
                if method == "forward+backward":
                    base_time = median
                rows.append(SpeedRow(name, length, batch, method, median, peak))
                progress(f"{label}: {median:.3f} s, peak {peak if peak is not None else float('nan'):.0f} MiB")
            _set_ratios(rows, length, batch, "median_s")
    return rows


def run_memory_benchmark(settings: SpeedSettings, progress: Callable[[str], None] = print) -> list[SpeedRow]:
    """Peak memory only (one fresh process per cell), for every (length, batch, method) of ``settings``."""
    rows: list[SpeedRow] = []
    for length in settings.lengths:
        name = "minilm-l6" if length <= 512 else "bert-config-l6"
        for batch in settings.batch_sizes:
            for method in (*BASELINES, *settings.methods):
                peak, note = peak_in_subprocess(method, length, batch, torch.get_num_threads())
                rows.append(SpeedRow(name, length, batch, method, None, peak, note))
                progress(f"T={length} B={batch} {method}: peak {peak if peak is not None else float('nan'):.0f} MiB")
            _set_ratios(rows, length, batch, "peak_mib")
    return rows


def _set_ratios(rows: list[SpeedRow], length: int, batch: int, field: str) -> None:
    """Each row's ``field`` relative to forward+backward's, within one (length, batch) cell."""
    cell = [r for r in rows if r.length == length and r.batch == batch]
    base = next((getattr(r, field) for r in cell if r.method == "forward+backward"), None)
    for r in cell:
        if getattr(r, field) is not None and base:
            r.ratio = getattr(r, field) / base


def speed_table(rows: Sequence[SpeedRow], settings: SpeedSettings, command: str) -> str:
    """Markdown: medians, ratios to forward+backward, and peak memory."""
    threads = torch.get_num_threads()
    device = settings.device
    if device.startswith("cuda") and torch.cuda.is_available():
        hardware = torch.cuda.get_device_name(0)
    else:
        hardware = f"{platform.processor() or platform.machine()}, {threads} torch thread(s)"
    memory_only = all(r.median_s is None for r in rows)
    measured = ("`ratio` is peak memory / that of forward + backward with parameter gradients (default attention)."
                if memory_only else
                f"Median of {settings.repeats} runs after a warm-up (LIG: one run). `ratio` is time / (forward + "
                "backward with parameter gradients, default attention).")
    lines = [
        f"# {'Peak memory' if memory_only else 'Speed and memory'} ({device})",
        "",
        f"Reproduce: `{command}`",
        "",
        f"Hardware: {hardware}; torch {torch.__version__}. {measured} "
        "Peak memory is the growth of resident memory during one call, each measured in a fresh process with "
        "the high-water mark reset after loading (on GPU: the CUDA allocator's peak).",
        "",
        "| model | T | B | method | median (s) | ratio to fwd+bwd | peak memory (MiB) | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        med = "" if r.median_s is None else f"{r.median_s:.3f}"
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}×"
        peak = "" if r.peak_mib is None else f"{r.peak_mib:.0f}"
        lines.append(f"| {r.model} | {r.length} | {r.batch} | {r.method} | {med} | {ratio} | {peak} | {r.note} |")
    return "\n".join(lines) + "\n"


def write_results(rows: Sequence[SpeedRow], settings: SpeedSettings, out: Path, command: str) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(out, speed_table(rows, settings, command))
