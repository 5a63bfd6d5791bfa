"""The GPU speed script (benchmarks/gpu_speed.py) runs its whole path on CPU: cells, refusals, the time budget."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_speed.py"


def _run(tmp_path, *args):
    return subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "speed"), *args],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_gpu_speed_script_measures_every_cell_on_cpu(tmp_path):
    done = _run(tmp_path, "--device", "cpu", "--models", "minilm", "--dtypes", "fp32,bf16", "--lengths", "16",
                "--batch-sizes", "1,2", "--methods", "pr-a,pr-tag", "--repeats", "1")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "speed.jsonl").read_text().splitlines()]
    cells = {(r["dtype"], r["batch"], r["method"]) for r in rows}
    for dtype in ("fp32", "bf16"):
        assert {(dtype, 1, m) for m in ("forward+backward", "pr-a", "pr-tag", "ig")} <= cells
        assert {(dtype, 2, m) for m in ("forward+backward", "pr-a", "pr-tag")} <= cells
        assert (dtype, 2, "ig") not in cells  # LIG once per length, at batch 1
    assert all(r["note"] == "" and r["seconds"] > 0 and r["ratio"] > 0 for r in rows)
    assert all(r["ratio"] == 1.0 for r in rows if r["method"] == "forward+backward")
    main, lig = (tmp_path / "speed.md").read_text().split("LIG-50 against PR-AG")
    assert main.count("| minilm |") == len(rows)
    assert [line.split(" | ")[1] for line in lig.splitlines() if line.startswith("| minilm")] == ["fp32", "bf16"]
    assert all(line.endswith("|  |") for line in lig.splitlines() if line.startswith("| minilm"))  # no PR-AG here


def test_gpu_speed_script_keeps_going_past_its_budget_and_says_so(tmp_path):
    done = _run(tmp_path, "--device", "cpu", "--models", "minilm", "--dtypes", "fp32", "--lengths", "16,32",
                "--batch-sizes", "1", "--methods", "pr-ag", "--repeats", "1", "--budget-s", "0")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "speed.jsonl").read_text().splitlines()]
    assert [(r["length"], r["note"]) for r in rows] == [(16, "not run: time budget"), (32, "not run: time budget")]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the message is for machines without CUDA")
def test_gpu_speed_script_without_cuda_says_how_to_check_on_cpu(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 2 and "torch sees no CUDA device; pass --device cpu" in done.stderr


def test_refusals_and_out_of_memory_are_notes():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from gpu_speed import _error_note
    finally:
        sys.path.remove(str(SCRIPT.parent))
    from captum_prxai.exceptions import PRXAIError

    assert _error_note(PRXAIError("the attention maps need about 40 GiB; only 10 are free")).startswith(
        "refused: the attention maps need about 40 GiB")
    assert _error_note(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")) == "out of memory"
    assert _error_note(ValueError("bad")) == "failed: ValueError: bad"
