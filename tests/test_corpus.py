"""attribute_dataset: output schema and metadata, bucketing, resumption, bad input, and ray == local."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from captum_prxai.cli import main
from captum_prxai.corpus import attribute_dataset, plan_batches, read_metadata, read_results
from captum_prxai.corpus.io import MANIFEST
from captum_prxai.exceptions import PRXAIError
from conftest import _tiny

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

WORDS = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
LABELS = ["neg", "neu", "pos"]


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> str:
    """A tiny random BERT classifier (64 positions, 3 classes) with a word-level tokenizer, saved to disk."""
    from transformers import BertTokenizer

    folder = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    vocab += [f"w{i}" for i in range(50 - len(vocab))]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizer(str(folder / "vocab.txt"), model_max_length=64)
    torch.manual_seed(0)
    model = _tiny("bert")
    model.config.id2label = dict(enumerate(LABELS))
    model.config.label2id = {n: i for i, n in enumerate(LABELS)}
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return str(folder)


def _texts(n: int, seed: int = 0, lo: int = 1, hi: int = 30) -> list[str]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi, (n,), generator=gen).tolist()
    return [" ".join(WORDS[int(i)] for i in torch.randint(0, len(WORDS), (k,), generator=gen)) for k in lengths]


def _csv(path: Path, texts, labels=None, ids=None) -> Path:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["uid", "body", "gold"])
        for i, t in enumerate(texts):
            w.writerow([ids[i] if ids else f"doc-{i}", t, labels[i] if labels else ""])
    return path


def _scores(rows, method="scores_pr_g"):
    return {r["id"]: r[method] for r in rows}


# ============================================================================ output
def test_local_output_schema_metadata_and_scores_from_the_core(tiny_checkpoint, tmp_path):
    texts = _texts(12)
    src = _csv(tmp_path / "in.csv", texts, labels=[LABELS[i % 3] for i in range(12)])
    run = attribute_dataset(src, tmp_path / "out", text_column="body", id_column="uid", label_column="gold",
                            model=tiny_checkpoint, methods="pr-g,pr-a", shard_size=5, progress=False)
    assert (run.total, run.processed, run.explained, run.skipped, run.shards) == (12, 12, 12, {}, 3)
    files = sorted((tmp_path / "out").glob("part-*.parquet"))
    assert len(files) == 3
    schema = pq.read_schema(str(files[0]))
    assert schema.names == ["row", "id", "input_hash", "label", "skip_reason", "n_tokens", "truncated", "windows", "tokens",
                            "predicted", "probabilities", "target", "scores_pr_g", "scores_pr_a"]
    assert schema.field("scores_pr_g").type == pa.list_(pa.float32())
    meta = json.loads(schema.metadata[b"captum_prxai"])
    assert meta == read_metadata(tmp_path / "out")
    assert meta["model"] == tiny_checkpoint and meta["label_names"] == LABELS
    assert [m["name"] for m in meta["methods"]] == ["pr-g", "pr-a"] and meta["target"] == "predicted"

    rows = read_results(tmp_path / "out")
    assert [r["row"] for r in rows] == list(range(12)) and [r["id"] for r in rows] == [f"doc-{i}" for i in range(12)]
    assert [r["label"] for r in rows] == [i % 3 for i in range(12)]

    from transformers import AutoTokenizer

    import captum_prxai as cp
    from captum_prxai.models import load_model

    model, tokenizer = load_model(tiny_checkpoint)
    assert isinstance(tokenizer, type(AutoTokenizer.from_pretrained(tiny_checkpoint)))
    pr = cp.PRGradient(lambda i, m: model(i, attention_mask=m).logits, cp.attention_layers(model))
    for r, text in zip(rows, texts):
        enc = tokenizer(text, return_tensors="pt")
        assert r["tokens"] == tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
        assert len(r["scores_pr_g"]) == len(r["scores_pr_a"]) == len(r["tokens"]) == r["n_tokens"]
        logits = model(**enc).logits[0]
        assert r["predicted"] == int(logits.argmax()) == r["target"]
        assert r["probabilities"] == pytest.approx(torch.softmax(logits.double(), -1).tolist(), abs=1e-6)
        direct = pr.attribute(enc["input_ids"], target=r["target"], additional_forward_args=(enc["attention_mask"],))
        assert r["scores_pr_g"] == pytest.approx(direct[0].tolist(), abs=1e-5)


def test_jsonl_output_holds_the_same_rows_as_parquet(tiny_checkpoint, tmp_path):
    src = _csv(tmp_path / "in.csv", _texts(6, seed=3))
    common = dict(text_column="body", id_column="uid", model=tiny_checkpoint, methods="pr-g", progress=False)
    attribute_dataset(src, tmp_path / "pq", **common)
    attribute_dataset(src, tmp_path / "js", format="jsonl", **common)
    a, b = read_results(tmp_path / "pq"), read_results(tmp_path / "js")
    assert [r["id"] for r in a] == [r["id"] for r in b]
    for x, y in zip(a, b):
        assert x["scores_pr_g"] == y["scores_pr_g"] and x["tokens"] == y["tokens"] and x["target"] == y["target"]


# ============================================================================ batching
def test_token_budget_batches_and_bucketing_cut_padding():
    lengths = [30, 3, 29, 4, 31, 2, 28, 5]
    for bucketing in (True, False):
        batches = plan_batches(lengths, token_budget=64, bucketing=bucketing)
        assert sorted(i for b in batches for i in b) == list(range(8))
        assert all(len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 64 for b in batches)
    padded = {bk: sum(len(b) * max(lengths[i] for i in b) for b in plan_batches(lengths, 64, bk))
              for bk in (True, False)}
    assert padded[True] < padded[False]
    assert plan_batches([100, 1], token_budget=10) == [[1], [0]]  # an over-budget text gets a batch of its own


def test_bucketing_gives_the_same_scores_as_input_order(tiny_checkpoint, tmp_path):
    src = _csv(tmp_path / "in.csv", _texts(20, seed=1, lo=1, hi=60))
    common = dict(text_column="body", id_column="uid", model=tiny_checkpoint, methods="pr-g,pr-ag",
                  token_budget=160, shard_size=7, progress=False)
    attribute_dataset(src, tmp_path / "bucketed", bucketing=True, **common)
    attribute_dataset(src, tmp_path / "plain", bucketing=False, **common)
    a, b = read_results(tmp_path / "bucketed"), read_results(tmp_path / "plain")
    assert [r["id"] for r in a] == [r["id"] for r in b]
    for x, y in zip(a, b):
        assert x["predicted"] == y["predicted"] and x["tokens"] == y["tokens"]
        for col in ("scores_pr_g", "scores_pr_ag"):
            assert x[col] == pytest.approx(y[col], abs=1e-5)


# ============================================================================ skips and long texts
def test_skips_are_rows_with_a_reason_and_are_counted(tiny_checkpoint, tmp_path):
    long_text = " ".join(["a"] * 100)  # 102 tokens > 64
    texts = ["a b c", "   ", "", long_text, "d e"]
    src = _csv(tmp_path / "in.csv", texts, labels=["pos", "neg", "", "neu", ""])
    common = dict(text_column="body", id_column="uid", label_column="gold", model=tiny_checkpoint,
                  methods="pr-g", progress=False)
    run = attribute_dataset(src, tmp_path / "skip", long="skip", target="label", **common)
    assert run.skipped == {"empty": 2, "too-long": 1, "no-label": 1} and run.explained == 1
    rows = read_results(tmp_path / "skip")
    assert [r["skip_reason"] for r in rows] == [None, "empty", "empty", "too-long", "no-label"]
    assert rows[0]["target"] == 2 and rows[3]["n_tokens"] == 102 and rows[3]["scores_pr_g"] is None
    assert "skipped: empty 2, no-label 1, too-long 1" in run.summary()

    cut = attribute_dataset(src, tmp_path / "cut", long="truncate", **common)
    assert cut.truncated == 1 and cut.skipped == {"empty": 2}
    row = read_results(tmp_path / "cut")[3]
    assert row["truncated"] and row["n_tokens"] == 102 and len(row["tokens"]) == len(row["scores_pr_g"]) == 64

    win = attribute_dataset(src, tmp_path / "win", long="windows", **common)
    assert win.windowed == 1
    row = read_results(tmp_path / "win")[3]
    assert row["windows"] >= 2 and not row["truncated"]
    assert len(row["tokens"]) == len(row["scores_pr_g"]) == 102
    assert sum(row["scores_pr_g"]) == pytest.approx(1.0, abs=1e-4)


# ============================================================================ resumption
def test_resume_after_a_failed_run_does_only_the_missing_shards(tiny_checkpoint, tmp_path, monkeypatch):
    from captum_prxai.corpus import worker as worker_mod

    src = _csv(tmp_path / "in.csv", _texts(20, seed=2))
    common = dict(text_column="body", id_column="uid", model=tiny_checkpoint, methods="pr-g", shard_size=4,
                  progress=False)
    real = worker_mod.Worker.iter_process
    calls = {"n": 0}

    def failing(self, records):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("simulated crash")
        return real(self, records)

    monkeypatch.setattr(worker_mod.Worker, "iter_process", failing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        attribute_dataset(src, tmp_path / "out", **common)
    assert len(list((tmp_path / "out").glob("part-*.parquet"))) == 2
    monkeypatch.setattr(worker_mod.Worker, "iter_process", real)

    seen: list[int] = []
    spy = real

    def counting(self, records):
        seen.extend(r["row"] for r in records)
        return spy(self, records)

    monkeypatch.setattr(worker_mod.Worker, "iter_process", counting)
    run = attribute_dataset(src, tmp_path / "out", **common)
    assert (run.already_done, run.processed) == (8, 12) and len(seen) == 12
    rows = read_results(tmp_path / "out")
    assert [r["row"] for r in rows] == list(range(20))  # complete, no duplicates
    again = attribute_dataset(src, tmp_path / "out", **common)
    assert (again.already_done, again.processed, again.shards) == (20, 0, 0)

    fresh = attribute_dataset(src, tmp_path / "fresh", **common)
    assert fresh.processed == 20
    assert _scores(read_results(tmp_path / "fresh")) == _scores(rows)


SLOW_METHOD = textwrap.dedent("""
    import time
    from captum_prxai import methods as registry

    def register_slow(seconds):
        pr_g = registry.resolve_method("pr-g").factory

        def slow(model, forward_func, ctx):
            inner = pr_g(model, forward_func, ctx)

            def explain(ids, mask, special, target):
                time.sleep(seconds)
                return inner(ids, mask, special, target)

            return registry.Explainer("slow-pr-g", "slow PR-G", explain, inner.attribution)

        registry.register_method("slow-pr-g", "slow PR-G", "test", "PR-G, slowly", slow, overwrite=True)
