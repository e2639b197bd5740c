"""The web page in headless Chromium against a service on real HTTP (uvicorn on
loopback) whose LLM is the tests' OpenAI-compatible server: Markdown rendered
safely (a corpus of hostile documents is indexed for it), results grouped by
file with nested hits, the outline/neighbourhood panel driven by mouse and
keyboard, each hit's relevance and a "No good match" state under the relevance
floor (at phone width), an answer streamed in, sources first, and /docs with
no request leaving the machine."""

from __future__ import annotations

import os
import re
import threading

import pytest

from tests.browser import chromium
from tests.serving.helpers import free_port, settings_for
from tests.waiting import wait_until

EVIL_MD = """# Evil page

Some **bold** text with <script>window.__pwned = 1</script> inline.

<img src="x" onerror="window.__pwned = 2">

[click me](javascript:window.__pwned=3) and [a safe link](https://example.org/safe)

<iframe src="https://example.org/frame"></iframe>

## Tricks

<svg onload="window.__pwned = 4"></svg> and <a href="#" onclick="window.__pwned=5">x</a>

| col | val |
|-----|-----|
| <b onmouseover="window.__pwned=6">a</b> | [d](data:text/html,<script>alert(1)</script>) |
"""
EVIL_HTML = """<html><body><h1>HTML page</h1>
<p>Text <script>window.__pwned=7</script> with <a href="javascript:alert(1)">a link</a>.</p>
<p onmouseover="window.__pwned=8">hover &lt;script&gt;window.__pwned=9&lt;/script&gt;</p>
</body></html>"""
ANSWER = ("Use a **nearby barometer**: subtract its air pressure from each reading [1], "
          "then convert the rest to depth [2].")


@pytest.fixture(scope="module")
def hostile_index(tmp_path_factory):
    """Documents that try to run script in the page, indexed by the real pipeline."""
    import dagster as dg

    from tests.conftest import Builder, write_corpora

    base = tmp_path_factory.mktemp("hostile")
    root = base / "corpus" / "docs"
    root.mkdir(parents=True)
    (root / "evil.md").write_text(EVIL_MD)
    (root / "page.html").write_text(EVIL_HTML)
    cfg = write_corpora(base / "corpora.yaml", {"hostile": {
        "root": str(base / "corpus"), "out": str(base / "index"),
        "url_template": "https://example.org/src/{path}#L{line}"}})
    with dg.instance_for_test() as instance:
        Builder(instance, cfg).build("hostile")
    return base / "index"


@pytest.fixture(scope="module")
def site(sample_index, hostile_index):
    """The service on a real loopback port, its LLM an OpenAI-compatible server."""
    import uvicorn

    from strata.service.app import create_app
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI() as llm:
        llm.reply = lambda body: ANSWER
        os.environ.setdefault("OPENAI_API_KEY", "sk-test-page")
        app = create_app(settings_for(f"sample={sample_index}", f"hostile={hostile_index}",
                                      llm_backend="openai", llm_model="fake-model",
                                      llm_base_url=llm.base_url))
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                               log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        def up() -> bool:
            assert thread.is_alive(), "uvicorn stopped before it started"
            return server.started

        wait_until(up, "uvicorn did not start")
        yield {"base": f"http://127.0.0.1:{port}", "llm": llm}
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser, site):
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    # console errors, except a refused request (the tests check those themselves)
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error"
            and not m.text.startswith("Failed to load resource") else None)
    page.on("dialog", lambda d: (page.errors.append("dialog: " + d.message), d.dismiss()))
    page.goto(site["base"] + "/")
    page.wait_for_selector("body[data-ready='1']")
    yield page
    page.close()


def _search(page, query, mode="auto", index="sample", min_relevance="0",
            ready="#results li.result"):
    """Search from the page and return the /search response it rendered. The
    floor defaults to 0 (every hit kept): most tests here are about rendering,
    not about which hits the relevance model lets through; "" is the server's."""
    page.select_option("#index", index)
    page.select_option("#mode", mode)
    page.fill("#min-relevance", min_relevance)
    page.fill("#query", query)
    with page.expect_response(lambda r: r.url.endswith("/search")) as answer:
        page.press("#query", "Enter")
    page.wait_for_selector(f"body[data-busy='0'] {ready}")
    return answer.value.json()


