"""`strata serve` as a user runs it: a real uvicorn process on loopback with
API keys, called over real HTTP, and its web page driven in headless Chromium."""

from __future__ import annotations

import signal
import time

import httpx
import pytest

from tests.browser import chromium
from tests.serving.helpers import key_file, serve_process



@pytest.fixture(scope="module")
def server(sample_index, tmp_path_factory):
    work = tmp_path_factory.mktemp("serve")
    key, keys = key_file(work, 600)
    with serve_process(sample_index, work / "server.log", "--api-keys", str(keys)) \
            as (base, _port, proc):
        yield {"base": base, "key": key, "proc": proc, "log": work / "server.log"}


def test_a_real_server_answers_over_http(server):
    base, key = server["base"], server["key"]
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base, timeout=30) as c:
        health = c.get("/health").json()
        assert health["auth"] is True and health["indexes"][0]["name"] == "sample"
        assert c.post("/search", json={"query": "barometric drift"}).status_code == 401
        r = c.post("/search", json={"query": "barometric drift", "mode": "diffusion",
                                    "verbose": True}, headers=auth)
        assert r.status_code == 200 and r.json()["results"]
        assert r.headers["x-request-id"] and "server" not in r.headers
        ask = c.post("/ask", json={"question": "How is barometric drift corrected?"},
                     headers=auth).json()
        assert ask["sources"] and ask["extractive"]
        big = c.post("/search", content=b"{" + b" " * 70_000 + b"}", headers={
            **auth, "content-type": "application/json"})
        assert big.status_code == 413
        schema = c.get("/openapi.json").json()
        assert schema["info"]["title"] == "Strata retrieval service"


def test_the_server_log_names_clients_but_never_keys(server):
    with httpx.Client(base_url=server["base"], timeout=30) as c:
        c.post("/search", json={"query": "parquet export"},
               headers={"X-API-Key": server["key"]})
        c.get(f"/indexes?api_key={server['key']}", headers={"X-API-Key": server["key"]})
    time.sleep(0.3)
    text = server["log"].read_text()
    assert "tester POST /search 200" in text
    assert "tester GET /indexes 200" in text
    assert server["key"] not in text


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def test_the_web_page_searches_and_asks(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server["base"] + "/")
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    assert page.is_visible("#key-label"), "the page asks for a key when the service needs one"
    assert "401" in page.text_content("#error")

    page.fill("#api-key", server["key"])
    page.dispatch_event("#api-key", "change")
    page.wait_for_selector("#index option[value='sample']", state="attached")

    page.fill("#query", "tide curve chart at station 8443970")
    page.select_option("#mode", "hierarchical")
    page.click("#search-btn")
    page.wait_for_selector("#results li.result")
    results = page.query_selector_all("#results li.result")
    assert len(results) == 10
    assert "hierarchical mode" in page.text_content("#summary")
    crumbs = [r.query_selector(".crumb .trail").text_content() for r in results]
    assert any("›" in c for c in crumbs), crumbs  # breadcrumb trails below the file
    page.wait_for_selector("#results li[data-kind='image'] figure img", timeout=10_000)
    img_ok = page.eval_on_selector("#results li[data-kind='image'] figure img",
                                   "img => img.complete && img.naturalWidth > 0")
    assert img_ok, "the image from the index's image store is shown"

    page.fill("#query", "What does the calibration CSV contain? table of paths contents")
    page.select_option("#mode", "flat")
    page.click("#search-btn")
    page.wait_for_selector("body[data-busy='0'] #results li.result")
    page.fill("#query", "layout of the repository: path and contents")
    page.click("#search-btn")
    page.wait_for_selector("#results li[data-kind='table'] .md table th", timeout=10_000)
    page.fill("#query", "pip install tidewater parquet extra")
    page.click("#search-btn")
    page.wait_for_selector("#results li[data-kind='code'] pre code")  # code rendered
    page.screenshot(path=str(tmp_path / "search.png"))

    page.fill("#query", "How do I correct pressure readings for barometric drift?")
    page.select_option("#mode", "routed")
    page.click("#ask-btn")
    page.wait_for_selector("#answer[data-state='done']")
    assert "extractive" in page.text_content("#answer-meta")
    assert "barometer" in page.text_content("#answer-text").lower()
    assert page.query_selector_all("#answer-sources li")
    assert page.is_visible("#answer-connections-box")
    assert "offline router chose" in page.text_content("#answer-reasoning")
    page.screenshot(path=str(tmp_path / "ask.png"))

    page.fill("#query", "x" * 2500)  # the service refuses; the page says why
    page.click("#search-btn")
    page.wait_for_selector("#error:not([hidden])")
    assert "at most 2000 characters" in page.text_content("#error")
    assert page.text_content("#summary") == "", "no stale summary under a new error"
    assert not errors, errors


def test_the_server_stops_cleanly_on_interrupt(server):
    proc = server["proc"]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    assert "Finished server process" in server["log"].read_text()
