"""The HTTP API answers with what the query module answers, and refuses bad
input with a 4xx that says why and leaks nothing."""

from __future__ import annotations

import json

import pytest

from tests.serving.helpers import copy_index, make_client, settings_for

QUERY = "how do I correct pressure readings for barometric drift?"


@pytest.fixture(scope="module")
def index(sample_index):
    from strata.retrieval import Index

    return Index.open(sample_index)


def test_health_lists_the_registrys_modes_for_clients_to_offer(api):
    """The web page builds its mode menu and its kind filter from this: a mode added
    to retrieval.modes.MODES reaches it with no edit here or in the page."""
    from strata.retrieval.modes import DEFAULT_MODE, MODES

    modes = api.get("/health").json()["modes"]
    names = [m["name"] for m in modes]
    assert names[0] == DEFAULT_MODE
    assert modes[0]["default"] is True
    assert len({MODES[n] for n in names}) == len(names)  # an alias ("dense") is left out
    assert {MODES[n] for n in names} == set(MODES.values())
    assert {m["name"] for m in modes if m["kinds"]} == {"auto", "flat", "keyword", "hybrid"}


def test_health_reports_the_version_model_and_uptime(api, index):
    body = api.get("/health").json()
    assert body["status"] == "ok" and body["uptime_s"] >= 0 and body["auth"] is False
    assert body["llm"] == "offline"
    assert body["indexes"] == [{"name": "sample", "version": index.version,
                                "model": index.manifest["model"], "reload_error": None}]


def test_indexes_lists_corpus_versions_and_counts(api, index):
    (info,) = api.get("/indexes").json()["indexes"]
    assert info["name"] == info["corpus"] == "sample"
    assert info["version"] == info["latest_version"] == index.version
    assert index.version in info["versions"]
    assert info["counts"]["files"] == index.manifest["counts"]["files"] > 10
    assert info["dim"] == 384 and info["model"].endswith("all-MiniLM-L6-v2")


@pytest.mark.parametrize("mode, params", [
    ("auto", {}), ("auto", {"alpha": 0.8, "budget_tokens": 300}),
    ("flat", {}), ("keyword", {}), ("hybrid", {"candidates": 20}),
    ("hierarchical", {"siblings": False, "max_children": 2}),
    ("diffusion", {"spread_code_k": 3, "time_budget_s": 1.0}),
    ("routed", {"max_files": 2}),
])
def test_search_is_the_query_module_over_http(api, index, mode, params):
    """Same results, same order, same scores as ``Index.search`` with the same
    parameters: the service has no retrieval code of its own."""
    r = api.post("/search", json={"query": QUERY, "mode": mode, "k": 6, "params": params})
    assert r.status_code == 200, r.text
    body = r.json()
    direct = index.search(QUERY, mode=mode, k=6, **params)
    assert [h["node_id"] for h in body["results"]] == [x.node_id for x in direct]
    assert [h["score"] for h in body["results"]] == pytest.approx([x.score for x in direct],
                                                                  abs=1e-5)
    assert body["version"] == index.version and body["mode"] == mode and body["results"]
    assert [h["rank"] for h in body["results"]] == list(range(1, len(direct) + 1))
    assert "trace" not in body or body["trace"] is None


NONSENSE = "zzqx kubernetes helm chart qwertyuiop"


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("params", [{}, {"budget_tokens": 2000}, {"kinds": ["code"]},
                                    {"kinds": ["code"], "budget_tokens": 2000}])
def test_every_hit_has_a_relevance_and_k_is_a_hard_cap(api, index, k, params):
    """At most ``k`` hits, whatever a token budget would have room for, each with
    its relevance, a probability; the floor the service used is in the body."""
    body = api.post("/search", json={"query": QUERY, "k": k, "params": params,
                                     "min_relevance": 0}).json()
    hits = body["results"]
    assert hits and len(hits) <= k, [h["node_id"] for h in hits]
    assert all(0.0 <= h["relevance"] <= 1.0 for h in hits)
    assert body["min_relevance"] == 0 and body["nothing_relevant"] is False
    assert body["below"] == [] and body["note"] is None
    if "kinds" in params:
        assert {h["kind"] for h in hits} == {"code"}
    direct = index.search(QUERY, k=k, min_relevance=0, **params)
    assert [h["relevance"] for h in hits] == pytest.approx([r.relevance for r in direct])


