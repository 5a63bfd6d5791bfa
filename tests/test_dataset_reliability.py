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


# ============================================================================ resume keyed by id + input hash
COMMON = dict(text_column="body", methods="pr-g", shard_size=2, bucketing=False, progress=False)
SAME = ("row", "id", "input_hash", "label", "tokens", "predicted", "target", "skip_reason")


def _same_table(resumed, fresh):
    """The resumed run's table equals a fresh run's: same rows, ids, hashes and tokens; scores to batching noise."""
    assert [tuple(r[k] for k in SAME) for r in resumed] == [tuple(r[k] for k in SAME) for r in fresh]
    for a, b in zip(resumed, fresh):
        assert (a["scores_pr_g"] is None) == (b["scores_pr_g"] is None)
        if a["scores_pr_g"] is not None:
            assert a["scores_pr_g"] == pytest.approx(b["scores_pr_g"], abs=1e-5)


def _write_csv(path: Path, rows) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["uid", "body", "gold"])
        w.writerows(rows)
    return path


def test_an_edited_text_or_label_is_recomputed_not_read_back(tiny_checkpoint, tmp_path):
    texts = _texts(8, seed=7)
    rows = [[f"doc-{i}", t, "pos"] for i, t in enumerate(texts)]
    src = _write_csv(tmp_path / "in.csv", rows)
    kw = dict(COMMON, id_column="uid", label_column="gold", model=tiny_checkpoint)
    attribute_dataset(src, tmp_path / "out", **kw)
    rows[3][1] = "z y x w v"  # an edited text
    rows[6][2] = "neg"  # a changed label
    _write_csv(src, rows)
    run = attribute_dataset(src, tmp_path / "out", **kw)
    assert (run.recomputed_shards, run.processed, run.already_done) == (2, 4, 4)  # shards {2,3} and {6,7}
    note = next(n for n in run.notes if "the input changed" in n)
    assert "2 with another text or label (id 'doc-3', 'doc-6')" in note and "2 shard(s)" in note
    resumed = read_results(tmp_path / "out")
    assert resumed[3]["tokens"] == ["[CLS]", "z", "y", "x", "w", "v", "[SEP]"] and resumed[6]["label"] == 0
    attribute_dataset(src, tmp_path / "fresh", **kw)
    _same_table(resumed, read_results(tmp_path / "fresh"))
    again = attribute_dataset(src, tmp_path / "out", **kw)
    assert (again.processed, again.recomputed_shards, again.already_done) == (0, 0, 8)


def test_inserted_deleted_and_reordered_rows_are_never_lost_or_duplicated(tiny_checkpoint, tmp_path):
    texts = _texts(10, seed=8)
    # default ids (the row number): a row inserted at 4 shifts every row after it
    src = _write_csv(tmp_path / "plain.csv", [[str(i), t, ""] for i, t in enumerate(texts)])
    kw = dict(COMMON, model=tiny_checkpoint)
    attribute_dataset(src, tmp_path / "plain", **kw)
    inserted = texts[:4] + ["q r s"] + texts[4:]
    _write_csv(src, [[str(i), t, ""] for i, t in enumerate(inserted)])
    run = attribute_dataset(src, tmp_path / "plain", **kw)
    assert run.already_done == 4 and run.processed == 7 and "Ids are row numbers here" in run.notes[-1]
    attribute_dataset(src, tmp_path / "plain-fresh", **kw)
    plain = read_results(tmp_path / "plain")
    _same_table(plain, read_results(tmp_path / "plain-fresh"))
    assert [r["tokens"][1:-1] for r in plain] == [t.split() for t in inserted]

    # an id column: rows deleted (doc-2) and reordered (doc-8 and doc-9 swapped) since the run began
    ids_src = _write_csv(tmp_path / "ids.csv", [[f"doc-{i}", t, ""] for i, t in enumerate(texts)])
    kw = dict(COMMON, id_column="uid", model=tiny_checkpoint)
    attribute_dataset(ids_src, tmp_path / "ids", **kw)
    order = [0, 1, 3, 4, 5, 6, 7, 9, 8]
    _write_csv(ids_src, [[f"doc-{i}", texts[i], ""] for i in order])
    run = attribute_dataset(ids_src, tmp_path / "ids", **kw)
    note = next(n for n in run.notes if "the input changed" in n)
    assert "1 no longer in the input (id 'doc-2')" in note and "at another row" in note
    attribute_dataset(ids_src, tmp_path / "ids-fresh", **kw)
    resumed = read_results(tmp_path / "ids")
    _same_table(resumed, read_results(tmp_path / "ids-fresh"))
    assert [r["id"] for r in resumed] == [f"doc-{i}" for i in order] and [r["row"] for r in resumed] == list(range(9))


