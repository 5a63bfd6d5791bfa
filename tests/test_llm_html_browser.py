"""The generation HTML view in headless Chromium: hovering a row colours the prompt by that row's sources.

Uses the explorer test's browser (system Chromium driven by the npm module playwright-core; install both with
tests/e2e/setup-browser.sh). Without them this test fails, it does not skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from captum_prxai.viz.generation_html import generation_html  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import { createRequire } from "node:module";
const [page_url, executablePath, root] = process.argv.slice(2);
const { chromium } = createRequire(root + "/package.json")("playwright-core");
const browser = await chromium.launch({ executablePath, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
const page = await browser.newPage();
await page.goto(page_url);
const spans = async () => page.$$eval(".prompt span", (s) => s.map((e) => getComputedStyle(e).backgroundColor));
const before = await spans();
await page.hover('tr.row[data-row="1"]');
const after = await spans();
const active = await page.$$eval("tr.row.active", (r) => r.map((e) => e.getAttribute("data-row")));
const label = await page.textContent("#row-label");
const external = await page.evaluate(() => performance.getEntriesByType("resource").map((e) => e.name));
console.log(JSON.stringify({ before, after, active, label, external }));
await browser.close();
"""


def _css(rgb: str) -> str:
    return rgb.replace(",", ", ")  # getComputedStyle writes rgb(r, g, b)


def test_hovering_a_row_highlights_its_sources(tmp_path):
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    node = shutil.which("node")
    if node is None or not Path(chromium).is_file() or not (ROOT / "node_modules" / "playwright-core").is_dir():
        pytest.fail("this browser test needs node, Chromium and playwright-core: run tests/e2e/setup-browser.sh.",
                    pytrace=False)
    scores = torch.tensor([[0.9, 0.1, 0.0], [0.0, 0.2, 0.8]])
    html = generation_html(["The", " capital", " France"], [" Paris", "."], scores, method="pr-a")
    path = tmp_path / "view.html"
    path.write_text(html, encoding="utf-8")
    script = tmp_path / "hover.mjs"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run([node, str(script), path.as_uri(), chromium, str(ROOT)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    data = json.loads(html.split('id="prxai-data">')[1].split("</script>")[0])
    assert seen["before"] == [_css(c) for c in data["colors"][0]]  # the first row is shown on load
    assert seen["after"] == [_css(c) for c in data["colors"][1]]  # hovering row 1 recolours the prompt
    assert seen["after"][2] != "rgb(255, 255, 255)" and seen["after"][0] == "rgb(255, 255, 255)"
    assert seen["active"] == ["1"] and seen["label"] == "Sources of . (row 2):"
    assert seen["external"] == []  # no asset loaded from anywhere
