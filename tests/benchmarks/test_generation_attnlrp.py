"""benchmarks/generation.py's precomputed methods (the AttnLRP rows made by lxt in its own venv): rows read from
a file go through the same evaluation as a built-in method's, and a file made on other prompts is refused.

The lxt side (``benchmarks/attnlrp/generation_scores.py``) needs its own venv (transformers 4.x) and is not run
here; see benchmarks/attnlrp/README.md, section "Generation"."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import tiny_causal_lm, word_tokenizer

from captum_prxai.bench.cache import RecordCache
from captum_prxai.exceptions import PRXAIError

WORDS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(30)]
#: the record fields the deletion evaluation writes
METRICS = ("comprehensiveness", "sufficiency", "comp_bins", "suff_bins", "comp_rows", "suff_rows",
           "negative_bottom", "full_probs")


@pytest.fixture(scope="module")
def gen(benchmark_script):
    return benchmark_script("generation.py")


@pytest.fixture(scope="module")
def tok():
    return word_tokenizer(WORDS, bos=False)  # the benchmark adds the BOS text itself, as for SmolLM2


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm(len(WORDS))


def _prompts(gen, tok):
    items = {"cloze": [gen.Source(f"w{i} w{i + 1} w{i + 2} w{i + 4}") for i in range(8)]}
    return gen.load_prompts(tok, ["cloze"], ["tune", "holdout"], 2, items)


def _targets(out):
    return {(r["source"], r["half"], r["example"]): r["target"]
            for r in RecordCache(out / "cache.jsonl").read().values() if r["method"] == "_target"}


def _by_method(out, method):
    return {(r["source"], r["half"], r["example"]): r
            for r in RecordCache(out / "cache.jsonl").read().values() if r["method"] == method}


def _write_rows(gen, lm, tok, prompts, targets, path, cpu_s=1.25, edit=None):
    """A precomputed file holding PR-A's rows of every prompt (``edit(line)`` may change a line)."""
    explain = gen.make_method("pr-a", lm, tok, 8)
    with open(path, "w") as f:
        for prompt in (p for cell in prompts.values() for p in cell):
            target = torch.tensor(targets[(prompt.source, prompt.half, prompt.index)])
            line = {"model": "tiny", "source": prompt.source, "half": prompt.half, "example": prompt.index,
                    "text_sha": prompt.sha, "input_ids": prompt.ids.tolist(), "target": target.tolist(),
                    "rows": explain(prompt, target).tolist(), "cpu_s": cpu_s}
            if edit is not None:
                line = edit(line)
            if line is not None:
                f.write(json.dumps(line) + "\n")
    return path


def test_precomputed_rows_get_the_records_of_the_method_that_made_them(gen, tok, lm, tmp_path):
    prompts = _prompts(gen, tok)
    assert gen.run("tiny", lm, tok, prompts, ["pr-a"], tmp_path) == {"computed": 4, "cached": 0}
    path = _write_rows(gen, lm, tok, prompts, _targets(tmp_path), tmp_path / "scores.jsonl")
    pre = {"attnlrp": gen.Precomputed(path)}
    assert gen.run("tiny", lm, tok, prompts, ["attnlrp"], tmp_path, precomputed=pre) == {"computed": 4, "cached": 0}
    direct, read = _by_method(tmp_path, "pr-a"), _by_method(tmp_path, "attnlrp")
    assert set(read) == set(direct) and len(read) == 4
    for key, rec in read.items():
        assert {m: rec[m] for m in METRICS} == {m: direct[key][m] for m in METRICS}
        assert rec["cpu_s"] == 1.25 and rec["config_key"] != direct[key]["config_key"]  # the file's time; own key
    # cached on a rerun; a changed line (other rows) is evaluated again, and only that one
    assert gen.run("tiny", lm, tok, prompts, ["attnlrp"], tmp_path, precomputed=pre) == {"computed": 0, "cached": 4}
    first = next(p for cell in prompts.values() for p in cell)

    def reverse_first(line):
        if line["example"] == first.index and line["half"] == first.half:
            line["rows"] = [[-v for v in row] for row in line["rows"]]
        return line

    _write_rows(gen, lm, tok, prompts, _targets(tmp_path), path, edit=reverse_first)
    again = gen.run("tiny", lm, tok, prompts, ["attnlrp"], tmp_path, precomputed={"attnlrp": gen.Precomputed(path)})
    assert again == {"computed": 1, "cached": 3}
    changed = _by_method(tmp_path, "attnlrp")[(first.source, first.half, first.index)]
    assert changed["comprehensiveness"] != direct[(first.source, first.half, first.index)]["comprehensiveness"]
    # the table shows the method under its label
    assert gen.main(["--table", "--out", str(tmp_path)]) == 0
    assert "| AttnLRP (lxt) | 2 |" in (tmp_path / "summary.md").read_text()


