// The Strata search page: calls /search, /ask (streamed) and the node and outline
// endpoints of the service that serves it.
//
// Safety: text from the index is inserted as text (textContent). The one
// exception is the HTML the server renders from Markdown and sanitizes (nh3);
// it enters the page only through toFragment(), which passes it through the
// page's single Trusted Types policy (the CSP refuses any other HTML sink) and
// re-checks every element and attribute against the same allow-list.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_STORE = "strata.apiKey";
let authRequired = false;
let lastIndex = null;  // the index the results on screen come from
let lastData = null;   // the /search response on screen, for the path filter
let lastTerms = null;  // the query's words of that search, to mark in the texts
const KIND_MODES = new Set();  // the modes whose params take kinds: from /health

// ---------------------------------------------------------------- safe HTML
// the server's allow-list (service/render.py), served as /html-policy.js before this file;
// without it nothing passes (every element becomes its text)
const HTML_POLICY = window.strataHtmlPolicy || { tags: [], attributes: {}, schemes: [] };
const TAGS = new Set(HTML_POLICY.tags);
const SCHEME = new RegExp(`^(${HTML_POLICY.schemes.join("|")}):`, "i");
const policy = (window.trustedTypes || { createPolicy: (_name, rules) => rules })
  .createPolicy("strata-html", { createHTML: (html) => html });

function scrub(root) {
  for (const node of [...root.querySelectorAll("*")]) {
    if (!TAGS.has(node.tagName)) {
      node.replaceWith(document.createTextNode(node.textContent || ""));
      continue;
    }
    // rel: the server's sanitizer writes it on links; the page sets its own below
    const keep = [...(HTML_POLICY.attributes[node.tagName] || []), ...(node.tagName === "A" ? ["rel"] : [])];
    for (const attr of [...node.attributes]) {
      if (!keep.includes(attr.name.toLowerCase())) node.removeAttribute(attr.name);
    }
    if (node.tagName === "A") {
      const href = node.getAttribute("href") || "";
      if (href && !SCHEME.test(href)) node.removeAttribute("href");
      if (node.hasAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer nofollow");
      }
    }
  }
}

function toFragment(html) {
  const doc = new DOMParser().parseFromString(policy.createHTML(html), "text/html");
  scrub(doc.body);
  const frag = document.createDocumentFragment();
  frag.append(...doc.body.childNodes);
  return frag;
}

// ---------------------------------------------------------------- helpers
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
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

async function failure(resp) {
  let data = null;
  try { data = await resp.json(); } catch (_) { /* not JSON */ }
  let detail = data && data.detail;
  if (Array.isArray(detail)) detail = detail.map((d) => `${d.loc.join(".")}: ${d.msg}`).join("; ");
  return new Error(`${resp.status}: ${detail || resp.statusText}`);
}

