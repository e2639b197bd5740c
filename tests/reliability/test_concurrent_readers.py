"""Readers query while rebuilds publish new versions: no exception, and no
result mixes versions. Threads share the process with the build;
one extra reader runs as a separate process. The keyword reader searches the
LanceDB full-text indexes directly, so Lance tables are open and being read
while the build rewrites its own Lance tables and publishes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import dagster as dg

from strata.retrieval import Index
from tests.conftest import REPO, Builder, write_corpora

WORDS = ["zanzibar", "quokka", "marimba"]


def _page(i: int) -> str:
    return f"# Page {i}\n\nThe {WORDS[i]} tide gauge reports the {WORDS[i]} level hourly.\n"


def _check(idx: Index, query: str, mode: str) -> None:
    """Every hit must belong to the version the reader pinned: its node, its
    document and (for a new page) the page must exist in that same version."""
    nodes = set(idx.nodes()["node_id"])
    docs = set(idx.documents()["path"])
    for r in idx.search(query, k=5, mode=mode):
        assert r.node_id in nodes, (idx.version, r.node_id)
        assert r.path in docs or r.kind == "entity", (idx.version, r.path)


READER = textwrap.dedent("""
    import json, sys, time
    from strata.retrieval import Index
    from pathlib import Path
    out, stop = sys.argv[1], Path(sys.argv[2])
    seen, n = set(), 0
    while not stop.exists() or n == 0:
        idx = Index.open(out)
        nodes = set(idx.nodes()["node_id"])
        for r in idx.search("quokka tide gauge", k=5):
            assert r.node_id in nodes, (idx.version, r.node_id)
        seen.add(idx.version); n += 1
    print(json.dumps({"versions": sorted(seen), "queries": n}))
""")


def test_queries_during_publishes_see_one_whole_version(sample_copy, tmp_path):
    out = tmp_path / "index"
    cfg = write_corpora(tmp_path / "corpora.yaml", {"live": {"root": str(sample_copy),
                                                            "out": str(out)}})
    errors: list[BaseException] = []
    seen: set[int] = set()
    counts = [0]
    stop = threading.Event()

    def reader(mode: str) -> None:
        try:
            while not stop.is_set():
                idx = Index.open(out)
                for i in range(len(WORDS)):
                    _check(idx, f"{WORDS[i]} tide gauge", mode)
                seen.add(idx.version)
                counts[0] += 1
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    with dg.instance_for_test() as instance:
        builder = Builder(instance, cfg)
        (sample_copy / "docs" / "page-0.md").write_text(_page(0))
        builder.build("live")
        threads = [threading.Thread(target=reader, args=(m,), daemon=True)
                   for m in ("flat", "hierarchical", "diffusion", "keyword")]
        for t in threads:
            t.start()
        stop_file = tmp_path / "stop"
        proc = subprocess.Popen([sys.executable, "-c", READER, str(out), str(stop_file)], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in (1, 2):
            (sample_copy / "docs" / f"page-{i}.md").write_text(_page(i))
            builder.build("live")
        stop.set()
        stop_file.write_text("done")
        for t in threads:
            t.join(timeout=120)
        stdout, stderr = proc.communicate(timeout=300)
    assert not errors, repr(errors[0])
    assert proc.returncode == 0, stderr[-2000:]
    assert counts[0] > 3
    assert len(seen) >= 2, f"the readers never crossed a publish: {seen}"
    child = json.loads(stdout.strip().splitlines()[-1])
    assert child["queries"] > 0
