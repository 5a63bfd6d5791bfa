// End-to-end check of the explorer's generation view in headless Chromium (Playwright, system browser).
//
//   node tests/e2e/generation.e2e.mjs --url http://127.0.0.1:8765/ --prompt "w1 w2 w3" --target "w4 w5 w6"
//
// Submits an empty prompt (its error must show in the page), then the prompt and target; waits for the matrix,
// hovers its second row and reads the prompt's colours before and after, the active row and the row label, and the
// colours the view's data gives each row; then, with --special-target, a continuation the library refuses. Prints one JSON line with what it saw; exits 1 on a page error, a
// console error (a Content-Security-Policy violation included) or a failed check.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
function check(cond, message) { if (!cond) throw new Error(`check failed: ${message}`); }

const profile = mkdtempSync(join(tmpdir(), "prxai-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath, headless: true, viewport: { width: 1280, height: 900 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const problems = [];
const summary = {};
try {
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(60000);
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("console", (msg) => {
    if (msg.type() === "error" && !msg.text().startsWith("Failed to load resource")) problems.push(`console error: ${msg.text()}`);
  });
  await page.goto(args.url);
  await page.waitForSelector("#method option", { state: "attached" });
  summary.methods = await page.$$eval("#method option", (os) => os.map((o) => o.value));
  summary.selected = await page.inputValue("#method");

  // an empty prompt: the server's message in the page, nothing else shown
  await page.click("#explain");
  await page.waitForSelector("#error:not([hidden])");
  summary.empty_error = await page.textContent("#error");
  check(await page.isHidden("#gen-result"), "a result is shown under the error");

  await page.fill("#prompt", args.prompt);
  await page.fill("#target", args.target);
  if (args.method) await page.selectOption("#method", args.method);
  await page.click("#explain");
  await page.waitForSelector("#gen-view tr.row");
  await page.waitForSelector("#gen-view tr.row.active");  // the view's script ran: row 0 is shown on load
  check(await page.isHidden("#error"), "the earlier error is still shown");
  const spans = async () => page.$$eval("#gen-view .prompt span", (s) => s.map((e) => getComputedStyle(e).backgroundColor));
  summary.rows = await page.$$eval("#gen-view tr.row", (rs) => rs.map((r) => r.querySelector("th").textContent));
  summary.before = await spans();
  await page.hover('#gen-view tr.row[data-row="1"]');
  summary.after = await spans();
  summary.active = await page.$$eval("#gen-view tr.row.active", (r) => r.map((e) => e.getAttribute("data-row")));
  summary.label = await page.textContent("#row-label");
  summary.data = await page.$eval("#prxai-data", (e) => JSON.parse(e.textContent));
  summary.display = await page.$eval('#gen-view tr.row[data-row="1"]', (r) => getComputedStyle(r).display);
  summary.meta = await page.textContent("#gen-meta");
  summary.job = await page.getAttribute("#gen-result", "data-job");
  summary.count_disabled = await page.isDisabled("#max-new-tokens");  // a target is given: nothing is generated
  await page.screenshot({ path: args.screenshot || join(profile, "generation.png"), fullPage: true });

  // a continuation the library refuses (special tokens only): its message from the job, the old matrix cleared
  if (args["special-target"]) {
    await page.fill("#target", args["special-target"]);
    await page.click("#explain");
    await page.waitForSelector("#error:not([hidden])");
    summary.job_error = await page.textContent("#error");
    summary.cleared = await page.isHidden("#gen-result");
  }
  if (problems.length) throw new Error(problems.join("\n"));
  console.log(JSON.stringify(summary));
} catch (err) {
  console.error(err.message);
  process.exitCode = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
