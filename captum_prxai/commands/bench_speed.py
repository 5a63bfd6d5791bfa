"""``captum-prxai bench-speed``: time PR-XAI against forward, forward+backward and LIG-50."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

HELP = "Time PR-XAI, GAE and LIG-50 against one forward and one forward+backward pass."


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lengths", type=_ints, default=[128, 512, 2048, 4096], help="sequence lengths (comma-separated)")
    parser.add_argument("--batch-sizes", type=_ints, default=[1, 16], help="batch sizes (comma-separated)")
    parser.add_argument("--methods", default="pr-ag,pr-a,gae,ig", help="benchmark method names")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per setting (median reported)")
    parser.add_argument("--ig-steps", type=int, default=None,
                        help="Integrated Gradients steps (default: those of the benchmark's 'ig' method)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="skip LIG when one call would take longer")
    parser.add_argument("--memory-only", action="store_true",
                        help="measure peak memory only (a fresh process per cell); 'ratio' is then to the "
                             "peak memory of forward+backward")
    parser.add_argument("--out", default="benchmarks/results/speed_cpu.md", help="Markdown table to write")


def settings_from_args(args: argparse.Namespace):
    """The :class:`~captum_prxai.bench.speed.SpeedSettings` of the command line (checked)."""
    from captum_prxai.bench.speed import SpeedSettings
    from captum_prxai.exceptions import PRXAIError
    from captum_prxai.methods import IG_DEFAULTS, parse_methods

    for flag, values in (("--lengths", args.lengths), ("--batch-sizes", args.batch_sizes)):
        if not values or min(values) < 1:
            raise PRXAIError(f"{flag} takes positive whole numbers, got {','.join(map(str, values)) or 'none'}.")
    for flag, value in (("--repeats", args.repeats), ("--ig-steps", args.ig_steps), ("--threads", args.threads)):
        if value is not None and value < 1:
            raise PRXAIError(f"{flag} must be at least 1, got {value}.")
    if args.max_seconds <= 0:
        raise PRXAIError(f"--max-seconds must be positive, got {args.max_seconds}.")
    return SpeedSettings(lengths=args.lengths, batch_sizes=args.batch_sizes, methods=parse_methods(args.methods),
                         repeats=args.repeats, ig_steps=args.ig_steps or IG_DEFAULTS["n_steps"],
                         max_seconds_per_call=args.max_seconds, device=args.device)


def run(args: argparse.Namespace) -> int:
    import torch

    from captum_prxai.bench.speed import run_memory_benchmark, run_speed_benchmark, speed_table, write_results

    settings = settings_from_args(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    runner = run_memory_benchmark if args.memory_only else run_speed_benchmark
    rows = runner(settings, progress=lambda line: print(line, file=sys.stderr, flush=True))
    command = "captum-prxai bench-speed " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    path = write_results(rows, settings, Path(args.out), command)
    print(speed_table(rows, settings, command))
    print(f"wrote {path}")
    return 0