def test_without_a_floor_the_server_default_applies(api):
    from strata.retrieval.modes import default_min_relevance

    body = api.post("/search", json={"query": QUERY, "k": 5}).json()
    assert body["min_relevance"] == pytest.approx(default_min_relevance())
    assert all(h["relevance"] >= body["min_relevance"] for h in body["results"])


def test_a_floor_nothing_reaches_says_so_and_names_the_closest(api):
    body = api.post("/search", json={"query": NONSENSE, "k": 4, "min_relevance": 0.99}).json()
    assert body["results"] == [] and body["context"] == ""
    assert body["nothing_relevant"] is True and body["min_relevance"] == 0.99
    below = body["below"]
    assert 0 < len(below) <= 4
    assert all(0.0 <= h["relevance"] < 0.99 for h in below)
    assert [h["relevance"] for h in below] == sorted((h["relevance"] for h in below),
                                                     reverse=True)
    assert [h["rank"] for h in below] == list(range(1, len(below) + 1))
    best = below[0]
    assert body["note"].startswith("no result above relevance 0.99; closest: "
                                   f"{best['location']} (relevance {best['relevance']:.2f})")
    # the same floor on a question: nothing to answer from
    ask = api.post("/ask", json={"question": NONSENSE, "min_relevance": 0.99}).json()
    assert ask["sources"] == [] and ask["connections"] == []


def test_a_floor_that_cuts_some_hits_keeps_them_in_below(api):
    everything = api.post("/search", json={"query": QUERY, "k": 6, "min_relevance": 0}).json()
    relevances = [h["relevance"] for h in everything["results"]]
    assert len(set(relevances)) > 1, relevances
    floor = max(relevances)  # the best hit stays, the others fall below
    body = api.post("/search", json={"query": QUERY, "k": 6, "min_relevance": floor}).json()
    assert body["results"] and body["below"] and body["nothing_relevant"] is False
    assert all(h["relevance"] >= floor for h in body["results"])
    assert all(h["relevance"] < floor for h in body["below"])
    # the floor applies before the cut: what it took from the first six, the mode's
    # deeper candidates above it may fill (retrieval.modes.run_mode)
    assert {h["node_id"] for h in everything["results"] if h["relevance"] >= floor} <= \
        {h["node_id"] for h in body["results"]}
    assert [h["rank"] for h in body["results"] + body["below"]] == \
        list(range(1, len(body["results"]) + len(body["below"]) + 1))
    assert f"below relevance {floor:g} left out" in body["note"]


def test_results_carry_the_markdown_context_block(api):
    body = api.post("/search", json={"query": QUERY, "mode": "hierarchical", "k": 4}).json()
    first = body["results"][0]
    assert first["markdown"].startswith(f"### 1. {first['breadcrumb']}\n")
    assert f"- source: `{first['location']}`" in first["markdown"]
    assert f"- id: `{first['node_id']}` ({first['kind']}, {first['relation']}" in first["markdown"]
    assert body["context"].split("\n\n### 2.")[0].startswith(first["markdown"][:200])
    assert all(h["url"] is None for h in body["results"])  # the sample declares no url_template
    code = [h for h in body["results"] if h["kind"] == "code"]
    for h in code:
        assert f"```{h['language'] or ''}\n" in h["markdown"]


def test_hierarchical_params_change_the_expansion(api):
    both = api.post("/search", json={"query": QUERY, "mode": "hierarchical", "k": 20}).json()
    none = api.post("/search", json={
        "query": QUERY, "mode": "hierarchical", "k": 20,
        "params": {"parents": False, "siblings": False, "children": False, "fill": False}}).json()
    assert {h["relation"] for h in both["results"]} - {"seed"}, "the default expands"
    assert {h["relation"] for h in none["results"]} == {"seed"}
    assert len(none["results"]) == 5  # the default number of seeds


def test_verbose_adds_the_trace_with_stage_timings(api):
    body = api.post("/search", json={"query": QUERY, "mode": "diffusion", "k": 5,
                                     "verbose": True}).json()
    trace = body["trace"]
    assert trace["mode"] == "diffusion"
    assert {"embed_query", "recall", "diffusion", "final"} <= set(trace["timings_ms"])
    assert trace["counts"]["results"] == len(body["results"])
    routed = api.post("/search", json={"query": QUERY, "mode": "routed", "verbose": True}).json()
    assert routed["trace"]["router"] == "offline" and routed["trace"]["route"]


