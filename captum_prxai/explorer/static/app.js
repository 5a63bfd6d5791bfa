// PR-XAI Explorer front end: plain JavaScript, no build step.
// Talks to the JSON API of captum_prxai/explorer/app.py. All HTML received from
// the server (heatmap fragments, graph SVG) is generated there with every text escaped;
// everything else is inserted with textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  info: null,
  source: null,         // {dataset, index, label_name} when the text is a dataset example
  nextStart: 0,
  listToken: 0,         // drops answers of outdated list requests
  job: null,            // the job shown (its last snapshot), of the first model
  others: [],           // jobs of the compared models, shown in columns beside it
  shownForm: null,      // JSON of the form that produced the shown job (to tell when it is stale)
  graph: null,          // the graph request drawn on screen (export draws the same)
  graphJob: null,       // the graph job being drawn (its last snapshot)
  pendingConfirm: null, // a request waiting for "Run anyway"
};

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else node.setAttribute(k, v);
  }
  if (text !== undefined) node.textContent = text;
  return node;
}

function showError(message) {
  const box = $("error");
  if (!message) { box.hidden = true; box.textContent = ""; return; }
  box.textContent = message;
  box.hidden = false;
}

// ids of this page's jobs (explain, graph, batch) that have not finished: leaving the page cancels them, since no
// other page can read them (they belong to this page's session)
const LIVE_JOBS = new Set();

function trackJob(data) {
  if (!data || typeof data.id !== "string" || typeof data.status !== "string") return;
  if (["done", "cancelled"].includes(data.status)) LIVE_JOBS.delete(data.id); else LIVE_JOBS.add(data.id);
}

async function api(path, body) {
  const data = await apiRequest(path, body);
  if (data instanceof Response) return data;
  if (path.startsWith("/api/explain") || path.startsWith("/api/graph") || path.startsWith("/api/jobs/")) trackJob(data);
  return data;
}

window.addEventListener("pagehide", () => {
  for (const id of LIVE_JOBS) {
    // keepalive: the request is sent even though the page goes away
    fetch(`/api/jobs/${id}/cancel`, { method: "POST", keepalive: true, body: "{}",
      headers: { "Content-Type": "application/json", "X-PRXAI-Session": SESSION } }).catch(() => {});
  }
  LIVE_JOBS.clear();
});

// ------------------------------------------------------------------ set-up
async function init() {
  try {
    state.info = await api("/api/info");
  } catch (err) { showError(`Cannot reach the explorer: ${err.message}`); return; }
  const info = state.info;
  const lim = info.limits;
  $("model-info").textContent = `model: ${info.model} (${info.model_class}; classes: ${info.label_names.join(", ")})`
    + (lim.max_tokens ? ` · at most ${lim.max_tokens} tokens` : "");
  for (const name of info.datasets) $("dataset").append(el("option", { value: name }, name));
  $("dataset").value = info.dataset;
  info.label_names.forEach((name, i) => {
    $("f-pred").append(el("option", { value: String(i) }, name));
    $("target").append(el("option", { value: String(i) }, name));
  });
  for (const p of info.palettes) $("palette").append(el("option", { value: p }, p === "colorblind" ? "colour-blind safe (blue / orange)" : "red / green"));
  const scaleNames = { own: "each card its own", row: "shared by the row", all: "shared by all rows" };
  for (const sc of info.scales) {
    $("scale").append(el("option", { value: sc }, scaleNames[sc] || sc));
    $("batch-scale").append(el("option", { value: sc }, scaleNames[sc] || sc));
  }
  $("scale").value = "own";
  $("batch-scale").value = "all";  // the batch view compares rows: one scale across them by default
  buildMethods(info);
  buildParams(info);
  if (info.models.length > 1) {
    for (const m of info.models.slice(1)) {
      const box = el("input", { type: "checkbox", "data-compare": m.name, id: `c-${m.name}` });
      box.checked = true;
      const label = el("label", { class: "check", for: `c-${m.name}`, title: `${m.model_class}; classes: ${m.label_names.join(", ")}` });
      label.append(box, document.createTextNode(m.name));
      $("compare-models").append(label);
    }
    $("compare-models").hidden = false;
  }
  for (const m of info.graph_methods) {
    const spec = info.methods.find((x) => x.name === m);
    if (spec) $("graph-method").append(el("option", { value: m }, spec.label));
  }
  const firstPr = info.default_methods.find((m) => info.graph_methods.includes(m));
  if (firstPr) $("graph-method").value = firstPr;
  bindEvents();
  updateCharCount();
  await switchDataset();
}

