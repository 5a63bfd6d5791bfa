"""What a command-line user sees for bad input: one line, exit status 2, no traceback, nothing left half-done."""

from __future__ import annotations

import json
import re
import shutil

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_explain import tiny_model_dir  # noqa: E402,F401  (the fixture: a tiny BERT checkpoint folder)

import captum_prxai.models  # noqa: E402
from captum_prxai.cli import main  # noqa: E402
from captum_prxai.commands import _output  # noqa: E402


def _run(capsys, *argv):
    code = main([*map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_line_error(code, err, phrase):
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("captum-prxai explain: error: ")
    assert phrase in lines[0], lines[0]


def _without_model_type(folder):
    config = json.loads((folder / "config.json").read_text())
    del config["model_type"]
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("damage, phrase", [
    (lambda f: (f / "config.json").write_text('{"model_type": "bert", '), "not a valid JSON file"),
    (lambda f: (f / "model.safetensors").write_bytes(b"\x00garbage" * 64), "cannot load the model in"),
    (_without_model_type, "model_type"),
])
def test_a_broken_model_folder_is_one_line_and_exit_2(tiny_model_dir, tmp_path, capsys, damage, phrase):  # noqa: F811
    folder = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, folder)
    damage(folder)
    code, out, err = _run(capsys, "explain", "a good film", "--model", folder)
    _one_line_error(code, err, phrase)
    assert str(folder) in err


@pytest.fixture
def no_model_loading(monkeypatch):
    """Fail loudly if the command gets as far as loading a model."""
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(captum_prxai.models, "load_model", refuse)


def test_an_output_under_a_file_is_refused_before_any_work(tmp_path, capsys, no_model_loading):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a folder")
    for option in ("--html", "--json"):
        code, out, err = _run(capsys, "explain", "a good film", option, blocker / "sub" / "out.file")
        _one_line_error(code, err, f"{option} {blocker / 'sub' / 'out.file'}: cannot make its folder, {blocker} is a file")
    code, out, err = _run(capsys, "explain", "a good film", "--graph", blocker / "g.png")
    _one_line_error(code, err, "cannot make its folder")


def test_an_output_that_is_a_folder_is_refused_before_any_work(tmp_path, capsys, no_model_loading):
    code, out, err = _run(capsys, "explain", "a good film", "--json", tmp_path)
    _one_line_error(code, err, f"--json {tmp_path} is a folder; give a file name")


def test_an_unwritable_output_folder_is_refused_before_any_work(tmp_path, capsys, no_model_loading, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = _output.os.access
    # the permission check itself (chmod cannot lock out root, who runs some CI machines)
    monkeypatch.setattr(_output.os, "access", lambda p, mode: False if str(p) == str(locked) else real_access(p, mode))
    code, out, err = _run(capsys, "explain", "a good film", "--html", locked / "deep" / "why.html")
    _one_line_error(code, err, f"cannot write in {locked} (no write permission)")
    assert not (locked / "deep").exists()


@pytest.mark.parametrize("name", ["g.xyz", "graph", "g.png.txt"])
def test_graph_refuses_unknown_figure_formats(tmp_path, capsys, no_model_loading, name):
    code, out, err = _run(capsys, "explain", "a good film", "--graph", tmp_path / name)
    _one_line_error(code, err, "unknown figure format")
    assert ".png, .svg, .pdf" in err
    assert not (tmp_path / name).exists()


def test_graph_with_no_pr_xai_method_says_the_view_is_for_pr_xai(tmp_path, capsys, no_model_loading):
    code, out, err = _run(capsys, "explain", "a good film", "--methods", "rollout,ig", "--graph", tmp_path / "g.svg")
    _one_line_error(code, err, "the graph view is for PR-XAI methods")
    assert "pr-xai" in err and not (tmp_path / "g.svg").exists()


def test_two_outputs_on_one_file_are_refused(tmp_path, capsys, no_model_loading):
    code, out, err = _run(capsys, "explain", "a good film", "--html", tmp_path / "x.svg", "--graph", tmp_path / "x.svg")
    _one_line_error(code, err, "--html and --graph name the same file")


def test_a_text_of_unknown_tokens_says_so_instead_of_an_empty_top_line(tiny_model_dir, capsys):  # noqa: F811
    code, out, err = _run(capsys, "explain", "\U0001f642\U0001f642\U0001f642", "--model", tiny_model_dir,
                          "--methods", "pr-g,ixg", "--color", "never")
    assert code == 0, err
    assert not re.search(r"top:\s*$", out, re.M), out
    assert out.count("top: none: the text's 1 token is unknown to the tokenizer ([UNK])") == 2
    assert "note: the tokenizer knows none of the text's words" in out


def test_known_words_next_to_unknown_ones_are_ranked_without_a_note(tiny_model_dir, capsys):  # noqa: F811
    code, out, err = _run(capsys, "explain", "\U0001f642 good film", "--model", tiny_model_dir, "--methods", "pr-g",
                          "--color", "never")
    assert code == 0, err
    top = re.search(r"top: (.*)$", out, re.M).group(1)
    assert sorted(w.split()[0] for w in top.split(", ")) == ["film", "good"]
    assert "note:" not in out


def test_a_text_with_no_tokens_is_one_clear_error(tiny_model_dir, capsys):  # noqa: F811
    code, out, err = _run(capsys, "explain", "\u200b\u200b", "--model", tiny_model_dir)
    _one_line_error(code, err, "gives no tokens once tokenised")


def test_a_file_system_error_mid_run_is_one_line_not_a_traceback(capsys, monkeypatch):
    from captum_prxai.commands import datasets as datasets_cmd

    def full_disk(args):
        raise OSError(28, "No space left on device", "/cache/data/movie-sentences.partial")

    monkeypatch.setattr(datasets_cmd, "run", full_disk)
    code, out, err = _run(capsys, "datasets")
    assert code == 1 and "Traceback" not in err
    assert err.strip() == "captum-prxai datasets: error: No space left on device: /cache/data/movie-sentences.partial"


def test_graph_without_matplotlib_names_the_extra_before_any_work(tmp_path, capsys, no_model_loading, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    code, out, err = _run(capsys, "explain", "a good film", "--graph", tmp_path / "g.png")
    _one_line_error(code, err, "pip install 'captum-prxai[viz]'")


def test_output_folders_are_checked_like_files(tmp_path, monkeypatch):
    from captum_prxai.exceptions import PRXAIError

    blocker = tmp_path / "taken"
    blocker.write_text("x")
    with pytest.raises(PRXAIError, match=f"--out {blocker} is a file; give a folder"):
        _output.check_output_dir(blocker, "--out")
    with pytest.raises(PRXAIError, match=f"cannot make its folder, {blocker} is a file"):
        _output.check_output_dir(blocker / "run", "--out")
    assert _output.check_output_dir(tmp_path / "new" / "run", "--out") == tmp_path / "new" / "run"
    assert not (tmp_path / "new").exists()  # checking makes nothing
    real_access = _output.os.access
    monkeypatch.setattr(_output.os, "access", lambda p, mode: False if str(p) == str(tmp_path) else real_access(p, mode))
    with pytest.raises(PRXAIError, match="cannot write in it"):
        _output.check_output_dir(tmp_path, "--out")
