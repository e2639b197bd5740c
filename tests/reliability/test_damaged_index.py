"""A damaged index explains itself in one line and the next build rebuilds
around the damage.

Published versions are hard links of ``build/``, so a file damaged in place in
a published version is also a damaged cache: the next `strata index` must
notice it and rebuild what it covered, not fail the same way forever."""

from __future__ import annotations

import json
import shutil

import pytest

from strata.pipelines.cli import main
from strata.retrieval import Index

PAGES = {
    "tides.md": "# Tides\n\nThe harbour gauge reads the tide every minute.\n\n"
                "## Drift\n\nBarometric drift is corrected hourly against the reference.\n",
    "salinity.md": "# Salinity\n\nSalinity is logged every hour near the pier.\n",
    "gauge.py": "def read_gauge(port):\n    \"\"\"Read one tide gauge.\"\"\"\n    return port\n",
}


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("STRATA_CORPORA", str(tmp_path / "corpora.yaml"))
    monkeypatch.setenv("STRATA_SHARDS", "1")
    root = tmp_path / "corpus"
    root.mkdir()
    for name, text in PAGES.items():
        (root / name).write_text(text)
    return root


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one line, no stack trace
    assert err[0].startswith("error: index ") and "Traceback" not in err[0]
    return err[0]


def _truncate(path, size=64):
    with open(path, "r+b") as f:
        f.truncate(size)


def _lance_data_file(vdir, kind="section"):
    return sorted((vdir / "lance" / f"{kind}_vectors.lance" / "data").glob("*.lance"))[0]


def test_damage_is_one_line_with_the_file_and_the_rebuild_command(cli_env, tmp_path, capsys):
    out = tmp_path / "index"
    assert main(["index", str(cli_env), "--corpus", "dmg", "--out", str(out), "-q"]) == 0
    capsys.readouterr()
    v1 = out / "versions" / "v000001"
    rebuild = f"strata index {cli_env} --corpus dmg --out"

    def damaged_copy(name):
        copy = tmp_path / name
        shutil.copytree(out, copy, symlinks=True)  # separate files: damage stays in the copy
        return copy, copy / "versions" / "v000001"

    # a truncated Lance data file: queries read the memory-mapped query arrays, not
    # Lance, so every mode still answers in full (the next build re-encodes it: below)
    assert main(["search", "--index", str(out), "--mode", "keyword", "--json",
                 "barometric drift"]) == 0
    whole = json.loads(capsys.readouterr().out)["results"]
    copy, vdir = damaged_copy("lance")
    _truncate(_lance_data_file(vdir))
    assert main(["search", "--index", str(copy), "--mode", "keyword", "--json",
                 "barometric drift"]) == 0
    assert json.loads(capsys.readouterr().out)["results"] == whole
    assert main(["search", "--index", str(copy), "--mode", "flat", "barometric drift"]) == 0
    capsys.readouterr()

    # a truncated query array: every mode says which file
    for name in ("vectors.npy", "nodes.arrow", "graph/indptr.npy"):
        copy, vdir = damaged_copy(f"query-{name.replace('/', '-')}")
        _truncate(vdir / "query" / name)
        for mode in ("auto", "flat", "keyword"):
            assert main(["search", "--index", str(copy), "--mode", mode, "barometric drift"]) == 1
            line = _one_error_line(capsys)
            assert f"versions/v000001/query/{name} of version 1 is unreadable" in line, line
            assert rebuild in line
    assert main(["ask", "--index", str(copy), "what reads the tide?"]) == 1
    assert "query/graph/indptr.npy" in _one_error_line(capsys)

    # a truncated lexical index: the modes that read it say which file
    copy, vdir = damaged_copy("lexical")
    _truncate(vdir / "lexical" / "units" / "docs.parquet")
    for mode in ("keyword", "auto"):
        assert main(["search", "--index", str(copy), "--mode", mode, "barometric drift"]) == 1
        line = _one_error_line(capsys)
        assert "lexical/units" in line and "of version 1" in line and rebuild in line

    # a truncated nodes.parquet: what reads the tables (map) says which file
    copy, vdir = damaged_copy("nodes")
    _truncate(vdir / "nodes.parquet")
    assert main(["map", "--index", str(copy)]) == 1
    line = _one_error_line(capsys)
    assert "versions/v000001/nodes.parquet of version 1 is unreadable" in line and rebuild in line

    # a truncated manifest, then a CURRENT holding garbage
    copy, vdir = damaged_copy("manifest")
    _truncate(vdir / "manifest.json", 10)
    assert main(["map", "--index", str(copy)]) == 1
    assert "versions/v000001/manifest.json of version 1" in _one_error_line(capsys)
    copy, vdir = damaged_copy("current")
    (copy / "CURRENT").write_bytes(b"\x00garbage\xff")
    assert main(["search", "--index", str(copy), "tide"]) == 1
    line = _one_error_line(capsys)
    assert "CURRENT is unreadable" in line and "garbage" in line and rebuild in line

    # `strata map` on a damaged documents table
    copy, vdir = damaged_copy("documents")
    _truncate(vdir / "documents.parquet")
    assert main(["map", "--index", str(copy), "--json"]) == 1
    assert "documents.parquet" in _one_error_line(capsys)

    # now the original, damaged in place: build/ shares these files (hard links)
    assert (v1 / "nodes.parquet").stat().st_ino == (out / "build" / "nodes.parquet").stat().st_ino
    bad = _lance_data_file(v1)
    _truncate(v1 / "nodes.parquet")
    _truncate(bad)
    _truncate(v1 / "lexical" / "units" / "docs.parquet")
    assert main(["index", str(cli_env), "--corpus", "dmg", "--out", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["version"] == 2
    report = json.loads((out / "build" / "build_report.json").read_text())
    assert report["parse"]["parsed"] == len(PAGES)  # the unreadable parse cache was rebuilt
    assert report["embed"]["computed"] > 0  # and the damaged vector table re-encoded
    idx = Index.open(out)
    assert idx.version == 2
    assert any("Drift" in r.breadcrumb for r in idx.search("barometric drift", mode="keyword", k=3))
    assert [r.node_id for r in idx.search("barometric drift", k=3)]
    # the damaged version is still on disk and still says so
    with pytest.raises(Exception, match="nodes.parquet of version 1"):
        Index.open(out, version=1).nodes()
