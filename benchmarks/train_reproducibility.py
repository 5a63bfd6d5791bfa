"""Which CPU kernel choices change the weights of a seeded training run, and whether pinning them fixes the weights.

A seeded training run (``captum-prxai train``) repeated on one machine gives
bit-identical weights, but models retrained for the faithfulness matrix on
other machines often came back with other weights (``models.md``). PyTorch's
CPU build picks kernels by the CPU it finds, in three libraries: ATen's
vectorised kernels (``ATEN_CPU_CAPABILITY``), oneMKL's matrix products
(``MKL_CBWR``) and oneDNN (``ONEDNN_MAX_CPU_ISA``). This script trains the same
short run (MiniLM-L6 on tweets, ``--steps`` steps, 1 thread, seed 0) in fresh
processes under each setting:

- ``native`` twice (the CPU's own choices: is one machine deterministic?);
- each variable alone, set to a narrower instruction set than the CPU's
  (does that library's choice change the weights?);
- all three pinned to AVX2 (``captum_prxai.models._cpu.PINNED_ENV``, what
  ``captum-prxai train --pin-kernels`` sets) twice;
- the pins set inside a process that has already computed something (does a
  late setting take effect?).

It prints, and writes to ``benchmarks/results/train_reproducibility.md``, each
run's largest weight difference to ``native`` and to ``pinned``, and the
SHA-256 of each run's weights. It appends this machine's native and pinned
fingerprints to ``benchmarks/results/train_reproducibility.jsonl``; the report
lists every CPU recorded there, so a run on another CPU shows whether the pinned
weights agree across CPUs.

Command (about 6 minutes on one core)::

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1 python benchmarks/train_reproducibility.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

RESULTS = Path(__file__).resolve().parent / "results"
REPORT = RESULTS / "train_reproducibility.md"
LOG = RESULTS / "train_reproducibility.jsonl"
COMMAND = "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1 python benchmarks/train_reproducibility.py"

#: (run name, extra environment, set the pins late inside the process)
RUNS = [
    ("native", {}, False),
    ("native, again", {}, False),
    ("ATEN_CPU_CAPABILITY=avx2", {"ATEN_CPU_CAPABILITY": "avx2"}, False),
    ("ATEN_CPU_CAPABILITY=default", {"ATEN_CPU_CAPABILITY": "default"}, False),
    ("MKL_CBWR=AVX2", {"MKL_CBWR": "AVX2"}, False),
    ("ONEDNN_MAX_CPU_ISA=AVX2", {"ONEDNN_MAX_CPU_ISA": "AVX2"}, False),
    ("pinned", "PINNED", False),
    ("pinned, again", "PINNED", False),
    ("pinned late, in-process", {}, True),
]


def _child(out: str, steps: int, late: bool, pinned: bool) -> None:
    """Train in this process and print one JSON line: the kernels used, the seconds taken."""
    import torch

    from captum_prxai.models import PINNED_ENV
    from captum_prxai.models.train import train_classifier

    if late:
        torch.ones(4, 4) @ torch.ones(4, 4)  # a notebook that has computed something already
        os.environ.update(PINNED_ENV)
    t0 = time.time()
    result = train_classifier("minilm", "tweets", out_dir=Path(out), overwrite=True, progress=False, max_steps=steps,
                              threads=1, max_test=64, pin_kernels=pinned)
    # the kernels this process trained with, as the model card records them
    print(json.dumps({"cpu": result.card["cpu"], "seconds": round(time.time() - t0, 1)}))


def _weights(folder: Path) -> Dict[str, "object"]:
    from safetensors.torch import load_file

    state: Dict[str, object] = {}
    for f in sorted(folder.glob("*.safetensors")):
        state.update(load_file(str(f)))
    return state


def _fingerprint(state) -> str:
    h = hashlib.sha256()
    for key in sorted(state):
        h.update(key.encode())
        h.update(state[key].contiguous().numpy().tobytes())
    return h.hexdigest()


def _max_diff(a, b) -> float:
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


def run_table(records: List[Dict], steps: int, torch_version: str) -> List[str]:
    """This machine's runs: each one's largest weight difference to ``native`` (the first record) and to
    ``pinned``, and its fingerprint. A record holds ``name``, ``state`` (the weights), ``fingerprint`` and ``cpu``."""
    native = records[0]["state"]
    pinned = next(r for r in records if r["name"] == "pinned")["state"]
    cpu = records[0]["cpu"]
    lines = [
        "# Training reproducibility: which CPU kernel choices change the weights",
        "",
        f"Command: `{COMMAND}` ({steps} steps of `captum-prxai train --encoder minilm --dataset tweets "
        "--threads 1`, seed 0, each run in a fresh process; written by `benchmarks/train_reproducibility.py`).",
        f"CPU: {cpu['processor']}; native ATen kernels: {cpu['capability']}; torch {torch_version}.",
        "",
        "| run | ATen kernels | max abs weight difference to native | to pinned | weights SHA-256 (first 16) |",
        "|---|---|---:|---:|---|",
    ]
    for r in records:
        lines.append(f"| {r['name']} | {r['cpu']['capability']} | {_max_diff(r['state'], native):.3g} | "
                     f"{_max_diff(r['state'], pinned):.3g} | `{r['fingerprint'][:16]}` |")
    return lines


def history_table(history: List[Dict]) -> List[str]:
    """Every recorded run, one row each, and whether its pinned weights equal those of the first run recorded with
    the same torch and steps on another CPU (``no other CPU yet`` until there is one)."""
    lines = [
        "Every CPU this script has run on (`train_reproducibility.jsonl`, one line per run). The last column compares "
        "the pinned weights with those of the first run on another CPU with the same torch and steps: `same` means "
        "pinning gave the two CPUs the same weights bit for bit.",
        "",
        "| date | CPU | native kernels | torch | steps | native SHA-256 (first 16) | pinned SHA-256 (first 16) | "
        "pinned vs another CPU |",
        "|---|---|---|---|---:|---|---|---|",
    ]
    for e in history:
        other = next((o for o in history if o["processor"] != e["processor"] and o["torch"] == e["torch"]
                      and o["steps"] == e["steps"]), None)
        verdict = "no other CPU yet" if other is None else (
            "same" if other["pinned"] == e["pinned"] else f"differs from {other['processor']}")
        lines.append(f"| {e['date']} | {e['processor']} | {e['native_capability']} | {e['torch']} | {e['steps']} | "
                     f"`{e['native'][:16]}` | `{e['pinned'][:16]}` | {verdict} |")
    return lines


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="training steps per run (default 40)")
    parser.add_argument("--child", nargs=3, metavar=("OUT", "LATE", "PINNED"), help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true", help="print only; write neither the report nor the log")
    args = parser.parse_args(argv)
    if args.child:
        out, late, pinned = args.child
        _child(out, args.steps, late == "1", pinned == "1")
        return 0

    from captum_prxai.models import PINNED_ENV

    base = {k: v for k, v in os.environ.items() if k not in PINNED_ENV}
    records = []
    with tempfile.TemporaryDirectory(prefix="train-repro-") as tmp:
        for i, (name, extra, late) in enumerate(RUNS):
            pinned = extra == "PINNED"
            env = {**base, **(PINNED_ENV if pinned else extra)}
            out = Path(tmp) / f"run{i}"
            cmd = [sys.executable, __file__, "--steps", str(args.steps), "--child", str(out), str(int(late)),
                   str(int(pinned))]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode:
                sys.stderr.write(proc.stderr[-3000:])
                print(f"run {name!r} failed", file=sys.stderr)
                return 1
            info = json.loads(proc.stdout.strip().splitlines()[-1])
            state = _weights(out)
            records.append({"name": name, "state": state, "fingerprint": _fingerprint(state), **info})
            print(f"{name}: {info['cpu']['capability']} kernels, {info['seconds']} s", flush=True)

    import torch

    pinned = next(r for r in records if r["name"] == "pinned")
    entry = {"date": time.strftime("%Y-%m-%d"), "processor": records[0]["cpu"]["processor"],
             "native_capability": records[0]["cpu"]["capability"], "torch": torch.__version__, "steps": args.steps,
             "native": records[0]["fingerprint"], "pinned": pinned["fingerprint"]}
    history = [json.loads(x) for x in LOG.read_text().splitlines() if x.strip()] if LOG.is_file() else []
    lines = run_table(records, args.steps, torch.__version__) + [""] + history_table(history + [entry])
    report = "\n".join(lines) + "\n"
    print(report)
    if not args.no_write:
        with LOG.open("a") as fh:
            fh.write(json.dumps(entry) + "\n")
        REPORT.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
