"""The committed tables reproduce: a few rows of the matrix, computed again with today's code, equal the committed
``results.csv`` to 1e-6 (the algorithm/recipe split and the registry's move of the research variants changed no
score)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CELL = ROOT / "benchmarks" / "results" / "matrix" / "minilm--movie-sentences" / "results.csv"
METRICS = ("comprehensiveness", "sufficiency", "comprehensiveness@1", "comprehensiveness@10", "comprehensiveness@50",
           "sufficiency@1", "sufficiency@10", "sufficiency@50", "aopc_most", "aopc_least", "log_odds", "prob")


def _rows(path: Path) -> dict:
    with path.open(newline="", encoding="utf-8") as fh:
        return {(row["example"], row["method"]): row for row in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def rerun(benchmark_script, tmp_path_factory):
    """The first three held-out examples of the MiniLM movie-sentences cell, run again as ``matrix.py`` runs them."""
    research = benchmark_script("research_methods.py")
    from captum_prxai.bench.ablation import dataset_half
    from captum_prxai.bench.runner import run_benchmark
    from captum_prxai.data import load_dataset
    from captum_prxai.models import load_model

    default = research.research_default(causal=False, depth=6)
    model, tokenizer = load_model("default")
    dataset = dataset_half(load_dataset("movie-sentences", "test"), "holdout")
    out = tmp_path_factory.mktemp("matrix-rows")
    run_benchmark(model, tokenizer, dataset, f"{default},pr-xai,pr-ag", n=3, out_dir=out, model_name="default",
                  progress=False)
    return default, _rows(out / "results.csv")


def test_the_defaults_matrix_rows_reproduce_to_1e6(rerun):
    default, rows = rerun
    committed = _rows(CELL)
    examples = sorted({example for example, _ in rows})
    assert len(examples) == 3
    for example in examples:
        for method in (default, "pr-ag"):
            ours, theirs = rows[(example, method)], committed[(example, method)]
            for metric in METRICS:
                assert float(ours[metric]) == pytest.approx(float(theirs[metric]), abs=1e-6), (example, method, metric)


def test_the_library_default_is_the_matrixs_default_column(rerun):
    default, rows = rerun
    for example in {example for example, _ in rows}:
        for metric in METRICS:
            assert rows[(example, "pr-xai")][metric] == rows[(example, default)][metric]
