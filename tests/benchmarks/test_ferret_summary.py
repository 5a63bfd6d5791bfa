"""The ferret cross-check's summary pairs every method against the cell's own default (benchmarks/ferret)."""
import json
from pathlib import Path

import numpy as np

from captum_prxai.methods import resolve_method


def _write_cell(folder: Path, methods, default_method=None, n=6, seed=0):
    """A small cell as export_cell.py and ferret_eval.py write it: our values and ferret's, per example and method."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    with open(folder / "examples.jsonl", "w") as ex, open(folder / "ferret.jsonl", "w") as fr:
        for i in range(n):
            line = {"example": i, "input_ids": [101, 5, 6, 7, 102], "special_tokens_mask": [1, 0, 0, 0, 1],
                    "prob": 0.9, "methods": {}}
            if default_method is not None:
                line["default_method"] = default_method
            for m in methods:
                comp, suff = rng.uniform(0.0, 0.6), rng.uniform(-0.1, 0.3)
                line["methods"][m] = {"scores": rng.uniform(0.01, 1.0, 5).tolist(), "comprehensiveness": comp,
                                      "sufficiency": suff}
                for variant in ("default", "eraser"):
                    fr.write(json.dumps({
                        "example": i, "method": m, "variant": variant,
                        "comprehensiveness": comp + rng.uniform(0.0, 0.2), "sufficiency": suff - rng.uniform(0.0, 0.1),
                        "ids_match": True, "prob_ferret": 0.9, "prob_ours": 0.9,
                        "tokens_ferret_first_last": ["[CLS]", "[SEP]"], "levels_comp": 9, "levels_suff": 9,
                        "retok_mismatch_comp": 0, "retok_mismatch_suff": 1}) + "\n")
            ex.write(json.dumps(line) + "\n")


def _paired_heading(md: str, cell: str) -> str:
    section = md.split(f"## {cell}\n", 1)[1]
    return next(line for line in section.splitlines() if line.startswith("Paired differences"))


def test_ferret_summary_pairs_against_the_recorded_default(tmp_path, benchmark_script):
    summarize = benchmark_script("ferret/summarize.py")
    methods = ["pr-tag", "pr-tag-pm0.25", "gae", "ig", "random"]
    _write_cell(tmp_path / "minilm--movie-sentences", methods, default_method="pr-tag-pm0.25")
    _write_cell(tmp_path / "mpnet--tweets", methods, default_method=None, seed=1)  # exported before the field existed
    reports = {cell: summarize.cell_report(tmp_path / cell) for cell in ("minilm--movie-sentences", "mpnet--tweets")}
    assert reports["minilm--movie-sentences"][0]["default_method"] == "pr-tag-pm0.25"
    assert reports["mpnet--tweets"][0]["default_method"] is None

    md = summarize.write_md(tmp_path, reports).read_text()
    recorded = _paired_heading(md, "minilm--movie-sentences")
    assert recorded.startswith("Paired differences PR-TAG± (λ=0.25) − method")
    # the default's own column is left out of its paired table, and PR-TAG is one of the methods compared
    table = md.split(recorded, 1)[1].split("Rankings", 1)[0]
    header = next(line for line in table.splitlines() if line.startswith("| Metric |"))
    assert "PR-TAG± (λ=0.25)" not in header and "| PR-TAG |" in header
    # every label is the registry's, the one the project's other tables print
    assert f"| {resolve_method('ig').label} |" in header and "| ig |" not in header
    # an encoder cell without the field keeps the former rule: PR-TAG
    assert _paired_heading(md, "mpnet--tweets").startswith("Paired differences PR-TAG − method")