def test_overwrite_deletes_only_the_runs_own_shards(tiny_checkpoint, tmp_path):
    src = _csv(tmp_path / "in.csv", _texts(4, seed=9))
    out = tmp_path / "out"
    attribute_dataset(src, out, text_column="body", model=tiny_checkpoint, methods="pr-g", shard_size=2,
                      progress=False)
    listed = json.loads((out / MANIFEST).read_text())["shards"]
    assert sorted(p.name for p in out.glob("part-*.parquet")) == listed and len(listed) == 2
    (out / "part-notes.txt").write_text("mine")
    (out / "part-000000007-0123456789.parquet").write_bytes(b"a user's file named like a shard")
    run = attribute_dataset(src, out, text_column="body", model=tiny_checkpoint, methods="pr-a", overwrite=True,
                            shard_size=4, progress=False)
    assert run.processed == 4 and any("not this run's" in n for n in run.notes)
    assert (out / "part-notes.txt").read_text() == "mine"
    assert (out / "part-000000007-0123456789.parquet").read_bytes() == b"a user's file named like a shard"
    assert not any((out / n).exists() for n in listed)
    assert [r["row"] for r in read_results(out)] == [0, 1, 2, 3]  # the listed shards only


# ============================================================================ flushing, progress
def _clocked(monkeypatch, seconds_per_batch: float):
    """Every batch the worker yields advances the runner's clock by ``seconds_per_batch`` (no real waiting)."""
    from captum_prxai.corpus import runner as runner_mod
    from captum_prxai.corpus import worker as worker_mod

    clock = {"now": 1000.0}
    monkeypatch.setattr(runner_mod.time, "monotonic", lambda: clock["now"])
    real = worker_mod.Worker.iter_process

    def ticking(self, records):
        for rows in real(self, records):
            clock["now"] += seconds_per_batch
            yield rows

    monkeypatch.setattr(worker_mod.Worker, "iter_process", ticking)


def test_a_long_shard_is_flushed_every_flush_seconds_and_counted_once_written(tiny_checkpoint, tmp_path, monkeypatch):
    import tqdm.auto

    texts = [" ".join(["a"] * 10)] * 12  # 12 tokens each: 2 texts a batch at a budget of 24
    src = _csv(tmp_path / "in.csv", texts)
    out = tmp_path / "out"
    counted = []

    class Bar:  # the progress bar: every count must already be on disk
        def __init__(self, *args, **kwargs):
            self.n = 0

        def update(self, n):
            self.n += n
            on_disk = len(read_results(out))
            assert on_disk >= self.n, (on_disk, self.n)
            counted.append(self.n)

        def set_postfix(self, **kwargs):
            pass

        def close(self):
            pass

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    _clocked(monkeypatch, 20.0)  # 20 s a batch: a 30 s flush writes every second batch
    run = attribute_dataset(src, out, text_column="body", model=tiny_checkpoint, methods="pr-g", token_budget=24,
                            shard_size=256, flush_seconds=30, progress=True)
    assert run.shards == 3 and run.processed == 12  # one planned shard, written as 3 partial shards of 4 texts
    assert counted == [4, 8, 12]
    assert [r["row"] for r in read_results(out)] == list(range(12))


