"""The ferret cross-check's export (benchmarks/ferret/export_cell.py): the file ferret's venv reads."""
import csv
import json
import sys

import pytest
import torch

WORDS = "the a movie film plot was is not very good bad great awful boring fun".split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
TEXTS = ["the movie was very good", "a boring plot", "not a great film", "fun", "the plot is bad",
         "a great movie", "awful film", "the film was not boring", "very bad plot", "good fun",
         "the movie is great fun", "a very awful plot"]


@pytest.fixture
def tiny_encoder(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    tokenizer = BertTokenizer(str(tmp_path / "vocab.txt"))
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=2)
    torch.manual_seed(0)
    return BertForSequenceClassification(config).eval(), tokenizer


def test_export_cell_writes_the_benchmarks_scores_and_the_resolved_default(tmp_path, monkeypatch, tiny_encoder,
                                                                            benchmark_script):
    from captum_prxai.data import TextDataset
    from captum_prxai.methods import default_method

    threads = torch.get_num_threads()
    try:
        export = benchmark_script("ferret/export_cell.py")
    finally:
        torch.set_num_threads(threads)  # the script pins one thread when it loads
    model, tokenizer = tiny_encoder
    data = TextDataset("toy", "test", TEXTS, [i % 2 for i in range(len(TEXTS))], ["neg", "pos"])
    monkeypatch.setattr(export, "load_model", lambda name: (model, tokenizer))
    monkeypatch.setattr(export, "load_dataset", lambda name, split: data)
    out, model_dir = tmp_path / "cell", tmp_path / "model"
    monkeypatch.setattr(sys, "argv", ["export_cell.py", "--dataset", "toy", "--model", "tiny", "--n", "3",
                                      "--methods", "default,random,default", "--out", str(out),
                                      "--model-dir", str(model_dir)])
    export.main()

    default = default_method(model)
    lines = [json.loads(line) for line in (out / "examples.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    with open(out / "ours" / "results.csv", newline="") as fh:
        rows = {(int(r["example"]), r["method"]): r for r in csv.DictReader(fh)}
    for line in lines:
        # 'default' resolved once, by the function PageRankAttribution() uses, and recorded per example
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
