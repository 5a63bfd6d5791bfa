"""Reliability of the benchmark (issue 14): a cache that cannot go stale or lose records, settings checked
before any work, one-line messages for CLI users; and the layout of the method registry (issue 13)."""

from __future__ import annotations

import ast
import json
import os
import random
import signal
import time
from pathlib import Path

import pytest
import torch
from test_bench import DATA  # the toy data of the tiny BERT fixture (tests/conftest.py)

from captum_prxai import cli
from captum_prxai.bench import run_benchmark
from captum_prxai.bench.cache import RecordCache
from captum_prxai.exceptions import PRXAIError
from captum_prxai.methods import METHODS, register_precomputed

PACKAGE = Path(__file__).resolve().parents[1] / "captum_prxai"


@pytest.fixture(autouse=True)
def _registry_as_found():
    """The method registry is global: leave it as each test found it (the ablation registers its variants)."""
    before = dict(METHODS)
    yield
    METHODS.clear()
    METHODS.update(before)


def _lines(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _precomputed(path: Path, tokenizer, texts, scale: float, max_length: int = 16) -> Path:
    rows = []
    for i, text in enumerate(texts):
        ids = tokenizer(text, truncation=True, max_length=max_length)["input_ids"]
        rows.append(json.dumps({"input_ids": ids, "scores": [scale * ((i + j) % 5) for j in range(len(ids))]}))
    path.write_text("\n".join(rows) + "\n")
    return path


# ----------------------------------------------------------------------------- item 4: the cache key
def test_a_changed_precomputed_file_is_recomputed_not_read_from_the_cache(tiny, tmp_path):
    model, tokenizer = tiny
    texts = [t for t, _ in DATA]
    out = tmp_path / "out"
    try:
        register_precomputed("ext-rel", _precomputed(tmp_path / "a.jsonl", tokenizer, texts, 1.0), overwrite=True)
        first = run_benchmark(model, tokenizer, DATA, ["ext-rel"], n=3, out_dir=out, progress=False, plot=False,
                              max_length=16)
        assert first.n_computed == 3
        # same ids, other scores (the reverse ranking): the old records must not be reported
        register_precomputed("ext-rel", _precomputed(tmp_path / "a.jsonl", tokenizer, texts, -1.0), overwrite=True)
        second = run_benchmark(model, tokenizer, DATA, ["ext-rel"], n=3, out_dir=out, progress=False, plot=False,
                               max_length=16)
        assert second.n_computed == 3 and second.n_cached == 0
        assert [r["scores"] for r in second.records] == [[-s for s in r["scores"]] for r in first.records]
        assert second.summary["ext-rel"]["comprehensiveness"] != first.summary["ext-rel"]["comprehensiveness"]
    finally:
        METHODS.pop("ext-rel", None)


def test_the_cache_key_covers_options_weights_dataset_length_and_metric_settings(tiny, tmp_path):
    model, tokenizer = tiny
    out = tmp_path / "out"
    base = dict(n=2, out_dir=out, progress=False, plot=False, max_length=16)
    opts = {"ig": {"n_steps": 4}}
    first = run_benchmark(model, tokenizer, DATA, ["ig", "random"], method_options=opts, **base)
    assert first.n_computed == 4
    # another IG option recomputes IG only; the random control is reused
    other = run_benchmark(model, tokenizer, DATA, ["ig", "random"], method_options={"ig": {"n_steps": 5}}, **base)
    assert (other.n_computed, other.n_cached) == (2, 2)
    assert {r["method"] for r in other.records if r["config_key"] not in first.meta["cache_keys"].values()} == {"ig"}
    # the same options again, also under an alias of the method: all from the cache
    assert run_benchmark(model, tokenizer, DATA, ["ig", "random"], method_options=opts, **base).n_cached == 4
    alias = run_benchmark(model, tokenizer, DATA, ["ig", "random"], **base,
                          method_options={"integrated-gradients": {"n_steps": 4}})
    assert alias.n_cached == 4
    # other settings that change the numbers: recomputed
    assert run_benchmark(model, tokenizer, DATA, ["random"], **{**base, "max_length": 5}).n_computed == 2
    assert run_benchmark(model, tokenizer, DATA, ["random"], **base, steps=4).n_computed == 2
    assert run_benchmark(model, tokenizer, DATA, ["random"], **base, log_odds_fraction=0.5).n_computed == 2
    from captum_prxai.data import TextDataset

    renamed = TextDataset("toy", "train", [t for t, _ in DATA], [y for _, y in DATA], ["neg", "pos"])
    assert run_benchmark(model, tokenizer, renamed, ["random"], **base).n_computed == 2
    relabelled = [(t, 1 - y) for t, y in DATA]  # same texts, other gold labels: accuracy differs
    assert run_benchmark(model, tokenizer, relabelled, ["random"], **base).n_computed == 2
    # same name, other weights (a model retrained into the same folder)
    changed = type(model)(model.config).eval()
    changed.load_state_dict(model.state_dict())
    with torch.no_grad():
        changed.classifier.bias.add_(0.5)
    assert run_benchmark(changed, tokenizer, DATA, ["random"], **base).n_computed == 2
    assert run_benchmark(model, tokenizer, DATA, ["random"], **base).n_cached == 2  # the original still matches


# ----------------------------------------------------------------------------- item 5: whole lines
def test_a_damaged_tail_is_cut_off_before_the_next_record_is_appended(tiny, tmp_path):
    model, tokenizer = tiny
    out = tmp_path / "out"
    run_benchmark(model, tokenizer, DATA, ["random"], n=2, out_dir=out, progress=False, plot=False)
    cache = out / "cache.jsonl"
    whole = cache.read_bytes()
    cache.write_bytes(whole + whole.splitlines(keepends=True)[0][:40])  # a record cut short by a crash
    with pytest.warns(UserWarning, match="cut off a damaged last line"):
        res = run_benchmark(model, tokenizer, DATA, ["random"], n=3, out_dir=out, progress=False, plot=False)
    assert (res.n_cached, res.n_computed) == (2, 1)
    records = _lines(cache)  # every line parses: the new record did not land on the fragment
    assert len(records) == 3 and sorted(r["example"] for r in records) == sorted(r["example"] for r in res.records)


def test_record_cache_appends_whole_lines_and_repairs_the_tail(tmp_path):
    cache = RecordCache(tmp_path / "c.jsonl")
    cache.append({"config_key": "k", "example": 0, "method": "m", "text_sha": "t", "label": None})
    with (tmp_path / "c.jsonl").open("ab") as fh:
        fh.write(b'{"config_key": "k", "exa')
    with pytest.warns(UserWarning, match="damaged"):
        cache.append({"config_key": "k", "example": 1, "method": "m", "text_sha": "t", "label": 1})
    assert (tmp_path / "c.jsonl").read_bytes().count(b"\n") == 2
    assert [rid[:3] for rid in sorted(cache.read())] == [("k", 0, "m"), ("k", 1, "m")]


def test_the_cli_prints_the_damaged_cache_warning_on_one_line(tiny, tmp_path, monkeypatch, capsys):
    ckpt, argv = _cli_setup(tiny, tmp_path, monkeypatch)
    assert cli.main(argv) == 0
    with (tmp_path / "bench" / "cache.jsonl").open("a") as fh:
        fh.write('{"config_key": "trunc')
    capsys.readouterr()
    assert cli.main(argv) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("captum-prxai benchmark: warning: ") and "damaged" in err[0]


def test_rewritten_outputs_are_replaced_whole_or_not_at_all(tiny, tmp_path, monkeypatch):
    from captum_prxai import _cache

    model, tokenizer = tiny
    out = tmp_path / "out"
    run_benchmark(model, tokenizer, DATA, ["random"], n=2, out_dir=out, progress=False, plot=False)
    before = {name: (out / name).read_bytes() for name in ("summary.json", "summary.md", "results.csv")}

    def crash(src, dst):
        raise OSError("killed while writing")

    monkeypatch.setattr(_cache.os, "replace", crash)  # the last step of every rewrite
    with pytest.raises(OSError, match="killed while writing"):
        run_benchmark(model, tokenizer, DATA, ["random"], n=3, out_dir=out, progress=False, plot=False)
    monkeypatch.undo()
    assert {name: (out / name).read_bytes() for name in before} == before  # the old outputs, whole
    assert sorted(p.name for p in out.iterdir()) == ["cache.jsonl", "results.csv", "summary.json", "summary.md"]


# ----------------------------------------------------------------------------- item 9: --max-length
def test_max_length_is_honoured_checked_and_recorded(tiny, tmp_path):
    model, tokenizer = tiny
    long_text = [(" ".join(["the movie was very good"] * 6), 1)]
    res = run_benchmark(model, tokenizer, long_text, ["random"], n=1, out_dir=tmp_path / "a", progress=False,
                        plot=False, max_length=3)
    assert res.records[0]["n_tokens"] == 3 and len(res.records[0]["tokens"]) == 3
    meta = json.loads((tmp_path / "a" / "summary.json").read_text())["meta"]
    assert meta["max_length"] == 3 and meta["longest_input_tokens"] == 3
    for too_short in (1, 2):  # [CLS] [SEP] and nothing to explain
        with pytest.raises(PRXAIError, match="at least 3 tokens"):
            run_benchmark(model, tokenizer, long_text, ["random"], n=1, out_dir=tmp_path / "b", progress=False,
                          max_length=too_short)
    with pytest.raises(PRXAIError, match="more than this model accepts"):
        run_benchmark(model, tokenizer, long_text, ["random"], n=1, out_dir=tmp_path / "b", progress=False,
                      max_length=1000)
    default = run_benchmark(model, tokenizer, long_text, ["random"], n=1, out_dir=tmp_path / "c", progress=False,
                            plot=False)
    assert default.meta["max_length"] == 32  # the model's limit (max_position_embeddings), not None


# ----------------------------------------------------------------------------- CLI: checked before loading
def _cli_setup(tiny, tmp_path, monkeypatch):
    from captum_prxai import data as data_module
    from captum_prxai.data import TextDataset

    model, tokenizer = tiny
    ckpt = tmp_path / "ckpt"
    if not ckpt.exists():
        model.save_pretrained(ckpt)
        tokenizer.save_pretrained(ckpt)
    monkeypatch.setattr(data_module, "load_dataset", lambda name, split="test": TextDataset(
        "toy", split, [t for t, _ in DATA], [y for _, y in DATA], ["neg", "pos"]))
    argv = ["benchmark", "--model", str(ckpt), "--dataset", "toy", "--methods", "random", "--n", "2",
            "--out", str(tmp_path / "bench"), "--max-length", "16", "--device", "cpu", "--no-progress", "--no-plot"]
    return ckpt, argv


@pytest.mark.parametrize("extra, phrase", [
    (["--steps", "0"], "--steps must be at least 1, got 0"),
    (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
    (["--n", "-1"], "--n must be at least 1"),
    (["--max-length", "0"], "--max-length must be at least 1"),
    (["--option", "random.bogus=1"], "method 'random' has no option 'bogus'"),
    (["--option", "pr-g.dampng=0.5"], "method 'pr-g' has no option 'dampng'; its options: "),
    (["--option", "nope.x=1"], "unknown method 'nope'"),
    (["--out", "FILE/sub"], "cannot make its folder"),
    (["--out", "FILE"], "is a file"),
])
def test_cli_benchmark_checks_settings_before_the_model_loads(tiny, tmp_path, monkeypatch, capsys, extra, phrase):
    from captum_prxai import models

    _, argv = _cli_setup(tiny, tmp_path, monkeypatch)
    (tmp_path / "FILE").write_text("not a folder")
    extra = [str(tmp_path / e) if e.startswith("FILE") else e for e in extra]

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded before the settings were checked")

    monkeypatch.setattr(models, "load_model", no_loading)
    monkeypatch.setattr(models, "load_default", no_loading)
    capsys.readouterr()  # what saving the checkpoint printed
    assert cli.main(argv + extra) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("captum-prxai benchmark: error: ") and phrase in err, err
    assert not (tmp_path / "bench").exists()  # nothing was written


def test_cli_benchmark_too_short_max_length_is_one_line(tiny, tmp_path, monkeypatch, capsys):
    _, argv = _cli_setup(tiny, tmp_path, monkeypatch)
    capsys.readouterr()
    assert cli.main(argv + ["--max-length", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "at least 3 tokens" in err


@pytest.mark.parametrize("argv, phrase", [
    (["--variants", "pr:nope"], "unknown variant 'pr:nope'"),
    (["--option", "gae.bogus=1"], "method 'gae' has no option 'bogus'"),
    (["--baselines", "magic"], "unknown method 'magic'"),
    (["--threads", "0"], "--threads must be at least 1"),
])
def test_ablation_checks_its_arguments_before_the_model_loads(monkeypatch, capsys, argv, phrase):
    from captum_prxai import models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the model was loaded first"))
    capsys.readouterr()
    assert cli.main(["ablation", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("captum-prxai ablation: error: ") and phrase in err, err


def test_a_mixed_case_pr_variant_registers_once_and_takes_its_options(tiny):
    from captum_prxai.methods import MethodContext, build_method, parse_options, register_pr_method

    try:
        spec = register_pr_method("test:Variant=True", {"damping": 0.5})
        assert register_pr_method("test:Variant=True", {"damping": 0.5}) is spec  # idempotent
        options = parse_options(["test:variant=true.damping=0.25"])
        explainer = build_method("test:Variant=True", tiny[0], lambda *a: None, MethodContext(options=options))
        assert explainer.attribution.damping == 0.25  # the run's option reached the variant
    finally:
        METHODS.pop("test:variant=true", None)


# ----------------------------------------------------------------------------- issue 13 §2: layout
def _imports(path: Path) -> set:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_the_registry_is_a_library_module_and_no_library_module_imports_the_cli():
    import captum_prxai.bench.methods as old
    import captum_prxai.methods as registry

    assert old.METHODS is registry.METHODS and old.build_method is registry.build_method
    for folder in ("methods", "bench"):
        for path in (PACKAGE / folder).glob("*.py"):
            bad = {m for m in _imports(path) if m.startswith(("captum_prxai.commands", "captum_prxai.cli"))}
            assert not bad, f"{path.name} imports {bad}"
    for path in (PACKAGE / "methods").glob("*.py"):
        bad = {m for m in _imports(path) if m.startswith(("captum_prxai.bench", "captum_prxai.explorer"))}
        assert not bad, f"methods/{path.name} imports {bad}"


def test_one_ig_step_count_everywhere():
    import argparse

    from captum_prxai.bench.speed import SpeedSettings
    from captum_prxai.commands import bench_speed
    from captum_prxai.methods import IG_DEFAULTS, method_settings

    parser = argparse.ArgumentParser()
    bench_speed.add_arguments(parser)
    steps = IG_DEFAULTS["n_steps"]
    assert SpeedSettings().ig_steps == steps and bench_speed.settings_from_args(parser.parse_args([])).ig_steps == steps
    assert bench_speed.settings_from_args(parser.parse_args(["--ig-steps", "7"])).ig_steps == 7
    with pytest.raises(PRXAIError, match="--ig-steps must be at least 1"):
        bench_speed.settings_from_args(parser.parse_args(["--ig-steps", "0"]))
    assert method_settings("ig")["options"]["n_steps"] == steps and f"{steps} steps" in METHODS["ig"].description


def test_one_resident_memory_reader():
    from captum_prxai.bench import _memory, speed

    assert not hasattr(speed, "_rss") and speed.rss_bytes is _memory.rss_bytes
    assert _memory.rss_bytes() > 0


# ----------------------------------------------------------------------------- the crash test
def _child(folder: str, out: str, ext: str, seed: int) -> None:
    """One benchmark run in a forked process (killed part-way by the test)."""
    from transformers import BertForSequenceClassification, BertTokenizer

    model = BertForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = BertTokenizer.from_pretrained(folder)
    data = [tuple(x) for x in json.loads((Path(folder) / "data.json").read_text())]
    register_precomputed("ext", ext, overwrite=True)
    run_benchmark(model, tokenizer, data, ["random", "ext", "ixg"], n=None, out_dir=out, progress=False, plot=False,
                  max_length=16, seed=seed)


def test_sigkill_damaged_tails_and_changed_inputs_never_lose_duplicate_or_reuse_stale_records(tiny, tmp_path):
    """Kill the benchmark at seeded random points, damage the cache's tail, change the precomputed file and the
    seed in between; the run that finishes gives exactly the records of a run that was never interrupted."""
    import captum.attr  # noqa: F401  (imported once here, not in every forked run)

    model, tokenizer = tiny
    words = "the a movie film plot was is not very good bad great awful boring fun".split()
    rng = random.Random(14)
    data = [(" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))), rng.randint(0, 1)) for _ in range(12)]
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "data.json").write_text(json.dumps(data))
    texts = [t for t, _ in data]
    old_ext = _precomputed(tmp_path / "old.jsonl", tokenizer, texts, 1.0)
    ext = _precomputed(tmp_path / "ext.jsonl", tokenizer, texts, -1.0)
    out = tmp_path / "out"
    cache = out / "cache.jsonl"
    total = len(data) * 3

    killed: list = []

    def run_and_kill(ext_file: Path, seed: int, stop_after: int) -> None:
        import multiprocessing

        child = multiprocessing.get_context("fork").Process(target=_child,
                                                            args=(str(folder), str(out), str(ext_file), seed))
        child.start()
        deadline = time.monotonic() + 120
        try:
            while child.is_alive() and time.monotonic() < deadline:
                if cache.exists() and cache.read_bytes().count(b"\n") >= stop_after:
                    break
                time.sleep(0.005)
        finally:
            if child.is_alive():
                os.kill(child.pid, signal.SIGKILL)
            child.join()
        assert child.exitcode in (-signal.SIGKILL, 0)
        killed.append(child.exitcode == -signal.SIGKILL)

    # stale inputs first: an older precomputed file, then another seed (other random scores)
    run_and_kill(old_ext, 0, rng.randint(3, total // 2))
    run_and_kill(ext, 1, rng.randint(3, total // 2))
    for _ in range(3):  # the real settings, killed three times; then a record cut in half
        before = cache.read_bytes().count(b"\n")
        run_and_kill(ext, 0, before + rng.randint(1, total // 3))
    assert sum(killed) >= 3, killed  # the kills landed part-way through the runs
    body = cache.read_bytes()
    last = body.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    cache.write_bytes(body[: len(body) - 1 - len(last)] + last[: len(last) // 2])  # a write cut short

    from transformers import BertForSequenceClassification

    model = BertForSequenceClassification.from_pretrained(folder).eval()  # as the killed runs loaded it
    try:
        register_precomputed("ext", ext, overwrite=True)
        with pytest.warns(UserWarning, match="damaged"):
            resumed = run_benchmark(model, tokenizer, data, ["random", "ext", "ixg"], n=None, out_dir=out,
                                    progress=False, plot=False, max_length=16, seed=0)
        clean = run_benchmark(model, tokenizer, data, ["random", "ext", "ixg"], n=None, out_dir=tmp_path / "clean",
                              progress=False, plot=False, max_length=16, seed=0)
    finally:
        METHODS.pop("ext", None)
    assert resumed.errors == [] and resumed.n_computed + resumed.n_cached == total
    assert resumed.n_cached > 0  # the killed runs' records were kept...
    got = {(r["example"], r["method"]): r for r in resumed.records}
    assert len(got) == len(resumed.records) == total  # ...none lost, none twice
    want = {(r["example"], r["method"]): r for r in clean.records}
    for rid, rec in want.items():  # ...and none stale: the same scores and metrics as an uninterrupted run
        assert got[rid]["scores"] == pytest.approx(rec["scores"], abs=1e-6), rid
        assert got[rid]["metrics"] == pytest.approx(rec["metrics"], abs=1e-6), rid
        assert got[rid]["config_key"] == rec["config_key"]
    lines = _lines(cache)  # every line whole; the current key holds each (example, method) once
    current = [(r["example"], r["method"]) for r in lines if r["config_key"] in resumed.meta["cache_keys"].values()]
    assert sorted(current) == sorted(want)


def test_an_option_added_at_its_neutral_value_keeps_every_cached_records_key():
    """``walk_gate`` came after the matrix's records were cached: at ``None`` (and on PR-A, which has no negative
    walk to gate) it stays out of the cache key, so those records stay valid; a gate set changes the key."""
    from captum_prxai.methods import METHODS, method_settings
    from captum_prxai.methods.builtin import register_pr_method

    # two-walk variants as the benchmarks register them (benchmarks/research_methods.py), without and with a gate
    register_pr_method("tmp-pm", {"walks": "both", "negative_weight": 1.0}, class_name="PRTemperedAttentionGradient",
                       overwrite=True)
    register_pr_method("tmp-pm-gate", {"walks": "both", "negative_weight": 0.25, "attention_power": 0.25,
                                       "walk_gate": 0.5}, class_name="PRTemperedAttentionGradient", overwrite=True)
    for name in ("pr-a", "pr-g", "pr-ag", "pr-tag", "tmp-pm"):
        assert "walk_gate" not in method_settings(name)["options"], name
    assert METHODS["tmp-pm"].defaults()["walk_gate"] is None  # still an option of the preset
    gated = method_settings("tmp-pm-gate")["options"]
    assert gated["walk_gate"] == 0.5
    assert method_settings("tmp-pm", {"tmp-pm": {"walk_gate": 0.3}})["options"]["walk_gate"] == 0.3
    register_pr_method("tmp-gate-auto", {"edge_weight": "gradient"}, overwrite=True)
    try:  # the class's own "auto" resolves by model, so it stays in the key
        assert method_settings("tmp-gate-auto")["options"]["walk_gate"] == "auto"
    finally:
        del METHODS["tmp-gate-auto"]