async function call(method, path, body) {
  let resp;
  try {
    resp = await fetch(path, { method, headers: headers(),
                               body: body ? JSON.stringify(body) : undefined });
  } catch (e) {
    throw new Error("the service did not answer (" + e.message + ")");
  }
  if (!resp.ok) throw await failure(resp);
  return resp.json();
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

function badge(kind) {
  return el("span", { class: "badge " + kind }, kind);
}

// A button that opens a node in the side panel.
function nodeButton(item, label) {
  return el("button", { type: "button", class: "nav", "data-node-id": item.node_id,
                        title: item.location || item.node_id,
                        onclick: () => openNode(item.node_id) },
            label || item.title || item.node_id);
}

// ---------------------------------------------------------------- busy and status
let busyCount = 0;
function setBusy(on, text) {
  busyCount = Math.max(0, busyCount + (on ? 1 : -1));
  const busy = busyCount > 0;
  for (const b of [$("search-btn"), $("ask-btn")]) b.disabled = busy;
  $("loading").hidden = !busy;
  if (text) $("loading-text").textContent = text;
  $("results").setAttribute("aria-busy", busy ? "true" : "false");
  document.body.dataset.busy = busy ? "1" : "0";
}

function startRequest(text) {
  showError("");
  $("summary").textContent = "";  // never a stale "answered in 7 ms" under a new error
  setBusy(true, text);
}

// ---------------------------------------------------------------- highlighting
// Syntax colours for code hits, by a small tokenizer in the page (no library, no
// network): comments, strings, numbers and keywords become <span class="tok-…">,
// built as DOM nodes (the text stays text).
const KEYWORDS = new Set(("and as assert async await break case catch class const continue def "
  + "default defer del do elif else enum export extends false fn for from func go if impl import "
  + "in interface is lambda let loop match mod mut new nil none not null or package pass pub "
  + "raise range return select self static struct super switch this throw trait true try type "
  + "use var where while with yield None True False").split(" "));
const SLASH_COMMENTS = /^(typescript|javascript|ts|js|tsx|jsx|go|rust|c|cpp|java|kotlin|swift|scala|csharp|cs|json)$/;
const HASH_COMMENTS = /^(python|py|yaml|yml|toml|shell|bash|sh|ruby|r|perl|make|makefile|dockerfile|ini)$/;
const STRINGS = String.raw`"""[\s\S]*?"""|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|` + "`[^`]*`";
const NUMBERS = String.raw`\b0x[0-9a-fA-F]+\b|\b\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?\b`;

function tokenRule(language) {
  const lang = (language || "").toLowerCase();
  const comments = [];
  if (SLASH_COMMENTS.test(lang)) comments.push(String.raw`//[^\n]*`, String.raw`/\*[\s\S]*?\*/`);
  if (HASH_COMMENTS.test(lang) || !SLASH_COMMENTS.test(lang)) comments.push(String.raw`#[^\n]*`);
  return new RegExp(`(${comments.join("|")})|(${STRINGS})|(${NUMBERS})|([A-Za-z_][A-Za-z0-9_]*)`, "g");
}

function tokenize(text, language) {
  const out = [];
  let at = 0;
  for (const m of text.matchAll(tokenRule(language))) {
    let cls = null;
    if (m[1]) cls = "tok-com";
    else if (m[2]) cls = "tok-str";
    else if (m[3]) cls = "tok-num";
    else if (m[4] && KEYWORDS.has(m[4])) cls = "tok-kw";
    if (!cls) continue;
    if (m.index > at) out.push(text.slice(at, m.index));
    out.push(el("span", { class: cls }, m[0]));
    at = m.index + m[0].length;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

// The query's words (three letters or more, common words left out) as one
// case-insensitive pattern that matches them as whole words, a plural or -ed/-ing
// form included; "_" counts as a break between words (moving_average).
const STOP = new Set(("the and for with how what when where which who why does did can are "
  + "was were has have had from that this these those into onto out our you your not but "
  + "all any its use using about").split(" "));

function termPattern(query) {
  const words = [...new Set((query || "").toLowerCase().match(/[\p{L}\p{N}_]{3,}/gu) || [])]
    .filter((w) => !STOP.has(w))
    .sort((a, b) => b.length - a.length)
    .map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!words.length) return null;
  return new RegExp(`(?<![\\p{L}\\p{N}])(?:${words.join("|")})(?:s|es|ed|d|ing)?(?![\\p{L}\\p{N}])`, "giu");
}

// Wraps the matches of pattern in root's text in <mark> elements (DOM nodes, never HTML).
function markTerms(root, pattern) {
  if (!pattern || !root) return root;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) texts.push(walker.currentNode);
  for (const t of texts) {
    const found = [...t.data.matchAll(pattern)];
    if (!found.length) continue;
    const frag = document.createDocumentFragment();
    let at = 0;
    for (const m of found) {
      if (m.index > at) frag.append(t.data.slice(at, m.index));
      frag.append(el("mark", { class: "term" }, m[0]));
      at = m.index + m[0].length;
    }
    if (at < t.data.length) frag.append(t.data.slice(at));
    t.replaceWith(frag);
  }
  return root;
}

// ---------------------------------------------------------------- results
function hitBody(hit) {
  if (hit.html) return el("div", { class: "md" }, toFragment(hit.html));
  if (hit.kind === "code") {
    return el("pre", {}, el("code", { class: "language-" + (hit.language || "text") },
                            ...tokenize(hit.text || "", hit.language)));
  }
  if (hit.kind === "image") {
    const fig = el("figure", {}, el("figcaption", {}, hit.text));
    fig.dataset.alt = hit.text;
    if (hit.image_url) imageInto(fig, hit.image_url);
    return fig;
  }
  return el("div", { class: "text" }, hit.text);
}

async function imageInto(figure, url) {
  try {
    const resp = await fetch(url, { headers: headers() });
    if (!resp.ok) return;
    const blob = await resp.blob();
    figure.prepend(el("img", { alt: figure.dataset.alt || "", src: URL.createObjectURL(blob) }));
  } catch (_) { /* the caption stays */ }
}

// The breadcrumb below what the reader already sees (the file, or the enclosing hit).
function trail(hit, above) {
  const parts = (hit.breadcrumb || hit.path).split(" > ");
  let skip = 1;  // the file is the group's heading
  if (above) skip = Math.max(skip, (above.breadcrumb || "").split(" > ").length);
  const shown = parts.slice(Math.min(skip, parts.length - 1));
  const crumbs = el("span", { class: "trail" });
  shown.forEach((p, i) => {
    if (i) crumbs.append(el("span", { class: "sep", "aria-hidden": "true" }, " › "));
    crumbs.append(el("span", { class: i === shown.length - 1 ? "crumb-last" : "crumb-part" }, p));
  });
  return crumbs;
}

function contextLine(hit) {
  const ctx = hit.context || [];
  const parent = ctx.find((c) => c.relation === "parent");
  const near = ctx.filter((c) => c.relation === "sibling");
  const inside = ctx.filter((c) => c.relation === "container");
  if (!parent && !near.length && !inside.length) return null;
  const line = el("div", { class: "context" });
  if (parent) line.append("in ", nodeButton(parent));
  if (inside.length) line.append(parent ? " · " : "", "found for ",
                                 ...inside.map((c) => nodeButton(c)));
  if (near.length) {
    line.append(" · next to ");
    near.forEach((c, i) => line.append(i ? ", " : "", nodeButton(c)));
  }
  return line;
}

const isNumber = (x) => typeof x === "number" && Number.isFinite(x);
// A floor as the reader set it: two decimals, more only when they matter (0.995 is not 1.00).
const floorText = (f) => (isNumber(f) ? (Number(f.toFixed(2)) === f ? f.toFixed(2) : String(f))
                                      : "the floor");

// The hit's estimated probability of being relevant (absent from an older server:
// no badge), as text and a small bar; the floor sets its colour.
function relevanceBadge(hit, floor) {
  if (!isNumber(hit.relevance)) return null;
  const r = Math.min(1, Math.max(0, hit.relevance));
  const tier = isNumber(floor) && r < floor ? "low" : r >= 0.5 ? "high" : "mid";
  const fill = el("span", { class: "rel-fill" });
  fill.style.width = `${Math.round(r * 100)}%`;  // CSSOM, not a style attribute (CSP)
  return el("span", { class: "relevance " + tier, "data-relevance": String(r),
                      title: "estimated probability that this hit is relevant" },
            `relevance ${r.toFixed(2)}`,
            el("span", { class: "rel-bar", "aria-hidden": "true" }, fill));
}

function hitCard(hit, above, opts = {}) {
  const where = link(hit.location, hit.url);
  const score = isNumber(hit.score) ? ` · score ${hit.score.toFixed(3)}` : "";
  const meta = el("div", { class: "meta" }, where,
                  ` · ${hit.relation}${hit.via ? " via " + hit.via : ""}${score} · #${hit.rank}`);
  const open = el("button", { type: "button", class: "explore", title: "outline and connections (o)",
                              onclick: () => openNode(hit.node_id) }, "Explore");
  const head = el("div", { class: "crumb" }, badge(hit.kind), trail(hit, above), open);
  const scores = el("div", { class: "scores" }, relevanceBadge(hit, opts.floor),
                    opts.below ? el("span", { class: "below-tag" }, "below the relevance floor") : null);
  return el("li", { class: opts.below ? "result below" : "result", tabindex: "0",
                    "data-kind": hit.kind, "data-node-id": hit.node_id, "data-rank": hit.rank,
                    "aria-label": opts.below ? `${hit.breadcrumb} (below the relevance floor)`
                                             : hit.breadcrumb },
            head, scores.childNodes.length ? scores : null, meta, contextLine(hit),
            markTerms(hitBody(hit), opts.terms));
}

// Hits grouped by file (in the order of their best hit) into list; a hit whose
// ancestor is also a hit is shown inside it. Returns the number of files.
function renderGroups(list, hitList, opts) {
  list.replaceChildren();
  const groups = new Map();
  for (const hit of hitList) {
    const key = hit.path || "(no file)";
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(hit);
  }
  for (const [path, hits] of groups) {
    const ids = new Map(hits.map((h) => [h.node_id, h]));
    const order = new Map(hits.map((h, i) => [h.node_id, i]));
    // the nearest ancestor that is a hit ranked better: a hit never moves above its rank
    // to sit inside a container found later (diffusion often ranks the section below it)
    const enclosing = (h) => (h.ancestors || []).map((a) => ids.get(a))
      .find((a) => a && order.get(a.node_id) < order.get(h.node_id)) || null;
    const cards = new Map();
    const top = el("ol", { class: "hits" });
    for (const hit of hits) {  // rank order: an enclosing hit may come later
      cards.set(hit.node_id, hitCard(hit, enclosing(hit), opts));
    }
    for (const hit of hits) {
      const outer = enclosing(hit);
      if (!outer) { top.append(cards.get(hit.node_id)); continue; }
      const card = cards.get(outer.node_id);
      let nested = card.querySelector(":scope > ol.nested");
      if (!nested) { nested = el("ol", { class: "hits nested" }); card.append(nested); }
      nested.append(cards.get(hit.node_id));
    }
    const fileHit = hits.find((h) => h.kind === "file");
    const fileId = fileHit ? fileHit.node_id : (hits[0].ancestors || []).slice(-1)[0];
    const head = el("div", { class: "file-head" }, el("span", { class: "path" }, path),
                    el("span", { class: "muted" }, ` ${hits.length} hit(s)`),
                    fileId ? el("button", { type: "button", class: "outline-btn",
                                            onclick: () => openNode(fileId, { tab: "outline" }) },
                                "Outline") : null);
    list.append(el("li", { class: opts.below ? "file-group below" : "file-group",
                           "data-path": path }, head, top));
  }
  return groups.size;
}

function clearResults() {
  $("results").replaceChildren();
  $("below").replaceChildren();
  $("below-box").hidden = true;
  $("no-match").hidden = true;
}

// The results, then (dimmed, after a divider) the hits under the relevance floor;
// when none reached it, a "No good match" panel above the closest ones.
function pathPrefix() {
  return $("path-filter").value.trim().replace(/^\.?\/+/, "");
}

function renderResults(data) {
  if (lastIndex !== data.index) closePanel();  // its node belongs to another index
  lastIndex = data.index;
  lastData = data;
  clearResults();
  const floor = isNumber(data.min_relevance) ? data.min_relevance : null;
  const prefix = pathPrefix();
  const keep = (h) => !prefix || (h.path || "").startsWith(prefix);
  const all = data.results || [];
  const shown = all.filter(keep);
  const files = renderGroups($("results"), shown, { floor, terms: lastTerms });
  const allBelow = Array.isArray(data.below) ? data.below : [];
  const below = allBelow.filter(keep);
  const none = data.nothing_relevant === true;
  if (none) {
    $("no-match-floor").textContent = `No result reached relevance ${floorText(floor)}.`
      + (below.length ? ` The ${below.length} closest hit(s) are shown below, dimmed.` : "");
    $("no-match-note").textContent = data.note || "";
    $("no-match").hidden = false;
  }
  if (below.length) {
    renderGroups($("below"), below, { floor, below: true, terms: lastTerms });
    $("below-title").textContent = (none ? "Closest hits, below" : "Below")
      + ` the relevance floor (min_relevance ${floorText(floor)})`;
    $("below-note").textContent = none ? "" : (data.note || "");
    $("below-box").hidden = false;
  }
  const under = below.length ? `, ${below.length} below relevance ${floorText(floor)}` : "";
  const hidden = all.length - shown.length + allBelow.length - below.length;
  const filtered = prefix ? ` (path filter "${prefix}": ${hidden} hidden)` : "";
  $("summary").textContent =
    `${shown.length} result(s) in ${files} file(s)${under} from ${data.index} v${data.version}, ${data.mode} mode, ${data.took_ms.toFixed(0)} ms${filtered}`;
}

// ---------------------------------------------------------------- search and ask
function checkedKinds() {
  return [...document.querySelectorAll("#kinds input[type=checkbox]:checked")].map((c) => c.value);
}

function fillModes(modes) {  // the server's registry of modes, the default first and selected
  const select = $("mode");
  const ordered = [...modes.filter((m) => m.default), ...modes.filter((m) => !m.default)];
  select.replaceChildren(...ordered.map((m) => {
    if (m.kinds) KIND_MODES.add(m.name);
    return el("option", { value: m.name }, m.default ? `${m.name} (default)` : m.name);
  }));
  syncKinds();
}

function syncKinds() {  // only some modes filter by kind
  const on = KIND_MODES.has($("mode").value);
  $("kinds").disabled = !on;
  $("kinds-note").textContent = on ? "none ticked: every kind"
                                   : `not in ${$("mode").value} mode (auto, hybrid, flat, keyword only)`;
}

function request(field) {
  const body = { mode: $("mode").value, k: Number($("k").value) || 10 };
  body[field] = $("query").value;
  if ($("index").value) body.index = $("index").value;
  const floor = $("min-relevance").value.trim();  // empty: the server's floor
  if (floor !== "") body.min_relevance = Number(floor);
  return body;
}

async function search(ev) {
  if (ev) ev.preventDefault();
  if (!$("query").value.trim()) return;
  startRequest("Searching…");
  $("answer").hidden = true;
  clearResults();
  try {
    const body = request("query");
    const kinds = checkedKinds();
    if (kinds.length && KIND_MODES.has(body.mode)) body.params = { kinds };
    const data = await call("POST", "/search", body);
    lastTerms = termPattern(body.query);
    renderResults(data);
  } catch (e) {
    showError(e.message);
  } finally {
    setBusy(false);
  }
}

function sourceItem(s) {
  const where = s.lines ? `${s.path}:${s.lines}` : s.path;
  return el("li", { value: String(s.n), id: `source-${s.n}` },
            nodeButton(s, s.breadcrumb || s.path), " ",
            el("span", { class: "muted" }, "— "), link(where, s.url),
            el("span", { class: "muted" }, ` (${s.kind})`));
}

// [n] in the answer becomes a link to source n.
function linkCitations(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) texts.push(walker.currentNode);
  for (const t of texts) {
    if (!/\[\d+\]/.test(t.data) || t.parentElement.closest("a, code, pre")) continue;
    const frag = document.createDocumentFragment();
    t.data.split(/(\[\d+\])/).forEach((part) => {
      const m = /^\[(\d+)\]$/.exec(part);
      frag.append(m ? el("a", { href: `#source-${m[1]}`, class: "cite" }, part) : part);
    });
    t.replaceWith(frag);
  }
}

