"""Memory of the explorer's many-pass methods: peak and after-job resident memory, with and without the budget.

Each configuration runs in its own process (so peaks do not mix): the
embedded MiniLM-L6 classifier is loaded, an explorer :class:`Engine` is
built with the given ``memory_budget_mb`` (``0`` = no bound: Captum's
default, every IG step in one batch), one text of exactly ``tokens`` tokens
is explained with Integrated Gradients, and the process reports its resident
memory (``/proc/self/statm``) after loading, its peak (``VmHWM`` of
``/proc/self/status``) and its resident memory after the job, when the
explorer has returned freed memory with :func:`captum_prxai.explorer.engine.release_memory`
(and, for comparison, before that call).

Run (Linux; about 20 minutes on 2 busy cores)::

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/explorer_memory.py \
        --out benchmarks/results/explorer_memory.md

Times and memory depend on the machine and its load; they are what one run measured.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

CONFIGS = [  # (tokens, ig_steps, memory_budget_mb; 0 = unbounded)
    (128, 100, 0), (128, 100, 1024), (256, 300, 1024), (512, 300, 1024), (512, 300, 256),
]


def _peak_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def child(tokens: int, steps: int, budget: float) -> dict:
    import torch

    from captum_prxai.explorer.engine import DatasetStore, Engine, release_memory, rss_bytes
    from captum_prxai.models import load_default

    torch.set_num_threads(1)
    model, tokenizer = load_default()
    engine = Engine(model, tokenizer, DatasetStore({"none": [("x", 0)]}), max_chars=10 ** 6,
                    memory_budget_mb=budget if budget > 0 else 1e9)
    words = " ".join(["film"] * (tokens - 2))
    enc = engine.encode(words)
    assert len(enc.tokens) == tokens, len(enc.tokens)
    release_memory()
    loaded = rss_bytes()
    import captum_prxai.explorer.engine as eng

    if budget <= 0:  # Captum's default: no internal batching at all
        eng.Engine.batch_size_for = lambda self, t, backward: 10 ** 9  # type: ignore[assignment]
    calls = {"n": 0}
    real_release = eng.release_memory

    def measured_release() -> None:  # RSS just before the explorer returns memory
        calls["before"] = rss_bytes()
        real_release()
        calls["n"] += 1

    eng.release_memory = measured_release  # type: ignore[assignment]
    start = time.perf_counter()
    result = engine.explain(enc, 1, "ig", {"ig_steps": steps})
    seconds = time.perf_counter() - start
    return {"tokens": tokens, "steps": steps, "budget_mb": budget, "batch": result["batch"],
            "loaded_mb": loaded / 2 ** 20, "peak_mb": _peak_bytes() / 2 ** 20,
            "before_release_mb": calls.get("before", 0) / 2 ** 20, "after_mb": rss_bytes() / 2 ** 20,
            "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", nargs=3, type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tokens, steps, budget = args.child
        print(json.dumps(child(int(tokens), int(steps), budget)))
        return
    rows = []
    for tokens, steps, budget in CONFIGS:
        out = subprocess.run([sys.executable, __file__, "--child", str(tokens), str(steps), str(budget)],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    lines = [
        "# Explorer memory: Integrated Gradients with and without the memory budget",
        "",
        "Command: `OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/explorer_memory.py "
        "--out benchmarks/results/explorer_memory.md` (embedded MiniLM-L6, CPU, one thread, one process per row; "
        "a shared 2-core machine, so times are noisy).",
        "",
        "`batch`: IG steps per internal batch (`internal_batch_size`, from the input length and the budget; "
        "'all' = Captum's default, every step at once). Memory is resident memory (RSS) of the process: after "
        "loading the model, the peak during the job, just before the explorer's `release_memory()` "
        "(gc + `malloc_trim`), and after it.",
        "",
        "| tokens | IG steps | budget (MB) | batch | RSS loaded (MB) | peak RSS (MB) | RSS before release (MB) | "
        "RSS after job (MB) | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        batch = "all" if r["budget_mb"] <= 0 else str(r["batch"])
        budget = "none" if r["budget_mb"] <= 0 else f"{r['budget_mb']:.0f}"
        lines.append(f"| {r['tokens']} | {r['steps']} | {budget} | {batch} | {r['loaded_mb']:.0f} | {r['peak_mb']:.0f} | "
                     f"{r['before_release_mb']:.0f} | {r['after_mb']:.0f} | {r['seconds']:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