def _shot(page, name):
    folder = os.environ.get("STRATA_SCREENSHOTS")
    if folder:
        page.screenshot(path=os.path.join(folder, name))


def test_markdown_is_rendered_and_script_in_documents_never_runs(page):
    _search(page, "evil page tricks with a table", mode="hierarchical", index="hostile")
    results = page.locator("#results")
    # Markdown became HTML
    assert results.locator(".md strong", has_text="bold").count() >= 1
    assert results.locator(".md h1, .md h2").count() >= 1
    assert results.locator(".md table th", has_text="col").count() >= 1
    safe = results.locator(".md a", has_text="a safe link").first
    assert safe.get_attribute("href") == "https://example.org/safe"
    assert "noopener" in safe.get_attribute("rel")
    # ... and the script in the documents is text, never code
    text = results.inner_text()
    assert "<script>window.__pwned = 1</script>" in text
    assert "<script>window.__pwned=9</script>" in text
    page.hover("#results .md table td")
    page.wait_for_timeout(300)  # let any handler that slipped through fire
    assert page.evaluate("window.__pwned") is None
    found = page.evaluate("""() => {
        const bad = [];
        for (const e of document.querySelectorAll('#results *')) {
            if (['SCRIPT', 'IFRAME', 'SVG', 'IMG', 'OBJECT', 'EMBED'].includes(e.tagName)
                && !e.closest('figure')) bad.push(e.tagName);
            for (const a of e.attributes) {
                if (a.name.startsWith('on')) bad.push(e.tagName + '@' + a.name);
                if (/^\\s*(javascript|data|vbscript):/i.test(a.value)) bad.push(a.name + '=' + a.value);
            }
        }
        return bad;
    }""")
    assert found == [], found
    # the source link from the corpus's url_template
    link = page.locator("#results .meta a").first
    assert link.get_attribute("href").startswith("https://example.org/src/docs/")
    assert not page.errors, page.errors
    # the HTML sinks are closed by the CSP: a string cannot become markup
    refused = page.evaluate("""() => {
        try { document.body.insertAdjacentHTML('beforeend', '<b>x</b>'); return 'inserted'; }
        catch (e) { return e.name; }
    }""")
    assert refused == "TypeError"
    # the page re-checks with the server's own allow-list (service/render.py), not a copy
    from strata.service.render import ATTRIBUTES, TAGS

    policy = page.evaluate("window.strataHtmlPolicy")
    assert policy["tags"] == sorted(t.upper() for t in TAGS)
    assert policy["attributes"] == {t.upper(): sorted(a) for t, a in ATTRIBUTES.items()}