function methodLabel(m) {
  // the registry's label; the default method is marked even where its label does not say so
  return m.name === state.info.default_method && !/default/i.test(m.label) ? `${m.label} (default)` : m.label;
}

function methodBox(m, info) {
  const box = el("input", { type: "checkbox", "data-method": m.name, id: `m-${m.name}` });
  box.checked = info.default_methods.includes(m.name);
  const label = el("label", { class: m.name === info.default_method ? "check default" : "check", for: `m-${m.name}`,
                              title: m.description });
  label.append(box, document.createTextNode(methodLabel(m)));
  return label;
}

function buildMethods(info) {
  // the featured methods (at most about 8, the default first and marked), then the rest under a collapsed
  // "More methods" group, by family
  const featured = info.featured.map((n) => info.methods.find((m) => m.name === n)).filter(Boolean);
  const main = el("fieldset", { class: "featured" });
  main.append(el("legend", {}, "Methods"));
  for (const m of featured) main.append(methodBox(m, info));
  $("methods").append(main);
  const rest = info.methods.filter((m) => !info.featured.includes(m.name));
  if (!rest.length) return;
  const more = el("details", { class: "more-methods" });
  more.append(el("summary", {}, `More methods (${rest.length})`));
  const families = [];
  for (const m of rest) if (!families.includes(m.family)) families.push(m.family);
  for (const fam of families) {
    const set = el("fieldset");
    set.append(el("legend", {}, info.family_names[fam] || fam));
    for (const m of rest.filter((x) => x.family === fam)) set.append(methodBox(m, info));
    more.append(set);
  }
  more.open = rest.some((m) => info.default_methods.includes(m.name));
  $("methods").append(more);
}

function buildParams(info) {
  for (const p of info.params) {
    const label = el("label", { class: "field", title: p.help, "data-param-field": p.key }, p.label);
    let input;
    if (p.kind === "choice") {
      input = el("select");
      for (const c of p.choices) input.append(el("option", { value: c }, c));
      input.value = p.default;
    } else {
      input = el("input", { type: "number", min: String(p.min), max: String(p.max),
                            step: p.kind === "int" ? "1" : "0.01" });
      if (p.default !== null) input.value = String(p.default);
      else input.placeholder = "default";
    }
    input.dataset.param = p.key;
    input.dataset.kind = p.kind;
    label.append(input, el("span", { class: "help" }, p.help));
    $("params").append(label);
  }
  syncParams();
}

function checkedMethods() {
  return [...document.querySelectorAll("input[data-method]")].filter((b) => b.checked).map((b) => b.dataset.method);
}

function syncParams() {
  // show only the parameters used by a ticked method
  const used = new Set();
  for (const name of checkedMethods()) {
    const spec = state.info.methods.find((m) => m.name === name);
    (spec ? spec.params : []).forEach((p) => used.add(p));
  }
  for (const field of document.querySelectorAll("[data-param-field]")) field.hidden = !used.has(field.dataset.paramField);
}

function params() {
  const out = {};
  for (const input of document.querySelectorAll("[data-param]")) {
    if (input.value === "") continue;
    if (input.dataset.kind === "choice") { out[input.dataset.param] = input.value; continue; }
    const value = Number(input.value);  // a number field never sends text: the server refuses it
    out[input.dataset.param] = Number.isFinite(value) ? value : input.value;
  }
  return out;
}

function bindEvents() {
  $("dataset").addEventListener("change", switchDataset);
  let timer = null;
  $("search").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => loadExamples(true), 250); });
  for (const id of ["f-label", "f-pred", "f-correct"]) $(id).addEventListener("change", () => loadExamples(true));
  $("more").addEventListener("click", () => loadExamples(false));
  $("text").addEventListener("input", () => {
    if (state.source) { state.source = null; markSelected(); updateSourceBadge(); }
    updateCharCount();
    markStale();
  });
  $("text").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) explain(); });
  $("methods").addEventListener("change", () => { syncParams(); markStale(); });
  $("params").addEventListener("input", markStale);
  $("params").addEventListener("change", markStale);
  $("target").addEventListener("change", markStale);
  $("truncate").addEventListener("change", () => { updateCharCount(); markStale(); });
  $("explain").addEventListener("click", () => explain());
  $("cancel").addEventListener("click", cancelJob);
  $("confirm-run").addEventListener("click", () => {
    const pending = state.pendingConfirm;
    hideConfirm();
    if (pending && pending.graph) drawGraph(pending); else if (pending) explain(pending);
  });
  $("confirm-cancel").addEventListener("click", hideConfirm);
  // display options: re-rendered from the shown job, never recomputed
  $("merge").addEventListener("change", rerender);
  $("palette").addEventListener("change", rerender);
  $("scale").addEventListener("change", rerender);
  $("batch-scale").addEventListener("change", rescaleBatch);
  $("graph-btn").addEventListener("click", () => drawGraph());
  for (const id of ["graph-method", "graph-edges", "graph-nodes", "graph-layout", "graph-walk"]) $(id).addEventListener("change", markGraphStale);
  $("export").addEventListener("click", exportPage);
}