def test_an_interrupt_mid_shard_keeps_the_rows_computed_so_far(tiny_checkpoint, tmp_path, monkeypatch):
    from captum_prxai.corpus import worker as worker_mod

    src = _csv(tmp_path / "in.csv", [" ".join(["b"] * 10)] * 10)
    real = worker_mod.Worker.iter_process

    def interrupted(self, records):
        for n, rows in enumerate(real(self, records)):
            if n == 3:
                raise KeyboardInterrupt
            yield rows

    monkeypatch.setattr(worker_mod.Worker, "iter_process", interrupted)
    kw = dict(text_column="body", model=tiny_checkpoint, methods="pr-g", token_budget=24, progress=False)
    with pytest.raises(KeyboardInterrupt):
        attribute_dataset(src, tmp_path / "out", **kw)
    assert len(read_results(tmp_path / "out")) == 6  # three batches of two, written although the shard is unfinished
    monkeypatch.setattr(worker_mod.Worker, "iter_process", real)
    run = attribute_dataset(src, tmp_path / "out", **kw)
    assert (run.already_done, run.processed) == (6, 4)
    assert [r["row"] for r in read_results(tmp_path / "out")] == list(range(10))


# ============================================================================ damaged shards, disk full
@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_damaged_shard_is_detected_recomputed_and_reported(tiny_checkpoint, tmp_path, fmt):
    src = _csv(tmp_path / "in.csv", _texts(6, seed=10))
    kw = dict(text_column="body", model=tiny_checkpoint, methods="pr-g", shard_size=3, bucketing=False,
              format=fmt, progress=False)
    attribute_dataset(src, tmp_path / "out", **kw)
    attribute_dataset(src, tmp_path / "fresh", **kw)
    first, second = sorted((tmp_path / "out").glob(f"part-*.{fmt}"))
    data = first.read_bytes()
    first.write_bytes(data[: len(data) // 2])  # truncated mid-write by a crash or a full disk
    if fmt == "jsonl":  # the other loses a whole line: still valid JSON Lines, yet rows are missing
        second.write_bytes(b"".join(second.read_bytes().splitlines(keepends=True)[:2]))
    with pytest.raises(PRXAIError, match=f"damaged shard .*{first.name}.*rerun the same attribute-dataset"):
        read_results(tmp_path / "out")
    run = attribute_dataset(src, tmp_path / "out", **kw)
    damaged = 2 if fmt == "jsonl" else 1
    assert run.damaged_shards == damaged and run.processed == 3 * damaged
    assert sum("damaged shard" in n and "explained again" in n for n in run.notes) == damaged
    assert "damaged shard" in run.summary()
    _same_table(read_results(tmp_path / "out"), read_results(tmp_path / "fresh"))


def test_a_full_disk_exits_2_naming_the_path_and_leaves_no_temporary_files(tiny_checkpoint, tmp_path, capsys,
                                                                             monkeypatch):
    import errno
    import os

    from captum_prxai.corpus import io as io_mod

    src = _csv(tmp_path / "in.csv", _texts(6, seed=11))
    out = tmp_path / "out"
    real_fsync = os.fsync
    shards_synced = {"n": 0}

    def fsync(fd):  # the third shard's write finds the disk full
        if "/.part-" in os.readlink(f"/proc/self/fd/{fd}"):
            shards_synced["n"] += 1
            if shards_synced["n"] >= 3:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(io_mod.os, "fsync", fsync)
    argv = [src, "--text-column", "body", "--model", tiny_checkpoint, "--methods", "pr-g", "--shard-size", 2,
            "--no-bucketing", "-o", out, "--no-progress"]
    code, _, err = _cli(capsys, *argv)
    err = _one_line_error(code, err)
    assert f"cannot write {out}/part-000000004-" in err and "No space left on device" in err
    assert not list(out.glob(".*.tmp")) and len(read_results(out)) == 4
    monkeypatch.setattr(io_mod.os, "fsync", real_fsync)
    code, stdout, err = _cli(capsys, *argv)
    assert code == 0 and "4 of 6 were already done" in stdout
    assert [r["row"] for r in read_results(out)] == list(range(6))


def test_a_run_killed_mid_shard_keeps_its_flushed_rows(tiny_checkpoint, tmp_path):
    """One planned shard of 16 texts, flushed after every batch (flush_seconds=0); SIGKILL after two files."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from captum_prxai import methods as registry
    from test_corpus import SLOW_METHOD

    script = tmp_path / "run.py"
    script.write_text(SLOW_METHOD + (
        "import sys\nfrom captum_prxai.corpus import attribute_dataset\nregister_slow(0.4)\n"
        "attribute_dataset(sys.argv[1], sys.argv[2], text_column='body', id_column='uid', model=sys.argv[3],\n"
        "                  methods='slow-pr-g', token_budget=24, flush_seconds=0, progress=False, threads=1)\n"))
    src = _csv(tmp_path / "in.csv", [" ".join(["c"] * 10)] * 16)
    out = tmp_path / "out"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(script), str(src), str(out), tiny_checkpoint], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 180
    while time.time() < deadline and len(list(out.glob("part-*.parquet"))) < 2 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    kept = len(read_results(out))
    assert 4 <= kept < 16 and kept % 2 == 0  # whole batches of two, from a shard that never finished

    namespace: dict = {}
    exec(SLOW_METHOD, namespace)
    namespace["register_slow"](0.0)
    try:
        run = attribute_dataset(src, out, text_column="body", id_column="uid", model=tiny_checkpoint,
                                methods="slow-pr-g", token_budget=24, progress=False)
    finally:
        registry.METHODS.pop("slow-pr-g", None)
    assert (run.already_done, run.processed) == (kept, 16 - kept)
    assert [r["row"] for r in read_results(out)] == list(range(16)) and not list(out.glob(".*.tmp"))


# ============================================================================ docs/dataset.md
DOC = Path(__file__).resolve().parents[1] / "docs" / "dataset.md"


def _table(text: str, header: str) -> list[list[str]]:
    """Rows (cells) of the markdown table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_docs_dataset_md_states_the_codes_defaults_columns_and_example():
    import argparse
    import re

    from captum_prxai.commands.attribute_dataset import add_arguments
    from captum_prxai.corpus import SKIP_REASONS, score_column
    from captum_prxai.corpus.io import _schema
    from captum_prxai.corpus.ray_engine import ACTOR_RESTARTS
    from captum_prxai.methods import default_method

    text = DOC.read_text(encoding="utf-8")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    actions = {s: a for a in parser._actions for s in a.option_strings}

    # the options table: every option exists; the defaults it states are the parser's
    options = {re.findall(r"`(--[a-z-]+)", row[0])[0]: row for row in _table(text, "| option |")}
    assert all(o in actions for o in options), sorted(set(options) - set(actions))
    default = default_method()
    assert actions["--methods"].default is None  # None: the default method, resolved per model
    assert options["--methods"][2].startswith(f"`{default}`")
    for flag in ("--target", "--long", "--format", "--engine"):
        assert options[flag][2] == f"`{actions[flag].default}`", flag
    for flag in ("--token-budget", "--shard-size", "--flush-seconds"):
        assert float(options[flag][2]) == actions[flag].default, flag

    # the output table lists the schema's columns, in order
    columns = [re.findall(r"`([^`]+)`", row[0])[0] for row in _table(text, "| column |")]
    schema = _schema([default], {}).names
    assert columns == schema[:-1] + ["scores_<method>"] and schema[-1] == score_column(default)
    skip_row = next(row for row in _table(text, "| column |") if row[0] == "`skip_reason`")
    assert all(f"`{reason}`" in skip_row[2] for reason in SKIP_REASONS)

    # the Python example runs the default method, and the pandas example reads that method's column
    python_example = re.search(r"```python\nfrom captum_prxai.corpus import attribute_dataset.*?```", text, re.S)[0]
    assert "methods=" not in python_example.replace("# methods=None", "")
    pandas_example = re.search(r"```python\nimport pandas as pd.*?```", text, re.S)[0]
    assert re.findall(r"row\.(scores_\w+)", pandas_example) == [score_column(default)]
    assert f"at most {ACTOR_RESTARTS}\ntimes" in text or f"at most {ACTOR_RESTARTS} times" in text


# ============================================================================ ray
def test_ray_reads_the_input_itself_and_reports_per_batch(tiny_checkpoint, tmp_path, monkeypatch):
    """CSV (with a ragged row skipped), JSON Lines and Parquet on a 1-CPU local Ray: the driver keeps no text,
    Ray Data reads the file (ray.data.read_csv / read_json / read_parquet), rows come back batch by batch, and the
    table equals the local engine's."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from captum_prxai.corpus import runner as runner_mod

    texts = _texts(14, seed=12, lo=0, hi=40)
    labels = ["neg", "neu", "pos"]
    rows = [[f"doc-{i}", t, labels[i % 3]] for i, t in enumerate(texts)]
    inputs = {"csv": _write_csv(tmp_path / "in.csv", rows[:5] + [["bad", "a, b", "pos", "extra"]] + rows[5:])}
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"uid": u, "body": t, "gold": g}) + "\n" for u, t, g in rows))
    inputs["jsonl"] = tmp_path / "in.jsonl"
    pq.write_table(pa.table({"uid": [r[0] for r in rows], "body": [r[1] for r in rows], "gold": [r[2] for r in rows]}),
                   str(tmp_path / "in.parquet"))
    inputs["parquet"] = tmp_path / "in.parquet"

    corpora, reads, adds = [], [], []
    real_read = runner_mod.read_corpus
    monkeypatch.setattr(runner_mod, "read_corpus", lambda *a, **k: corpora.append(real_read(*a, **k)) or corpora[-1])
    for name in ("read_csv", "read_json", "read_parquet"):
        real = getattr(ray.data, name)
        monkeypatch.setattr(ray.data, name,
                            lambda *a, _real=real, _name=name, **k: reads.append(_name) or _real(*a, **k))
    real_add = runner_mod._Flusher.add
    monkeypatch.setattr(runner_mod._Flusher, "add", lambda self, i, r: adds.append(len(r)) or real_add(self, i, r))

    common = dict(text_column="body", id_column="uid", label_column="gold", model=tiny_checkpoint, methods="pr-g",
                  token_budget=64, shard_size=6, bad_rows="skip", progress=False)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        for fmt, src in inputs.items():
            local = attribute_dataset(src, tmp_path / f"local-{fmt}", **common)
            corpora.clear(), reads.clear(), adds.clear()
            remote = attribute_dataset(src, tmp_path / f"ray-{fmt}", engine="ray", **common)
            assert corpora[0].texts is None and len(corpora[0].digests) == 14  # the driver held no text
            assert reads == [{"csv": "read_csv", "jsonl": "read_json", "parquet": "read_parquet"}[fmt]]
            assert len(adds) > remote.shards > 0 and sum(adds) == 14  # per batch, not per shard
            assert (remote.processed, remote.skipped, remote.explained) == (local.processed, local.skipped,
                                                                            local.explained)
            assert remote.processed == 14 and remote.skipped.get("empty", 0) >= 1
            _same_table(read_results(tmp_path / f"ray-{fmt}"), read_results(tmp_path / f"local-{fmt}"))
            if fmt == "csv":
                assert any("line(s) 7" in n for n in remote.notes)
        # resume on Ray after an edit: Ray cut its shards in input order (6 rows each), so the one holding row 3
        # is recomputed and the other 8 rows are kept; the texts still come from Ray's reader
        rows[3][1] = "z y x"
        _write_csv(inputs["csv"], rows[:5] + [["bad", "a, b", "pos", "extra"]] + rows[5:])
        reads.clear()
        again = attribute_dataset(inputs["csv"], tmp_path / "ray-csv", engine="ray", **common)
        assert (again.recomputed_shards, again.already_done, again.processed) == (1, 8, 6) and reads == ["read_csv"]
        attribute_dataset(inputs["csv"], tmp_path / "fresh-csv", **common)
        _same_table(read_results(tmp_path / "ray-csv"), read_results(tmp_path / "fresh-csv"))
    finally:
        ray.shutdown()


def test_ray_retries_only_the_rows_left_after_a_lost_worker_and_at_most_three_times(monkeypatch, capsys):
    """run_ray's retries, with Ray's execution stubbed: a lost actor (ActorDiedError) after some rows came back
    gets the rows left retried on new actors; a worker lost every time fails the run after ACTOR_RESTARTS retries;
    an error of our own code fails at once."""
    ray = pytest.importorskip("ray")
    from ray.exceptions import ActorDiedError

    from captum_prxai.corpus import ray_engine

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    shards = [[{"row": r, "id": str(r)} for r in range(s, s + 3)] for s in (0, 3, 6)]
    calls, got = [], []

    def flaky(_ray, todo, kwargs, deliver, *args):
        calls.append(sorted(r["row"] for shard in todo for r in shard))
        if len(calls) == 1:  # shard 0 and half of shard 1 come back, then the actor dies
            deliver(0, shards[0])
            deliver(1, shards[1][:1])
            raise RuntimeError("MapBatches failed") from ActorDiedError()
        for index, shard in enumerate(todo):
            if shard:
                deliver(index, shard)

    monkeypatch.setattr(ray_engine, "_execute", flaky)
    ray_engine.run_ray(shards, {}, lambda i, rows: got.extend(r["row"] for r in rows))
    assert calls == [list(range(9)), [4, 5, 6, 7, 8]] and sorted(got) == list(range(9))
    assert "a Ray worker was lost (ActorDiedError)" in capsys.readouterr().err

    def always_lost(*args):
        calls.append(1)
        raise ActorDiedError()

    calls.clear()
    monkeypatch.setattr(ray_engine, "_execute", always_lost)
    with pytest.raises(PRXAIError, match="the ray engine failed after 3 retries"):
        ray_engine.run_ray(shards, {}, lambda i, rows: None)
    assert len(calls) == 1 + ray_engine.ACTOR_RESTARTS

    def our_bug(*args):
        calls.append(1)
        raise ValueError("a bug")

    calls.clear()
    monkeypatch.setattr(ray_engine, "_execute", our_bug)
    with pytest.raises(PRXAIError, match=r"the ray engine failed \(ValueError: a bug\)"):
        ray_engine.run_ray(shards, {}, lambda i, rows: None)
    assert len(calls) == 1


def test_results_of_the_former_layout_are_refused_with_the_reason(tiny_checkpoint, tmp_path):
    """A folder of the first layout (rows without input_hash, no shard list) is never resumed from."""
    src = _csv(tmp_path / "in.csv", ["a b", "c d"])
    out = tmp_path / "out"
    attribute_dataset(src, out, text_column="body", model=tiny_checkpoint, methods="pr-g", progress=False)
    manifest = json.loads((out / MANIFEST).read_text())
    manifest.update(format_version=1, run_key="0123456789abcdef")
    manifest.pop("shards")
    (out / MANIFEST).write_text(json.dumps(manifest))
    (out / "part-000000005-0123456789.parquet").write_bytes(b"a shard of the former layout")
    (out / "part-notes.txt").write_text("mine")
    with pytest.raises(PRXAIError, match=r"an older output layout \(1; this version writes 2"):
        attribute_dataset(src, out, text_column="body", model=tiny_checkpoint, methods="pr-g", progress=False)
    run = attribute_dataset(src, out, text_column="body", model=tiny_checkpoint, methods="pr-g", overwrite=True,
                            progress=False)
    assert run.processed == 2 and not (out / "part-000000005-0123456789.parquet").exists()  # its shards: deleted
    assert (out / "part-notes.txt").read_text() == "mine" and len(list(out.glob("part-*.parquet"))) == 1


def test_the_library_refuses_a_device_this_torch_cannot_use_before_the_model_loads(monkeypatch):
    """``attribute_dataset(device="tpu")`` (the library, not the CLI) says so in one line, before any model loads."""
    import captum_prxai.corpus.worker as worker
    from captum_prxai.exceptions import PRXAIError

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded before the device was checked")

    monkeypatch.setattr(worker, "load_model_spec", never)
    for device in ("tpu", "cuda:7" if not __import__("torch").cuda.is_available() else "tpu"):
        with pytest.raises(PRXAIError, match="device"):
            worker.Worker("default", None, threads=1, device=device)
