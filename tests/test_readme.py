"""The README's code runs as written, its two commands install what they say, and its links and figures hold.

``.ci/run`` executes the first two ``bash`` blocks under "## Quick start" (install and explain; run the tests);
these tests check what those commands must be without running pip.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BENCHMARKS_DOC = ROOT / "docs" / "benchmarks.md"
#: every Markdown page of docs/ (the research log included), checked with the README for links and figures
DOCS = sorted((ROOT / "docs").rglob("*.md"))
RESULTS = ROOT / "benchmarks" / "results"
TESTED_TORCH = "torch==2.13.0"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def quick_start_commands() -> list[str]:
    """The ``bash`` blocks under "## Quick start", as ``.ci/run`` reads them (one command per block)."""
    text = README.read_text(encoding="utf-8")
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert section, "the README lost its '## Quick start' section"
    return [" ".join(b.split("\n")).strip() for b in re.findall(r"```bash\n(.*?)```", section.group(1), flags=re.S)]


def _pip_installs(command: str) -> list[list[str]]:
    """The argument lists of every ``pip install`` in a ``&&`` chain."""
    installs = []
    for part in command.split("&&"):
        words = shlex.split(part)
        if words[:2] == ["pip", "install"] or words[:4] == ["python", "-m", "pip", "install"]:
            installs.append(words[words.index("install") + 1:])
    return installs


_PRINTS = "# → "


def _expected_output(block: str) -> list[str]:
    """The lines a snippet says it prints: its ``# → ...`` comments, in order."""
    return [line.strip()[len(_PRINTS):] for line in block.splitlines() if line.strip().startswith(_PRINTS)]


@pytest.fixture(scope="module")
def snippet_runs():
    """Every ``python`` block of the README, run in order in one namespace, as a reader pastes them: its stdout."""
    import contextlib
    import io

    namespace: dict = {}
    runs = []
    for block in _python_blocks():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "README.md", "exec"), namespace)
        runs.append((block, out.getvalue().splitlines()))
    return runs, namespace


def test_every_readme_snippet_runs_and_prints_what_its_comments_say(snippet_runs):
    runs, _ = snippet_runs
    assert len(runs) >= 5, "the tour lost its snippets"
    for block, printed in runs:
        expected = _expected_output(block)
        assert expected, f"a snippet says nothing of what it prints:\n{block}"
        assert printed == expected, f"the snippet prints {printed}, its comments say {expected}:\n{block}"


def test_the_readme_snippets_match_the_library(snippet_runs):
    """What the tour's prose says of its results: the default is the recommended spec, the graph is the one scored,
    and padding (none here) and shapes are as stated."""
    import captum_prxai as cp

    _, namespace = snippet_runs
    graph = namespace["graph"]
    # the classifier of the tour is MiniLM-L6: an encoder of six attention layers
    assert graph.spec.as_dict() == cp.recommended_spec(causal=False, depth=6).as_dict()
    torch.testing.assert_close(graph.rescore(), graph.scores, atol=1e-5, rtol=1e-4)
    # the last snippet's attribution (your own model) stores its options as given, "auto"
    assert namespace["pr"].walks == "auto" and namespace["pr"].spec.walks == "both"


def test_a_newcomer_meets_a_runnable_example_within_the_first_screenful():
    lines = README.read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("```python"))
    assert first < 60, f"the first Python example is at line {first + 1}"
    assert len(lines) <= 260, f"the README has {len(lines)} lines; it is a reference, the history is in docs/research/"
    history = re.findall(r"\b(?:first|second|third|[a-z]+th) round\b", README.read_text(encoding="utf-8"), flags=re.I)
    assert not history, f"the README retells the search ({history}); that is docs/research/'s"


def _tour_commands(prefix: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    tour = re.search(r"^## A five-minute tour\n(.*?)(?=^## )", text, flags=re.S | re.M).group(1)
    return [" ".join(b.split()) for b in re.findall(r"```bash\n(.*?)```", tour, flags=re.S)
            if b.strip().startswith(prefix)]


def test_the_tours_dataset_command_runs(tmp_path, monkeypatch):
    import json

    from captum_prxai.cli import main

    [command] = _tour_commands("captum-prxai attribute-dataset")
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(command)[1:] + ["--threads", "1"]) == 0
    rows = [json.loads(line) for path in sorted((tmp_path / "scores").glob("part-*.jsonl"))
            for line in path.read_text().splitlines()]
    assert len(rows) == 20 and all("scores_pr_xai" in row or "scores" in row for row in rows)