def test_results_grouped_nested_and_explored_by_keyboard(page, site):
    _search(page, "barometric drift correction with a barometer", mode="hierarchical")
    groups = page.locator("#results > li.file-group")
    paths = [groups.nth(i).get_attribute("data-path") for i in range(groups.count())]
    assert len(paths) == len(set(paths)) >= 2, paths  # one group per file
    hits = page.evaluate("""() => [...document.querySelectorAll('#results li.result')].map(
        li => [li.closest('li.file-group').dataset.path, li.dataset.nodeId])""")
    assert len(hits) == 10
    # a hit inside another hit of the same file is shown inside it
    nested = page.locator("li.result > ol.nested > li.result")
    assert nested.count() >= 1
    inner = nested.first
    outer_crumb = inner.locator("xpath=../..").get_attribute("aria-label")
    assert inner.get_attribute("aria-label").startswith(outer_crumb + " > ")
    assert "calibration.md" in page.text_content("#summary") or "file(s)" in page.text_content("#summary")

    # keyboard: / to the box, ↓ into the results, j to the next, o opens the panel
    page.keyboard.press("Escape")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "query"
    page.keyboard.press("ArrowDown")
    first = page.evaluate("document.activeElement.dataset.nodeId")
    page.keyboard.press("j")
    second = page.evaluate("document.activeElement.dataset.nodeId")
    assert first == hits[0][1] and second == hits[1][1]
    page.keyboard.press("o")
    page.wait_for_selector("#panel:not([hidden]) #panel-node .rel-group")
    assert page.get_attribute("#panel", "aria-busy") == "false"
    groups_shown = page.locator("#panel-node .rel-group h4").all_text_contents()
    assert "Parent" in groups_shown or "Children" in groups_shown

    # the drift section: parent, children, links both ways, entities and facts
    page.keyboard.press("Escape")
    assert page.is_hidden("#panel")
    drift = page.locator("#results li.result[aria-label='docs/calibration.md > Calibration > "
                         "Barometric drift']")
    drift.locator(":scope > .crumb button.explore").click()
    page.wait_for_selector("#panel-title:has-text('Barometric drift')")
    shown = page.locator("#panel-node .rel-group h4").all_text_contents()
    assert {"Parent", "Siblings", "Children", "Links to", "Linked from"} <= set(shown), shown
    assert "Vented and non-vented sensors" in page.inner_text("[data-group='Links to']")
    _shot(page, "web-search.png")
    # click through: a child, then back
    page.locator("[data-group='Children'] button.nav", has_text="Correcting with a barometer").click()
    page.wait_for_selector("#panel-title:has-text('Correcting with a barometer')")
    assert "Barometric drift" in page.inner_text("[data-group='Parent']")
    page.keyboard.press("Backspace")
    page.wait_for_selector("#panel-title:has-text('Barometric drift')")
    # the outline of its file, the node marked, entries clickable
    page.click("#tab-outline")
    current = page.locator("#panel-outline button[aria-current='true']")
    assert current.inner_text().endswith("Barometric drift")
    assert page.locator("#panel-outline li").count() >= 10
    page.locator("#panel-outline button.nav", has_text="Troubleshooting").click()
    page.wait_for_selector("#panel-title:has-text('Troubleshooting')")
    assert page.locator("#panel-outline button[aria-current='true']").inner_text() \
        .endswith("Troubleshooting")
    _shot(page, "web-outline.png")

    # an error after a success: the error shows, no stale summary, no busy state left
    page.fill("#query", "x" * 2500)
    page.press("#query", "Enter")
    page.wait_for_selector("#error:not([hidden])")
    assert page.text_content("#summary") == ""
    assert page.is_hidden("#loading") and page.is_enabled("#search-btn")
    assert not page.errors, page.errors


def test_an_answer_streams_in_sources_first(page, site):
    llm = site["llm"]
    llm.stream_gate = threading.Event()  # the model stops halfway until released
    try:
        page.select_option("#mode", "auto")
        page.fill("#query", "How do I correct pressure readings for barometric drift?")
        page.press("#query", "Control+Enter")
        page.wait_for_selector("#answer[data-state='writing'] #answer-sources li")
        page.wait_for_selector("#answer-text:not(:empty)")
        partial = page.text_content("#answer-text")
        assert partial and ANSWER.startswith(partial.strip()) and partial.strip() != ANSWER
        assert page.text_content("#answer-meta") == "(writing…)"
        assert page.is_visible("#loading") and "Writing" in page.text_content("#loading-text")
        assert page.locator("#answer-sources li").count() >= 3
        _shot(page, "web-ask-streaming.png")
        llm.stream_gate.set()
        page.wait_for_selector("#answer[data-state='done']")
    finally:
        llm.stream_gate.set()
        llm.stream_gate = None
    assert page.text_content("#answer-meta") == "(openai:fake-model)"
    assert page.locator("#answer-text strong", has_text="nearby barometer").count() == 1
    cite = page.locator("#answer-text a.cite").first
    assert cite.inner_text() == "[1]" and cite.get_attribute("href") == "#source-1"
    assert "answered in" in page.text_content("#summary")
    assert page.is_hidden("#loading")
    asked = [r for r in llm.chat_requests() if r.body.get("stream")]
    assert asked and "<<<CONTEXT" in asked[-1].prompt
    assert not page.errors, page.errors


@pytest.mark.parametrize("path, ready", [
    ("/docs", ".opblock-summary-path[data-path='/indexes/{name}/outline']"),
    ("/redoc", "text='/indexes/{name}/nodes/{node_id}'")])
