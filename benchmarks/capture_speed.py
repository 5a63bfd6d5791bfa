"""Time and peak memory of PR-A, PR-G and PR-AG as ratios to one forward+backward pass (issue 19).

Every cell (length ``T``, batch ``B``) uses the model, inputs and method
callables of :func:`captum_prxai.bench.speed.method_calls`: MiniLM-L6 up to 512
tokens, and beyond that a MiniLM-sized randomly initialised BERT config
(6 layers, 384 wide, 12 heads) with enough positions, as in
``benchmarks/results/speed_cpu_b1.md``. The baseline ``forward+backward`` is
one pass with parameter gradients and the model's default (fused SDPA)
attention.

* **Time**: after one warm-up of each callable, ``--repeats`` rounds run the
  baseline and every method one after another (round robin, so that the load
  of a shared machine hits them alike). Both the wall time and the CPU time
  of the process (``time.process_time``) are recorded; with one torch thread
  the CPU time is the compute time, and it does not count the time the
  process waits for a core, so on a shared machine it is the robust measure.
  The tables report medians and the ratio of medians.
* **Memory**: the growth of resident memory during one call, each cell in a
  fresh process with the high-water mark reset after loading
  (:func:`captum_prxai.bench.speed.child_peak_memory`).

A run writes JSON; ``table`` turns a "before" and an "after" run into the
Markdown tables committed under ``benchmarks/results/``::

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/capture_speed.py run --label after \\
        --lengths 128,512,2048,4096 --batch-sizes 1 --json /tmp/after_b1.json
    python benchmarks/capture_speed.py table --before /tmp/before_b1.json --after /tmp/after_b1.json \\
        --speed-out benchmarks/results/capture_speed_cpu.md --memory-out benchmarks/results/capture_memory_cpu.md

The "before" run is the same command with ``PYTHONPATH`` pointing at a copy of
the package from before the change (see ``docs/speed.md``).
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Optional

import torch

BASELINE = "forward+backward"
DEFAULT_METHODS = ("pr-a", "pr-g", "pr-ag", "pr-tag")


def _cells(lengths: str, batches: str) -> list[tuple[int, int]]:
    return [(int(t), int(b)) for t in lengths.split(",") for b in batches.split(",")]


def run(args: argparse.Namespace) -> dict:
    from captum_prxai.bench.speed import SpeedSettings, method_calls

    torch.set_num_threads(args.threads)
    methods = [m for m in args.methods.split(",") if m]
    lengths = sorted({t for t, _ in _cells(args.lengths, args.batch_sizes)})
    results: dict = {"label": args.label, "threads": args.threads, "torch": torch.__version__,
                     "machine": platform.machine(), "command": " ".join(shlex.quote(a) for a in sys.argv),
                     "cells": []}
    for length, batch in _cells(args.lengths, args.batch_sizes):
        model_name = "minilm-l6" if length <= 512 else "bert-config-l6"
        cell = {"model": model_name, "length": length, "batch": batch, "times": {}, "peak_mib": {}}
        if not args.memory_only:
            single = [m for m in args.single_run.split(",") if m and batch == 1]
            settings = SpeedSettings(lengths=tuple(lengths), batch_sizes=(batch,), methods=tuple(methods + single))
            _, calls = method_calls(length, batch, settings)
            names = [BASELINE, *methods]
            for name in names:
                calls[name]()  # warm-up
            times: dict[str, list[float]] = {name: [] for name in names + single}
            cpu: dict[str, list[float]] = {name: [] for name in names + single}
            for _ in range(args.repeats):
                for name in names:
                    start, start_cpu = time.perf_counter(), time.process_time()
                    calls[name]()
                    cpu[name].append(time.process_time() - start_cpu)
                    times[name].append(time.perf_counter() - start)
            for name in single:  # one call each: a LIG-50 call is itself 50+ forward+backward passes
                start, start_cpu = time.perf_counter(), time.process_time()
                calls[name]()
                cpu[name].append(time.process_time() - start_cpu)
                times[name].append(time.perf_counter() - start)
            cell["times"], cell["cpu"] = times, cpu
            del calls
            summary = ", ".join(f"{n} {statistics.median(cpu[n]):.3f}s cpu ({statistics.median(v):.3f}s wall)"
                                for n, v in times.items())
            print(f"[{args.label}] T={length} B={batch}: {summary}", flush=True)
        if not args.time_only:
            for name in (BASELINE, *methods):
                peak = _child_memory(name, length, batch, args.threads)
                cell["peak_mib"][name] = peak
                print(f"[{args.label}] T={length} B={batch} {name}: peak "
                      f"{'failed' if peak is None else f'{peak:.0f} MiB'}", flush=True)
        results["cells"].append(cell)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    return results


def _child_memory(method: str, length: int, batch: int, threads: int) -> Optional[float]:
    from captum_prxai.bench.speed import peak_in_subprocess

    peak, why = peak_in_subprocess(method, length, batch, threads)
    if peak is None:
        sys.stderr.write(f"{method} T={length} B={batch}: {why}\n")
    return peak


def _ratio(value: Optional[float], base: Optional[float]) -> str:
    return "" if value is None or not base else f"{value / base:.2f}×"


def _merge(runs: list[dict]) -> dict:
    """``(T, B) -> cell`` over several runs: time from the timing runs, peak memory from the memory runs.

    Timing runs of the same cell pool their rounds (the medians are then over all of them); a later memory
    run of a cell replaces an earlier one.
    """
    cells: dict = {}
    for run_ in runs:
        for c in run_["cells"]:
            cell = cells.setdefault((c["length"], c["batch"]), {"model": c["model"], "length": c["length"],
                                                                 "batch": c["batch"], "times": {}, "cpu": {},
                                                                 "peak_mib": {}})
            for kind in ("times", "cpu"):
                for method, rounds in (c.get(kind) or {}).items():
                    cell[kind].setdefault(method, []).extend(rounds)
            cell["peak_mib"].update(c.get("peak_mib") or {})
    return cells


def table(args: argparse.Namespace) -> None:
    before = json.loads(Path(args.before).read_text())
    after = json.loads(Path(args.after).read_text())
    extra_before = [json.loads(Path(p).read_text()) for p in args.more_before]
    extra_after = [json.loads(Path(p).read_text()) for p in args.more_after]
    cells_before = _merge([before, *extra_before])
    cells_after = _merge([after, *extra_after])
    keys = sorted(set(cells_before) & set(cells_after))
    commands = [r["command"] for r in [before, *extra_before]] + [r["command"] for r in [after, *extra_after]]
    table_command = " ".join(shlex.quote(a) for a in sys.argv)
    note = args.note or ""
    header = (
        f"Runs (the \"before\" ones with `PYTHONPATH` at the package copy from before the change):\n\n"
        + "\n".join(f"    {c}" for c in commands)
        + f"\n\nTable: `{table_command}`\n\n"
        f"Hardware: {platform.machine()}, {after['threads']} torch thread(s); torch {after['torch']}. {note}\n"
    )
    speed = ["# PR-XAI capture: time as a ratio to one forward+backward (cpu)", "", header,
             "Median CPU time of the rounds (one torch thread: the compute time, robust to the machine's load); "
             "ratio = method median / forward+backward median (parameter gradients, the model's default fused "
             "attention), in the same run. Wall-time ratios, noisier on a shared machine, in the last column.", "",
             "| model | T | B | method | before (s) | before ratio | after (s) | after ratio | speed-up | "
             "wall ratio before → after |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    memory = ["# PR-XAI capture: peak memory as a ratio to one forward+backward (cpu)", "", header,
              "Peak memory = growth of resident memory during one call, each in a fresh process with the "
              "high-water mark reset after loading; ratio = method / forward+backward.", "",
              "| model | T | B | method | before (MiB) | before ratio | after (MiB) | after ratio |",
              "|---|---|---|---|---|---|---|---|"]
    for key in keys:
        b, a = cells_before[key], cells_after[key]
        methods = [m for m in dict.fromkeys([*a["cpu"], *a["peak_mib"]]) if m in b["cpu"] or m in b["peak_mib"]]
        med = lambda cell, kind, name: (statistics.median(cell[kind][name])  # noqa: E731
                                        if cell.get(kind, {}).get(name) else None)
        for method in methods:
            tb, ta = med(b, "cpu", method), med(a, "cpu", method)
            base_b, base_a = med(b, "cpu", BASELINE), med(a, "cpu", BASELINE)
            if tb is not None and ta is not None:
                gain = "" if method == BASELINE else f"{tb / ta:.2f}×"
                wall = (f"{_ratio(med(b, 'times', method), med(b, 'times', BASELINE))} → "
                        f"{_ratio(med(a, 'times', method), med(a, 'times', BASELINE))}")
                speed.append(f"| {a['model']} | {key[0]} | {key[1]} | {method} | {tb:.3f} | {_ratio(tb, base_b)} | "
                             f"{ta:.3f} | {_ratio(ta, base_a)} | {gain} | {wall} |")
            mb, ma = b["peak_mib"].get(method), a["peak_mib"].get(method)
            if method in b["peak_mib"] and method in a["peak_mib"]:
                fmt = lambda v: "failed" if v is None else f"{v:.0f}"  # noqa: E731
                memory.append(f"| {a['model']} | {key[0]} | {key[1]} | {method} | {fmt(mb)} | "
                              f"{_ratio(mb, b['peak_mib'].get(BASELINE))} | {fmt(ma)} | "
                              f"{_ratio(ma, a['peak_mib'].get(BASELINE))} |")
    lig = [key for key in sorted(cells_after) if cells_after[key]["cpu"].get("ig")]
    if lig:
        speed += ["", "## LIG-50 against PR-XAI (after; CPU time of one LIG call, same run)", "",
                  "| model | T | B | LIG-50 (s) | LIG-50 ratio | LIG-50 ÷ PR-AG | LIG-50 ÷ PR-TAG |",
                  "|---|---|---|---|---|---|---|"]
        for key in lig:
            a = cells_after[key]
            ig, base = statistics.median(a["cpu"]["ig"]), statistics.median(a["cpu"][BASELINE])
            per = {m: statistics.median(a["cpu"][m]) for m in ("pr-ag", "pr-tag") if a["cpu"].get(m)}
            speed.append(f"| {a['model']} | {key[0]} | {key[1]} | {ig:.2f} | {ig / base:.1f}× | "
                         + " | ".join(f"{ig / per[m]:.1f}×" if m in per else "" for m in ("pr-ag", "pr-tag"))
                         + " |")
    if args.speed_out:
        Path(args.speed_out).write_text("\n".join(speed) + "\n")
    if args.memory_out:
        Path(args.memory_out).write_text("\n".join(memory) + "\n")
    print("\n".join(speed + [""] + memory))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="measure one code version, write JSON")
    r.add_argument("--label", required=True)
    r.add_argument("--lengths", default="128,512,2048,4096")
    r.add_argument("--batch-sizes", default="1")
    r.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    r.add_argument("--repeats", type=int, default=5)
    r.add_argument("--single-run", default="", help="methods timed by one call, at batch 1 only (e.g. ig: LIG-50)")
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--time-only", action="store_true")
    r.add_argument("--memory-only", action="store_true")
    r.add_argument("--json", default=None)
    t = sub.add_parser("table", help="before/after JSON -> Markdown tables")
    t.add_argument("--before", required=True)
    t.add_argument("--after", required=True)
    t.add_argument("--more-before", nargs="*", default=[])
    t.add_argument("--more-after", nargs="*", default=[])
    t.add_argument("--note", default="")
    t.add_argument("--speed-out", default=None)
    t.add_argument("--memory-out", default=None)
    o = sub.add_parser("ratios", help="runs of one code version -> one Markdown table of ratios")
    o.add_argument("--json", nargs="+", required=True)
    o.add_argument("--note", default="")
    o.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args)
    elif args.command == "ratios":
        ratios(args)
    else:
        table(args)
    return 0


def ratios(args: argparse.Namespace) -> None:
    """One table of one code version: median CPU time and peak memory of each method over forward+backward's."""
    runs = [json.loads(Path(p).read_text()) for p in args.json]
    lines = ["# PR-XAI capture: one code version, ratios to one forward+backward (cpu)", "", "Runs:", ""]
    lines += [f"    {run['command']}" for run in runs]
    lines += ["", f"Table: `benchmarks/capture_speed.py ratios --json {' '.join(args.json)}`", "",
              f"Hardware: {runs[0]['machine']}, {runs[0]['threads']} torch thread(s); torch {runs[0]['torch']}. "
              f"{args.note}", "", "| model | T | B | method | CPU time (s) | time ratio | peak (MiB) | memory ratio |",
              "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        for cell in run["cells"]:
            base_t = statistics.median(cell["cpu"][BASELINE]) if cell.get("cpu", {}).get(BASELINE) else None
            base_m = cell.get("peak_mib", {}).get(BASELINE)
            for method in dict.fromkeys([*cell.get("cpu", {}), *cell.get("peak_mib", {})]):
                t = statistics.median(cell["cpu"][method]) if cell.get("cpu", {}).get(method) else None
                m = cell.get("peak_mib", {}).get(method)
                lines.append(f"| {cell['model']} | {cell['length']} | {cell['batch']} | {method} | "
                             f"{'' if t is None else f'{t:.3f}'} | {'' if t is None else _ratio(t, base_t)} | "
                             f"{'' if m is None else f'{m:.0f}'} | {'' if m is None else _ratio(m, base_m)} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    raise SystemExit(main())