function updateCharCount() {
  const n = $("text").value.length, max = state.info ? state.info.limits.max_chars : 0;
  const box = $("char-count");
  if (state.source) {
    box.textContent = `${n} characters (dataset example: not limited by characters; long ones need 'truncate')`;
    box.classList.remove("over");
    return;
  }
  const over = n > max;
  box.textContent = `${n} / ${max} characters` + (over && $("truncate").checked ? ` (the first ${max} will be explained)` : "");
  box.classList.toggle("over", over && !$("truncate").checked);
}

function updateSourceBadge() {
  const badge = $("source-badge");
  if (!state.source) { badge.hidden = true; return; }
  badge.textContent = `${state.source.dataset} #${state.source.index} · true: ${state.source.label_name}`;
  badge.hidden = false;
}

// ------------------------------------------------------------------ examples
async function switchDataset() {
  const name = $("dataset").value;
  $("list-meta").textContent = `loading ${name}…`;
  $("examples").replaceChildren();
  try {
    const summary = await api(`/api/datasets/${encodeURIComponent(name)}`);
    const sel = $("f-label");
    sel.replaceChildren(el("option", { value: "" }, "any"));
    summary.label_names.forEach((n, i) => sel.append(el("option", { value: String(i) }, `${n} (${summary.label_counts[i]})`)));
    $("f-correct").disabled = !summary.comparable;
    if (!summary.comparable) $("f-correct").value = "";
    $("f-correct").title = summary.comparable ? "" : "the model's classes differ from this dataset's";
  } catch (err) { showError(err.message); $("list-meta").textContent = ""; return; }
  await loadExamples(true);
}

async function loadExamples(reset) {
  const token = ++state.listToken;
  if (reset) { state.nextStart = 0; $("examples").replaceChildren(); }
  const needsPred = $("f-pred").value !== "" || $("f-correct").value !== "";
  const wanted = 25;
  let added = 0;
  let page = null;
  $("list-meta").textContent = needsPred ? "predicting…" : "loading…";
  $("more").disabled = true;
  try {
    // with a prediction filter, ask in small steps (64 new predictions each) and show how far the scan got
    do {
      const q = new URLSearchParams({ dataset: $("dataset").value, q: $("search").value, label: $("f-label").value,
                                      predicted: $("f-pred").value, correct: $("f-correct").value,
                                      start: String(state.nextStart || 0), limit: String(wanted - added),
                                      budget: needsPred ? "64" : "256" });
      page = await api(`/api/examples?${q}`);
      if (token !== state.listToken) return;
      for (const item of page.items) $("examples").append(exampleItem(item));
      added += page.items.length;
      state.nextStart = page.next_start;
      if (needsPred && !page.exhausted) {
        $("list-meta").textContent = `predicting… scanned ${page.scanned} / ${page.size} examples, ${added} match so far`;
      }
    } while (needsPred && !page.exhausted && added < wanted);
  } catch (err) {
    if (token === state.listToken) { showError(err.message); $("list-meta").textContent = ""; }
    return;
  } finally { $("more").disabled = false; }
  showError(null);
  const shown = $("examples").children.length;
  $("list-meta").textContent = `${shown} shown · ${page.size} examples · predictions cached: ${page.predicted_total}`
    + (page.exhausted ? "" : " · more below");
  $("more").hidden = page.exhausted;
  markSelected();
  syncBatch();
}

function exampleItem(item) {
  const li = el("li", { dataset: { index: String(item.index) } });
  const pick = el("input", { type: "checkbox", class: "batch-pick", title: "add to the batch view", "aria-label": `batch #${item.index}` });
  pick.addEventListener("click", (e) => { e.stopPropagation(); syncBatch(); });
  li.append(pick);
  li.append(el("div", { class: "ex-text" }, item.text));
  const meta = el("div", { class: "ex-meta" });
  meta.append(el("span", {}, `#${item.index}`), el("span", { class: "badge" }, `true: ${item.label_name}`));
  const cls = item.correct === null ? "badge" : item.correct ? "badge ok" : "badge bad";
  const mark = item.correct === null ? "" : item.correct ? " ✓" : " ✗";
  meta.append(el("span", { class: cls }, `pred: ${item.predicted_name} ${item.probability.toFixed(2)}${mark}`));
  li.append(meta);
  li.addEventListener("click", () => {
    state.source = { dataset: $("dataset").value, index: item.index, label_name: item.label_name };
    $("text").value = item.text;
    updateCharCount();
    updateSourceBadge();
    markSelected();
    markStale();
  });
  return li;
}