def test_the_api_docs_work_offline(browser, site, path, ready):
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    requests, problems = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(site["base"] + path)
    page.wait_for_selector(ready, timeout=30_000)
    if path == "/docs":
        assert page.locator(".opblock").count() == 7  # every operation listed
        _shot(page, "api-docs.png")
    outside = [u for u in requests if not (u.startswith(site["base"] + "/")
                                           or u.startswith(("blob:", "data:")))]
    assert requests and outside == [], outside
    assert not problems, problems
    page.close()


def _badges(page, scope):
    return page.evaluate("""(scope) => [...document.querySelectorAll(scope + ' li.result')].map(
        li => [li.dataset.nodeId, li.querySelector(':scope > .scores > .relevance')?.textContent,
               Number(li.querySelector(':scope > .scores > .relevance')?.dataset.relevance)])""",
                         scope)


def test_relevance_badges_the_floor_and_no_good_match_at_phone_width(page):
    page.set_viewport_size({"width": 390, "height": 844})
    # every hit shows its relevance, the ranking score stays in the detail line
    query = "barometric drift correction with a barometer"
    data = _search(page, query)
    relevance = {h["node_id"]: h["relevance"] for h in data["results"]}
    shown = _badges(page, "#results")
    assert len(shown) == len(data["results"]) >= 3
    for node_id, text, value in shown:
        assert value == pytest.approx(relevance[node_id])
        assert text == f"relevance {relevance[node_id]:.2f}"
    assert re.search(r"score \d\.\d{3} · #1$", page.inner_text("#results li.result >> nth=0 >> .meta"))
    assert page.is_hidden("#no-match") and page.is_hidden("#below-box")

    # a floor between the hits' relevances: the ones above it as usual, the rest dimmed
    # after a divider
    values = sorted(set(relevance.values()), reverse=True)
    assert len(values) >= 2, values
    floor = round((values[0] + values[1]) / 2, 6)
    data = _search(page, query, min_relevance=str(floor))
    assert data["min_relevance"] == pytest.approx(floor) and not data["nothing_relevant"]
    assert data["results"] and data["below"]
    assert all(v >= floor for _, _, v in _badges(page, "#results"))
    assert all(v < floor for _, _, v in _badges(page, "#below"))
    assert page.locator("#results li.result.below").count() == 0
    assert page.locator("#below li.result.below").count() == len(data["below"])
    title = re.fullmatch(r"Below the relevance floor \(min_relevance ([0-9.]+)\)",
                         page.inner_text("#below-title"))
    assert title and float(title[1]) == pytest.approx(floor)
    assert page.text_content("#below-note") == data["note"]
    assert page.is_hidden("#no-match")

    # nonsense, and a floor nothing reaches: "No good match", the closest hits dimmed
    data = _search(page, "zorblax quiffle vantablorp snerk", min_relevance="0.99",
                   ready="#no-match:not([hidden])")
    assert data["nothing_relevant"] and not data["results"] and data["below"]
    panel = page.locator("#no-match")
    assert panel.locator("h2").inner_text() == "No good match"
    assert "No result reached relevance 0.99." in panel.inner_text()
    assert page.text_content("#no-match-note") == data["note"]
    assert data["note"].startswith("no result above relevance 0.99")
    assert page.locator("#results li").count() == 0
    assert page.inner_text("#below-title") == \
        "Closest hits, below the relevance floor (min_relevance 0.99)"
    dimmed = page.locator("#below li.result.below")
    assert dimmed.count() == len(data["below"])
    assert dimmed.first.locator(".below-tag").inner_text() == "below the relevance floor"
    assert {n: t for n, t, _ in _badges(page, "#below")} == \
        {h["node_id"]: f"relevance {h['relevance']:.2f}" for h in data["below"]}
    # dimmed, not faded out: reduced opacity, back to full when focused
    opacity = float(dimmed.first.evaluate("e => getComputedStyle(e).opacity"))
    assert 0.8 <= opacity < 1
    # fits the phone's width: nothing scrolls sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.evaluate("document.activeElement.blur()")
    _shot(page, "web-no-match.png")
    # in dark mode the panel and the badges bring their own dark colours
    light = panel.evaluate("e => getComputedStyle(e).backgroundColor")
    page.emulate_media(color_scheme="dark")
    assert panel.evaluate("e => getComputedStyle(e).backgroundColor") != light
    page.emulate_media(color_scheme="light")
    # keyboard: from the box down into the dimmed hits, j to the next, o opens one
    page.focus("#query")
    page.keyboard.press("ArrowDown")
    first, second = [n for n, _, _ in _badges(page, "#below")][:2]  # in page order
    assert page.evaluate("document.activeElement.dataset.nodeId") == first
    assert float(page.evaluate("getComputedStyle(document.activeElement).opacity")) == 1
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.dataset.nodeId") == second
    assert page.evaluate("document.activeElement.className") == "result below"
    page.keyboard.press("o")
    page.wait_for_selector("#panel:not([hidden]) #panel-node .meta")
    assert page.get_attribute("#panel", "aria-busy") == "false"
    assert not page.errors, page.errors


