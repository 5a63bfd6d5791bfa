"""attribute-dataset, third reliability round: input checks, resumes that never return stale rows, shard handling.

Each test is named in docs/reliability.md ("Dataset runner: third round").
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from captum_prxai.cli import main
from captum_prxai.corpus import attribute_dataset, read_corpus, read_metadata, read_results
from captum_prxai.corpus.io import MANIFEST
from captum_prxai.exceptions import PRXAIError
from test_corpus import _csv, _texts, tiny_checkpoint  # noqa: F401  (the tiny checkpoint fixture)

pytest.importorskip("pyarrow")


def _cli(capsys, *argv):
    """Run the CLI; returns (exit code, stdout, stderr)."""
    code = main(["attribute-dataset", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# ============================================================================ input checks
def test_ragged_csv_rows_are_refused_with_their_line_or_skipped_and_counted(tiny_checkpoint, tmp_path, capsys):
    src = tmp_path / "ragged.csv"
    # line 3 is a quoted two-line text (lines 3-4); line 5 has a comma too many; line 6 has a field too few
    src.write_text('uid,body,gold\n1,a b,pos\n2,"c\nd",neg\n3,good, but far too long and dull,pos\n4,e f\n5,g,neu\n')
    with pytest.raises(PRXAIError, match=r"ragged.csv:5: this row has 4 fields but the header has 3"):
        read_corpus(src, text_column="body")
    code, _, err = _cli(capsys, src, "--text-column", "body", "--model", tiny_checkpoint, "-o", tmp_path / "out",
                        "--no-progress")
    assert "ragged.csv:5:" in _one_line_error(code, err) and "--skip-bad-rows" in err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("part-*"))

    corpus = read_corpus(src, text_column="body", id_column="uid", bad_rows="skip")
    assert corpus.ids == ["1", "2", "5"] and corpus.texts == ["a b", "c\nd", "g"] and corpus.skipped_lines == [5, 6]
    code, out, err = _cli(capsys, src, "--text-column", "body", "--id-column", "uid", "--model", tiny_checkpoint,
                          "--methods", "pr-g", "-o", tmp_path / "out", "--no-progress", "--skip-bad-rows")
    assert code == 0, err
    assert "skipped 2 ragged CSV row(s)" in out and "line(s) 5, 6" in out
    assert [r["id"] for r in read_results(tmp_path / "out")] == ["1", "2", "5"]


def test_a_csv_field_over_131072_characters_is_read(tiny_checkpoint, tmp_path):
    long_text = " ".join(["a", "b"] * 70_000)  # 279,999 characters
    assert len(long_text) > csv.field_size_limit()
    src = _csv(tmp_path / "long.csv", [long_text, "c d"])
    before = csv.field_size_limit()
    corpus = read_corpus(src, text_column="body", id_column="uid")
    assert corpus.texts == [long_text, "c d"]
    assert csv.field_size_limit() == before  # the process-wide limit is restored
    (tmp_path / "long.jsonl").write_text(json.dumps({"uid": "doc-0", "body": long_text}) + "\n")
    common = dict(text_column="body", id_column="uid", model=tiny_checkpoint, methods="pr-g", progress=False)
    run = attribute_dataset(src, tmp_path / "csv-out", **common)
    assert run.explained == 2 and run.truncated == 1
    attribute_dataset(tmp_path / "long.jsonl", tmp_path / "jsonl-out", **common)
    from_csv, from_jsonl = read_results(tmp_path / "csv-out")[0], read_results(tmp_path / "jsonl-out")[0]
    assert from_csv["tokens"] == from_jsonl["tokens"] and from_csv["n_tokens"] == 140_002
    assert from_csv["scores_pr_g"] == pytest.approx(from_jsonl["scores_pr_g"], abs=1e-5)  # batched with "c d"


def test_negative_limits_are_refused(tiny_checkpoint, tmp_path, capsys):
    src = _csv(tmp_path / "in.csv", ["a b", "c d", "e"])
    for limit in (-1, -5):
        with pytest.raises(PRXAIError, match=f"limit must be a whole number of texts, 0 or more, got {limit}"):
            read_corpus(src, text_column="body", limit=limit)
        code, _, err = _cli(capsys, src, "--text-column", "body", "--model", tiny_checkpoint, "--limit", limit,
                            "-o", tmp_path / "out", "--no-progress")
        assert "got -" in _one_line_error(code, err)
    assert not list((tmp_path / "out").glob("part-*")) if (tmp_path / "out").exists() else True
    assert read_corpus(src, text_column="body", limit=2).texts == ["a b", "c d"]


@pytest.mark.parametrize("threads", ["0", "-2"])
def test_threads_below_one_are_refused(tiny_checkpoint, tmp_path, capsys, threads):
    src = _csv(tmp_path / "in.csv", ["a b"])
    code, _, err = _cli(capsys, src, "--text-column", "body", "--model", tiny_checkpoint, "--threads", threads,
                        "-o", tmp_path / "out", "--no-progress")
    assert f"threads must be a whole number, at least 1, got {threads}" in _one_line_error(code, err)


def test_an_empty_output_name_is_refused_and_nothing_is_written_here(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    src = _csv(tmp_path / "in.csv", ["a b"])
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    for output in ("", "  "):
        code, _, err = _cli(capsys, src, "--text-column", "body", "--model", tiny_checkpoint, "-o", output,
                            "--no-progress")
        assert "output folder is an empty name" in _one_line_error(code, err)
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("value,kind", [(["a", "b"], "a list"), ({"t": "a"}, "an object"), (5, "a number"),
                                        (True, "a boolean")])
def test_a_jsonl_text_that_is_not_a_string_is_refused_with_its_line(tiny_checkpoint, tmp_path, capsys, value, kind):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": "a b"}) + "\n\n" + json.dumps({"text": value}) + "\n")
    code, _, err = _cli(capsys, src, "--model", tiny_checkpoint, "-o", tmp_path / "out", "--no-progress")
    assert f"in.jsonl, line 3: the text column 'text' holds {kind}, not a string" in _one_line_error(code, err)
    nulls = tmp_path / "null.jsonl"
    nulls.write_text(json.dumps({"text": None}) + "\n")
    assert read_corpus(nulls).texts == [None]  # null stays an empty text (skipped, counted)


def test_an_option_for_a_method_not_run_is_refused_not_stored(tiny_checkpoint, tmp_path, capsys):
    src = _csv(tmp_path / "in.csv", ["a b", "c"])
    code, _, err = _cli(capsys, src, "--text-column", "body", "--model", tiny_checkpoint, "--methods", "pr-g",
                        "--option", "pr-a.damping=0.5", "-o", tmp_path / "out", "--no-progress")
    err = _one_line_error(code, err)
    assert "options given for pr-a (--option pr-a.damping=...)" in err and "methods run (pr-g)" in err
    assert not (tmp_path / "out" / MANIFEST).exists()
    with pytest.raises(PRXAIError, match="options given for pr-g.*not among the methods run"):
        attribute_dataset(src, tmp_path / "out", text_column="body", model=tiny_checkpoint, methods="pr-a",
                          method_options={"pr-g": {"damping": 0.5}}, progress=False)
    # the default methods (none named) are checked too, once the model says which they are
    with pytest.raises(PRXAIError, match="options given for ig"):
        attribute_dataset(src, tmp_path / "out", text_column="body", model=tiny_checkpoint,
                          method_options={"ig": {"n_steps": 4}}, progress=False)
    assert not (tmp_path / "out" / MANIFEST).exists()
    code, _, err = _cli(capsys, src, "--text-column", "body", "--model", tiny_checkpoint, "--methods", "pr-g,pr-a",
                        "--option", "pr-a.damping=0.5", "-o", tmp_path / "out", "--no-progress")
    assert code == 0, err
    assert read_metadata(tmp_path / "out")["method_options"] == {"pr-a": {"damping": 0.5}}