def test_a_file_of_other_prompts_is_refused_and_an_uncovered_prompt_skipped(gen, tok, lm, tmp_path):
    prompts = _prompts(gen, tok)
    gen.run("tiny", lm, tok, prompts, ["random"], tmp_path)
    targets = _targets(tmp_path)

    def other_ids(line):  # the prompt tokenised differently: one id fewer
        line["input_ids"] = line["input_ids"][1:]
        line["rows"] = [row[1:] for row in line["rows"]]
        return line

    path = _write_rows(gen, lm, tok, prompts, targets, tmp_path / "ids.jsonl", edit=other_ids)
    with pytest.raises(PRXAIError, match=r"the prompt of tiny cloze/tune example \d+ differs from the benchmark's"):
        gen.run("tiny", lm, tok, prompts, ["attnlrp"], tmp_path, precomputed={"attnlrp": gen.Precomputed(path)})

    def other_target(line):
        line["target"] = line["target"][::-1] if line["target"] != line["target"][::-1] else line["target"][1:] + [3]
        return line

    path = _write_rows(gen, lm, tok, prompts, targets, tmp_path / "target.jsonl", edit=other_target)
    with pytest.raises(PRXAIError, match="the continuation of tiny cloze/tune example"):
        gen.run("tiny", lm, tok, prompts, ["attnlrp"], tmp_path, precomputed={"attnlrp": gen.Precomputed(path)})
    assert not _by_method(tmp_path, "attnlrp")  # nothing recorded from a refused file

    holdout_only = _write_rows(gen, lm, tok, prompts, targets, tmp_path / "holdout.jsonl",
                               edit=lambda line: line if line["half"] == "holdout" else None)
    logged = []
    counts = gen.run("tiny", lm, tok, prompts, ["attnlrp"], tmp_path, log=logged.append,
                     precomputed={"attnlrp": gen.Precomputed(holdout_only)})
    assert counts == {"computed": 2, "cached": 0, "skipped": 2}
    assert sum("no precomputed rows of attnlrp; skipped" in line for line in logged) == 2
    assert {k[1] for k in _by_method(tmp_path, "attnlrp")} == {"holdout"}


def test_command_line_refuses_a_bad_precomputed_file_in_one_line(gen, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"model": "smollm2", "source": "cloze"}) + "\n")
    for spec, words in ((f"attnlrp={tmp_path / 'none.jsonl'}", "no precomputed scores"),
                        (f"attnlrp={bad}", "bad.jsonl:1: missing half, example"),
                        (f"pr-a={bad}", "not among the built-in methods"),
                        ("attnlrp", "NAME=PATH")):
        with pytest.raises(SystemExit) as caught:
            gen.main(["--methods", "attnlrp", "--precomputed", spec, "--out", str(tmp_path)])
        assert words in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(SystemExit) as caught:  # a precomputed name is a method only when its file is given
        gen.main(["--methods", "attnlrp", "--out", str(tmp_path)])
    assert "unknown method 'attnlrp'" in str(caught.value)
    assert not (tmp_path / "COMMAND").exists()  # refused before anything is written
