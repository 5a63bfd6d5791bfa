// End-to-end check of the captum-prxai explorer in headless Chromium (Playwright, system browser).
//
//   node tests/e2e/explorer.e2e.mjs --url http://127.0.0.1:8765/ --screenshot test-artifacts/explorer.png
//   node tests/e2e/explorer.e2e.mjs --url ... --mode shot --index 23 --methods pr-ag,ig --screenshot docs/images/explorer.png
//
// mode "test" (default): picks a dataset example and two methods, checks the heatmaps, the filters,
// an oversized text (old results cleared), a typed text, the graph view, the export download (it must
// match the screen even after the form changed), two models side by side, the batch view, and a slow
// method that a second tab does not wait for and that the Cancel button stops; then takes a screenshot.
// mode "shot": only picks an example (--index N of the first page, or the first match of --query) and
// explains it, for documentation.
// Prints one JSON line with what it saw; exits 1 with a message on the first failed check.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
const url = args.url;
const mode = args.mode || "test";
const shot = args.screenshot || "test-artifacts/explorer-e2e.png";
const methods = (args.methods || "pr-ag,ig").split(",");
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
if (!url) { console.error("usage: explorer.e2e.mjs --url URL [--screenshot PATH] [--mode test|shot]"); process.exit(2); }

function check(cond, message) { if (!cond) throw new Error(`check failed: ${message}`); }

