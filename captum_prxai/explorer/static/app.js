// PR-XAI Explorer front end: plain JavaScript, no build step.
// Talks to the JSON API of captum_prxai/explorer/app.py. All HTML received from
// the server (heatmap fragments, graph SVG) is generated there with every text escaped;
// everything else is inserted with textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  info: null,
  source: null,         // {dataset, index} when the text is a dataset example
  nextStart: 0,
  listToken: 0,         // drops answers of outdated list requests
  job: null,
  lastRequest: null,    // body of the last explain request (export / graph reuse it)
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

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const resp = await fetch(path, opts);
  const type = resp.headers.get("Content-Type") || "";
  if (!resp.ok) {
    let message = `${resp.status} ${resp.statusText}`;
    if (type.includes("json")) message = (await resp.json()).error || message;
    throw new Error(message);
  }
  return type.includes("json") ? resp.json() : resp;
}

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
  buildMethods(info);
  buildParams(info);
  for (const m of info.graph_methods) {
    const spec = info.methods.find((x) => x.name === m);
    if (spec) $("graph-method").append(el("option", { value: m }, spec.label));
  }
  bindEvents();
  updateCharCount();
  await switchDataset();
}

function buildMethods(info) {
  const families = [];
  for (const m of info.methods) if (!families.includes(m.family)) families.push(m.family);
  const names = { "pr-xai": "PR-XAI", attention: "Attention baselines", gradient: "Captum gradients",
                  perturbation: "Captum perturbations", control: "Control" };
  for (const fam of families) {
    const set = el("fieldset");
    set.append(el("legend", {}, names[fam] || fam));
    for (const m of info.methods.filter((x) => x.family === fam)) {
      const box = el("input", { type: "checkbox", "data-method": m.name, id: `m-${m.name}` });
      box.checked = info.default_methods.includes(m.name);
      const label = el("label", { class: "check", for: `m-${m.name}`, title: m.description });
      label.append(box, document.createTextNode(m.label));
      set.append(label);
    }
    $("methods").append(set);
  }
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
    label.append(input);
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
    out[input.dataset.param] = input.dataset.kind === "choice" ? input.value
      : input.dataset.kind === "int" ? Number.parseInt(input.value, 10) : Number.parseFloat(input.value);
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
  });
  $("text").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) explain(); });
  $("methods").addEventListener("change", syncParams);
  $("explain").addEventListener("click", explain);
  $("merge").addEventListener("change", () => { if (state.lastRequest) explain(); });
  $("graph-btn").addEventListener("click", drawGraph);
  $("export").addEventListener("click", exportPage);
}

function updateCharCount() {
  const n = $("text").value.length, max = state.info ? state.info.limits.max_chars : 0;
  $("char-count").textContent = `${n} / ${max} characters`;
  $("char-count").style.color = n > max ? "var(--bad)" : "";
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
  const q = new URLSearchParams({ dataset: $("dataset").value, q: $("search").value, label: $("f-label").value,
                                  predicted: $("f-pred").value, correct: $("f-correct").value,
                                  start: String(state.nextStart || 0), limit: "25" });
  const needsPred = $("f-pred").value !== "" || $("f-correct").value !== "";
  $("list-meta").textContent = needsPred ? "predicting…" : "loading…";
  $("more").disabled = true;
  let page;
  try { page = await api(`/api/examples?${q}`); } catch (err) {
    if (token === state.listToken) { showError(err.message); $("list-meta").textContent = ""; }
    return;
  } finally { $("more").disabled = false; }
  if (token !== state.listToken) return;
  showError(null);
  for (const item of page.items) $("examples").append(exampleItem(item));
  state.nextStart = page.next_start;
  const shown = $("examples").children.length;
  $("list-meta").textContent = `${shown} shown · ${page.size} examples · predictions cached: ${page.predicted_total}`
    + (page.exhausted ? "" : " · more below");
  $("more").hidden = page.exhausted;
  markSelected();
}

function exampleItem(item) {
  const li = el("li", { dataset: { index: String(item.index) } });
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
                 merge_subwords: $("merge").checked, target: $("target").value === "" ? null : Number($("target").value) };
  if (state.source) body.example = { dataset: state.source.dataset, index: state.source.index };
  else body.text = $("text").value;
  return body;
}