function markSelected() {
  for (const li of $("examples").children) {
    li.classList.toggle("selected", !!state.source && state.source.dataset === $("dataset").value
                        && String(state.source.index) === li.dataset.index);
  }
}

// ------------------------------------------------------------------ explain
function request() {
  const body = { methods: checkedMethods(), params: params(), truncate: $("truncate").checked,
                 merge_subwords: $("merge").checked, palette: $("palette").value,
                 target: $("target").value === "" ? null : Number($("target").value) };
  if (state.source) body.example = { dataset: state.source.dataset, index: state.source.index };
  else body.text = $("text").value;
  return body;
}

function formKey(body) {
  // what decides the computed results (display options excluded)
  const { methods, params: p, truncate, target, example, text } = body;
  return JSON.stringify({ methods, params: p, truncate, target, example: example || null, text: example ? null : text,
                          compare: comparedModels() });
}

function clearResults() {
  // nothing computed for another input stays on screen under a new error
  state.job = null;
  state.others = [];
  for (const col of [...document.querySelectorAll(".column[data-model]")].slice(1)) col.remove();
  $("columns").classList.remove("multi");
  document.querySelector(".column .column-title").hidden = true;
  state.shownForm = null;
  state.graph = null;
  if (state.graphJob) {  // a graph of the old input being drawn: not needed any more
    api(`/api/jobs/${state.graphJob.id}/cancel`, {}).catch(() => {});
    state.graphJob = null;
  }
  $("prediction").replaceChildren();
  $("prediction").hidden = true;
  $("results").replaceChildren();
  delete $("results").dataset.job;
  $("results").dataset.state = "empty";
  $("graph").replaceChildren();
  $("tools").hidden = true;
  $("progress").hidden = true;
  $("stale").hidden = true;
}

function markStale() {
  if (!state.job || !state.shownForm) return;
  const stale = formKey(request()) !== state.shownForm;
  $("stale").hidden = !stale;
  $("results").dataset.stale = stale ? "true" : "false";
}

function markGraphStale() {
  if (!state.graph) return;
  const changed = JSON.stringify(graphSpec()) !== JSON.stringify(state.graph);
  $("graph-stale").hidden = !changed;
}

function comparedModels() {
  return [...document.querySelectorAll("input[data-compare]")].filter((b) => b.checked).map((b) => b.dataset.compare);
}

function compareColumn(name) {
  let col = document.querySelector(`.column[data-model="${CSS.escape(name)}"]`);
  if (!col) {
    col = el("div", { class: "column", "data-model": name });
    col.append(el("h3", { class: "column-title" }, name), el("section", { class: "panel prediction", hidden: "" }),
               el("section", { class: "results", "aria-live": "polite" }));
    $("columns").append(col);
  }
  return col;
}

const COST_PARAMS = ["ig_steps", "permutations", "samples"];

async function applyLimits(body) {
  // the page's maximum of each cost setting, for this text: the largest the server estimates under its limit,
  // so a setting the page offers is never refused
  const costly = body.methods.some((n) => {
    const m = state.info.methods.find((x) => x.name === n);
    return m && m.params.some((p) => COST_PARAMS.includes(p));
  });
  if (!costly) return;
  const est = await api("/api/estimate", body);
  for (const e of est.estimates) {
    if (!e.largest || !COST_PARAMS.includes(e.largest.param)) continue;
    const input = document.querySelector(`[data-param="${e.largest.param}"]`);
    const spec = state.info.params.find((p) => p.key === e.largest.param);
    const top = Math.min(spec.max, e.largest.value);
    input.max = String(top);
    input.title = `at most ${top} for this text (the explorer's limit is ${state.info.limits.max_method_seconds} s per method)`;
  }
}

function hideConfirm() { state.pendingConfirm = null; $("confirm").hidden = true; }