const profile = mkdtempSync(join(tmpdir(), "prxai-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: Number(args.width || 1440), height: Number(args.height || 900) },
  deviceScaleFactor: Number(args.scale || 1),
  acceptDownloads: true,
});
const problems = [];
const summary = { mode };
try {
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(Number(args.timeout || 60000));
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  // failed requests show up as console errors too; judge them by status instead (413 is expected below)
  page.on("console", (msg) => {
    if (msg.type() === "error" && !msg.text().startsWith("Failed to load resource")) problems.push(`console error: ${msg.text()}`);
  });
  page.on("response", (resp) => {
    if (resp.status() >= 400 && resp.status() !== 413) problems.push(`HTTP ${resp.status()} for ${resp.url()}`);
  });

  await page.goto(url);
  await page.waitForSelector("#examples li");
  summary.title = await page.title();
  check(summary.title === "PR-XAI Explorer", `page title is ${summary.title}`);

  async function pickMethods(names) {
    for (const box of await page.$$("input[data-method]")) {
      const want = names.includes(await box.getAttribute("data-method"));
      if ((await box.isChecked()) !== want) await box.click();
    }
  }

  async function explainAndWait(names) {
    const before = await page.getAttribute("#results", "data-job");
    await page.click("#explain");
    await page.waitForFunction((old) => {
      const r = document.querySelector("#results");
      return r.dataset.state === "done" && r.dataset.job !== old;
    }, before);
    for (const name of names) {
      await page.waitForSelector(`#results .card[data-method="${name}"] .prx-tok[data-score]`);
    }
    return page.$$eval("#results .card[data-method]", (cards) => cards.map((c) => ({
      method: c.dataset.method,
      scores: [...c.querySelectorAll(".prx-tok[data-score]")].map((s) => Number(s.dataset.score)),
      tokens: [...c.querySelectorAll(".prx-tok")].map((s) => s.textContent),
      cached: c.querySelector(".card-meta .badge")?.textContent,
    })));
  }

  if (args.query) {
    await page.fill("#search", args.query);
    await page.waitForFunction((q) => [...document.querySelectorAll("#examples li .ex-text")]
      .some((e) => e.textContent.toLowerCase().includes(q.toLowerCase())), args.query);
  }
  // 1. a dataset example with two methods
  const first = args.index !== undefined ? page.locator(`#examples li[data-index="${args.index}"]`)
    : page.locator("#examples li").first();
  const exampleText = await first.locator(".ex-text").textContent();
  await first.click();
  check((await page.inputValue("#text")) === exampleText, "clicking an example puts its text in the text box");
  check(await page.isVisible("#source-badge"), "the source badge shows the example");
  await pickMethods(methods);
  const cards = await explainAndWait(methods);
  check(cards.length === methods.length, `${methods.length} heatmaps, got ${cards.length}`);
  for (const c of cards) {
    check(c.scores.length > 2 && c.scores.every(Number.isFinite), `${c.method}: finite data-score on every token`);
  }
  check(await page.isVisible("#prediction .probs"), "prediction probabilities shown");
  summary.example = { text: exampleText, cards: cards.map((c) => ({ method: c.method, n: c.scores.length })) };

  // two models side by side (the server has a second model): one column each, same tokens, own predictions
  if (await page.isVisible("#compare-models")) {
    await page.waitForFunction(() => [...document.querySelectorAll(".column .results")].every((r) =>
      r.querySelectorAll(".card").length > 0 && r.querySelectorAll(".card.pending").length === 0));
    const columns = await page.$$eval(".column", (cols) => cols.map((c) => ({
      model: c.dataset.model, title: c.querySelector(".column-title").textContent,
      prediction: c.querySelector(".panel .strong") ? c.querySelector(".panel .strong").textContent : "",
      cards: [...c.querySelectorAll(".card[data-method]")].map((k) => k.dataset.method),
      tokens: [...c.querySelectorAll(".card .prx-tok")].map((t) => t.textContent),
    })));
    check(columns.length === 2, `two model columns, got ${columns.length}`);
    check(JSON.stringify(columns[0].cards) === JSON.stringify(columns[1].cards), "the same methods for both models");
    check(JSON.stringify(columns[0].tokens) === JSON.stringify(columns[1].tokens), "the heatmaps are aligned token by token");
    check(columns.every((c) => c.prediction.startsWith("Prediction:")), "each model shows its prediction");
    summary.side_by_side = columns.map((c) => ({ model: c.model || c.title, prediction: c.prediction }));
  }

  if (mode === "shot") {
    await page.waitForSelector("#progress", { state: "hidden" });
    await page.screenshot({ path: shot, fullPage: args.full === "1" });
    summary.screenshot = shot;
  } else {
    // 2. the same request again is served from the cache
    const again = await explainAndWait(methods);
    check(again.every((c) => c.cached === "cached"), "a repeated request is answered from the cache");

    // 3. the correctness filter
    await page.selectOption("#f-correct", "wrong");
    await page.waitForFunction(() => !document.querySelector("#list-meta").textContent.includes("…"));
    const wrong = await page.$$eval("#examples li .badge", (b) => b.map((x) => x.className));
    check(wrong.filter((c) => c.includes("ok")).length === 0, "filter 'wrong' lists no correctly classified example");
    summary.wrong_listed = await page.locator("#examples li").count();
    await page.selectOption("#f-correct", "");

    // 4. an oversized text gets the server's message
    await page.fill("#text", "good ".repeat(1000));
    await page.click("#explain");
    await page.waitForSelector("#error:not([hidden])");
    summary.oversized_error = await page.textContent("#error");
    check(/at most \d+/.test(summary.oversized_error), `oversized text error: ${summary.oversized_error}`);
    check(await page.isHidden("#prediction"), "the previous prediction is cleared under the error");
    check((await page.locator(".results .card").count()) === 0, "the previous heatmaps are cleared under the error");
    check((await page.locator(".column").count()) === 1, "the compared model's column is cleared too");

    // 5. a typed text
    const typed = args.text || "a great film but a dull plot";
    await page.fill("#text", "");
    await page.locator("#text").pressSequentially(typed);
    check(!(await page.isVisible("#source-badge")), "typing replaces the dataset example");
    const typedCards = await explainAndWait(methods);
    check(await page.isHidden("#error"), "the error is cleared");
    const shown = typedCards[0].tokens.join(" ");
    for (const word of typed.split(" ").slice(1, 3)) check(shown.includes(word), `heatmap shows '${word}': ${shown}`);
    summary.typed = { text: typed, tokens: typedCards[0].tokens };

    // 6. graph view, with its own settings
    await page.fill("#graph-edges", "5");
    await page.selectOption("#graph-layout", "circle");
    await page.click("#graph-btn");
    await page.waitForSelector("#graph svg");
    const graphTitle = await page.getAttribute("#graph", "data-title");
    check(/5 strongest edges/.test(graphTitle), `graph drawn with the chosen edge count: ${graphTitle}`);

    // 7. the form changes after the run: the page says so, and the export still shows what is on screen
    const shownTarget = (await page.textContent("#prediction .muted")).match(/explaining: (\w+)/)[1];
    const otherTarget = await page.$$eval("#target option", (opts, shown) =>
      opts.map((o) => o.textContent).find((t) => t !== "predicted" && t !== shown), shownTarget);
    await page.selectOption("#target", { label: otherTarget });
    check(await page.isVisible("#stale"), "changing the class marks the results stale");
    const screen = await page.$$eval("#results .card[data-method]", (cards) => cards.map((c) =>
      [...c.querySelectorAll(".prx-tok[data-score]")].map((t) => Number(t.dataset.score))));
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
    const exported = readFileSync(await download.path(), "utf-8");
    check(download.suggestedFilename().endsWith(".html"), `download name ${download.suggestedFilename()}`);
    check((exported.match(/class="prx-heatmap"/g) || []).length === methods.length, "export has one heatmap per method");
    check(exported.includes(`Why ${shownTarget}?`) && !exported.includes(`Why ${otherTarget}?`),
          `the export explains the class on screen (${shownTarget}), not the changed form (${otherTarget})`);
    const exportedScores = exported.split('class="prx-heatmap"').slice(1).map((block) =>
      [...block.split('class="prx-legend"')[0].matchAll(/data-score="([^"]+)"/g)].map((m) => Number(m[1])));
    check(JSON.stringify(exportedScores.map((r) => r.map((x) => x.toPrecision(3))))
          === JSON.stringify(screen.map((r) => r.map((x) => x.toPrecision(3)))), "the exported scores are the ones on screen");
    check(exported.includes(graphTitle.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")),
          "the export has the graph as drawn");
    summary.export = { name: download.suggestedFilename(), bytes: exported.length, target: shownTarget };
    await page.selectOption("#target", "");

    // 8. batch view: three ticked examples, one method, stacked with their labels
    const picks = page.locator("#examples li .batch-pick");
    for (let i = 0; i < 3; i += 1) await picks.nth(i).check();
    await page.selectOption("#batch-method", methods[0]);
    await page.click("#batch-btn");
    await page.waitForFunction(() => document.querySelector("#batch").dataset.state === "done");
    const rows = await page.$$eval("#batch .batch-row", (rs) => rs.map((r) => ({
      heat: r.querySelectorAll(".prx-tok[data-score]").length, badges: [...r.querySelectorAll(".badge")].map((b) => b.textContent),
    })));
    check(rows.length === 3 && rows.every((r) => r.heat > 2), `batch view: 3 heatmaps, got ${JSON.stringify(rows)}`);
    check(rows.every((r) => r.badges.some((b) => b.startsWith("true:")) && r.badges.some((b) => b.startsWith("pred:"))),
          "batch rows show true and predicted labels");
    summary.batch = rows.length;

    // 9. a slow method: a second tab stays responsive, and Cancel stops it
    if (args.slow) {
      await pickMethods([args.slow]);
      await page.fill("#text", "a good film");
      await page.click("#explain");
      await page.waitForFunction(() => document.querySelector("#results").dataset.state === "running");
      const second = await context.newPage();
      second.on("pageerror", (err) => problems.push(`second tab: ${err.message}`));
      await second.goto(url);
      await second.waitForSelector("#examples li");
      for (const box of await second.$$("input[data-method]")) {
        const want = (await box.getAttribute("data-method")) === methods[0];
        if ((await box.isChecked()) !== want) await box.click();
      }
      await second.fill("#text", "the plot was dull");
      await second.click("#explain");
      await second.waitForFunction(() => document.querySelector("#results").dataset.state === "done");
      check(await second.isVisible("#prediction .probs"), "the second tab got its prediction");
      check((await page.getAttribute("#results", "data-state")) === "running", "the slow job was still running meanwhile");
      await second.close();
      await page.click("#cancel");
      await page.waitForFunction(() => document.querySelector("#results").dataset.state === "cancelled");
      await page.waitForSelector("#progress", { state: "hidden" });  // every shown job (both models) has stopped
      summary.cancelled = await page.textContent(`#results .card[data-method="${args.slow}"]`);
      await pickMethods(methods);
    }

    await page.screenshot({ path: shot, fullPage: true });
    summary.screenshot = shot;
  }
  check(problems.length === 0, `no errors in the page: ${problems.join("; ")}`);
  console.log(JSON.stringify(summary));
} catch (err) {
  console.error(err.message || String(err));
  if (problems.length) console.error(problems.join("\n"));
  process.exitCode = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
