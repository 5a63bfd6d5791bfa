// End-to-end check of the captum-prxai explorer in headless Chromium (Playwright, system browser).
//
//   node tests/e2e/explorer.e2e.mjs --url http://127.0.0.1:8765/ --screenshot test-artifacts/explorer.png
//   node tests/e2e/explorer.e2e.mjs --url ... --mode shot --index 23 --methods pr-ag,ig --screenshot docs/images/explorer.png
//
// mode "test" (default): checks the method picker (at most 8 featured methods, the default marked), picks a
// dataset example and two methods, checks the heatmaps and measures the top-token bars, the filters,
// an oversized text (old results cleared), a typed text, the graph view (its title not clipped), the export
// download (it must match the screen even after the form changed, and hold every model's column), two models
// side by side, the batch view (its method select inside the sidebar), a slow method that a second tab does
// not wait for, cannot read or cancel, and that the Cancel button stops (the progress bar moving meanwhile, and
// Export and Show graph disabled after it), an export that is refused by the cost limit and one that stops
// when its request is aborted, and a graph request whose page is left (cancelled); then takes a screenshot.
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
  // answers the checks below expect to be refused: [status, url part]
  const expected = [];
  page.on("response", (resp) => {
    const ok = resp.status() === 413 || expected.some(([st, part]) => resp.status() === st && resp.url().includes(part));
    if (resp.status() >= 400 && !ok) {
      problems.push(`HTTP ${resp.status()} for ${resp.url()}`);
      resp.text().then((t) => problems.push(`  answer: ${t.slice(0, 300)}`), () => {});
    }
  });

  await page.goto(url);
  await page.waitForSelector("#examples li");
  summary.title = await page.title();
  check(summary.title === "PR-XAI Explorer", `page title is ${summary.title}`);

  async function pickMethods(names) {
    // a method outside the featured ones is under "More methods": open it first
    await page.$$eval("details.more-methods", (ds) => ds.forEach((d) => { d.open = true; }));
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

  // issue 62: the picker shows at most 8 methods, by their labels, with the default marked; the rest are collapsed
  const picker = await page.evaluate(() => ({
    visible: [...document.querySelectorAll("#methods input[data-method]")].filter((b) => b.checkVisibility())
      .map((b) => ({ name: b.dataset.method, label: b.parentElement.textContent })),
    defaults: [...document.querySelectorAll("#methods label.check.default")].map((l) => l.textContent),
    more: document.querySelector("details.more-methods") ? !document.querySelector("details.more-methods").open : null,
    batch: [...document.querySelectorAll("#batch-method option")].map((o) => [o.value, o.textContent]),
  }));
  check(picker.visible.length > 0 && picker.visible.length <= 8, `at most 8 methods in view: ${JSON.stringify(picker.visible)}`);
  check(picker.defaults.length === 1 && /default/i.test(picker.defaults[0]), `the default is marked: ${picker.defaults}`);
  check(picker.more === true, "the other methods are under a collapsed 'More methods'");
  check(picker.batch.length > 0 && picker.batch.every(([v, t]) => t && t !== v),
        `the batch view lists labels, not internal names: ${JSON.stringify(picker.batch)}`);
  summary.picker = { visible: picker.visible.length, default: picker.defaults[0] };

  // item 9: the batch method select stays inside the sidebar
  const fit = await page.evaluate(() => {
    const aside = document.querySelector("#browser").getBoundingClientRect();
    const sel = document.querySelector("#batch-method").getBoundingClientRect();
    return { aside: [aside.left, aside.right], select: [sel.left, sel.right] };
  });
  check(fit.select[1] <= fit.aside[1] + 0.5 && fit.select[0] >= fit.aside[0] - 0.5,
        `the batch method select fits the sidebar: ${JSON.stringify(fit)}`);

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
  // few IG steps: far under the test server's low cost limit (1 s), which a Shapley export is over (item 1)
  if (methods.includes("ig") && mode === "test") await page.fill('[data-param="ig_steps"]', "8");
  const cards = await explainAndWait(methods);
  check(cards.length === methods.length, `${methods.length} heatmaps, got ${cards.length}`);
  for (const c of cards) {
    check(c.scores.length > 2 && c.scores.every(Number.isFinite), `${c.method}: finite data-score on every token`);
  }
  check(await page.isVisible("#prediction .probs"), "prediction probabilities shown");
  summary.example = { text: exampleText, cards: cards.map((c) => ({ method: c.method, n: c.scores.length })) };

  // item 3: the top-token bars are drawn: each bar as wide as its |score| relative to the card's first
  const bars = await page.$$eval("#results .card[data-method]", (cs) => cs.map((c) => ({
    method: c.dataset.method,
    scale: c.querySelector(".scale-note") ? c.querySelector(".scale-note").textContent : "",
    rows: [...c.querySelectorAll(".bar-row")].map((r) => ({
      word: r.querySelector(".bar-tok").textContent,
      track: r.querySelector(".bar-track").getBoundingClientRect().width,
      bar: r.querySelector(".hbar").getBoundingClientRect().width,
      value: Number(r.querySelector(".hbar").dataset.value),
      seq: r.querySelector(".hbar").classList.contains("seq"),
    })),
  })));
  for (const card of bars) {
    check(card.rows.length > 0, `${card.method}: top tokens listed`);
    check(card.rows.every((r) => !["[CLS]", "[SEP]"].includes(r.word)), `${card.method}: no [CLS]/[SEP] in the top tokens`);
    const first = card.rows[0];
    check(first.track > 40, `${card.method}: the bar track is ${first.track} px wide`);
    check(Math.abs(first.bar - first.track) <= 1, `${card.method}: the largest bar fills its track (${first.bar} of ${first.track} px)`);
    for (const r of card.rows) {
      const want = (first.track * Math.abs(r.value)) / Math.abs(first.value);
      check(Math.abs(r.bar - want) <= 1.5, `${card.method}: bar of '${r.word}' is ${r.bar} px, want ${want.toFixed(1)}`);
    }
    check(/scale/.test(card.scale), `${card.method}: the card names its colour scale (${card.scale})`);
    const sequential = /sequential/.test(card.scale);
    check(card.rows.every((r) => r.seq === sequential), `${card.method}: the bars take the heatmap's scale (${card.scale})`);
  }
  summary.bars = bars.map((c) => ({ method: c.method, widths: c.rows.map((r) => Math.round(r.bar)) }));

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
    // item 9: the title is text above the drawing that wraps, and nothing of the drawing is outside the SVG
    const drawn = await page.evaluate(() => {
      const cap = document.querySelector("#graph .graph-title");
      const svg = document.querySelector("#graph svg");
      const vb = svg.viewBox.baseVal;
      const b = svg.getBBox();
      return { caption: cap ? cap.textContent : null, scroll: cap ? cap.scrollWidth - cap.clientWidth : 1,
               vb: [vb.x, vb.y, vb.width, vb.height], box: [b.x, b.y, b.width, b.height] };
    });
    check(drawn.caption === graphTitle && drawn.scroll <= 0, `the graph's title is shown whole: ${JSON.stringify(drawn)}`);
    check(drawn.box[0] >= drawn.vb[0] - 1 && drawn.box[0] + drawn.box[2] <= drawn.vb[0] + drawn.vb[2] + 1
          && drawn.box[1] >= drawn.vb[1] - 1 && drawn.box[1] + drawn.box[3] <= drawn.vb[1] + drawn.vb[3] + 1,
          `nothing is drawn outside the SVG: ${JSON.stringify(drawn)}`);

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
    // item 5: the export holds every model shown, each with one heatmap per method
    const columns = await page.locator(".column").count();
    const sections = exported.split('<section class="prx-model"').slice(1);
    check(sections.length === columns, `the export has ${sections.length} model sections for ${columns} columns`);
    check(sections.every((sec) => (sec.match(/class="prx-heatmap"/g) || []).length === methods.length),
          "export has one heatmap per method and model");
    if (columns > 1) check(sections[1].includes("model: tiny-flipped"), "the compared model is in the export");
    check(exported.includes(`Why ${shownTarget}?`) && !exported.includes(`Why ${otherTarget}?`),
          `the export explains the class on screen (${shownTarget}), not the changed form (${otherTarget})`);
    const exportedScores = sections[0].split('class="prx-heatmap"').slice(1).map((block) =>
      [...block.split('class="prx-legend"')[0].matchAll(/data-score="([^"]+)"/g)].map((m) => Number(m[1])));
    check(JSON.stringify(exportedScores.map((r) => r.map((x) => x.toPrecision(3))))
          === JSON.stringify(screen.map((r) => r.map((x) => x.toPrecision(3)))), "the exported scores are the ones on screen");
    check(exported.includes(graphTitle.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")),
          "the export has the graph as drawn");
    summary.export = { name: download.suggestedFilename(), bytes: exported.length, target: shownTarget, models: sections.length };
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
      // item 9: the progress bar moves during the one long method
      await page.waitForFunction(() => document.querySelector("#progress-bar").value > 0);
      const slowJob = await page.getAttribute("#results", "data-job");
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
      // item 2: the second tab is another page session: it can neither read nor cancel the first tab's job
      second.on("response", (resp) => {
        if (resp.status() >= 400 && !(resp.status() === 404 && resp.url().includes(slowJob))) problems.push(`second tab: HTTP ${resp.status()} for ${resp.url()}`);
      });
      const foreign = await second.evaluate(async (id) => {
        const session = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
        const headers = { "X-PRXAI-Session": session, "Content-Type": "application/json" };
        const read = await fetch(`/api/jobs/${id}`, { headers });
        const cancel = await fetch(`/api/jobs/${id}/cancel`, { method: "POST", headers, body: "{}" });
        return [read.status, cancel.status];
      }, slowJob);
      check(foreign[0] === 404 && foreign[1] === 404, `another page session gets 404 for the job: ${foreign}`);
      summary.foreign_job = foreign;
      check((await page.getAttribute("#results", "data-state")) === "running", "the slow job was still running meanwhile");
      await second.close();
      await page.click("#cancel");
      await page.waitForFunction(() => document.querySelector("#results").dataset.state === "cancelled");
      await page.waitForSelector("#progress", { state: "hidden" });  // every shown job (both models) has stopped
      summary.cancelled = await page.textContent(`#results .card[data-method="${args.slow}"]`);
      // item 9: nothing finished, so there is nothing to export or draw
      check(await page.isDisabled("#export") && await page.isDisabled("#graph-btn"),
            "Export and Show graph are disabled after a cancel that finished nothing");

      // item 1: an export that computes goes through the cost limit, and stops when its request is aborted
      expected.push([422, "/api/export"]);
      const refused = await page.evaluate(async () => {
        const resp = await fetch("/api/export", { method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ text: "good ".repeat(40), truncate: true, methods: ["shapley"], params: { permutations: 200 }, confirmed: true }) });
        return [resp.status, (await resp.json()).error];
      });
      check(refused[0] === 422 && /would take about/.test(refused[1]), `the export is refused over the cost limit: ${refused}`);
      const aborted = await page.evaluate(async (slow) => {
        const pause = (ms) => new Promise((r) => setTimeout(r, ms));
        const running = async () => (await (await fetch("/api/stats")).json()).running;
        const ctrl = new AbortController();
        const request = fetch("/api/export", { method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ text: "a good film", methods: [slow] }), signal: ctrl.signal }).then(() => "answered", (e) => e.name);
        for (let i = 0; i < 200 && !(await running()).includes(slow); i += 1) await pause(50);
        const before = await running();
        ctrl.abort();
        const outcome = await request;
        for (let i = 0; i < 400 && (await running()).length; i += 1) await pause(50);
        return { before, outcome, after: await running() };
      }, args.slow);
      check(aborted.before.includes(args.slow) && aborted.outcome === "AbortError" && aborted.after.length === 0,
            `the aborted export's job stopped: ${JSON.stringify(aborted)}`);
      summary.export_limits = { refused: refused[0], aborted: aborted.after.length === 0 };

      // item 1: the graph view's request is a job of its page, queued on the one-pass lane and cancelled when the
      // page is left
      if (args["slow-fast"]) {
        const third = await context.newPage();
        third.on("pageerror", (err) => problems.push(`third tab: ${err.message}`));
        await third.goto(url);
        await third.waitForSelector("#examples li");
        await third.fill("#text", "a good film");  // a length whose forward passes were timed warm
        await third.click("#explain");  // the default method
        await third.waitForFunction(() => document.querySelector("#results").dataset.state === "done");
        // another client's slow one-pass method holds the lane the graph is drawn on
        const blocker = await third.evaluate(async (slowFast) => {
          const session = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
          const headers = { "X-PRXAI-Session": session, "Content-Type": "application/json" };
          const job = await (await fetch("/api/explain", { method: "POST", headers,
            body: JSON.stringify({ text: "a good film", methods: [slowFast] }) })).json();
          for (let i = 0; i < 200 && !(await (await fetch("/api/stats")).json()).running.includes(slowFast); i += 1) {
            await new Promise((r) => setTimeout(r, 50));
          }
          return { id: job.id, session };
        }, args["slow-fast"]);
        // the graph box's Cancel stops a graph waiting for the lane
        await third.click("#graph-btn");
        await third.waitForFunction(() => !!document.querySelector("#graph").dataset.job);
        const cancelledJob = await third.getAttribute("#graph", "data-job");
        await third.click("#graph .graph-cancel");
        await third.waitForFunction(() => /graph cancelled/.test(document.querySelector("#graph").textContent));
        check(await third.isHidden("#error"), "a cancelled graph is no error");
        // a second graph request, left behind by its page
        await third.click("#graph-btn");
        await third.waitForFunction((old) => {
          const job = document.querySelector("#graph").dataset.job;
          return !!job && job !== old;
        }, cancelledJob);
        const graphJob = await third.getAttribute("#graph", "data-job");
        const owner = await third.evaluate(() => SESSION);
        const queued = await third.evaluate(async (id) => ({
          lanes: (await (await fetch("/api/stats")).json()).queued,
          status: (await (await fetch(`/api/jobs/${id}`, { headers: { "X-PRXAI-Session": SESSION } })).json()).status,
        }), graphJob);
        check(queued.status === "queued" && queued.lanes.fast >= 1 && await third.isVisible("#graph .spinner"),
              `the graph waits on the one-pass lane: ${JSON.stringify(queued)}`);
        await third.goto("about:blank");  // the page is left
        await third.close();
        const left = await page.evaluate(async ([id, session, b]) => {
          const pause = (ms) => new Promise((r) => setTimeout(r, ms));
          const as = (sid) => ({ "X-PRXAI-Session": sid, "Content-Type": "application/json" });
          let status = null;
          for (let i = 0; i < 200 && status !== "cancelled"; i += 1) {  // read as the page that left
            status = (await (await fetch(`/api/jobs/${id}`, { headers: as(session) })).json()).status;
            if (status !== "cancelled") await pause(50);
          }
          const blocking = (await (await fetch(`/api/jobs/${b.id}`, { headers: as(b.session) })).json()).status;
          await fetch(`/api/jobs/${b.id}/cancel`, { method: "POST", headers: as(b.session), body: "{}" });
          return { status, blocking };
        }, [graphJob, owner, blocker]);
        check(left.status === "cancelled" && left.blocking === "running",
              `leaving the page cancelled its graph job while the lane was still busy: ${JSON.stringify(left)}`);
        summary.graph_left = { job: graphJob, status: left.status, cancelled: cancelledJob };
      }
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