def _in_viewport(page, selector):
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    return box, (box is not None and box["y"] >= 0 and box["x"] >= 0
                 and box["y"] + box["height"] <= size["height"] + 0.5
                 and box["x"] + box["width"] <= size["width"] + 0.5)


@pytest.mark.parametrize("width, height", [(390, 844), (1280, 800)])
def test_explore_opens_where_the_reader_is(page, width, height):
    page.set_viewport_size({"width": width, "height": height})
    _search(page, "barometric drift correction with a barometer", mode="hierarchical")
    last = page.locator("#results li.result").last
    last.scroll_into_view_if_needed()
    assert page.evaluate("window.scrollY") > 300  # far down the results
    node_id = last.get_attribute("data-node-id")
    last.locator(":scope > .crumb button.explore").click()
    page.wait_for_selector("#panel:not([hidden]) #panel-node .meta")
    page.wait_for_timeout(100)
    box, inside = _in_viewport(page, "#panel")
    assert inside, (box, page.viewport_size)
    assert box["height"] > 150, box
    assert node_id in page.inner_text("#panel-node .meta")
    # the keyboard is in the panel; Esc closes it and goes back to the hit
    assert page.evaluate("document.getElementById('panel').contains(document.activeElement)")
    if width == 390:
        _shot(page, "web-explore-phone.png")
    page.keyboard.press("Escape")
    assert page.is_hidden("#panel")
    assert page.evaluate("document.activeElement.dataset.nodeId") == node_id
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert not page.errors, page.errors


CONTRAST = """(sel) => {
    const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => {
        const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const out = [];
    for (const e of [...document.querySelectorAll(sel)].slice(0, 6)) {
        let bg = null;
        for (let n = e; n; n = n.parentElement) {
            const c = rgb(getComputedStyle(n).backgroundColor);
            if (c.length === 3 || (c.length === 4 && c[3] > 0.9)) { bg = c.slice(0, 3); break; }
        }
        bg = bg || [255, 255, 255];
        const fg = rgb(getComputedStyle(e).color).slice(0, 3);
        const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
        out.push([sel, (a + 0.05) / (b + 0.05), lum(bg)]);
    }
    return out;
}"""


def test_dark_mode_is_page_wide_and_readable(browser, site):
    page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(site["base"] + "/")
    page.wait_for_selector("body[data-ready='1']")
    _search(page, "barometric drift correction with a barometer", mode="hierarchical")
    page.locator("#results li.result").first.locator(":scope > .crumb button.explore").click()
    page.wait_for_selector("#panel:not([hidden]) #panel-node .rel-group")
    for sel in ["body", "#query", "#summary", ".file-head .path", ".result .crumb-last",
                ".result .meta", ".result .text, .result .md p", "button.nav", ".badge",
                "mark.term", "#panel-node .rel-group h4", "#search-btn", "button.explore",
                "#mode", "kbd"]:
        found = page.evaluate(CONTRAST, sel)
        assert found, sel
        for _, ratio, _background in found:
            assert ratio >= 4.5, (sel, ratio)
        if sel in ("body", ".result .meta", "#panel-node .rel-group h4", "#query"):
            assert all(bg < 0.05 for _, _, bg in found), (sel, found)  # a dark background
    page.evaluate("document.activeElement.blur()")
    _shot(page, "web-dark.png")
    assert not errors, errors
    page.close()