async function explain(confirmedBody) {
  showError(null);
  hideConfirm();
  const body = confirmedBody ? Object.assign({}, confirmedBody, { confirmed: true }) : request();
  if (!body.methods.length) { clearResults(); showError("Tick at least one method."); return; }
  if (!body.example && !body.text.trim()) { clearResults(); showError("Type a text or pick an example first."); return; }
  $("explain").disabled = true;
  try {
    await applyLimits(body);
    const job = await api("/api/explain", body);
    clearResults();
    state.job = job;
    state.shownForm = formKey(body);
    $("tools").hidden = false;
    const models = state.info.models;
    for (const name of comparedModels()) {
      // the same text and methods; the same class when the models share their classes, else each one's prediction
      const same = JSON.stringify(models.find((m) => m.name === name).label_names) === JSON.stringify(models[0].label_names);
      const other = Object.assign({}, body, { model: name, confirmed: true, target: same ? body.target : null });
      try { state.others.push(await api("/api/explain", other)); } catch (err) { showError(`${name}: ${err.message}`); }
    }
    if (state.others.length) {
      $("columns").classList.add("multi");
      const title = document.querySelector(".column .column-title");
      title.textContent = state.info.model;
      title.hidden = false;
    }
    renderAll();
    markStale();
    const final = (j) => ["done", "cancelled"].includes(j.status);
    while (state.job && state.job.id === job.id && ![state.job, ...state.others].every(final)) {
      await new Promise((r) => setTimeout(r, 300));
      const q = displayQuery();
      const snaps = await Promise.all([state.job, ...state.others].map((j) => final(j) ? j : api(`/api/jobs/${j.id}?${q}`)));
      if (state.job && state.job.id === job.id) { state.job = snaps[0]; state.others = snaps.slice(1); renderAll(); }
    }
    if ($("scale").value === "all" && state.others.length) await rerender();  // one scale across the columns
  } catch (err) {
    if (err.status === 409 && err.body && err.body.needs_confirmation) {
      clearResults();
      state.pendingConfirm = body;
      $("confirm-text").textContent = err.message;
      $("confirm").hidden = false;
    } else {
      clearResults();
      showError(err.message);
    }
  } finally {
    $("explain").disabled = false;
  }
}

function displayQuery(scale = $("scale").value, share = null) {
  const q = { merge_subwords: $("merge").checked ? "true" : "false", palette: $("palette").value, scale };
  if (share !== null) q.share = String(share);
  return new URLSearchParams(q);
}

function sharedTop(jobs) {
  // the largest share of a method's total |score| on one word, over every row shown (scale "all")
  return Math.min(1, Math.max(0, ...jobs.flatMap((j) => j.results.map((r) => r.scale.share))));
}

async function rerender() {
  if (!state.job) return;
  try {
    const all = [state.job, ...state.others];
    const q = displayQuery($("scale").value, $("scale").value === "all" ? sharedTop(all) : null);
    const snaps = await Promise.all(all.map((j) => api(`/api/jobs/${j.id}?${q}`)));
    if (state.job && snaps[0].id === state.job.id) { state.job = snaps[0]; state.others = snaps.slice(1); renderAll(); }
  } catch (err) { showError(err.message); }
}

function renderAll() {
  renderJob(state.job);
  for (const job of state.others) {
    const col = compareColumn(job.model);
    renderJob(job, col.querySelector(".prediction"), col.querySelector(".results"), false);
  }
}

async function cancelJob() {
  if (!state.job) return;
  $("cancel").disabled = true;
  if (state.graphJob) api(`/api/jobs/${state.graphJob.id}/cancel`, {}).catch(() => {});  // a graph being drawn too
  try {
    const snaps = await Promise.all([state.job, ...state.others].map((j) => api(`/api/jobs/${j.id}/cancel`, {})));
    state.job = snaps[0];
    state.others = snaps.slice(1);
    await rerender();  // with the display options and colour scale on screen
  } catch (err) { showError(err.message); } finally { $("cancel").disabled = false; }
}

function renderPrediction(input, box) {
  box.replaceChildren();
  const head = el("div", { class: "row" });
  head.append(el("span", { class: "strong" }, `Prediction: ${input.predicted_name}`),
              el("span", { class: "muted" }, `explaining: ${input.target_name} · ${input.n_tokens} tokens`
                 + (input.truncated ? ` (truncated from ${input.full_chars > input.chars ? `${input.full_chars} characters` : `${input.full_length} tokens`})` : "")));
  if (input.source.kind === "example") {
    const ok = input.source.label === input.predicted;
    head.append(el("span", { class: ok ? "badge ok" : "badge bad" },
                   `true class: ${input.source.label_name}${ok ? " ✓" : " ✗"}`));
  }
  const probs = el("div", { class: "probs" });
  input.probabilities.forEach((p, i) => {
    const bar = el("div", { class: i === input.predicted ? "bar pred" : "bar" });
    const fill = el("span");
    fill.style.width = `${(100 * p).toFixed(1)}%`;
    bar.append(fill);
    probs.append(el("span", {}, input.label_names[i]), bar, el("span", { class: "muted" }, p.toFixed(3)));
  });
  box.append(head, probs);
  box.hidden = false;
}