// Server-sent events of a fetch response: yields {event, data}.
async function* events(resp) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length) yield { event, data: JSON.parse(data.join("\n")) };
    }
  }
}

async function ask() {
  if (!$("query").value.trim()) return;
  startRequest("Retrieving…");
  clearResults();
  $("answer").hidden = true;
  const req = request("question");
  if (req.mode === "hybrid" || req.mode === "flat" || req.mode === "keyword") req.mode = "auto";
  req.stream = true;
  try {
    let resp;
    try {
      resp = await fetch("/ask", { method: "POST", headers: headers(), body: JSON.stringify(req) });
    } catch (e) {
      throw new Error("the service did not answer (" + e.message + ")");
    }
    if (!resp.ok) throw await failure(resp);
    const text = $("answer-text");
    let finished = false;
    for await (const { event, data } of events(resp)) {
      if (event === "sources") {
        if (lastIndex !== data.index) closePanel();
        lastIndex = data.index;
        $("answer").hidden = false;
        $("answer").dataset.state = "writing";
        text.replaceChildren();
        $("answer-meta").textContent = "(writing…)";
        $("answer-sources").replaceChildren(...data.sources.map(sourceItem));
        $("answer-connections").replaceChildren(...data.connections.map(sourceItem));
        $("answer-connections-box").hidden = data.connections.length === 0;
        $("answer-reasoning").textContent = data.reasoning;
        $("loading-text").textContent = "Writing the answer…";
        $("summary").textContent = `from ${data.index} v${data.version}, ${data.mode} mode`;
      } else if (event === "delta") {
        text.append(data.text);
      } else if (event === "error") {
        showError(data.detail);
      } else if (event === "done") {
        finished = true;
        text.replaceChildren(toFragment(data.html));
        linkCitations(text);
        $("answer").dataset.state = "done";
        $("answer-meta").textContent = data.extractive ? "(extractive: no LLM answered)" : `(${data.llm})`;
        $("summary").textContent += `, answered in ${data.took_ms.toFixed(0)} ms`;
      }
    }
    if (!finished) throw new Error("the answer stream ended early");
  } catch (e) {
    $("summary").textContent = "";
    showError(e.message);
    if ($("answer").dataset.state === "writing") $("answer-meta").textContent = "(interrupted)";
  } finally {
    setBusy(false);
  }
}

