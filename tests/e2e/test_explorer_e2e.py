"""End-to-end test of the explorer in headless Chromium (Playwright's playwright-core from npm, system Chromium).

The server runs in a thread on a free loopback port with a tiny BERT model; the
Node script ``explorer.e2e.mjs`` drives the page. Run ``.ci/setup-browser``
once to install Chromium and the node module; without them this test fails
(it does not skip).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("flask")

from captum_prxai.explorer import ServerThread, create_app  # noqa: E402
from e2e._tiny import build_tiny  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "explorer.e2e.mjs"
ARTIFACTS = ROOT / "test-artifacts"
SETUP = "run tests/e2e/setup-browser.sh (installs chromium with apt-get and playwright-core with npm)"


def _requirements() -> tuple[str, str]:
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    node = shutil.which("node")
    missing = []
    if not (Path(chromium).is_file() and os.access(chromium, os.X_OK)):
        missing.append(f"Chromium at {chromium}")
    if node is None:
        missing.append("node (Node.js)")
    if not (ROOT / "node_modules" / "playwright-core" / "package.json").is_file():
        missing.append(f"the npm module playwright-core in {ROOT / 'node_modules'}")
    if missing:
        pytest.fail(f"the browser test needs {', '.join(missing)}: {SETUP}.", pytrace=False)
    return chromium, node  # type: ignore[return-value]


@pytest.fixture
def slow_method():
    """A registered many-pass method that calls the model until its job is cancelled (at most 120 s)."""
    import time

    import torch

    from captum_prxai.methods import METHODS, Explainer, register_method

    def factory(model, forward, ctx):
        def run(ids, mask, special, target):
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                forward(ids, mask)  # the explorer's guarded forward raises once the job is cancelled
                time.sleep(0.01)
            return torch.zeros(ids.shape)

        return Explainer("e2e-slow", "Slow (test)", run)

    register_method("e2e-slow", "Slow (test)", "perturbation", "calls the model until cancelled", factory)
    try:
        yield "e2e-slow"
    finally:
        METHODS.pop("e2e-slow", None)


@pytest.fixture
def slow_fast_method():
    """A registered one-pass-lane method (family "gradient") that calls the model until its job is cancelled (at most
    120 s): it holds the lane the graph view runs on."""
    import time

    import torch

    from captum_prxai.methods import METHODS, Explainer, register_method

    def factory(model, forward, ctx):
        def run(ids, mask, special, target):
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                forward(ids, mask)  # the explorer's guarded forward raises once the job is cancelled
                time.sleep(0.01)
            return torch.zeros(ids.shape)

        return Explainer("e2e-slow-fast", "Slow one-pass (test)", run)

    register_method("e2e-slow-fast", "Slow one-pass (test)", "gradient", "calls the model until cancelled", factory)
    try:
        yield "e2e-slow-fast"
    finally:
        METHODS.pop("e2e-slow-fast", None)


def test_explorer_in_headless_chromium(tmp_path, slow_method, slow_fast_method):
    import copy

    import torch

    chromium, node = _requirements()
    model, tokenizer, datasets = build_tiny(tmp_path)
    flipped = copy.deepcopy(model)
    with torch.no_grad():
        flipped.classifier.weight.mul_(-1.0)  # a second model that disagrees, shown beside the first
    # a low cost limit, so that a Shapley export of 200 permutations is refused (about 4,400 model evaluations;
    # the page runs IG with 8 steps, 24)
    app = create_app(model, tokenizer, datasets, model_name="tiny-bert", max_chars=300, max_method_seconds=1.0,
                     default_methods=("pr-ag",), compare={"tiny-flipped": (flipped, tokenizer)})
    warm = app.test_client()  # each model's first passes are timed for the estimates: make them warm ones
    for name in ("tiny-bert", "tiny-flipped"):
        for _ in range(6):
            assert warm.post("/api/estimate", json={"text": "a good film", "methods": ["pr-ag"],
                                                    "model": name}).status_code == 200
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "explorer-e2e.png"
    if shot.exists():
        shot.unlink()
    with ServerThread(app, port=0) as server:
        proc = subprocess.run(
            [node, str(SCRIPT), "--url", server.url, "--screenshot", str(shot), "--methods", "pr-ag,ig",
             "--text", "a great film but a dull plot", "--slow", slow_method, "--slow-fast", slow_fast_method],
            cwd=ROOT, env={**os.environ, "CHROMIUM": chromium}, capture_output=True, text=True, timeout=240,
        )
    assert proc.returncode == 0, f"browser script failed:\n{proc.stderr}\n{proc.stdout}"
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [c["method"] for c in summary["example"]["cards"]] == ["pr-ag", "ig"]
    assert summary["example"]["text"] in [t for t in datasets["tiny-reviews"].texts]
    assert "300" in summary["oversized_error"] and "characters" in summary["oversized_error"]
    assert summary["typed"]["tokens"][:3] == ["[CLS]", "a", "great"]
    assert summary["export"]["name"].endswith(".html") and summary["export"]["bytes"] > 1000
    assert [c["model"] for c in summary["side_by_side"]] == ["", "tiny-flipped"] or \
        [c["model"] for c in summary["side_by_side"]][1] == "tiny-flipped"
    assert summary["side_by_side"][0]["prediction"] != summary["side_by_side"][1]["prediction"]
    assert summary["batch"] == 3
    assert summary["cancelled"] == "Slow (test): cancelled"
    # issue 62: the picker; issue 64: the bars' widths (3), the export's limits and cancel (1), a foreign
    # session (2), both models in the export (5); the layout checks (9) are asserted in the script
    assert 0 < summary["picker"]["visible"] <= 8 and "default" in summary["picker"]["default"].lower()
    assert all(len(c["widths"]) > 0 and c["widths"][0] > 40 for c in summary["bars"])
    assert summary["export_limits"] == {"refused": 422, "aborted": True}
    assert summary["foreign_job"] == [404, 404]
    assert summary["export"]["models"] == 2
    # item 1: the graph view's jobs, one cancelled with the graph box's Cancel and one left behind by its page, were
    # cancelled before their pass
    for key in ("cancelled", "job"):
        left = app.extensions["prxai_explorer_jobs"].get(summary["graph_left"][key])
        assert left is not None and left.payload["kind"] == "graph" and left.status == "cancelled", key
        assert left.results == {} and set(left.errors.values()) == {"cancelled"}, key
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    engine = app.extensions["prxai_explorer"]
    assert engine.stats()["attribution_hits"] >= 2  # the repeated request in the page hit the cache