def test_the_tours_explorer_command_serves_the_page(tmp_path):
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    [command] = _tour_commands("captum-prxai explore")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    words = shlex.split(command)
    words[words.index("--port") + 1] = str(port)
    proc = subprocess.Popen([sys.executable, "-m", "captum_prxai.cli", *words[1:]], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline, page = time.time() + 120, None
        while time.time() < deadline and page is None and proc.poll() is None:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read().decode()
            except OSError:
                time.sleep(0.5)
        assert page is not None, proc.stdout.read().decode() if proc.poll() is not None else "no page in 120 s"
        assert "<html" in page.lower()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_quick_start_has_an_install_and_explain_command_then_a_test_command():
    commands = quick_start_commands()
    assert len(commands) >= 2, commands
    install, tests = commands[:2]
    assert "captum-prxai explain" in install and "--html" in install, install
    assert "pytest" in tests, tests


def test_every_quick_start_install_pins_the_tested_torch():
    # Any other torch spec, or none with no torch installed, lets pip fetch a multi-GB CUDA build.
    for command in quick_start_commands()[:2]:
        for args in _pip_installs(command):
            if "--no-deps" in args:
                continue
            assert TESTED_TORCH in args, f"'pip install {' '.join(args)}' must pin {TESTED_TORCH}"


def test_the_explain_command_installs_only_the_core_and_the_tests_install_dev():
    install, tests = quick_start_commands()[:2]
    project_specs = [a for args in _pip_installs(install) for a in args if a == "." or a.startswith(".[")]
    assert project_specs == ["."], f"explaining a sentence needs no extra, got {project_specs}"
    test_specs = [a for args in _pip_installs(tests) for a in args if a.startswith(".[")]
    assert test_specs == [".[dev]"], test_specs


BROWSER_SETUP = "tests/e2e/setup-browser.sh"


def test_the_test_command_runs_the_browser_set_up_before_pytest(monkeypatch, tmp_path):
    """The browser test fails without Chromium, so the README's test command installs it first, with the script
    the test's failure message names (no step hidden in ``.ci/run``)."""
    steps = [part.strip() for part in quick_start_commands()[1].split("&&")]
    pytest_step = next(i for i, step in enumerate(steps) if "pytest" in step)
    assert f"bash {BROWSER_SETUP}" in steps[:pytest_step], steps
    assert (ROOT / BROWSER_SETUP).is_file()
    e2e = importlib.import_module("e2e.test_explorer_e2e")
    monkeypatch.setenv("CHROMIUM", str(tmp_path / "no-chromium"))
    with pytest.raises(pytest.fail.Exception, match=re.escape(f"run {BROWSER_SETUP}")):
        e2e._requirements()


def _fake_checkout(tmp_path: Path, install: str, tests: str) -> tuple[Path, Path, dict]:
    """A checkout with this ``.ci/`` and a README whose Quick start commands are ``install`` and ``tests``; the tools
    a hidden step could call (pip, python, node, npm, apt-get, sudo, the venv's python, the browser set-up) only
    append their name to ``calls.log``. Returns the checkout, the log and the environment to run ``.ci/run`` in."""
    import shutil

    root, stubs, log = tmp_path / "checkout", tmp_path / "stubs", tmp_path / "calls.log"
    shutil.copytree(ROOT / ".ci", root / ".ci")
    (root / "README.md").write_text(f"# x\n\n## Quick start\n\n```bash\n{install}\n```\n\n```bash\n{tests}\n```\n\n"
                                    "## Next\n", encoding="utf-8")
    logging = '#!/bin/sh\necho "$(basename "$0") $*" >> "$CALLS"\n'
    for path in [stubs / name for name in ("pip", "pip3", "python", "python3", "pytest", "node", "npm", "npx",
                                            "apt-get", "sudo", "chromium")] + [root / ".venv" / "bin" / "python",
                                                                               root / BROWSER_SETUP]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(logging)
        path.chmod(0o755)
    import os

    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}", "CALLS": str(log)}
    return root, log, env


