"""Does the CPU cap on rows per tile pay? PR-A and PR-TAG with and without it, interleaved in one process.

Each round times one forward+backward (the baseline, fused attention, parameter gradients) and then every
(method, cap) pair on the same model and input (``captum_prxai.bench.speed.method_calls``: MiniLM-L6 up to 512 tokens,
a MiniLM-sized BERT config beyond). Interleaving in one process makes the comparison robust to the load of a
shared machine, which hits every configuration alike. ``cap`` sets ``captum_prxai.hooks.CPU_TILE_ROWS`` for the
call (``none`` = budget alone). Ratios are
of median CPU times (one torch thread). Prints a Markdown table with the command::

    OMP_NUM_THREADS=1 python benchmarks/tile_cap_ab.py --lengths 512,2048,4096 --repeats 5,3,2
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from typing import Optional

import torch

import captum_prxai.hooks as hooks
from captum_prxai.bench.speed import SpeedSettings, method_calls


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="512,2048,4096")
    parser.add_argument("--repeats", default="5,3,2", help="rounds per length (one number, or one per length)")
    parser.add_argument("--methods", default="pr-a,pr-tag")
    parser.add_argument("--caps", default="32,16,none")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    lengths = [int(t) for t in args.lengths.split(",")]
    repeats = [int(r) for r in args.repeats.split(",")]
    repeats = repeats * len(lengths) if len(repeats) == 1 else repeats
    methods = args.methods.split(",")
    caps = {c: (10**9 if c == "none" else int(c)) for c in args.caps.split(",")}
    saved = hooks.CPU_TILE_ROWS
    print(f"`OMP_NUM_THREADS=1 python benchmarks/tile_cap_ab.py {' '.join(shlex.quote(a) for a in argv)}` "
          f"(torch {torch.__version__}, 1 thread; ratio = median CPU time / forward+backward median)\n")
    print("| T | rounds | forward+backward (s) | " + " | ".join(f"{m}, cap {c}" for m in methods for c in caps) + " |")
    print("|---|---|---|" + "---|" * (len(methods) * len(caps)))
    try:
        for length, rounds in zip(lengths, repeats):
            _, calls = method_calls(length, 1, SpeedSettings(lengths=(length,), batch_sizes=(1,), methods=tuple(methods)))
            for name in ("forward+backward", *methods):
                calls[name]()  # warm-up
            base: list[float] = []
            times: dict = {(m, c): [] for m in methods for c in caps}
            for _ in range(rounds):
                start = time.process_time()
                calls["forward+backward"]()
                base.append(time.process_time() - start)
                for m in methods:
                    for c, rows in caps.items():
                        hooks.CPU_TILE_ROWS = rows
                        start = time.process_time()
                        calls[m]()
                        times[(m, c)].append(time.process_time() - start)
            b = statistics.median(base)
            cells = " | ".join(f"{statistics.median(times[(m, c)]) / b:.2f}×" for m in methods for c in caps)
            print(f"| {length} | {rounds} | {b:.3f} | {cells} |", flush=True)
    finally:
        hooks.CPU_TILE_ROWS = saved
    return 0


if __name__ == "__main__":
    sys.exit(main())
