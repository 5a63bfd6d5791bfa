"""The ferret cross-check's export (benchmarks/ferret/export_cell.py): the file ferret's venv reads."""
import csv
import json
import sys

import pytest
import torch


@pytest.fixture
def tiny_encoder(tmp_path):
    """The explorer tests' tiny BERT and its reviews (tests/e2e/_tiny.py)."""
    from e2e._tiny import build_tiny

    model, tokenizer, datasets = build_tiny(tmp_path)
    return model, tokenizer, datasets["tiny-reviews"]


def test_export_cell_writes_the_benchmarks_scores_and_the_resolved_default(tmp_path, monkeypatch, tiny_encoder,
                                                                            benchmark_script):
    threads = torch.get_num_threads()
    try:
        export = benchmark_script("ferret/export_cell.py")
    finally:
        torch.set_num_threads(threads)  # the script pins one thread when it loads
    model, tokenizer, data = tiny_encoder
    monkeypatch.setattr(export, "load_model", lambda name: (model, tokenizer))
    monkeypatch.setattr(export, "load_dataset", lambda name, split: data)
    out, model_dir = tmp_path / "cell", tmp_path / "model"
    monkeypatch.setattr(sys, "argv", ["export_cell.py", "--dataset", "toy", "--model", "tiny", "--n", "3",
                                      "--methods", "default,random,default", "--out", str(out),
                                      "--model-dir", str(model_dir)])
    export.main()

    default = benchmark_script("research_methods.py").research_default(model)  # the matrix's name of the default
    lines = [json.loads(line) for line in (out / "examples.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    with open(out / "ours" / "results.csv", newline="") as fh:
        rows = {(int(r["example"]), r["method"]): r for r in csv.DictReader(fh)}
    for line in lines:
        # 'default' resolved once, to the research variant equal to the library's default, recorded per example
        assert line["default_method"] == default
        assert list(line["methods"]) == [default, "random"]
        assert line["explained_position"] is None  # an encoder: nothing is kept in every perturbed input
        encoded = tokenizer(line["text"])["input_ids"]
        assert line["input_ids"] == encoded and len(line["tokens"]) == len(encoded)
        assert line["special_tokens_mask"] == [1] + [0] * (len(encoded) - 2) + [1]
        for name, entry in line["methods"].items():
            assert len(entry["scores"]) == len(encoded)
            # the metric values are the benchmark's own rows for the same example and method
            row = rows[(line["example"], name)]
            assert entry["comprehensiveness"] == pytest.approx(float(row["comprehensiveness"]))
            assert entry["sufficiency"] == pytest.approx(float(row["sufficiency"]))
    # the model saved for ferret's venv gives the same logits
    from transformers import AutoModelForSequenceClassification

    saved = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    ids = torch.tensor([lines[0]["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(saved(ids).logits, model(ids).logits, atol=1e-6)