// ---------------------------------------------------------------- the side panel
const panel = { history: [], current: null, tab: "node", token: 0, opener: null };
const TABS = ["node", "outline", "graph"];

function panelTab(tab) {
  panel.tab = tab;
  for (const t of TABS) {
    $(`tab-${t}`).setAttribute("aria-selected", String(tab === t));
    $(`panel-${t}`).hidden = tab !== t;
  }
  if (tab === "outline") {
    const here = $("panel-outline").querySelector("[aria-current='true']");
    if (here) here.scrollIntoView({ block: "nearest" });
  }
}

// The panel where the reader is: a sheet over the page on a narrow screen (CSS),
// kept in the viewport beside the results on a wide one.
function revealPanel() {
  const box = $("panel").getBoundingClientRect();
  if (box.top < 0 || box.bottom > window.innerHeight) $("panel").scrollIntoView({ block: "nearest" });
}

function closePanel(opts = {}) {
  const wasOpen = !$("panel").hidden;
  $("panel").hidden = true;
  document.body.classList.remove("with-panel", "sheet-open");
  panel.history = [];
  panel.current = null;
  const back = panel.opener;
  panel.opener = null;
  if (opts.refocus && wasOpen && back && back.isConnected) back.focus({ preventScroll: true });
}

async function openNode(nodeId, opts = {}) {
  const index = lastIndex || $("index").value;
  if (!index) return;
  if (panel.current && panel.current !== nodeId && !opts.back) panel.history.push(panel.current);
  panel.current = nodeId;
  $("panel-back").disabled = panel.history.length === 0;
  if ($("panel").hidden) {
    const active = document.activeElement;
    panel.opener = active && active.closest ? active.closest("li.result") || active : null;
  }
  $("panel").hidden = false;
  document.body.classList.add("with-panel", "sheet-open");
  if (opts.tab) panelTab(opts.tab);
  revealPanel();
  if (!$("panel").contains(document.activeElement)) $("panel").focus({ preventScroll: true });
  const token = ++panel.token;
  const status = $("panel-status");
  status.className = "loading";
  status.textContent = "Loading…";
  $("panel").setAttribute("aria-busy", "true");
  const base = `/indexes/${encodeURIComponent(index)}`;
  try {
    const [node, outline] = await Promise.all([
      call("GET", `${base}/nodes/${encodeURIComponent(nodeId)}`),
      call("GET", `${base}/outline?target=${encodeURIComponent(nodeId)}`).catch(() => null)]);
    if (token !== panel.token) return;  // a later click won
    renderNode(node);
    renderOutline(outline, nodeId);
    renderGraph(node);
    status.className = "";
    status.textContent = "";
    revealPanel();
  } catch (e) {
    if (token !== panel.token) return;
    status.className = "error";
    status.textContent = e.message;
    $("panel-node").replaceChildren();
    $("panel-outline").replaceChildren();
    $("panel-graph").replaceChildren();
  } finally {
    if (token === panel.token) $("panel").setAttribute("aria-busy", "false");
  }
}

