"""The GPU speed script (benchmarks/gpu_speed.py) runs its whole path on CPU: cells, refusals, the time budget."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
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


def test_gpu_speed_script_times_each_shapes_default_and_lig_against_it(tmp_path, benchmark_script):
    done = _run(tmp_path, "--device", "cpu", "--models", "minilm", "--dtypes", "fp32", "--lengths", "16",
                "--batch-sizes", "1", "--methods", "default", "--repeats", "1")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "speed.jsonl").read_text().splitlines()]
    default = benchmark_script("research_methods.py").research_default(depth=6)  # the matrix's name of the default
    assert [r["method"] for r in rows] == ["forward+backward", default, "ig"]
    lig = (tmp_path / "speed.md").read_text().split("LIG-50 against PR-AG and the model's default")[1]
    row = next(line for line in lig.splitlines() if line.startswith("| minilm"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5] == "" and cells[6] == default and cells[7].endswith("×")  # no PR-AG timed; the default was
    by = {r["method"]: r["seconds"] for r in rows}
    assert float(cells[7].rstrip("×")) == pytest.approx(by["ig"] / by[default], abs=0.05)


def test_gpu_agreement_script_on_cpu_compares_cpu_with_itself_exactly(tmp_path, benchmark_script):
    """Run with --device cpu, the 'GPU' columns are CPU again: every method must agree with itself exactly."""
    script = ROOT / "benchmarks" / "gpu_agreement.py"
    done = subprocess.run([sys.executable, str(script), "--device", "cpu", "--shapes", "minilm", "--length", "16",
                           "--methods", "pr-ag,default,gae", "--out", str(tmp_path / "agree")],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in (tmp_path / "agree.md").read_text().splitlines() if line.startswith("| minilm")]
    default = benchmark_script("research_methods.py").research_default(depth=6)
    assert [r[1] for r in rows] == [m for m in ("pr-ag", default, "gae") for _ in (1, 2)]
    assert [r[2] for r in rows] == ["cpu fp32", "cpu bf16"] * 3
    fp32 = [r for r in rows if r[2] == "cpu fp32"]
    assert all(r[3:7] == ["0.0e+00", "1.0000", "1.0", "0.0e+00"] for r in fp32), fp32
    assert all(r[6] == "0.0e+00" for r in rows)  # padding scores zero in bf16 as well


def test_gpu_agreement_compare_measures_what_it_says():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from gpu_agreement import compare
    finally:
        sys.path.remove(str(SCRIPT.parent))
    reference = torch.tensor([[4.0, 3.0, 2.0, 1.0] + [0.5] * 8 + [0.0, 0.0]])
    mask = torch.tensor([[1] * 12 + [0, 0]])
    other = reference.clone()
    other[0, 0], other[0, 1], other[0, -1] = 3.0, 4.0, 0.25  # two tokens swap; padding gets a score
    row = compare(reference, other, mask)
    assert row["rel_max_diff"] == pytest.approx(0.25)
    assert row["padding"] == pytest.approx(0.25)
    assert row["top10"] == 1.0 and 0.9 < row["spearman"] < 1.0


def test_gpu_agreement_spearman_gives_ties_their_average_rank():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from gpu_agreement import _spearman
    finally:
        sys.path.remove(str(SCRIPT.parent))
    flat = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0])
    noisy = torch.tensor([0.3, 0.2, 0.1, 0.0, 1.0])  # the four tied tokens, in some order
    # average ranks (2.5, 2.5, 2.5, 2.5, 5) against (4, 3, 2, 1, 5): rho = 5 / sqrt(50); ranks by position give 0
    assert _spearman(flat, noisy) == pytest.approx(0.5 ** 0.5)
    assert _spearman(flat, flat) == 1.0
    assert _spearman(torch.zeros(4), torch.arange(4.0)) == 0.0
