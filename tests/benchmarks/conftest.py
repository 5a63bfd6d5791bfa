"""Fixtures of the benchmark scripts' tests (benchmarks/*.py). The tiny models are the root conftest's."""

from __future__ import annotations

import csv

import pytest
import torch


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


@pytest.fixture
def random_graph():
    """Two random 5-node graphs teleporting to node 0, the second with node 4 masked out, and their PageRank:
    ``(adjacency, teleport, mask, reference)``."""
    from captum_prxai import pagerank

    torch.manual_seed(0)
    adjacency = torch.rand(2, 5, 5, dtype=torch.float64)
    teleport = torch.zeros(2, 5, dtype=torch.float64)
    teleport[:, 0] = 1.0
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1, 4] = False
    reference = pagerank(adjacency, 0.7, personalization=teleport, node_mask=mask, tol=1e-12, max_iter=1000)
    return adjacency, teleport, mask, reference