function section(title, items, more, render) {
  if (!items || !items.length) return null;
  const list = el("ul", { class: "rel" }, ...items.map((x) => el("li", {}, render(x))));
  if (more) list.append(el("li", { class: "muted" }, `… ${more} more`));
  return el("section", { class: "rel-group", "data-group": title }, el("h4", {}, title), list);
}

function relItem(x) {
  const bits = [badge(x.kind), nodeButton(x)];
  if (x.location) bits.push(el("span", { class: "muted" }, " " + x.location));
  return el("span", {}, ...bits);
}

const GROUPS = [["links_to", "Links to"], ["linked_from", "Linked from"], ["imports", "Imports"],
  ["imported_by", "Imported by"], ["entities", "Entities it mentions"],
  ["mentioned_in", "Mentioned in"], ["related", "Related entities"], ["similar", "Similar"]];

function renderNode(data) {
  const n = data.node;
  $("panel-title").replaceChildren(badge(n.kind), el("strong", {}, n.title));
  const crumbs = el("div", { class: "crumbs" });
  [...data.ancestors].reverse().forEach((a) => crumbs.append(nodeButton(a), " › "));
  crumbs.append(el("span", {}, n.title));
  const where = el("div", { class: "meta" }, link(n.location || n.node_id, n.url),
                   n.position ? ` · ${n.position} of ${n.of} in its parent` : "",
                   ` · ${n.node_id}`);
  let body;
  if (n.html) body = el("div", { class: "md node-text" }, toFragment(n.html));
  else if (n.kind === "code") {
    body = el("pre", { class: "node-text" }, el("code", {}, ...tokenize(n.text || "", n.language)));
  }
  else body = el("div", { class: "text node-text" }, n.text);
  const facts = data.facts.length ? el("section", { class: "rel-group", "data-group": "Facts" },
    el("h4", {}, `Facts (${data.counts.facts})`),
    el("ul", { class: "rel" }, ...data.facts.map((f) => el("li", {},
      f.head_id ? nodeButton({ node_id: f.head_id, title: f.head }) : f.head,
      el("span", { class: "muted" }, ` ${f.relation} `),
      f.tail_id ? nodeButton({ node_id: f.tail_id, title: f.tail }) : f.tail,
      f.source_id && f.source_id !== n.node_id
        ? el("span", { class: "muted" }, " — from ", nodeButton({ node_id: f.source_id, title: "source" }))
        : null)))) : null;
  $("panel-node").replaceChildren(...[crumbs, where, body,
    section("Parent", data.parent ? [data.parent] : [], 0, relItem),
    section("Siblings", data.siblings, data.more_siblings, relItem),
    section("Children", data.children, data.more_children, relItem),
    ...GROUPS.map(([key, title]) => section(title, data.connections[key],
      (data.counts[key] || 0) - (data.connections[key] || []).length, relItem)),
    facts].filter(Boolean));
}

