// The Strata search page: calls /search and /ask of the service that serves it.
// Everything from the index is inserted as text (textContent), never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_STORE = "strata.apiKey";
let authRequired = false;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

async function call(method, path, body) {
  const resp = await fetch(path, { method, headers: headers(),
                                   body: body ? JSON.stringify(body) : undefined });
  let data = null;
  try { data = await resp.json(); } catch (_) { /* not JSON */ }
  if (!resp.ok) {
    let detail = data && data.detail;
    if (Array.isArray(detail)) detail = detail.map((d) => `${d.loc.join(".")}: ${d.msg}`).join("; ");
    throw new Error(`${resp.status}: ${detail || resp.statusText}`);
  }
  return data;
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

function link(text, url) {
  if (!url || !/^https?:\/\//i.test(url)) return document.createTextNode(text);
  return el("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, text);
}

// A Markdown pipe table as an HTML table; null when the text is not one.
function pipeTable(text) {
  const lines = text.split("\n").map((l) => l.trim()).filter((l) => l);
  if (lines.length < 2 || !lines[0].startsWith("|") || !/^\|?[\s:|-]+\|?$/.test(lines[1])) return null;
  const cells = (line) => line.replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  const table = el("table", { class: "md" });
  const head = el("tr");
  for (const c of cells(lines[0])) head.append(el("th", {}, c));
  table.append(el("thead", {}, head));
  const body = el("tbody");
  for (const line of lines.slice(2)) {
    const tr = el("tr");
    for (const c of cells(line)) tr.append(el("td", {}, c));
    body.append(tr);
  }
  table.append(body);
  return table;
}

async function imageInto(figure, url) {
  try {
    const resp = await fetch(url, { headers: headers() });
    if (!resp.ok) return;
    const blob = await resp.blob();
    const img = el("img", { alt: figure.dataset.alt || "", src: URL.createObjectURL(blob) });
    figure.prepend(img);
  } catch (_) { /* the caption stays */ }
}

function body(hit) {
  if (hit.kind === "code") {
    return el("pre", {}, el("code", { class: "language-" + (hit.language || "text") }, hit.text));
  }
  if (hit.kind === "table") {
    return pipeTable(hit.text) || el("div", { class: "text" }, hit.text);
  }
  if (hit.kind === "image") {
    const fig = el("figure", {}, el("figcaption", {}, hit.text));
    fig.dataset.alt = hit.text;
    if (hit.image_url) imageInto(fig, hit.image_url);
    return fig;
  }
  return el("div", { class: "text" }, hit.text);
}

function renderResults(data) {
  const list = $("results");
  list.replaceChildren();
  $("summary").textContent =
    `${data.results.length} result(s) from ${data.index} v${data.version}, ${data.mode} mode, ${data.took_ms.toFixed(0)} ms`;
  for (const hit of data.results) {
    const crumb = el("div", { class: "crumb" }, el("span", { class: "badge " + hit.kind }, hit.kind),
                     link(hit.breadcrumb || hit.path, hit.url));
    const meta = el("div", { class: "meta" },
                    `${hit.location} · ${hit.relation}${hit.via ? " via " + hit.via : ""} · score ${hit.score.toFixed(3)} · ${hit.node_id}`);
    list.append(el("li", { class: "result", "data-kind": hit.kind }, crumb, meta, body(hit)));
  }
}

function sourceItem(s) {
  const where = s.lines ? `${s.path}:${s.lines}` : s.path;
  return el("li", { value: String(s.n) }, link(s.breadcrumb || s.path, s.url), el("span", { class: "muted" }, ` — ${where} (${s.kind})`));
}

function renderAnswer(data) {
  $("answer").hidden = false;
  $("answer-text").textContent = data.answer;
  $("answer-meta").textContent = data.extractive ? "(extractive: no LLM configured)" : `(${data.llm})`;
  $("answer-sources").replaceChildren(...data.sources.map(sourceItem));
  $("answer-connections").replaceChildren(...data.connections.map(sourceItem));
  $("answer-connections-box").hidden = data.connections.length === 0;
  $("answer-reasoning").textContent = data.reasoning;
}

function request(field) {
  const body = { mode: $("mode").value, k: Number($("k").value) || 10 };
  body[field] = $("query").value;
  if ($("index").value) body.index = $("index").value;
  return body;
}

async function busy(fn) {
  for (const b of [$("search-btn"), $("ask-btn")]) b.disabled = true;
  showError("");
  try { await fn(); } catch (e) { showError(e.message); } finally {
    for (const b of [$("search-btn"), $("ask-btn")]) b.disabled = false;
  }
}

async function search(ev) {
  ev.preventDefault();
  await busy(async () => {
    $("answer").hidden = true;
    renderResults(await call("POST", "/search", request("query")));
  });
}

async function ask() {
  if (!$("query").value.trim()) return;
  await busy(async () => {
    const req = request("question");
    if (req.mode === "hybrid" || req.mode === "flat" || req.mode === "keyword") req.mode = "auto";
    const data = await call("POST", "/ask", req);
    renderAnswer(data);
    $("results").replaceChildren();
    $("summary").textContent = `answered from ${data.index} v${data.version} in ${data.took_ms.toFixed(0)} ms`;
  });
}

async function loadIndexes() {
  try {
    const data = await call("GET", "/indexes");
    const select = $("index");
    select.replaceChildren(...data.indexes.map((i) =>
      el("option", { value: i.name }, `${i.name} (v${i.version}, ${i.counts.files ?? "?"} files)`)));
    $("status").textContent = `${data.indexes.length} index(es)`;
  } catch (e) {
    showError(authRequired ? "Enter an API key to list the indexes. " + e.message : e.message);
  }
}

async function start() {
  $("api-key").value = sessionStorage.getItem(KEY_STORE) || "";
  $("api-key").addEventListener("change", () => {
    sessionStorage.setItem(KEY_STORE, $("api-key").value.trim());
    loadIndexes();
  });
  $("search-form").addEventListener("submit", search);
  $("ask-btn").addEventListener("click", ask);
  try {
    const health = await call("GET", "/health");
    authRequired = health.auth;
    $("key-label").hidden = !health.auth;
    $("status").textContent = `LLM: ${health.llm}`;
  } catch (e) {
    showError("The service did not answer /health: " + e.message);
    return;
  }
  await loadIndexes();
  document.body.dataset.ready = "1";
}

start();