""")

KILL_SCRIPT = SLOW_METHOD + textwrap.dedent("""
    import sys
    from captum_prxai.corpus import attribute_dataset

    register_slow(0.4)
    attribute_dataset(sys.argv[1], sys.argv[2], text_column="body", id_column="uid", model=sys.argv[3],
                      methods="slow-pr-g", shard_size=2, progress=False, threads=1)
""")


def test_resume_after_a_kill(tiny_checkpoint, tmp_path):
    from captum_prxai import methods as registry

    src = _csv(tmp_path / "in.csv", _texts(24, seed=4))
    out = tmp_path / "out"
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(script), str(src), str(out), tiny_checkpoint], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 180
    while time.time() < deadline and len(list(out.glob("part-*.parquet"))) < 3 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = len(list(out.glob("part-*.parquet")))
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    assert 3 <= finished < 12
    assert all(pq.read_table(str(p)).num_rows == 2 for p in out.glob("part-*.parquet"))  # complete shards only

    namespace: dict = {}
    exec(SLOW_METHOD, namespace)
    namespace["register_slow"](0.0)  # the same method (same settings), without the sleep
    try:
        run = attribute_dataset(src, out, text_column="body", id_column="uid", model=tiny_checkpoint,
                                methods="slow-pr-g", shard_size=2, progress=False)
    finally:
        registry.METHODS.pop("slow-pr-g", None)
    assert run.already_done == 2 * finished and run.processed == 24 - 2 * finished
    rows = read_results(out)
    assert sorted(r["row"] for r in rows) == list(range(24))
    assert not list(out.glob(".*.tmp"))


# ============================================================================ bad input
def _bad_inputs(tmp: Path):
    good = _csv(tmp / "good.csv", ["a b", "c d"], labels=["pos", "neg"])
    (tmp / "empty.csv").write_bytes(b"")
    (tmp / "header.csv").write_text("uid,body\n")
    (tmp / "latin1.csv").write_bytes("uid,body\n1,caf\xe9 a\n".encode("latin-1"))
    (tmp / "bad.jsonl").write_text('{"body": "a"}\n{"body": \n')
    _csv(tmp / "unknown.csv", ["a", "b", "c"], labels=["pos", "sarcastic", "7"])
    _csv(tmp / "dup.csv", ["a", "b"], ids=["x", "x"])
    (tmp / "notes.txt").write_text("a\n")
    (tmp / "a-file").write_text("")
    return [
        ("missing text column", dict(input=good, text_column="content"), "no column 'content'.*columns are: uid, body"),
        ("missing id column", dict(input=good, id_column="key"), "no column 'key' \\(the id column"),
        ("empty file", dict(input=tmp / "empty.csv"), "is empty"),
        ("header only", dict(input=tmp / "header.csv"), "holds no rows"),
        ("non-UTF-8 bytes", dict(input=tmp / "latin1.csv"), "not valid utf-8: byte 0xe9 at offset 14 \\(line 2\\)"),
        ("broken JSON line", dict(input=tmp / "bad.jsonl"), "bad.jsonl:2: not valid JSON"),
        ("unknown labels", dict(input=tmp / "unknown.csv", label_column="gold"),
         "unknown labels 'sarcastic' \\(1x\\), '7' \\(1x\\).*0=neg, 1=neu, 2=pos"),
        ("duplicate ids", dict(input=tmp / "dup.csv", id_column="uid"), "id 'x' appears twice"),
        ("unknown format", dict(input=tmp / "notes.txt"), "unknown input format '.txt'"),
        ("missing file", dict(input=tmp / "nope.csv"), "no input file"),
        ("unknown method", dict(input=good, methods="pr-g,magic"), "unknown method 'magic'"),
        ("unwritable output", dict(input=good, output=tmp / "a-file" / "out"), "cannot write to the output folder"),
        ("output is a file", dict(input=good, output=tmp / "a-file"), "is a file"),
        ("windows for a non-PR method", dict(input=good, methods="pr-g,saliency", long="windows"),
         "only the PR-XAI methods.*saliency cannot"),
        ("label target without labels", dict(input=good, target="label"), "give the label column"),
        ("target out of range", dict(input=good, target=5), "target 5 is out of range"),
        ("unknown engine", dict(input=good, engine="spark"), "unknown engine 'spark'"),
    ]


def test_bad_input_gives_clear_errors_before_any_work(tiny_checkpoint, tmp_path):
    cases = _bad_inputs(tmp_path)
    for name, kwargs, message in cases:
        kwargs = dict(kwargs)
        output = kwargs.pop("output", tmp_path / f"out-{name.replace(' ', '-')}")
        with pytest.raises(PRXAIError, match=message):
            attribute_dataset(kwargs.pop("input"), output, **{"text_column": "body", "model": tiny_checkpoint,
                                                              "progress": False, **kwargs})
        if Path(output).is_dir():
            assert not list(Path(output).glob("part-*")), name


def test_other_settings_in_the_output_folder_stop_the_run_unless_overwrite(tiny_checkpoint, tmp_path):
    src = _csv(tmp_path / "in.csv", ["a b", "c d"])
    common = dict(text_column="body", model=tiny_checkpoint, progress=False)
    attribute_dataset(src, tmp_path / "out", methods="pr-g", **common)
    with pytest.raises(PRXAIError, match="holds results of other settings"):
        attribute_dataset(src, tmp_path / "out", methods="pr-a", **common)
    run = attribute_dataset(src, tmp_path / "out", methods="pr-a", overwrite=True, **common)
    assert run.processed == 2 and "scores_pr_a" in read_results(tmp_path / "out")[0]
    assert json.loads((tmp_path / "out" / MANIFEST).read_text())["methods"][0]["name"] == "pr-a"


def test_cli_writes_the_table_and_reports_errors_on_one_line(tiny_checkpoint, tmp_path, capsys):
    src = _csv(tmp_path / "in.csv", ["a b c", " ", "d"])
    code = main(["attribute-dataset", str(src), "--text-column", "body", "--id-column", "uid", "--model",
                 tiny_checkpoint, "--methods", "pr-g", "--option", "pr-g.damping=0.5", "-o", str(tmp_path / "out"),
                 "--no-progress"])
    out = capsys.readouterr()
    assert code == 0 and "skipped: empty 1" in out.out and "attribute-dataset" not in out.err
    assert read_metadata(tmp_path / "out")["method_options"] == {"pr-g": {"damping": 0.5}}
    code = main(["attribute-dataset", str(src), "--model", tiny_checkpoint, "-o", str(tmp_path / "x"),
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "has no column 'text'" in err


# ============================================================================ ray
def _descends_from_us(pid: int) -> bool:
    """Whether ``pid`` is a descendant of this process (the Ray cluster this test started), via /proc."""
    while pid > 1:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        if pid == os.getpid():
            return True
    return False


def test_ray_engine_equals_local_row_for_row_even_when_an_actor_is_killed(tiny_checkpoint, tmp_path, capsys):
    """A two-actor local Ray cluster; one actor is SIGKILLed mid-run: the texts left are retried on new actors
    (if it was busy), nothing is lost or doubled, and Ray's error-level max_restarts line is not logged."""
    pytest.importorskip("ray.data")
    src = _csv(tmp_path / "in.csv", _texts(50, seed=5, lo=0, hi=80), labels=[LABELS[i % 3] for i in range(50)])
    common = dict(text_column="body", id_column="uid", label_column="gold", model=tiny_checkpoint,
                  methods="pr-g,pr-a", shard_size=8, token_budget=256, progress=False)
    local = attribute_dataset(src, tmp_path / "local", **common)
    killed: list[int] = []

    def kill_an_actor(path: Path) -> None:  # once the first shard is in, SIGKILL one of the two Ray actors
        if killed:
            return
        for proc in Path("/proc").iterdir():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if proc.name.isdigit() and cmdline.startswith(b"ray::MapWorker") and _descends_from_us(int(proc.name)):
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
                return

    remote = attribute_dataset(src, tmp_path / "ray", engine="ray", actors=2, cpus_per_actor=1,
                               on_shard=kill_an_actor, **common)
    assert killed, "no Ray actor process was found to kill"
    err = capsys.readouterr().err  # (the killed actor may have been idle: a retry is not always needed)
    assert "max_restarts" not in err and "Traceback" not in err, [
        line for line in err.splitlines() if "max_restarts" in line or "Error" in line][:20]
    assert (remote.processed, remote.skipped, remote.shards) == (local.processed, local.skipped, local.shards)
    assert local.skipped.get("empty", 0) >= 1 and local.truncated >= 1
    # Ray reads the file itself and cuts its shards in input order (the local engine: by length), so the batches,
    # hence the last bits of the scores, may differ; every other value is equal
    remote_rows, local_rows = read_results(tmp_path / "ray"), read_results(tmp_path / "local")
    assert [r["row"] for r in remote_rows] == list(range(50))  # nothing lost or doubled
    for a, b in zip(remote_rows, local_rows):
        scores = ("scores_pr_g", "scores_pr_a", "probabilities")
        assert {k: v for k, v in a.items() if k not in scores} == {k: v for k, v in b.items() if k not in scores}
        for col in scores:
            assert (a[col] is None and b[col] is None) or a[col] == pytest.approx(b[col], abs=1e-5)
    assert read_metadata(tmp_path / "ray") == read_metadata(tmp_path / "local")