function renderOutline(data, focus) {
  const box = $("panel-outline");
  if (!data) { box.replaceChildren(el("p", { class: "muted" }, "No outline for this node.")); return; }
  const root = el("ul", { class: "outline" });
  const stack = [root];
  for (const e of data.entries) {
    stack.length = e.depth + 1;
    let parent = stack[e.depth];
    if (!parent) parent = stack[stack.length - 1] || root;
    const item = el("li", { "data-node-id": e.node_id },
                    el("button", { type: "button", class: "nav",
                                   "aria-current": e.node_id === focus ? "true" : null,
                                   onclick: () => openNode(e.node_id, { tab: "outline" }) },
                       badge(e.kind), e.title),
                    e.start_line ? el("span", { class: "muted" }, ` L${e.start_line}`) : null);
    parent.append(item);
    if (e.expanded) {
      const sub = el("ul", {});
      item.append(sub);
      stack[e.depth + 1] = sub;
    }
  }
  box.replaceChildren(el("div", { class: "meta" }, data.root.path || data.root.title,
                         data.truncated ? " (cut short)" : ""), root);
  if (panel.tab === "outline") panelTab("outline");
}

// The node's neighbourhood as a small SVG drawing (no library): the node in the
// middle, its parent, children, siblings and connections around it, each one a
// link to open it. Built with DOM calls; labels are text nodes.
const SVG = "http://www.w3.org/2000/svg";
const GRAPH_RELATIONS = [["parent", "parent"], ["children", "child"], ["links_to", "links to"],
  ["linked_from", "linked from"], ["imports", "imports"], ["imported_by", "imported by"],
  ["siblings", "sibling"], ["entities", "mentions"], ["mentioned_in", "mentioned in"],
  ["related", "related"], ["similar", "similar"]];