function topTokens(top, signed) {
  // the server's list (the export's too): the words with the largest |score|, special tokens and the explained
  // token left out, merged into words when "merge word pieces" is ticked; bars scaled to the first, coloured as
  // the heatmap's scale: green / red for a signed method, the sequential colour for an unsigned one (grey below 0)
  const most = Math.max(1e-12, ...top.map(([, v]) => Math.abs(v)));
  const chart = el("div", { class: "bars", "data-top-tokens": String(top.length) });
  for (const [word, value] of top) {
    const row = el("div", { class: "bar-row" });
    const kind = signed ? (value < 0 ? "neg" : "pos") : (value < 0 ? "seq below" : "seq");
    const bar = el("div", { class: `hbar ${kind}`, "data-value": String(value) });
    bar.style.width = `${Math.min(100, (100 * Math.abs(value)) / most).toFixed(1)}%`;
    row.append(el("span", { class: "bar-tok" }, word), el("div", { class: "bar-track" }), el("span", { class: "bar-val" }, value.toPrecision(2)));
    row.children[1].append(bar);
    chart.append(row);
  }
  return chart;
}

function renderJob(job, predictionBox = $("prediction"), results = $("results"), main = true) {
  renderPrediction(job.input, predictionBox);
  const done = new Map(job.results.map((r) => [r.method, r]));
  const failed = new Map(job.errors.map((e) => [e.method, e.error]));
  results.replaceChildren();
  results.dataset.job = job.id;
  results.dataset.state = job.status;
  results.dataset.palette = job.palette;
  for (const raw of job.request.methods) {
    const found = state.info.methods.find((m) => m.name === raw);
    const spec = found ? { name: found.name, label: methodLabel(found) } : { name: raw, label: raw };
    if (done.has(spec.name)) {
      const r = done.get(spec.name);
      const card = el("article", { class: "card", "data-method": spec.name });
      const meta = el("div", { class: "card-meta" });
      meta.append(el("span", { class: r.cached ? "badge ok" : "badge" }, r.cached ? "cached" : "computed"));
      const ps = Object.entries(r.params).map(([k, v]) => `${k}=${v}`).join(", ");
      if (ps) meta.append(el("span", {}, ps));
      if (r.batch) meta.append(el("span", { title: "internal batch size, from the memory budget" }, `batch ${r.batch}`));
      card.append(meta);
      const frag = el("div");
      frag.innerHTML = r.html;  // generated and escaped by captum_prxai.viz.html
      card.append(frag);
      card.append(el("p", { class: "scale-note", "data-scale": r.scale.mode }, `colours: ${r.scale.text}`));
      const more = el("details", { class: "top-tokens" });
      more.append(el("summary", {}, "top tokens"), topTokens(r.top, r.scale.signed));
      more.open = true;
      card.append(more);
      results.append(card);
    } else if (failed.has(spec.name)) {
      const cancelled = failed.get(spec.name) === "cancelled";
      results.append(el("article", { class: cancelled ? "card failed cancelled" : "card failed", "data-method": spec.name },
                        `${spec.label}: ${failed.get(spec.name)}`));
    } else {
      const card = el("article", { class: "card pending", "data-method": spec.name });
      const running = (job.running || []).includes(spec.name);
      card.append(el("span", { class: "spinner" }), el("span", {}, running ? `${spec.label}: running…` : `${spec.label}: waiting`));
      results.append(card);
    }
  }
  if (!main) return;
  const prog = $("progress");
  const all = [job, ...state.others];
  if (all.every((j) => ["done", "cancelled"].includes(j.status))) {
    prog.hidden = true;
  } else {
    prog.hidden = false;
    // the server counts the running methods' model calls and scales the time left by their rate
    const secondsLeft = Math.max(...all.map((j) => j.estimated_seconds_left));
    const left = secondsLeft > 0.5 ? ` · about ${Math.ceil(secondsLeft)} s left` : "";
    $("progress-text").textContent = `${job.done}/${job.total} methods · ${job.current_label ? `running ${job.current_label}` : "queued"}`
      + ` · ${job.elapsed.toFixed(1)} s${left}`;
    $("progress-bar").value = Math.min(...all.map((j) => j.progress));
  }
  $("job-status").textContent = job.status === "cancelled" ? "cancelled" : "";
  // nothing finished (e.g. cancelled before any method ended): nothing to export or draw
  const anyResult = all.some((j) => j.results.length > 0);
  $("export").disabled = !anyResult;
  $("graph-btn").disabled = !anyResult;
  $("export").title = anyResult ? "a standalone HTML file of the results and graph shown here" : "no method has finished: nothing to export";
}