def test_query_terms_are_marked_and_code_is_coloured(page):
    query = "moving average window smoothing"
    data = _search(page, query, mode="hybrid")
    words = {"moving", "average", "window", "smoothing"}
    marks = page.locator("#results mark.term").all_text_contents()
    assert marks and all(any(m.lower().startswith(w) for w in words) for m in marks), marks
    # case-insensitive, at the start of a word only, and the text itself unchanged
    assert any(m[0].isupper() for m in marks) or any(m.islower() for m in marks)
    code = [h for h in data["results"] if h["kind"] == "code"]
    assert code, [h["kind"] for h in data["results"]]
    card = page.locator(f"#results li.result[data-node-id='{code[0]['node_id']}']")
    pre = card.locator(":scope > pre code")
    assert pre.text_content() == code[0]["text"]
    assert pre.locator(".tok-kw").count() >= 1
    assert pre.locator(".tok-str, .tok-com").count() >= 1
    assert set(pre.locator(".tok-kw").all_text_contents()) <= {
        "def", "return", "for", "in", "if", "or", "raise", "import", "from", "not", "and",
        "None", "True", "False", "else", "elif", "while", "with", "as", "class", "lambda",
        "yield", "try", "is", "pass", "break", "continue", "assert", "async", "await", "del",
        "self", "range", "type", "match", "new", "this", "use", "static", "let", "const"}
    assert pre.locator("mark.term").count() >= 1  # the query's words inside the code too
    # a word in the query's text is never markup: a hostile query stays text
    _search(page, "<img src=x onerror=window.__pwned=1> window", mode="hybrid")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#results img").count() == 0
    page.fill("#query", query)
    data = _search(page, query, mode="hybrid")
    card = page.locator(f"#results li.result[data-node-id='{code[0]['node_id']}']")
    card.scroll_into_view_if_needed()
    page.evaluate("document.activeElement.blur()")
    if os.environ.get("STRATA_SCREENSHOTS"):
        card.screenshot(path=os.path.join(os.environ["STRATA_SCREENSHOTS"], "web-code-hit.png"))
    assert not page.errors, page.errors


def test_filter_by_kind_and_path(page):
    page.set_viewport_size({"width": 1280, "height": 900})
    page.check("#kinds input[value='code']")
    data = _search(page, "tide readings and gauges", mode="hybrid")
    assert data["results"] and {h["kind"] for h in data["results"]} == {"code"}
    assert page.locator("#results li.result:not([data-kind='code'])").count() == 0
    sent = page.evaluate("null")  # the request itself: kinds in the mode's params
    with page.expect_request(lambda r: r.url.endswith("/search")) as req:
        page.press("#query", "Enter")
    sent = req.value.post_data_json
    assert sent["params"] == {"kinds": ["code"]}
    page.wait_for_selector("body[data-busy='0'] #results li.result")
    # a mode that takes no kinds: the box says so and nothing is sent
    page.select_option("#mode", "hierarchical")
    assert page.is_disabled("#kinds input[value='code']")
    assert "not in hierarchical mode" in page.text_content("#kinds-note")
    with page.expect_request(lambda r: r.url.endswith("/search")) as req:
        page.press("#query", "Enter")
    assert "params" not in req.value.post_data_json
    page.wait_for_selector("body[data-busy='0'] #results li.result")
    page.select_option("#mode", "auto")
    assert page.is_enabled("#kinds input[value='code']")
    data = _search(page, "tide readings and gauges", mode="auto")
    assert "code" in {h["kind"] for h in data["results"]}
    page.uncheck("#kinds input[value='code']")
    # the path prefix filters what is shown, client side
    data = _search(page, "tide readings and gauges", mode="auto")
    paths = {h["path"] for h in data["results"]}
    assert any(p.startswith("tidewater/") for p in paths) and any(
        not p.startswith("tidewater/") for p in paths), paths
    page.fill("#path-filter", "tidewater/")
    shown = [page.locator("#results li.file-group").nth(i).get_attribute("data-path")
             for i in range(page.locator("#results li.file-group").count())]
    assert shown and all(p.startswith("tidewater/") for p in shown), shown
    kept = [h for h in data["results"] if h["path"].startswith("tidewater/")]
    assert page.locator("#results li.result").count() == len(kept)
    assert 'path filter "tidewater/"' in page.text_content("#summary")
    assert "filters the shown results" in page.text_content("#path-note")
    # whole words: "tide" marks "tides", never "tidewater"
    marks = {m.lower() for m in page.locator("#results mark.term").all_text_contents()}
    assert marks and "tidewater" not in marks and marks <= {"tide", "tides", "reading",
                                                              "readings", "gauge", "gauges"}, marks
    page.evaluate("document.activeElement.blur()")
    _shot(page, "web-filter.png")
    page.fill("#path-filter", "")
    assert page.locator("#results li.result").count() == len(data["results"])
    assert not page.errors, page.errors


