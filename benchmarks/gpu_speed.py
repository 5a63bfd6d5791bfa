"""The GPU table of PR-XAI's cost: PR-A, PR-G, PR-AG, PR-TAG and the default against one forward+backward.

One prepared script for a lent GPU (issue 19): MiniLM-L6 and MPNet-base shapes (randomly initialised, so no
weights travel; :func:`captum_prxai.bench.speed.config_model` lifts their position limits on the config) at
512, 4096 and 16384 tokens, batch 1 and 32, bf16 and fp32. Every cell times one forward+backward pass with
parameter gradients (the model's default fused attention, the baseline) and each method through the same
callables as the CPU tables (:func:`captum_prxai.bench.speed.method_calls`), after a warm-up, with the device
synchronised; peak memory is the CUDA allocator's peak above the level before the call
(:class:`~captum_prxai.bench._memory.PeakMemory`). LIG-50 (Captum's LayerIntegratedGradients) is timed once
per length at batch 1, for its ratio to PR-AG and to the default. Cells the memory estimate refuses, or that run out of memory,
are rows with a note, not failures.

Rows are appended to ``<out>.jsonl`` as they are measured, and ``<out>.md`` is rewritten after every cell,
so a run stopped by its time limit still returns what it measured. ``--budget-s`` stops starting cells after
that many seconds (the cells left are listed as not run). The cells run in the order of the options, so
put first what matters most.

On the device machine (torch and transformers are there; captum is not, so its wheel travels in ``.whl``)::

    python3 -m pip download --no-deps --only-binary=:all: -d .whl captum==0.9.0   # here, once
    # there (carry .whl):
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:.
    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_speed.py --out $OUT/speed_gpu --budget-s 420

On CPU the same script runs for a check (``--device cpu``, small lengths); CPU tables come from
``benchmarks/capture_speed.py``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' own modules
from research_methods import register_research_methods, research_default  # noqa: E402

register_research_methods()  # the research variants the tables name (idempotent)

#: Attention layers of each shape (:func:`captum_prxai.bench.speed.config_model`), which pick its default.
DEPTHS = {"minilm": 6, "mpnet": 12}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
BASELINE = "forward+backward"


def _cells(args: argparse.Namespace) -> list[tuple[str, str, int, int]]:
    return [(m, d, t, b) for m in args.models.split(",") for d in args.dtypes.split(",")
            for t in (int(x) for x in args.lengths.split(",")) for b in (int(x) for x in args.batch_sizes.split(","))]


def _error_note(err: BaseException) -> str:
    from captum_prxai.exceptions import PRXAIError

    if isinstance(err, PRXAIError):
        return "refused: " + str(err).split(";")[0][:160]
    if isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in str(err).lower():
        return "out of memory"
    return f"failed: {type(err).__name__}: {str(err)[:160]}"


def measure_cell(architecture: str, dtype: str, length: int, batch: int, methods: Sequence[str], repeats: int,
                 device: torch.device, lig: bool, model_cache: dict) -> list[dict]:
    """One cell's rows: the baseline, then every method (and LIG-50 when ``lig``), each timed ``repeats`` times."""
    from captum_prxai.bench.speed import SpeedSettings, time_call, method_calls, config_model

    key = (architecture, dtype, length)
    if key not in model_cache:
        model_cache.clear()  # one model on the device at a time
        if device.type == "cuda":
            torch.cuda.empty_cache()
        model_cache[key] = config_model(architecture, length).to(device=device, dtype=DTYPES[dtype])
    model = model_cache[key]
    timed = [resolve_method(m, model) for m in methods] + (["ig"] if lig else [])
    settings = SpeedSettings(lengths=(length,), batch_sizes=(batch,), methods=tuple(timed), repeats=repeats,
                             device=str(device), memory_subprocess=False)
    rows: list[dict] = []
    base: Optional[float] = None
    try:
        _, calls = method_calls(length, batch, settings, model)
    except Exception as err:  # noqa: BLE001 - a cell that cannot be built is a row, not the end of the run
        return [dict(model=architecture, dtype=dtype, length=length, batch=batch, method=BASELINE, seconds=None,
                     ratio=None, peak_mib=None, note=_error_note(err))]
    for method in (BASELINE, *timed):
        row = dict(model=architecture, dtype=dtype, length=length, batch=batch, method=method, seconds=None,
                   ratio=None, peak_mib=None, note="")
        try:
            seconds, peak = time_call(calls[method], 1 if method == "ig" else repeats, device)
            row.update(seconds=seconds, peak_mib=peak)
            if method == BASELINE:
                base = seconds
                row["ratio"] = 1.0
            elif base:
                row["ratio"] = seconds / base
        except Exception as err:  # noqa: BLE001 - refusals and out-of-memory are results of the cell
            row["note"] = _error_note(err)
            if device.type == "cuda":
                torch.cuda.empty_cache()
        rows.append(row)
    return rows


def resolve_method(method: str, model: torch.nn.Module) -> str:
    """``"default"`` is the method :class:`~captum_prxai.PageRankAttribution` runs on ``model`` by default."""
    return research_default(model) if method == "default" else method