def test_ci_runs_the_readme_commands_and_nothing_else(tmp_path):
    import subprocess

    install = "pip install torch==2.13.0 -e . && echo explained >> $CALLS"
    tests = f"pip install torch==2.13.0 -e '.[dev]' && bash {BROWSER_SETUP} && python -m pytest -q"
    root, log, env = _fake_checkout(tmp_path, install, tests)
    done = subprocess.run(["bash", str(root / ".ci" / "run")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    # every call is one of the two commands', in their order: no set-up of its own, no extra python
    assert log.read_text().splitlines() == ["pip install torch==2.13.0 -e .", "explained",
                                            "pip install torch==2.13.0 -e .[dev]", "setup-browser.sh ",
                                            "python -m pytest -q"]


@pytest.mark.parametrize("install, tests, phrase", [
    ("echo install", "python -m pytest -q", "must run 'bash tests/e2e/setup-browser.sh' before pytest"),
    ("pip install -e .", f"bash {BROWSER_SETUP} && python -m pytest -q", "must pin torch==2.13.0"),
    ("echo install", f"bash {BROWSER_SETUP} && echo done", "must run pytest"),
])
def test_ci_checks_the_readme_commands_before_running_anything(tmp_path, install, tests, phrase):
    import subprocess

    root, log, env = _fake_checkout(tmp_path, install, tests)
    done = subprocess.run(["bash", str(root / ".ci" / "run")], capture_output=True, text=True, env=env)
    assert done.returncode == 1 and phrase in done.stderr, done.stderr
    assert not log.exists()  # refused before either command ran


# --------------------------------------------------------------------------------------------------
# Links and figures
# --------------------------------------------------------------------------------------------------

_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_point_to_committed_files_and_headings(doc):
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        resolved = (doc.parent / path).resolve() if path else doc
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved.read_text(encoding="utf-8")):
            broken.append(target)
    assert not broken, f"{doc.name}: broken links {broken}"


_FIGURE = re.compile(r"([-+−]?\d+\.\d+) ± (\d+\.\d+)")


def _committed_figures() -> set[tuple[Decimal, Decimal]]:
    figures = set()
    for path in RESULTS.rglob("*.md"):
        for mean, err in _FIGURE.findall(path.read_text(encoding="utf-8", errors="replace")):
            figures.add((abs(Decimal(mean.replace("−", "-"))), Decimal(err)))
    return figures


def _quoted_by(committed: set[tuple[Decimal, Decimal]], mean: str, err: str) -> bool:
    """Whether ``mean ± err`` is a committed figure, possibly rounded to fewer decimals (sign aside: prose
    says "trails by 0.049" for a committed -0.049)."""
    m, e = abs(Decimal(mean.replace("−", "-"))), Decimal(err)
    for cm, ce in committed:
        if cm.as_tuple().exponent > m.as_tuple().exponent or ce.as_tuple().exponent > e.as_tuple().exponent:
            continue
        if any(cm.quantize(m, rounding=r) == m and ce.quantize(e, rounding=r) == e
               for r in (ROUND_HALF_EVEN, ROUND_HALF_UP)):
            return True
    return False


@pytest.mark.parametrize("doc", [README, BENCHMARKS_DOC, ROOT / "docs" / "defaults.md"], ids=lambda p: p.name)
def test_every_mean_and_standard_error_quoted_is_a_committed_result(doc):
    committed = _committed_figures()
    quoted = _FIGURE.findall(doc.read_text(encoding="utf-8"))
    assert quoted, f"{doc.name} quotes no figure: is the pattern still right?"
    missing = [f"{m} ± {e}" for m, e in quoted if not _quoted_by(committed, m, e)]
    assert not missing, f"{doc.name} quotes figures found in no file under benchmarks/results: {missing}"


def test_figure_check_rejects_a_figure_that_was_never_measured():
    committed = _committed_figures()
    assert _quoted_by(committed, "0.381", "0.017")
    assert not _quoted_by(committed, "0.999", "0.001")


# --------------------------------------------------------------------------------------------------
# Commands quoted in the docs exist
# --------------------------------------------------------------------------------------------------


def quoted_command_lines(doc: Path) -> list[str]:
    """Every command in a ``bash`` block (``&&`` chains split, ``\\`` continuations joined) and every inline
    code span that starts like a command."""
    text = doc.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").split("\n"):
            commands += [part.strip() for part in line.split("&&") if part.strip()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    commands += [" ".join(span.split()) for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", prose)]
    return [c for c in commands if c.startswith(("captum-prxai", "python -m ", "python benchmarks/"))]


@pytest.mark.parametrize("doc", [README, BENCHMARKS_DOC], ids=lambda p: p.name)
def test_every_quoted_command_parses(doc):
    """Each ``captum-prxai`` command line quoted (sub-command and options) is accepted by the CLI's parser, each
    ``python -m`` module exists and each ``python benchmarks/...`` script is committed. A bare sub-command, or a
    line with placeholders (``...``, ``{a,b}``), is checked for its sub-command only."""
    from captum_prxai.cli import COMMANDS, build_parser

    parser = build_parser()
    commands = quoted_command_lines(doc)
    assert any(c.startswith("captum-prxai ") for c in commands), f"{doc.name}: no captum-prxai command found"
    bad = []
    for command in commands:
        words = shlex.split(command)
        if words[0] == "captum-prxai":
            if len(words) == 2 or "..." in command or "{" in command:  # a sub-command named in prose
                if words[1] not in COMMANDS or importlib.util.find_spec(COMMANDS[words[1]]) is None:
                    bad.append(command)
                continue
            try:
                parser.parse_args(words[1:])
            except SystemExit:
                bad.append(command)
        elif words[:2] == ["python", "-m"]:
            if importlib.util.find_spec(words[2]) is None:
                bad.append(command)
        elif not (ROOT / words[1]).is_file():
            bad.append(command)
    assert not bad, f"{doc.name} quotes commands that no longer exist or parse: {bad}"