async function explain() {
  showError(null);
  const body = request();
  if (!body.methods.length) { showError("Tick at least one method."); return; }
  if (!state.source && !body.text.trim()) { showError("Type a text or pick an example first."); return; }
  $("explain").disabled = true;
  try {
    const job = await api("/api/explain", body);
    state.lastRequest = body;
    state.job = job.id;
    renderJob(job);
    $("graph").replaceChildren();
    $("tools").hidden = false;
    let current = job;
    while (current.status !== "done" && state.job === job.id) {
      await new Promise((r) => setTimeout(r, 300));
      current = await api(`/api/jobs/${job.id}`);
      if (state.job === job.id) renderJob(current);
    }
  } catch (err) {
    showError(err.message);
  } finally {
    $("explain").disabled = false;
  }
}

function renderPrediction(input) {
  const box = $("prediction");
  box.replaceChildren();
  const head = el("div", { class: "row" });
  head.append(el("span", { class: "strong" }, `Prediction: ${input.predicted_name}`),
              el("span", { class: "muted" }, `explaining: ${input.target_name} · ${input.n_tokens} tokens`
                 + (input.truncated ? ` (truncated from ${input.full_length})` : "")));
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

function renderJob(job) {
  renderPrediction(job.input);
  const done = new Map(job.results.map((r) => [r.method, r]));
  const failed = new Map(job.errors.map((e) => [e.method, e.error]));
  const names = state.lastRequest ? state.lastRequest.methods : [...done.keys()];
  const results = $("results");
  results.replaceChildren();
  results.dataset.job = job.id;
  results.dataset.state = job.status;
  for (const raw of names) {
    const spec = state.info.methods.find((m) => m.name === raw) || { name: raw, label: raw };
    if (done.has(spec.name)) {
      const r = done.get(spec.name);
      const card = el("article", { class: "card", "data-method": spec.name });
      const meta = el("div", { class: "card-meta" });
      meta.append(el("span", { class: r.cached ? "badge ok" : "badge" }, r.cached ? "cached" : "computed"));
      const ps = Object.entries(r.params).map(([k, v]) => `${k}=${v}`).join(", ");
      if (ps) meta.append(el("span", {}, ps));
      card.append(meta);
      const frag = el("div");
      frag.innerHTML = r.html;  // generated and escaped by captum_prxai.viz.html
      card.append(frag);
      results.append(card);
    } else if (failed.has(spec.name)) {
      results.append(el("article", { class: "card failed", "data-method": spec.name }, `${spec.label}: ${failed.get(spec.name)}`));
    } else {
      const card = el("article", { class: "card pending", "data-method": spec.name });
      card.append(el("span", { class: "spinner" }), el("span", {}, job.current === spec.name ? `${spec.label}: running…` : `${spec.label}: waiting`));
      results.append(card);
    }
  }
  const prog = $("progress");
  if (job.status === "done") {
    prog.hidden = true;
  } else {
    prog.hidden = false;
    $("progress-text").textContent = `${job.done}/${job.total} methods · ${job.current_label ? `running ${job.current_label}` : "queued"}`
      + ` · ${job.elapsed.toFixed(1)} s`;
    $("progress-bar").value = job.done / job.total;
  }
}

// ------------------------------------------------------------------ graph and export
async function drawGraph() {
  if (!state.lastRequest) return;
  showError(null);
  const box = $("graph");
  box.replaceChildren(el("span", { class: "spinner" }));
  $("graph-btn").disabled = true;
  try {
    const body = Object.assign({}, state.lastRequest, { method: $("graph-method").value,
      top_edges: Number.parseInt($("graph-edges").value, 10) || 30, layout: $("graph-layout").value });
    const out = await api("/api/graph", body);
    box.innerHTML = out.svg;  // matplotlib SVG, text drawn as paths
  } catch (err) {
    box.replaceChildren();
    showError(err.message);
  } finally { $("graph-btn").disabled = false; }
}

async function exportPage() {
  if (!state.lastRequest) return;
  showError(null);
  $("export").disabled = true;
  try {
    const body = Object.assign({}, state.lastRequest);
    if ($("export-graph").checked) body.graph = $("graph-method").value;
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

document.addEventListener("DOMContentLoaded", init);
