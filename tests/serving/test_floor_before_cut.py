"""The relevance floor applies before the ``k`` cut, through every entry point
an agent or a person uses (Python, the CLI, HTTP, MCP): a small ``k`` never
says "nothing relevant" while a larger one finds something above the floor.
Agents ask with small ``k``."""

from __future__ import annotations

import re
import subprocess
import sys

import anyio

from strata.retrieval import Index
from tests.conftest import REPO

# questions the sample answers weakly: the first candidate falls under the
# default floor while later ones pass it (the case the floor used to hide)
WEAK = ["pangolin clause", "which licence does the project use",
        "how many times are failed jobs retried"]


def test_a_small_k_finds_what_a_larger_k_finds_above_the_floor(sample_index):
    idx = Index.open(sample_index)
    filled = 0
    for q in WEAK:
        wide = idx.search(q, k=10)
        for k in (1, 2, 3):
            narrow = idx.search(q, k=k)
            assert all(r.relevance >= narrow.min_relevance for r in narrow), (q, k)
            assert len(narrow) <= k
            if wide:
                assert narrow and not narrow.nothing_relevant, (q, k)
                assert len(narrow) == min(k, len(wide)) or narrow.trace.counts.get("filled")
            filled += narrow.trace.counts.get("filled", 0)
    assert filled, "no question here put its first candidate under the floor"


def test_the_cli_at_k_1(sample_index):
    out = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "search", "--index",
                          str(sample_index), "-k", "1", WEAK[0]],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("1. "), out.stdout
    assert "looks relevant" not in out.stdout


def test_http_at_k_1(sample_index):
    from tests.serving.helpers import make_client, settings_for

    with make_client(settings_for(sample_index)) as api:
        body = api.post("/search", json={"query": WEAK[0], "k": 1}).json()
    assert len(body["results"]) == 1 and body["nothing_relevant"] is False
    assert body["results"][0]["relevance"] >= body["min_relevance"]


def test_mcp_at_k_1(sample_index):
    from mcp import Client

    from tests.serving.helpers import mcp_stdio, tool_text

    params = mcp_stdio(sample_index)
    out: dict = {}

    async def session():
        async with Client(params, read_timeout_seconds=120) as client:
            out["r"] = await client.call_tool("search", {"query": WEAK[0], "k": 1})

    anyio.run(session)
    text = tool_text(out["r"])
    assert "No result above relevance" not in text, text
    assert len(re.findall(r"^- relevance: ", text, re.M)) == 1, text