def test_neighbourhood_graph(page):
    page.set_viewport_size({"width": 1280, "height": 900})
    _search(page, "barometric drift correction with a barometer", mode="hierarchical")
    drift = page.locator("#results li.result[aria-label='docs/calibration.md > Calibration > "
                         "Barometric drift']")
    drift.locator(":scope > .crumb button.explore").click()
    page.wait_for_selector("#panel-title:has-text('Barometric drift')")
    page.click("#tab-graph")
    assert page.is_visible("#panel-graph svg.graph")
    nodes = page.locator("#panel-graph g.gnode[role=button]")
    assert nodes.count() >= 4
    labels = [nodes.nth(i).get_attribute("aria-label") for i in range(nodes.count())]
    assert any(a.startswith("parent: ") for a in labels), labels
    assert any(a.startswith("child: ") for a in labels), labels
    assert any(a.startswith("links to: Vented") for a in labels), labels
    assert page.locator("#panel-graph line.edge").count() == nodes.count()
    _, inside = _in_viewport(page, "#panel-graph svg.graph")
    assert inside
    _shot(page, "web-graph.png")
    page.locator("#panel-graph g.gnode[aria-label='child: Correcting with a barometer']").click()
    page.wait_for_selector("#panel-title:has-text('Correcting with a barometer')")
    assert page.is_visible("#panel-graph svg.graph")  # stays on the graph
    assert page.locator("#panel-graph g.gnode.rel-parent").get_attribute("aria-label") == \
        "parent: Barometric drift"
    assert not page.errors, page.errors


def test_nesting_never_moves_a_hit_above_its_rank(page):
    data = _search(page, "barometric drift correction with a barometer", mode="diffusion")
    ranks = {h["node_id"]: h["rank"] for h in data["results"]}
    # the case this is about: a hit inside a section that ranks worse
    ids = set(ranks)
    assert any(ranks[a] > h["rank"] for h in data["results"]
               for a in h.get("ancestors") or [] if a in ids), "no such case in this search"
    pairs = page.evaluate("""() => [...document.querySelectorAll('li.result > ol.nested > li.result')]
        .map(li => [Number(li.closest('ol.nested').parentElement.dataset.rank), Number(li.dataset.rank)])""")
    assert all(outer < inner for outer, inner in pairs), pairs
    for group in page.locator("#results li.file-group").all():
        top = [int(r) for r in group.locator(":scope > ol.hits > li.result").evaluate_all(
            "ls => ls.map(l => l.dataset.rank)")]
        assert top == sorted(top), top
    first = page.locator("#results li.result").first.get_attribute("data-rank")
    assert first == "1"
    assert not page.errors, page.errors


@pytest.mark.parametrize("width, height", [(390, 844), (1280, 800)])
def test_code_in_the_panel_is_never_cut_off_and_the_keys_line_leaves_phones(page, width,
                                                                             height):
    """Code opened in the Explore panel wraps inside it (a horizontal scrollbar at
    the bottom of a box that scrolls vertically is out of sight: the lines read as
    cut off), and the keyboard line takes no room on a phone, which has no keys."""
    page.set_viewport_size({"width": width, "height": height})
    _search(page, "correct_barometric_drift barometer series")
    hit = page.locator("#results li.result:has(.badge.code)").first
    hit.locator(":scope > .crumb button.explore").click()
    page.wait_for_selector("#panel:not([hidden]) #panel-node pre")
    hidden_right = page.evaluate("""() => [...document.querySelectorAll('#panel pre')]
        .map(e => e.scrollWidth - e.clientWidth)""")
    assert hidden_right and max(hidden_right) <= 1, hidden_right
    _shot(page, f"web-panel-code-{width}.png")
    assert page.is_visible("#keys-help") == (width > 480)
    assert not page.errors, page.errors
