"""`strata mcp` as an agent's client runs it: a child process spoken to over
stdio (and over streamable HTTP with an API key) through the official MCP
client library, on the shared sample index."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import anyio
import httpx
import pytest

from strata.service.auth import KeyEntry, hash_key, new_key
from tests.conftest import REPO
from tests.serving.helpers import MCP_ENV, free_port, mcp_stdio, tool_text
from tests.waiting import wait_until

ID = re.compile(r"`((?:file|section|chunk|code|table|image|entity)-[0-9a-f]+)`")




def test_an_agent_uses_the_tools_over_stdio(sample_index):
    from mcp import Client

    from strata.core.tokens import estimate_tokens

    params = mcp_stdio(sample_index)
    out: dict = {}

    async def session():
        async with Client(params, read_timeout_seconds=120) as client:
            out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
            out["search"] = tool_text(await client.call_tool(
                "search", {"query": "how do I correct pressure readings for barometric drift?"}))
            out["small"] = tool_text(await client.call_tool(
                "search", {"query": "barometric drift", "mode": "hierarchical",
                           "budget_tokens": 300}))
            out["code"] = tool_text(await client.call_tool(
                "search", {"query": "barometric drift", "kinds": ["code"], "k": 3}))
            out["outline"] = tool_text(await client.call_tool(
                "outline", {"target": "tidewater.calibration"}))
            file_id = ID.search(out["outline"]).group(1)
            out["neighbourhood"] = tool_text(await client.call_tool(
                "neighbourhood", {"node_id": file_id}))
            drift = re.search(r"section Barometric drift — L\d+-\d+ `([^`]+)`",
                              tool_text(await client.call_tool(
                                  "outline", {"target": "docs/calibration.md"}))).group(1)
            out["node"] = tool_text(await client.call_tool("node", {"node_id": drift}))
            out["ask"] = tool_text(await client.call_tool(
                "ask", {"question": "How is barometric drift corrected?"}))
            out["stats"] = tool_text(await client.call_tool("index_stats", {}))
            out["missing"] = await client.call_tool("outline", {"target": "calibrashun.py"})

    anyio.run(session)
    tools = out["tools"]
    assert set(tools) == {"search", "ask", "outline", "node", "neighbourhood", "index_stats"}
    assert tools["search"].annotations.read_only_hint is True
    props = tools["search"].input_schema["properties"]
    assert {"query", "mode", "k", "kinds", "budget_tokens", "min_relevance", "index"} <= \
        set(props)
    assert "auto" in props["mode"]["anyOf"][0]["enum"]

    # search: Markdown blocks with breadcrumbs, path:lines and ids, within the default budget
    s = out["search"]
    assert "auto mode" in s and "### 1. " in s
    assert re.search(r"- source: `tidewater/calibration\.py:\d+-\d+`", s)
    assert "correct_barometric_drift" in s and re.search(r"- id: `code-[0-9a-f]+` \(code, ", s)
    assert estimate_tokens(s) <= 2000 * 1.1
    small = out["small"]
    assert "hierarchical mode" in small and estimate_tokens(small) <= 300 * 1.2
    assert "left out to fit the budget" in small
    code_kinds = re.findall(r"- id: `\S+` \((\w+),", out["code"])
    assert code_kinds and set(code_kinds) == {"code"}

    # outline: the module's hierarchy with lines and ids, nested by depth
    o = out["outline"]
    assert o.startswith("## Outline of tidewater.calibration (file, `tidewater/calibration.py:1-")
    assert re.search(r"\n  - code Calibrator — L\d+-\d+ `code-", o)
    assert re.search(r"\n    - code Calibrator\.fit — L\d+-\d+ `code-", o)

    # neighbourhood: the module's direct imports and who imports it
    n = out["neighbourhood"]
    assert "### Imports" in n and "tidewater.units" in n and "TideSeries" in n
    assert "### Imported by" in n and "tidewater/__init__.py" in n

    # node: text, parent, children
    assert "## Barometric drift (section)" in out["node"]
    assert "### Parent" in out["node"] and "Correcting with a barometer" in out["node"]
    assert "A non-vented pressure sensor" in out["node"]

    # ask: an extractive answer (no LLM) with numbered sources
    a = out["ask"]
    assert "extractive" in a and "### Sources" in a
    assert re.search(r"\n1\. .+ — \S+:\d+", a) and "docs/calibration.md" in a
    assert "files: 36" in out["stats"] and "tidewater/" in out["stats"]

    # a wrong target is the agent's error to read, with a suggestion
    assert out["missing"].is_error
    assert "did you mean tidewater/calibration.py" in out["missing"].content[0].text


NONSENSE = "zzqx kubernetes helm chart qwertyuiop"
BLOCK = re.compile(r"^### \d+\. ", re.M)


def test_search_returns_at_most_k_blocks_and_says_when_nothing_is_relevant(sample_index):
    """``k`` caps the blocks whatever room the token budget leaves, each block
    carries its relevance, and a query the index knows nothing about gets a
    plain "no result above relevance" with the closest result, not a list of
    the least bad passages. The floors are explicit (0 and 0.99), so the test
    holds whatever the calibration makes of these queries."""
    from mcp import Client

    params = mcp_stdio(sample_index)
    query = "how do I correct pressure readings for barometric drift?"
    calls = {
        "k2": {"query": query, "k": 2, "min_relevance": 0},
        "k3": {"query": query, "k": 3, "min_relevance": 0},
        "k2-wide": {"query": query, "k": 2, "budget_tokens": 16000, "min_relevance": 0},
        "k3-code": {"query": "barometric drift", "k": 3, "kinds": ["code"],
                    "min_relevance": 0},
        "k2-code-default": {"query": "barometric drift", "k": 2, "kinds": ["code"]},
        "k3-hierarchical": {"query": query, "k": 3, "mode": "hierarchical",
                            "min_relevance": 0},
        "nothing": {"query": NONSENSE, "min_relevance": 0.99},
        "anything": {"query": NONSENSE, "k": 2, "min_relevance": 0},
    }
    out: dict = {}

    async def session():
        async with Client(params, read_timeout_seconds=120) as client:
            out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
            for name, args in calls.items():
                result = await client.call_tool("search", args)
                out[name], out[name, "data"] = tool_text(result), result.structured_content
            out["ask"] = tool_text(await client.call_tool(
                "ask", {"question": NONSENSE, "min_relevance": 0.99}))

    anyio.run(session)
    for tool in ("search", "ask"):
        floor = out["tools"][tool].input_schema["properties"]["min_relevance"]
        assert "relevance" in floor["description"].lower()
    for name, args in calls.items():
        if name in ("nothing", "anything"):
            continue
        text = out[name]
        blocks = len(BLOCK.findall(text))
        relevances = re.findall(r"^- relevance: (\d\.\d\d)$", text, re.M)
        assert blocks <= args["k"], (name, text[:3000])
        assert blocks or "No result above relevance" in text, (name, text[:3000])
        assert len(relevances) == blocks and all(0 <= float(x) <= 1 for x in relevances), name
        data = out[name, "data"]  # the same results as data, no more than k either
        assert [h["node_id"] for h in data["results"]] == \
            re.findall(r"^- id: `(\S+)` \(", text, re.M), name
        assert len(data["results"]) == blocks <= data["k"] == args["k"]
        if args.get("min_relevance") == 0:
            assert blocks == args["k"], (name, text[:3000])  # the floor leaves all k
        if "kinds" in args:
            assert set(re.findall(r"- id: `\S+` \((\w+),", text)) == {"code"}, name

    nothing = out["nothing"]
    assert not BLOCK.search(nothing) and "Nothing matched" not in nothing
    found = re.search(r"No result above relevance 0\.99 for '([^']+)'; closest: "
                      r"`(\S+)` `[a-z]+-[0-9a-f]+` \(relevance (\d\.\d\d)\)", nothing)
    assert found, nothing
    assert found.group(1) == NONSENSE and float(found.group(3)) < 0.99
    assert out["nothing", "data"]["nothing_relevant"] and not out["nothing", "data"]["results"]
    # with no floor the same query gets the closest results, no more than k
    assert len(BLOCK.findall(out["anything"])) == 2
    assert "### Sources\n(none: nothing retrieved reached the relevance floor" in out["ask"]


@pytest.fixture
def mcp_http(sample_index, tmp_path):
    key = new_key()
    keys = tmp_path / "keys.txt"
    keys.write_text(KeyEntry("agent", hash_key(key), 600).line() + "\n")
    port = free_port()
    log = (tmp_path / "mcp.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "strata.pipelines.cli", "mcp", "--index", str(sample_index), "--http",
         "--port", str(port), "--api-keys", str(keys), "--log-level", "info"],
        cwd=REPO, env={**os.environ, **MCP_ENV}, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    def listening() -> bool:
        assert proc.poll() is None, (tmp_path / "mcp.log").read_text()[-3000:]
        try:
            httpx.get(base + "/mcp", timeout=2)
            return True
        except httpx.HTTPError:
            return False

    wait_until(listening, "strata mcp --http did not listen", poll_s=0.3)
    yield {"url": base + "/mcp", "key": key, "log": tmp_path / "mcp.log"}
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    log.close()


def test_streamable_http_needs_a_key(mcp_http):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    url, key = mcp_http["url"], mcp_http["key"]
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"accept": "application/json, text/event-stream"}
    refused = httpx.post(url, json=hello, headers=accept)
    assert refused.status_code == 401 and "API key" in refused.json()["error"]
    wrong = httpx.post(url, json=hello, headers={**accept, "authorization": "Bearer nope"})
    assert wrong.status_code == 401
    out: dict = {}

    async def session():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"},
                                      timeout=120) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                out["tools"] = [t.name for t in (await client.list_tools()).tools]
                out["search"] = tool_text(await client.call_tool(
                    "search", {"query": "tide chart", "k": 3}))

    anyio.run(session)
    assert "outline" in out["tools"] and "### 1. " in out["search"]
    time.sleep(0.3)
    log = mcp_http["log"].read_text()
    assert "agent POST /mcp 200" in log and key not in log


def test_streamable_http_answers_only_its_own_host_names(mcp_http):
    """The rule of `strata serve` (service.edge): a foreign Host gets 421 and a
    foreign Origin 403, even with a valid key; the path a client sent is logged
    with its control characters escaped."""
    url, key = mcp_http["url"], mcp_http["key"]
    port = url.rsplit(":", 1)[1].split("/")[0]
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {key}"}
    foreign = httpx.post(url, json=hello, headers={**headers, "host": f"attacker.example:{port}"})
    assert foreign.status_code == 421 and "Host" in foreign.json()["detail"]
    origin = httpx.post(url, json=hello, headers={**headers, "origin": "http://attacker.example"})
    assert origin.status_code == 403
    own = httpx.post(url, json=hello, headers={**headers, "host": f"localhost:{port}"})
    assert own.status_code == 200
    httpx.get(url.replace("/mcp", "/%1b]52;c;aGk=%07"), headers=headers)
    wait_until(lambda: b"\\x1b]52;c;aGk=\\x07" in mcp_http["log"].read_bytes(),
               "the request was never logged", poll_s=0.1)
    assert b"\x1b" not in mcp_http["log"].read_bytes()


def _ids(markdown: str) -> list[str]:
    return ID.findall(markdown)


def _one_line_error(result) -> str:
    assert result.is_error and result.structured_content is None, result
    text = result.content[0].text
    assert "\n" not in text, text
    return text


def test_node_tools_take_the_same_names_and_return_structured_content(sample_index):
    """``outline``, ``node`` and ``neighbourhood`` read a node id, a file path,
    a module name and a symbol name alike (an unknown or ambiguous name is a
    one-line error naming candidates), and search and the three answer with
    structured content that says what the Markdown says: the same ids, in the
    same order, never more than k results."""
    from mcp import Client

    params = mcp_stdio(sample_index)
    names = ["tidewater.calibration", "tidewater/calibration.py", "./tidewater/calibration.py",
             "calibration.py"]
    out: dict = {}

    async def session():
        async with Client(params, read_timeout_seconds=120) as client:
            out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
            o = await client.call_tool("outline", {"target": "tidewater/calibration.py"})
            out["outline"] = o
            file_id = o.structured_content["root"]["node_id"]
            out["file_id"] = file_id
            for tool in ("node", "neighbourhood"):
                for name in [file_id, *names]:
                    out[tool, name] = await client.call_tool(tool, {"node_id": name})
            for name in ("tidewater.calibration.correct_barometric_drift",
                         "correct_barometric_drift", "Calibrator.fit"):
                out["symbol", name] = await client.call_tool("node", {"node_id": name})
            drift = out["symbol", "correct_barometric_drift"].structured_content["node"]
            out["focus"] = await client.call_tool("outline", {"target": drift["node_id"]})
            out["section"] = await client.call_tool(
                "neighbourhood", {"node_id": "docs/calibration.md#calibration/barometric-drift"})
            out["unknown"] = await client.call_tool("node", {"node_id": "tidewater.calibraton"})
            out["unknown-n"] = await client.call_tool(
                "neighbourhood", {"node_id": "tidewater/calibrashun.py"})
            out["ambiguous"] = await client.call_tool("neighbourhood", {"node_id": "calibration"})
            out["search"] = await client.call_tool(
                "search", {"query": "barometric drift", "k": 3, "min_relevance": 0})
            out["nothing"] = await client.call_tool(
                "search", {"query": NONSENSE, "min_relevance": 0.99})

    anyio.run(session)
    tools = out["tools"]
    for name in ("search", "outline", "node", "neighbourhood"):
        assert tools[name].output_schema and tools[name].output_schema["type"] == "object", name
    for name, arg in (("outline", "target"), ("node", "node_id"), ("neighbourhood", "node_id")):
        help_ = tools[name].input_schema["properties"][arg]["description"]
        assert "file path" in help_ and "module" in help_ and "node id" in help_, name
    assert tools["ask"].output_schema is None and tools["index_stats"].output_schema is None
    file_id = out["file_id"]
    assert file_id.startswith("file-")

    # every name of the module gives what its node id gives, text and data alike
    for tool in ("node", "neighbourhood"):
        by_id = out[tool, file_id]
        expected = {k: v for k, v in by_id.structured_content.items() if k != "target"}
        for name in names:
            got = out[tool, name]
            assert tool_text(got) == tool_text(by_id), (tool, name)
            assert got.structured_content["target"] == name
            assert {k: v for k, v in got.structured_content.items() if k != "target"} == \
                expected, (tool, name)
    node = out["node", "tidewater.calibration"]
    assert node.structured_content["node"]["node_id"] == file_id
    assert tool_text(node).startswith("## tidewater.calibration (file)")
    assert "### Imports" in tool_text(out["neighbourhood", "tidewater/calibration.py"])

    # symbols by qualified name or by their unique tail
    full = out["symbol", "tidewater.calibration.correct_barometric_drift"].structured_content
    assert full["node"]["title"] == "correct_barometric_drift"
    assert full["node"]["kind"] == "code" and full["parent"]["node_id"] == file_id
    assert out["symbol", "correct_barometric_drift"].structured_content["node"] == full["node"]
    fit = out["symbol", "Calibrator.fit"].structured_content["node"]
    assert fit["node_path"] == "tidewater.calibration.Calibrator.fit"
    focus = out["focus"].structured_content
    assert focus["focus"] == full["node"]["node_id"] and focus["root"]["node_id"] == file_id
    section = out["section"].structured_content
    assert section["node"]["title"] == "Barometric drift"

    # an unknown or ambiguous name: one line, with the candidates
    assert "did you mean tidewater.calibration" in _one_line_error(out["unknown"])
    assert "did you mean tidewater/calibration.py" in _one_line_error(out["unknown-n"])
    ambiguous = _one_line_error(out["ambiguous"])
    assert "tidewater.calibration" in ambiguous and "docs/calibration.md#calibration" in ambiguous

    # the data says what the Markdown says
    o = out["outline"].structured_content
    assert [e["node_id"] for e in o["entries"]] == _ids(tool_text(out["outline"]))
    assert o["entries"][0]["depth"] == 0 and o["root"]["node_id"] == file_id
    for name in ("tidewater.calibration", "correct_barometric_drift"):
        got = out["node", name] if ("node", name) in out else out["symbol", name]
        d = got.structured_content
        listed = [d["node"]] + ([d["parent"]] if d["parent"] else []) + d["siblings"] \
            + d["children"]
        assert set(_ids(tool_text(got))) == {x["node_id"] for x in listed}, name
        assert d["node"]["text"] in tool_text(got)
    n = out["neighbourhood", file_id].structured_content
    listed = {n["node"]["node_id"]} | {x["node_id"] for x in n["children"]} \
        | {x["node_id"] for items in n["groups"].values() for x in items} \
        | {f["source_id"] for f in n["facts"]} | ({n["parent"]["node_id"]} if n["parent"] else set())
    assert set(_ids(tool_text(out["neighbourhood", file_id]))) == listed
    assert n["counts"]["imports"] >= len(n["groups"]["imports"]) >= 1

    s, text = out["search"].structured_content, tool_text(out["search"])
    hits = s["results"]
    assert 1 <= len(hits) <= s["k"] == 3 and not s["nothing_relevant"]
    assert [h["node_id"] for h in hits] == re.findall(r"^- id: `(\S+)` \(", text, re.M)
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    assert [f"{h['relevance']:.2f}" for h in hits] == \
        re.findall(r"^- relevance: (\d\.\d\d)$", text, re.M)
    for h in hits:
        assert f"- source: `{h['location']}`" in text and h["text"] in text
        assert h["kind"] in {"file", "section", "chunk", "code", "table", "image"}
        assert isinstance(h["score"], float) and h["path"]
    assert s["min_relevance"] == 0 and s["query"] == "barometric drift"
    nothing = out["nothing"].structured_content
    assert nothing["results"] == [] and nothing["nothing_relevant"] is True
    assert nothing["min_relevance"] == 0.99 and nothing["note"] in tool_text(out["nothing"])
    assert f"`{nothing['closest']['node_id']}`" in nothing["note"]