// ------------------------------------------------------------------ graph and export
function graphSpec() {
  return { method: $("graph-method").value, top_edges: Number.parseInt($("graph-edges").value, 10) || 30,
           nodes: Number.parseInt($("graph-nodes").value, 10) || 40, layout: $("graph-layout").value,
           walk: $("graph-walk").value };
}

async function drawGraph(pending) {
  // pending: a graph request the server asked to confirm ("Run anyway")
  if (!state.job) return;
  showError(null);
  hideConfirm();
  const box = $("graph");
  const stop = el("button", { type: "button", class: "secondary graph-cancel", disabled: "" }, "Cancel");
  box.replaceChildren(el("span", { class: "spinner" }), el("span", { class: "muted" }, "drawing the graph… "), stop);
  state.graph = null;  // the graph drawn before is off the screen: the export leaves it out
  $("graph-btn").disabled = true;
  let spec = null, body = null, id = null;
  try {
    if (pending) {
      spec = pending.spec;
      body = Object.assign({}, pending.body, { confirmed: true });
    } else {
      const req = state.job.request;
      spec = graphSpec();
      body = Object.assign({ params: req.params, target: state.job.input.target, truncate: !!req.truncate },
                           req.example ? { example: req.example } : { text: req.text }, spec);
    }
    // a job of this page, as an explain job is: the server's cost limits, quota and queue, and Cancel; polled here
    let job = await api("/api/graph", body);
    id = job.id;
    state.graphJob = job;
    box.dataset.job = job.id;
    stop.disabled = false;
    stop.addEventListener("click", () => { stop.disabled = true; api(`/api/jobs/${id}/cancel`, {}).catch((err) => showError(err.message)); });
    while (!["done", "cancelled"].includes(job.status)) {
      await new Promise((r) => setTimeout(r, 200));
      if (!state.graphJob || state.graphJob.id !== id) return;  // another graph was asked for meanwhile
      job = await api(`/api/jobs/${id}`);
      state.graphJob = job;
    }
    if (job.status === "cancelled") { box.replaceChildren(el("span", { class: "muted" }, "graph cancelled")); return; }
    if (!job.graph) throw new Error(`graph: ${job.errors.length ? job.errors[0].error : "not drawn"}`);
    const out = job.graph;
    // the title as text that wraps above the drawing (inside the SVG a long title was cut off on both sides)
    const caption = el("p", { class: "graph-title" }, out.title);
    const drawing = el("div", { class: "graph-svg" });
    drawing.innerHTML = out.svg;  // matplotlib SVG, text drawn as paths
    box.replaceChildren(caption, drawing);
    box.dataset.title = out.title;
    state.graph = spec;
    $("graph-stale").hidden = true;
  } catch (err) {
    box.replaceChildren();
    if (err.status === 409 && err.body && err.body.needs_confirmation) {
      state.pendingConfirm = { graph: true, body, spec };
      $("confirm-text").textContent = err.message;
      $("confirm").hidden = false;
    } else showError(err.message);
  } finally {
    if (state.graphJob && state.graphJob.id === id) state.graphJob = null;
    $("graph-btn").disabled = false;
  }
}

async function exportPage() {
  if (!state.job) return;
  showError(null);
  $("export").disabled = true;
  try {
    // exactly what is on screen: the shown job's results, display options and the drawn graph
    // every model's column shown, with the same display options and colour scale
    const all = [state.job, ...state.others];
    const body = { job: all.map((j) => j.id), merge_subwords: $("merge").checked, palette: $("palette").value,
                   scale: $("scale").value, graph: state.graph };  // the graph drawn on screen, if any
    if ($("scale").value === "all") body.share = sharedTop(all);
    if (state.graph) body.confirmed = true;  // the graph drawn on screen was confirmed (or needed no confirmation)
    const resp = await api("/api/export", body);
    const blob = await resp.blob();
    const match = /filename="([^"]+)"/.exec(resp.headers.get("Content-Disposition") || "");
    const a = el("a", { href: URL.createObjectURL(blob), download: match ? match[1] : "prxai-comparison.html" });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  } catch (err) { showError(err.message); } finally { $("export").disabled = false; }
}

// ------------------------------------------------------------------ batch view
function batchPicks() {
  return [...$("examples").querySelectorAll("li")].filter((li) => li.querySelector(".batch-pick").checked)
    .map((li) => Number(li.dataset.index));
}