const GRAPH_MAX = 16;

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const c of children) node.append(c);
  return node;
}

const clip = (text, n) => (text.length > n ? text.slice(0, n - 1) + "…" : text);

function renderGraph(data) {
  const n = data.node;
  const pools = { parent: data.parent ? [data.parent] : [], children: data.children || [],
                  siblings: data.siblings || [] };
  for (const [key] of GROUPS) pools[key] = (data.connections || {})[key] || [];
  // a fair share of every relation, in the order above, up to GRAPH_MAX
  const picked = [];
  const seen = new Set([n.node_id]);
  for (let round = 0; picked.length < GRAPH_MAX; round++) {
    let added = false;
    for (const [key, label] of GRAPH_RELATIONS) {
      const item = (pools[key] || [])[round];
      if (!item || picked.length >= GRAPH_MAX) continue;
      added = true;
      if (seen.has(item.node_id)) continue;
      seen.add(item.node_id);
      picked.push({ item, key, label });
    }
    if (!added) break;
  }
  const W = 600, H = 350, cx = W / 2, cy = H / 2, rx = 122, ry = 128;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "graph", role: "img",
                            "aria-label": `neighbourhood of ${n.title}: ${picked.length} nodes` });
  const edges = svg("g", { class: "edges" });
  const nodes = svg("g", { class: "nodes" });
  root.append(edges, nodes);
  picked.forEach(({ item, key, label }, i) => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(1, picked.length);
    const x = cx + rx * Math.cos(angle), y = cy + ry * Math.sin(angle);
    edges.append(svg("line", { x1: cx, y1: cy, x2: x.toFixed(1), y2: y.toFixed(1),
                               class: `edge rel-${key}` }));
    const right = Math.cos(angle) >= -0.01;
    const title = svg("title", {});
    title.textContent = `${label}: ${item.title || item.node_id} (${item.kind})`;
    const text = svg("text", { x: (x + (right ? 9 : -9)).toFixed(1), y: (y + 4).toFixed(1),
                               "text-anchor": Math.abs(Math.cos(angle)) < 0.2 ? "middle"
                                 : right ? "start" : "end" });
    if (Math.abs(Math.cos(angle)) < 0.2) text.setAttribute("y", (y + (y < cy ? -10 : 18)).toFixed(1));
    text.textContent = clip(item.title || item.node_id, 22);
    const g = svg("g", { class: `gnode rel-${key}`, tabindex: "0", role: "button",
                         "data-node-id": item.node_id,
                         "aria-label": `${label}: ${item.title || item.node_id}` },
                  title, svg("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: 7 }), text);
    g.addEventListener("click", () => openNode(item.node_id, { tab: "graph" }));
    g.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); ev.stopPropagation();
                                                 openNode(item.node_id, { tab: "graph" }); }
    });
    nodes.append(g);
  });
  const centre = svg("text", { x: cx, y: cy + 26, "text-anchor": "middle", class: "centre-label" });
  centre.textContent = clip(n.title || n.node_id, 30);
  nodes.append(svg("g", { class: "gnode centre" },
                   svg("circle", { cx, cy, r: 11 }), centre));
  const used = [...new Set(picked.map((p) => p.key))];
  const legend = el("ul", { class: "legend" }, ...used.map((key) => el("li", {},
    el("span", { class: `swatch rel-${key}`, "aria-hidden": "true" }),
    GRAPH_RELATIONS.find(([k]) => k === key)[1])));
  $("panel-graph").replaceChildren(
    picked.length ? root : el("p", { class: "muted" }, "Nothing around this node."),
    picked.length ? legend : "",
    el("p", { class: "muted" }, `${picked.length} of its neighbours; click one to go there.`));
}

