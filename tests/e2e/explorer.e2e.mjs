// End-to-end check of the captum-prxai explorer in headless Chromium (Playwright, system browser).
//
//   node tests/e2e/explorer.e2e.mjs --url http://127.0.0.1:8765/ --screenshot test-artifacts/explorer.png
//   node tests/e2e/explorer.e2e.mjs --url ... --mode shot --index 23 --methods pr-ag,ig --screenshot docs/images/explorer.png
//
// mode "test" (default): picks a dataset example and two methods, checks the heatmaps, the filters,
// an oversized text, a typed text, the graph view and the export download, then takes a screenshot.
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
      await page.waitForSelector(`.card[data-method="${name}"] .prx-tok[data-score]`);
    }
    return page.$$eval(".card[data-method]", (cards) => cards.map((c) => ({
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

    // 6. graph view
    await page.click("#graph-btn");
    await page.waitForSelector("#graph svg");

    // 7. export download
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
    const exported = readFileSync(await download.path(), "utf-8");
    check(download.suggestedFilename().endsWith(".html"), `download name ${download.suggestedFilename()}`);
    check((exported.match(/class="prx-heatmap"/g) || []).length === methods.length, "export has one heatmap per method");
    summary.export = { name: download.suggestedFilename(), bytes: exported.length };

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