def open_device(name: str) -> Optional[torch.device]:
    """The device to measure on, with TF32 off (fp32 means fp32); ``None``, after saying why, without CUDA."""
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda, but torch sees no CUDA device; pass --device cpu for a check run",
              file=sys.stderr)
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return device


def _fmt(value: Optional[float], spec: str) -> str:
    return "" if value is None else format(value, spec)


def write_table(path: Path, rows: Sequence[dict], header: str) -> Path:
    """The Markdown table of ``rows``, then LIG-50's cost as a multiple of PR-AG's and the default's."""

    lines = [header, "", "| model | dtype | T | B | method | median (s) | ratio to fwd+bwd | peak memory (MiB) | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['dtype']} | {r['length']} | {r['batch']} | {r['method']} | "
                     f"{_fmt(r['seconds'], '.4f')} | {_fmt(r['ratio'], '.2f')}{'×' if r['ratio'] else ''} | "
                     f"{_fmt(r['peak_mib'], '.0f')} | {r['note']} |")
    by = {(r["model"], r["dtype"], r["length"], r["batch"], r["method"]): r for r in rows}
    lig = [k for k in by if k[4] == "ig" and by[k]["seconds"]]
    if lig:
        lines += ["", "LIG-50 against PR-AG and the model's default (the same cell, batch 1; blank where that method "
                  "was not timed):", "", "| model | dtype | T | LIG-50 (s) | ratio to fwd+bwd | LIG-50 ÷ PR-AG | "
                  "default | LIG-50 ÷ default |", "|---|---|---|---|---|---|---|---|"]
        for k in lig:
            default = research_default(depth=DEPTHS[k[0]]) if k[0] in DEPTHS else ""
            ratios = []
            for method in ("pr-ag", default):
                other = by.get(k[:4] + (method,))
                ratio = by[k]["seconds"] / other["seconds"] if other and other["seconds"] else None
                ratios.append(f"{_fmt(ratio, '.1f')}{'×' if ratio else ''}")
            lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {by[k]['seconds']:.3f} | {_fmt(by[k]['ratio'], '.1f')}× | "
                         f"{ratios[0]} | {default} | {ratios[1]} |")
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--models", default="minilm,mpnet")
    p.add_argument("--dtypes", default="bf16,fp32")
    p.add_argument("--lengths", default="512,4096,16384")
    p.add_argument("--batch-sizes", default="1,32")
    p.add_argument("--methods", default="pr-a,pr-g,pr-ag,pr-tag,default",
                   help="methods to time; 'default' is the model's default (PR-TAG± by depth)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--no-lig", action="store_true", help="skip LIG-50 (timed at batch 1 of every length)")
    p.add_argument("--tile-bytes", type=int, default=None,
                   help="per-head tile budget of the capture (default: 256 MiB on CUDA, the library's elsewhere)")
    p.add_argument("--budget-s", type=float, default=None, help="start no cell after this many seconds")
    p.add_argument("--out", required=True, help="path stem: writes <out>.jsonl and <out>.md")
    args = p.parse_args(argv)

    from captum_prxai.hooks import current_tile_bytes, tile_budget

    device = open_device(args.device)
    if device is None:
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    jsonl, md = out.with_suffix(".jsonl"), out.with_suffix(".md")
    jsonl.write_text("")
    tile = args.tile_bytes or (256 * 2**20 if device.type == "cuda" else current_tile_bytes())
    hardware = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine()
    command = "python3 benchmarks/gpu_speed.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    header = (f"# PR-XAI on {hardware}: time and peak memory against one forward+backward\n\n"
              f"Command: `{command}`\n\ntorch {torch.__version__}; tile budget {tile / 2**20:.0f} MiB; "
              f"median of {args.repeats} runs after a warm-up (LIG-50: one run); ratio = time / forward+backward "
              "(parameter gradients, the model's default fused attention) in the same cell; peak memory above "
              "the level before the call (CUDA: the allocator's peak). Models of MiniLM-L6's and MPNet-base's "
              "shape, randomly initialised, position limits lifted on the config.")
    rows: list[dict] = []
    start = time.perf_counter()
    models: dict = {}
    lig_done: set = set()
    with tile_budget(tile):
        for architecture, dtype, length, batch in _cells(args):
            if args.budget_s is not None and time.perf_counter() - start > args.budget_s:
                new = [dict(model=architecture, dtype=dtype, length=length, batch=batch, method="(all)",
                            seconds=None, ratio=None, peak_mib=None, note="not run: time budget")]
            else:
                lig = not args.no_lig and batch == 1 and (architecture, dtype, length) not in lig_done
                lig_done.add((architecture, dtype, length))
                new = measure_cell(architecture, dtype, length, batch, args.methods.split(","), args.repeats,
                                   device, lig, models)
            rows += new
            with jsonl.open("a") as f:
                for r in new:
                    f.write(json.dumps(r) + "\n")
            write_table(md, rows, header)
            done = ", ".join(f"{r['method']} {_fmt(r['ratio'], '.2f') or r['note'] or 'base'}" for r in new)
            print(f"[{time.perf_counter() - start:6.0f} s] {architecture} {dtype} T={length} B={batch}: {done}",
                  flush=True)
    print(f"wrote {md} and {jsonl}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
