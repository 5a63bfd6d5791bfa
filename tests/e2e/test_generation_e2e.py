"""End-to-end test of the explorer's generation view in headless Chromium (playwright-core from npm, system Chromium).

The generation app runs in a thread on a free loopback port with a tiny random Llama causal LM and a word-level
tokenizer (tests/conftest.py); the Node script ``generation.e2e.mjs`` drives the page: an empty prompt's error,
then a prompt and target, and a hover on the matrix's second row. Install the browser with
tests/e2e/setup-browser.sh; without it this test fails (it does not skip).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("flask")

from captum_prxai.explorer import ServerThread, create_generation_app  # noqa: E402
from conftest import tiny_causal_lm, word_tokenizer  # noqa: E402
from e2e.test_explorer_e2e import _requirements  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "generation.e2e.mjs"
WORDS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(30)]


def _css(rgb: str) -> str:
    return rgb.replace(",", ", ")  # getComputedStyle writes rgb(r, g, b)


def test_generation_view_hover_highlights_the_rows_sources(tmp_path):
    import torch

    chromium, node = _requirements()
    model, tokenizer = tiny_causal_lm(len(WORDS)), word_tokenizer(WORDS, bos=False)
    app = create_generation_app(model, tokenizer, model_name="tiny-llama")
    with ServerThread(app, port=0) as server:
        proc = subprocess.run(
            [node, str(SCRIPT), "--url", server.url, "--prompt", "w1 w2 w3 w4", "--target", "w5 w6 w7",
             "--method", "pr-g", "--screenshot", str(tmp_path / "generation.png"), "--special-target", "</s>"],
            cwd=ROOT, env={**os.environ, "CHROMIUM": chromium}, capture_output=True, text=True, timeout=240,
        )
    assert proc.returncode == 0, f"browser script failed:\n{proc.stderr}\n{proc.stdout}"
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["selected"] == "pr-xai" and {"pr-a", "pr-g", "pr-ag"} <= set(seen["methods"])  # the default first
    assert "prompt is empty" in seen["empty_error"]
    assert seen["rows"] == ["w5", "w6", "w7"]
    colors = seen["data"]["colors"]
    assert seen["before"] == [_css(c) for c in colors[0]]  # row 0 is shown when the matrix appears
    assert seen["after"] == [_css(c) for c in colors[1]]  # hovering row 1 colours the prompt by row 1
    assert seen["before"] != seen["after"]
    assert seen["active"] == ["1"] and seen["label"] == "Sources of w6 (row 2):"
    assert seen["display"] == "table-row"  # the explorer's flex .row rule does not break the table
    # the colours are the row's scores: the strongest source of row 1 gets the darkest cell
    assert seen["count_disabled"] is True
    job = app.extensions["prxai_generation_jobs"].get(seen["job"])
    scores = torch.tensor(next(iter(job.results.values()))["token_attr"])[1]
    strongest = int(scores.argmax())
    assert seen["after"][strongest] != "rgb(255, 255, 255)"
    white = [j for j, c in enumerate(seen["after"]) if c == "rgb(255, 255, 255)"]
    assert all(float(scores[j]) <= float(scores[strongest]) for j in white)
    assert (tmp_path / "generation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the library's refusal of a special-tokens-only continuation, shown in the page (no traceback), old matrix gone
    assert "only special tokens" in seen["job_error"] and "Traceback" not in seen["job_error"]
    assert seen["cleared"] is True