function panelBack() {
  const prev = panel.history.pop();
  if (prev) openNode(prev, { back: true });
}

// ---------------------------------------------------------------- keyboard
function typing(target) {
  return target && (target.tagName === "INPUT" || target.tagName === "SELECT"
                    || target.tagName === "TEXTAREA" || target.isContentEditable);
}

const CARDS = "#results li.result, #below li.result";  // in page order

function moveFocus(step) {
  const cards = [...document.querySelectorAll(CARDS)];
  if (!cards.length) return;
  let current = document.activeElement.closest ? document.activeElement.closest("li.result") : null;
  if (!current && panel.opener && panel.opener.matches && panel.opener.matches("li.result")) {
    current = panel.opener;  // from the panel: on from the hit it was opened from
  }
  const at = cards.indexOf(current);
  const next = cards[Math.max(0, Math.min(cards.length - 1, at < 0 ? 0 : at + step))];
  next.focus();
  next.scrollIntoView({ block: "nearest" });
}

function onKey(ev) {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && ev.target === $("query")) {
    ev.preventDefault();
    ask();
    return;
  }
  if (ev.key === "ArrowDown" && ev.target === $("query") && document.querySelector(CARDS)) {
    ev.preventDefault();  // from the search box down into the results
    moveFocus(0);
    return;
  }
  if (ev.key === "Escape") {
    if (!$("panel").hidden) { closePanel({ refocus: true }); ev.preventDefault(); }
    else if (ev.target === $("query")) $("query").blur();
    return;
  }
  if (typing(ev.target) || ev.altKey || ev.ctrlKey || ev.metaKey) return;
  const card = ev.target.closest ? ev.target.closest("li.result") : null;
  if (ev.key === "/") { ev.preventDefault(); $("query").focus(); $("query").select(); }
  else if (ev.key === "j" || ev.key === "ArrowDown") { ev.preventDefault(); moveFocus(1); }
  else if (ev.key === "k" || ev.key === "ArrowUp") { ev.preventDefault(); moveFocus(-1); }
  else if ((ev.key === "o" || ev.key === "Enter") && card && ev.target === card) {
    ev.preventDefault();
    openNode(card.dataset.nodeId);
  } else if (ev.key === "Backspace" && !$("panel").hidden) { ev.preventDefault(); panelBack(); }
}

// ---------------------------------------------------------------- start
async function loadIndexes() {
  try {
    const data = await call("GET", "/indexes");
    const select = $("index");
    select.replaceChildren(...data.indexes.map((i) =>
      el("option", { value: i.name }, `${i.name} (v${i.version}, ${i.counts.files ?? "?"} files)`)));
    $("status").textContent = `${data.indexes.length} index(es)`;
    showError("");
  } catch (e) {
    showError(authRequired ? "Enter an API key to list the indexes. " + e.message : e.message);
  }
}

async function start() {
  $("api-key").value = sessionStorage.getItem(KEY_STORE) || "";
  const floor = new URLSearchParams(location.search).get("min_relevance");  // a shared link
  if (floor !== null && floor.trim() !== "" && Number.isFinite(Number(floor))) {
    $("min-relevance").value = floor.trim();
  }
  $("api-key").addEventListener("change", () => {
    sessionStorage.setItem(KEY_STORE, $("api-key").value.trim());
    loadIndexes();
  });
  $("search-form").addEventListener("submit", search);
  $("ask-btn").addEventListener("click", ask);
  $("panel-close").addEventListener("click", () => closePanel({ refocus: true }));
  $("tab-graph").addEventListener("click", () => panelTab("graph"));
  $("mode").addEventListener("change", syncKinds);
  syncKinds();
  $("path-filter").addEventListener("input", () => { if (lastData) renderResults(lastData); });
  $("panel-back").addEventListener("click", panelBack);
  $("tab-node").addEventListener("click", () => panelTab("node"));
  $("tab-outline").addEventListener("click", () => panelTab("outline"));
  document.addEventListener("keydown", onKey);
  try {
    const health = await call("GET", "/health");
    fillModes(health.modes || []);
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