function syncBatch() {
  const n = batchPicks().length;
  $("batch-btn").disabled = n === 0;
  $("batch-btn").textContent = n ? `Batch view (${n})` : "Batch view";
}

async function runBatch() {
  const picks = batchPicks().slice(0, 12);
  const method = $("batch-method").value;
  const spec = state.info.methods.find((m) => m.name === method);
  const box = $("batch");
  box.replaceChildren();
  box.hidden = false;
  box.dataset.state = "running";
  state.batchJobs = [];
  showError(null);
  const head = el("div", { class: "row" });
  head.append(el("span", { class: "strong" }, `Batch view: ${picks.length} examples · ${spec ? methodLabel(spec) : method}`));
  box.append(head);
  const p = params();
  for (const index of picks) {
    const row = el("article", { class: "card batch-row", "data-index": String(index) }, "");
    row.append(el("span", { class: "spinner" }));
    box.append(row);
  }
  for (const index of picks) {
    const row = box.querySelector(`.batch-row[data-index="${index}"]`);
    try {
      let job = await api("/api/explain", { example: { dataset: $("dataset").value, index }, methods: [method], params: p,
                                            truncate: true, confirmed: true, merge_subwords: $("merge").checked,
                                            palette: $("palette").value });
      while (!["done", "cancelled"].includes(job.status)) {
        await new Promise((r) => setTimeout(r, 300));
        job = await api(`/api/jobs/${job.id}?${displayQuery("own")}`);
      }
      state.batchJobs.push(job);
      renderBatchRow(row, job);
    } catch (err) {
      row.replaceChildren(el("span", { class: "failed" }, `#${index}: ${err.message}`));
    }
  }
  await rescaleBatch();
  box.dataset.state = "done";
}

function renderBatchRow(row, job) {
  const index = job.input.source.index;
  row.replaceChildren();
  const meta = el("div", { class: "card-meta" });
  const src = job.input.source;
  const ok = src.label === job.input.predicted;
  meta.append(el("span", {}, `#${index}`), el("span", { class: "badge" }, `true: ${src.label_name}`),
              el("span", { class: ok ? "badge ok" : "badge bad" }, `pred: ${job.input.predicted_name} ${job.input.probabilities[job.input.predicted].toFixed(2)}${ok ? " ✓" : " ✗"}`));
  row.append(meta);
  if (job.results.length) {
    const frag = el("div");
    frag.innerHTML = job.results[0].html;  // generated and escaped by captum_prxai.viz.html
    row.append(frag, el("p", { class: "scale-note", "data-scale": job.results[0].scale.mode }, `colours: ${job.results[0].scale.text}`));
  } else row.append(el("span", { class: "failed" }, job.errors.map((e) => e.error).join("; ")));
}

async function rescaleBatch() {
  // the rows' colour scale: shared across the rows by default (one method, comparable colours), or each its own
  const jobs = state.batchJobs || [];
  if (!jobs.length) return;
  const scale = $("batch-scale").value;
  const q = displayQuery(scale, scale === "all" ? sharedTop(jobs) : null);
  try {
    const snaps = await Promise.all(jobs.map((j) => api(`/api/jobs/${j.id}?${q}`)));
    state.batchJobs = snaps;
    for (const job of snaps) {
      const row = $("batch").querySelector(`.batch-row[data-index="${job.input.source.index}"]`);
      if (row) renderBatchRow(row, job);
    }
    $("batch").dataset.scale = scale;
  } catch (err) { showError(err.message); }
}

function fillBatchMethods(info) {
  // labels, never internal ids; the featured methods first, the rest grouped by family
  const featured = el("optgroup", { label: "Methods" });
  for (const n of info.featured) {
    const m = info.methods.find((x) => x.name === n);
    if (m) featured.append(el("option", { value: m.name }, methodLabel(m)));
  }
  $("batch-method").append(featured);
  for (const fam of Object.keys(info.family_names)) {
    const rest = info.methods.filter((m) => m.family === fam && !info.featured.includes(m.name));
    if (!rest.length) continue;
    const group = el("optgroup", { label: `More: ${info.family_names[fam]}` });
    for (const m of rest) group.append(el("option", { value: m.name }, methodLabel(m)));
    $("batch-method").append(group);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  init().then(() => {
    if (!state.info) return;
    fillBatchMethods(state.info);
    $("batch-method").value = state.info.default_method || state.info.default_methods[0] || state.info.methods[0].name;
    $("batch-btn").addEventListener("click", runBatch);
  });
});
