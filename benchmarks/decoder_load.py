"""Time of ``load_decoder(NAME)`` in a fresh process: the GGUF file dequantised, the cache written, the cache read.

Every run is a new Python process (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``) with
``CAPTUM_PRXAI_CACHE`` pointing at a temporary cache root that holds only a link to the packaged GGUF file (from
the usual cache root, fetched from the wheel once), so nothing else on the machine is read or written. Modes:

* ``cache=False``: the GGUF file dequantised by transformers, as every load did before the cache;
* cold: ``load_decoder(NAME)`` with the decoder cache cleared first: it dequantises, then writes the float32
  safetensors, config and tokenizer files with their manifest;
* warm: ``load_decoder(NAME)`` with that cache in place: it checks the manifest against the GGUF file and reads
  the cache.

The time is that of the first ``load_decoder`` call only (the imports of ``captum_prxai`` and torch are timed
apart), as wall seconds and the process's CPU seconds (one thread, so the CPU time is robust to other jobs
competing for the cores), with the peak resident memory up to then. The first call also imports transformers'
model and tokenizer modules, so in the two cached modes each process then calls ``load_decoder`` once more,
timed apart: a read of the cache with those modules loaded. Run from the repository root::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/decoder_load.py --out benchmarks/results/decoder_load.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import torch
torch.set_num_threads(1)
from captum_prxai.models.decoder import load_decoder
t1, c1 = time.perf_counter(), time.process_time()
model, tok = load_decoder(sys.argv[1], cache=sys.argv[2] == "1")
t2, c2 = time.perf_counter(), time.process_time()
peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
assert not model.training and model.config._attn_implementation == "eager"
assert next(model.parameters()).dtype == torch.float32
del model, tok
again = None
if sys.argv[2] == "1":  # again in this process (transformers' modules loaded): the cache is read
    t3 = time.perf_counter()
    load_decoder(sys.argv[1])
    again = time.perf_counter() - t3
print(json.dumps({"import_wall": t1 - t0, "load_wall": t2 - t1, "load_cpu": c2 - c1, "again_wall": again,
                  "peak_rss_mib": peak_rss}))
"""


def _run(name: str, cache: bool, root: Path) -> dict:
    env = {**os.environ, "CAPTUM_PRXAI_CACHE": str(root), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _CHILD, name, "1" if cache else "0"], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cell(values: list[float], digits: int = 1) -> str:
    each = ", ".join(f"{v:.{digits}f}" for v in values)
    return f"{statistics.median(values):.{digits}f} ({each})" if len(values) > 1 else f"{values[0]:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decoder", default="smollm2")
    parser.add_argument("--repeats", type=int, default=2, help="fresh processes per mode")
    parser.add_argument("--out", default=None, help="write the markdown table here too")
    args = parser.parse_args(argv)

    from captum_prxai.models.decoder import gguf_path

    gguf = gguf_path(args.decoder)  # under the usual cache root
    load = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="decoder-load-"))
    try:
        (root / "encoders" / args.decoder).mkdir(parents=True)
        os.symlink(gguf, root / "encoders" / args.decoder / gguf.name)
        folder = root / "decoders" / args.decoder
        runs: dict[str, list[dict]] = {"cache=False (GGUF dequantised, as before)": [],
                                       "cold (cache cleared: dequantise + write the cache)": [],
                                       "warm (manifest checked, cache read)": []}
        no_cache, cold, warm = runs
        for _ in range(args.repeats):
            shutil.rmtree(folder, ignore_errors=True)
            runs[no_cache].append(_run(args.decoder, False, root))
            assert not folder.exists(), "cache=False wrote a cache"
            runs[cold].append(_run(args.decoder, True, root))
            assert folder.is_dir(), "the cold load wrote no cache"
            runs[warm].append(_run(args.decoder, True, root))
            for mode in runs:
                print(f"{mode}: {runs[mode][-1]['load_wall']:.1f} s wall", file=sys.stderr, flush=True)
        size = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
    finally:
        shutil.rmtree(root, ignore_errors=True)

    import torch
    import transformers

    lines = [
        f"# `load_decoder({args.decoder!r})` in a fresh process",
        "",
        "Command (from the repository root):",
        "",
        "```",
        f"OMP_NUM_THREADS=1 nice -n 10 python benchmarks/decoder_load.py --decoder {args.decoder} "
        f"--repeats {args.repeats} --out benchmarks/results/decoder_load.md",
        "```",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores shared with other jobs, one thread per run; "
        f"Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}. "
        f"Each run is a new process with a temporary cache root; the GGUF file is `{gguf.name}` "
        f"({gguf.stat().st_size / 2**20:.0f} MiB); the decoder cache it writes is {size:.0f} MiB. "
        f"Median over {args.repeats} processes per mode, each run in brackets; the runs of the three modes "
        "alternate. Load times are those of the process's first `load_decoder` call (the imports of captum_prxai "
        "and torch apart), which also imports transformers' model and tokenizer modules; the last column is a "
        "second call in the same process (the cached modes only: it reads the cache).",
        "",
        "| mode | load, wall s | load, CPU s | imports, wall s | peak RSS, MiB | 2nd load in the process, wall s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for mode, rs in runs.items():
        lines.append(f"| {mode} | {_cell([r['load_wall'] for r in rs])} | {_cell([r['load_cpu'] for r in rs])} | "
                     f"{_cell([r['import_wall'] for r in rs])} | {_cell([r['peak_rss_mib'] for r in rs], 0)} | "
                     f"{_cell([r['again_wall'] for r in rs]) if rs[0]['again_wall'] is not None else '-'} |")
    def ratio(key: str) -> float:
        return statistics.median(r[key] for r in runs[no_cache]) / statistics.median(r[key] for r in runs[warm])

    lines += ["", f"A warm load in a fresh process takes 1/{ratio('load_wall'):.1f} of the wall time and "
              f"1/{ratio('load_cpu'):.1f} of the CPU time of dequantising the GGUF file; most of what is left is "
              "transformers importing its modules (a second load in the same process reads the cache in "
              f"{statistics.median(r['again_wall'] for r in runs[warm]):.1f} s). Load average of the machine "
              f"(1 min) at the start and the end: {load[0]:.1f}, {os.getloadavg()[0]:.1f}.", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
