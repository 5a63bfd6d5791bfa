"""Fixtures of the benchmark scripts' tests (benchmarks/*.py). The tiny models are the root conftest's."""

from __future__ import annotations

import csv

import pytest


def _write_results(folder, rows, probs=None):
    """A run folder's ``results.csv`` with ``(example, method, comprehensiveness, sufficiency)`` rows, and with
    ``probs`` (``{example: the explained class's probability}``) a ``prob`` column."""
    folder.mkdir(parents=True)
    fields = ["example", "method", "comprehensiveness", "sufficiency"] + (["prob"] if probs is not None else [])
    with (folder / "results.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for example, method, comp, suff in rows:
            row = {"example": example, "method": method, "comprehensiveness": comp, "sufficiency": suff}
            w.writerow({**row, "prob": probs[example]} if probs is not None else row)


@pytest.fixture
def write_results():
    """``write_results(folder, rows, probs=None)``: a run folder's ``results.csv``, as the scripts read it."""
    return _write_results