def test_ask_answers_with_sources_connections_and_reasoning(api):
    r = api.post("/ask", json={"question": QUERY, "mode": "routed"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["extractive"] is True and body["llm"] == "offline"
    assert body["answer"].startswith("No LLM is configured")
    assert "barometer" in body["answer"].lower()
    assert body["sources"] and body["connections"], body
    assert all(c["relation"] == "connection" for c in body["connections"])
    assert "offline router chose" in body["reasoning"]
    assert body["trace"]["route"]


def test_ask_uses_the_configured_llm(sample_index):
    """An injected ``str -> str`` LLM writes the answer from the numbered context."""
    from strata.core.llm import LLM, LLMConfig

    prompts = []

    def model(prompt: str) -> str:
        prompts.append(prompt)
        return "Correct the readings with a nearby barometer [1]."

    llm = LLM(LLMConfig(backend="callable"), fn=model)
    with make_client(settings_for(sample_index), llm=llm) as client:
        body = client.post("/ask", json={"question": QUERY, "k": 4}).json()
        health = client.get("/health").json()
    assert body["answer"] == "Correct the readings with a nearby barometer [1]."
    assert body["extractive"] is False and body["llm"].startswith("callable:")
    assert health["llm"].startswith("callable:")
    assert any("<<<CONTEXT" in p and QUERY in p for p in prompts)


def test_url_template_gives_each_result_a_source_link(sample_index, tmp_path):
    template = "https://git.example.org/tidewater/blob/main/{path}#L{line}-L{end_line}"
    idx = copy_index(sample_index, tmp_path / "index", url_template=template)
    with make_client(settings_for(idx)) as client:
        body = client.post("/search", json={"query": QUERY, "mode": "hierarchical"}).json()
        ask = client.post("/ask", json={"question": QUERY}).json()
    for h in body["results"]:
        line = h["start_line"] or 1
        assert h["url"] == (f"https://git.example.org/tidewater/blob/main/{h['path']}"
                            f"#L{line}-L{h['end_line'] or line}")
        assert f"- url: {h['url']}\n" in h["markdown"]
    assert all(s["url"].startswith("https://git.example.org/") for s in ask["sources"])


def test_images_are_served_from_the_index(api):
    body = api.post("/search", json={"query": "tide curve chart at station 8443970",
                                     "mode": "flat", "k": 5,
                                     "params": {"kinds": ["image"]}}).json()
    images = [h for h in body["results"] if h["image_url"]]
    assert images, body
    for h in images:
        r = api.get(h["image_url"])
        assert r.status_code == 200 and r.headers["content-type"] == "image/png"
        assert r.content.startswith(b"\x89PNG")
    # a blob extracted from a PDF/DOCX is served too
    index_images = api.get("/indexes").json()["indexes"][0]
    assert index_images["counts"]["nodes_by_kind"]["image"] >= 2


def test_image_endpoint_serves_only_recorded_images(api, index):
    import polars as pl

    blob = index.table("images").filter(pl.col("source") == "blob").row(0, named=True)
    ok = api.get(f"/indexes/sample/images/{blob['node_id']}")
    assert ok.status_code == 200 and ok.content.startswith(b"\x89PNG")
    missing = index.table("images").filter(pl.col("status") == "missing").row(0, named=True)
    for node_id in (missing["node_id"], "image-0000000000000000", "..%2F..%2Fetc%2Fpasswd",
                    "section-d360755e071a3910"):
        r = api.get(f"/indexes/sample/images/{node_id}")
        assert r.status_code == 404, node_id
    assert api.get("/indexes/nope/images/x").status_code == 404


BAD = [
    ({"query": QUERY, "index": "nope"}, 404, "no index named 'nope'"),
    ({"query": QUERY, "mode": "bogus"}, 422, "mode must be one of auto, dense, diffusion, flat"),
    ({"query": "x" * 2001}, 422, "at most 2000 characters"),
    ({"query": "   "}, 422, "should match pattern"),
    ({"query": ""}, 422, "at least 1 character"),
    ({"query": QUERY, "k": 0}, 422, "greater than or equal to 1"),
    ({"query": QUERY, "k": 101}, 422, "less than or equal to 100"),
    ({"query": QUERY, "k": "ten"}, 422, "valid integer"),
    ({"query": QUERY, "mode": "flat", "params": {"seeds": 3}}, 422,
     '"params","seeds"],"msg":"Extra inputs are not permitted"'),
    ({"query": QUERY, "mode": "diffusion", "params": {"time_budget_s": 600}}, 422,
     '"params","time_budget_s"],"msg":"Input should be less than or equal to 10'),
    ({"query": QUERY, "mode": "diffusion", "params": {"cross_encoder_path": "/etc/passwd"}}, 422,
     '"cross_encoder_path"],"msg":"Extra inputs are not permitted"'),
    ({"query": QUERY, "mode": "hierarchical", "params": {"seed_kinds": ["bogus"]}}, 422,
     '"params","seed_kinds",0]'),
    ({"query": QUERY, "mode": "flat", "params": {"candidates": 5}}, 422,
     '"candidates"],"msg":"Extra inputs are not permitted"'),
    ({"query": QUERY, "surprise": 1}, 422, "Extra inputs are not permitted"),
    ({"query": QUERY, "min_relevance": 1.5}, 422, '"min_relevance"],"msg":"Input should be less'),
    ({"query": QUERY, "min_relevance": -0.1}, 422, '"min_relevance"],"msg":"Input should be gre'),
    ({"question": QUERY}, 422, "Field required"),
]


@pytest.mark.parametrize("body, status, says", BAD, ids=[b[2][:30] for b in BAD])
def test_bad_requests_get_a_clear_4xx(api, body, status, says):
    r = api.post("/search", json=body)
    assert r.status_code == status, r.text
    text = r.text
    assert says in text
    assert "Traceback" not in text and 'File "' not in text
    assert "x" * 100 not in text, "the offending input is not echoed back"
    assert r.json()["request_id"] == r.headers["x-request-id"]


def test_malformed_json_and_wrong_content(api):
    r = api.post("/search", content=b'{"query": ', headers={"content-type": "application/json"})
    assert r.status_code == 422 and "json" in r.text.lower()
    assert api.post("/search", content=b"query=x").status_code == 422
    assert api.get("/search").status_code == 405


def test_request_body_over_the_cap_is_refused_unread(sample_index):
    with make_client(settings_for(sample_index, max_body_bytes=4096)) as client:
        big = json.dumps({"query": "tide " * 2000})
        r = client.post("/search", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "4096-byte limit" in r.json()["detail"]
        # like every other error, it says under which id the server filed it
        assert r.json()["request_id"] and r.json()["request_id"] == r.headers["x-request-id"]

        def chunks():  # no Content-Length: the body arrives in pieces
            yield b'{"query": "'
            for _ in range(100):
                yield b"tide " * 20
            yield b'"}'
        r = client.post("/search", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert client.post("/search", json={"query": "tide gauge"}).status_code == 200


def test_an_internal_error_is_a_500_without_internals(sample_index, monkeypatch, caplog):
    from strata.retrieval import Index

    def boom(self, *a, **kw):
        raise RuntimeError("secret internals at /srv/strata/x.py")

    with make_client(settings_for(sample_index)) as client:
        monkeypatch.setattr(Index, "search", boom)
        r = client.post("/search", json={"query": QUERY})
    assert r.status_code == 500
    assert r.json() == {"detail": "internal error", "request_id": r.headers["x-request-id"]}
    assert any("secret internals" in (rec.exc_text or "") or rec.exc_info
               for rec in caplog.records if rec.name == "strata.service"), \
        "the server log keeps the traceback"


def test_retrieval_refusals_are_client_errors(api):
    """A parameter combination the mode itself refuses (validated by retrieval,
    not by the schema) is a 422 with retrieval's message."""
    r = api.post("/search", json={"query": QUERY, "mode": "hierarchical",
                                  "params": {"context_order": "similarity", "seeds": 0,
                                             "fill": False}})
    assert r.status_code in (200, 422)
    r = api.post("/search", json={"query": "\x00\x01", "mode": "keyword"})
    assert r.status_code == 200


def test_openapi_schema_documents_every_mode_parameter(api):
    from dataclasses import fields

    from strata.retrieval.modes.diffusion import DiffusionConfig
    from strata.retrieval.modes.hierarchical import HierarchicalConfig

    schema = api.get("/openapi.json").json()
    comps = schema["components"]["schemas"]
    assert {"/search", "/ask", "/health", "/indexes",
            "/indexes/{name}/images/{node_id}"} <= set(schema["paths"])
    server_side = {"cross_encoder_path"}
    assert set(comps["DiffusionParams"]["properties"]) == \
        {f.name for f in fields(DiffusionConfig)} - server_side
    assert set(comps["HierarchicalParams"]["properties"]) == \
        {f.name for f in fields(HierarchicalConfig)}
    assert set(comps["RoutedParams"]["properties"]) == {
        "max_files", "sections_per_file", "connections", "max_connections", "min_relative",
        "lexical"}
    assert set(comps["AutoParams"]["properties"]) == {
        "kinds", "alpha", "candidates", "walk", "context", "budget_tokens", "facets"}
    modes = set()
    for name in ("SearchAuto", "SearchFlat", "SearchHybrid", "SearchHierarchical",
                 "SearchDiffusion", "SearchRouted"):
        mode = comps[name]["properties"]["mode"]
        modes |= set(mode.get("enum") or [mode.get("const")])
        assert comps[name]["properties"]["query"]["maxLength"] == 2000
    assert modes == {"auto", "flat", "dense", "keyword", "hybrid", "hierarchical", "diffusion",
                     "routed"}
    assert "mode" not in comps["SearchAuto"].get("required", []), "the default mode"
    assert "mode" in comps["SearchDiffusion"]["required"]
    assert "mode" in comps["SearchHierarchical"]["required"]


def test_search_without_a_mode_uses_the_default_and_says_so(api, index):
    body = api.post("/search", json={"query": QUERY, "k": 5}).json()
    assert body["mode"] == "auto"
    direct = index.search(QUERY, k=5)
    assert [h["node_id"] for h in body["results"]] == [x.node_id for x in direct]
    # every hit says where it sits
    assert all(h["context"] for h in body["results"])
    parents = [c for h in body["results"] for c in h["context"] if c["relation"] == "parent"]
    assert parents and all({"node_id", "title", "kind", "location"} <= set(c) for c in parents)


def test_the_web_page_and_its_assets(api):
    page = api.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("style-src")[0]
    # any HTML the page inserts goes through its one Trusted Types policy
    assert "require-trusted-types-for 'script'" in csp and "trusted-types strata-html" in csp
    assert '<script src="/static/app.js"' in page.text
    js = api.get("/static/app.js")
    assert js.status_code == 200 and "innerHTML" not in js.text and "eval(" not in js.text
    # one Trusted Types policy, used in one place: nothing else turns a string into HTML
    assert js.text.count("createPolicy(") == 1 and js.text.count("policy.createHTML(") == 1
    assert api.get("/static/style.css").status_code == 200


def test_hits_carry_sanitized_html_and_their_ancestors(api, index):
    body = api.post("/search", json={"query": "barometric drift", "mode": "hierarchical",
                                     "k": 10}).json()
    by_kind = {h["kind"]: h for h in body["results"]}
    section = next(h for h in body["results"] if h["kind"] == "section")
    assert section["html"].startswith("<h") and "<p>" in section["html"]
    assert section["ancestors"][-1].startswith("file-")
    assert section["ancestors"] == list(_ancestors(index, section["node_id"]))
    if "code" in by_kind:
        assert by_kind["code"]["html"] is None  # code is shown as code


def _ancestors(index, node_id):
    from strata.retrieval.navigate import ancestors

    return ancestors(index, node_id)


def test_a_node_with_its_relatives_and_connections(api, index):
    from strata.retrieval.navigate import resolve

    module = resolve(index, "tidewater.calibration")
    body = api.get(f"/indexes/sample/nodes/{module}").json()
    assert body["node"]["kind"] == "file" and body["node"]["path"] == "tidewater/calibration.py"
    assert body["node"]["html"] is None  # a source file is code, not Markdown
    assert {c["title"] for c in body["children"]} >= {"Calibrator", "correct_barometric_drift"}
    imports = {c["title"] for c in body["connections"]["imports"]}
    assert {"tidewater.units", "tidewater.models"} <= imports
    assert body["counts"]["imported_by"] == len(body["connections"]["imported_by"]) >= 1

    drift = resolve(index, "docs/calibration.md#calibration/barometric-drift")
    body = api.get(f"/indexes/sample/nodes/{drift}").json()
    assert body["node"]["html"].startswith("<h2>Barometric drift</h2>")
    assert body["parent"]["title"] == "Calibration"
    assert body["ancestors"][0]["node_id"] == body["parent"]["node_id"]
    assert [c["title"] for c in body["children"]][:1] == [
        "Scatter plot of residuals against staff readings over 30 days: before barometric "
        "correction the residuals swing by about ±0.15 m with the weather, afterwards they "
        "stay within a centimetre or two"]
    assert "linked_from" in body["connections"]  # getting-started links to it

    missing = api.get("/indexes/sample/nodes/section-0000")
    assert missing.status_code == 404
    assert "no node, file or module 'section-0000'" in missing.json()["detail"]
    assert api.get("/indexes/sample/nodes/a%20b").status_code == 404
    assert api.get("/indexes/nope/nodes/x").status_code == 404


@pytest.mark.parametrize("name, node", [
    ("tidewater.calibration", "tidewater.calibration"),
    ("tidewater/calibration.py", "tidewater.calibration"),
    ("docs/calibration.md%23calibration/barometric-drift", "docs/calibration.md#calibration/barometric-drift"),
    ("Calibrator.fit", "tidewater.calibration.Calibrator.fit")])
def test_a_node_can_be_named_as_the_mcp_tools_and_the_outline_name_it(api, index, name, node):
    from strata.retrieval.navigate import resolve

    body = api.get(f"/indexes/sample/nodes/{name}")
    assert body.status_code == 200, body.text
    assert body.json()["node"]["node_id"] == resolve(index, node)


def test_the_outline_of_a_file_with_a_node_marked(api, index):
    from strata.retrieval.navigate import resolve

    fit = resolve(index, "tidewater.calibration.Calibrator.fit")
    body = api.get("/indexes/sample/outline", params={"target": fit}).json()
    assert body["root"]["path"] == "tidewater/calibration.py" and body["focus"] == fit
    titles = [(e["depth"], e["title"]) for e in body["entries"]]
    assert titles[0] == (0, "tidewater.calibration")
    assert (1, "Calibrator") in titles and (2, "Calibrator.fit") in titles
    assert titles.index((1, "Calibrator")) < titles.index((2, "Calibrator.fit"))
    shallow = api.get("/indexes/sample/outline",
                      params={"target": "docs/calibration.md", "max_depth": 1}).json()
    assert max(e["depth"] for e in shallow["entries"]) == 1
    assert any(not e["expanded"] and e["children"] for e in shallow["entries"])
    wrong = api.get("/indexes/sample/outline", params={"target": "calibrashun.py"})
    assert wrong.status_code == 404 and "did you mean" in wrong.json()["detail"]


def test_the_api_docs_load_from_this_server(api):
    """/docs and /redoc reference only this server's files (the assets are
    served locally); the Chromium test checks the page renders offline."""
    import re

    for path in ("/docs", "/redoc"):
        page = api.get(path)
        assert page.status_code == 200
        urls = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert urls and all(u.startswith("/") for u in urls), urls
        assert "default-src 'none'" in page.headers["content-security-policy"]
        for u in urls:
            assert api.get(u).status_code == 200, u


def test_ask_streams_sources_then_the_answer(api):
    with api.stream("POST", "/ask", json={"question": QUERY, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = _events(r.iter_lines())
    names = [e for e, _ in events]
    assert names[0] == "sources" and names[-1] == "done" and "delta" in names
    sources, done = events[0][1], events[-1][1]
    assert sources["sources"] and sources["llm"] == "offline"
    assert done["extractive"] and done["answer"] == "".join(
        d["text"] for e, d in events if e == "delta")
    bad = api.post("/ask", json={"question": QUERY, "stream": True, "mode": "auto",
                                 "params": {"walk": "sideways"}})
    assert bad.status_code == 422  # refused before the stream starts


def _events(lines) -> list[tuple[str, dict]]:
    """Server-sent events as (name, JSON data)."""
    out, name = [], None
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            out.append((name, json.loads(line[6:])))
    return out


def test_ask_with_an_openai_compatible_llm_from_the_settings(sample_index, monkeypatch):
    """``--llm-backend openai --llm-base-url``: the answer comes over real HTTP
    from an OpenAI-compatible server; when that server fails, the service still
    answers (extractively, saying why)."""
    from tests.fake_openai import FakeOpenAI, prompt_of

    def reply(body):
        if "<<<FILE_MAP" in prompt_of(body):  # the router's request
            return {"files": [{"path": "docs/calibration.md", "confidence": 0.9,
                               "reason": "it has the drift section"}]}
        return "Use a nearby barometer to correct the readings [1]."

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-service")
    with FakeOpenAI() as server:
        server.reply = reply
        settings = settings_for(sample_index, llm_backend="openai", llm_model="test-model",
                                llm_base_url=server.base_url)
        with make_client(settings) as client:
            assert client.get("/health").json()["llm"] == "openai:test-model"
            body = client.post("/ask", json={"question": QUERY, "mode": "routed"}).json()
            assert body["answer"] == "Use a nearby barometer to correct the readings [1]."
            assert body["extractive"] is False and body["llm"] == "openai:test-model"
            assert body["trace"]["router"] == "llm"  # the router asked the model too
            assert body["sources"][0]["path"] == "docs/calibration.md"
            assert "it has the drift section" in body["reasoning"]
            # streamed: the LLM's pieces as they come over HTTP, sources first
            with client.stream("POST", "/ask", json={"question": QUERY + " (streamed)",
                                                     "mode": "routed", "stream": True}) as r:
                events = _events(r.iter_lines())
            names = [e for e, _ in events]
            assert names[0] == "sources" and names[-1] == "done"
            assert events[0][1]["sources"][0]["path"] == "docs/calibration.md"
            deltas = [d["text"] for e, d in events if e == "delta"]
            assert len(deltas) > 3 and "".join(deltas) == reply({"messages": []})
            assert events[-1][1]["extractive"] is False
            assert "<strong>" not in events[-1][1]["html"] and "[1]" in events[-1][1]["html"]
            assert any(r.body.get("stream") for r in server.chat_requests())
            server.add_fault("500", times=None)
            failed = client.post("/ask", json={"question": QUERY}).json()
            with client.stream("POST", "/ask", json={"question": QUERY + " again",
                                                     "stream": True}) as r:
                failed_events = _events(r.iter_lines())
            done = failed_events[-1][1]
            assert done["extractive"] is True and "The LLM could not answer" in done["answer"]
        assert failed["extractive"] is True and "The LLM could not answer" in failed["answer"]
        assert len(server.chat_requests()) >= 3


def test_the_uvicorn_factory_reads_the_environment(sample_index, monkeypatch):
    from fastapi.testclient import TestClient

    from strata.service.app import create_app_from_env
    from strata.service.settings import ServiceConfigError

    monkeypatch.delenv("STRATA_SERVE_INDEXES", raising=False)
    with pytest.raises(ServiceConfigError, match="STRATA_SERVE_INDEXES"):
        create_app_from_env()
    monkeypatch.setenv("STRATA_SERVE_INDEXES", f"docs={sample_index}")
    monkeypatch.setenv("STRATA_MAX_QUERY_CHARS", "50")
    with TestClient(create_app_from_env(), client=("127.0.0.1", 1),
                    base_url="http://localhost") as client:
        assert client.get("/health").json()["indexes"][0]["name"] == "docs"
        assert client.post("/search", json={"query": "q" * 51}).status_code == 422
        assert client.post("/search", json={"query": "tide", "index": "docs"}).status_code == 200


def test_a_request_naming_no_index_of_several_is_a_422_listing_them(sample_index):
    """A client that leaves out ``index`` when the service serves two sent an
    incomplete request (422, the names to choose from), not one for a missing
    index (404, which a client reads as "try another URL")."""
    from tests.serving.helpers import make_client, settings_for

    settings = settings_for(f"docs={sample_index}", f"code={sample_index}")
    with make_client(settings) as client:
        r = client.post("/search", json={"query": "barometric drift", "k": 2})
        assert r.status_code == 422, r.text
        assert "code" in r.text and "docs" in r.text
        assert client.post("/search", json={"query": "barometric drift", "k": 2,
                                            "index": "nope"}).status_code == 404
        named = client.post("/search", json={"query": "barometric drift", "k": 2,
                                             "index": "code"})
        assert named.status_code == 200 and named.json()["results"]
