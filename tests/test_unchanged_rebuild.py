"""A rebuild that changes nothing keeps the current version: no versions/vN+1,
CURRENT not moved, the publish asset's materialization says ``unchanged`` and
the CLI says "unchanged, still version N". A changed input still publishes a
new version."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import dagster as dg

from strata.core.storage.layout import IndexLayout, write_json_atomic
from strata.retrieval import Index
from tests.s3 import s3_endpoint
from tests.s3 import uri as s3_uri
from tests.conftest import REPO, write_corpora

# --------------------------------------------------------------------------- the layout


def _files(layout: IndexLayout, text: bytes = b"rows") -> None:
    layout.build.mkdir(parents=True, exist_ok=True)
    (layout.build_table("nodes")).write_bytes(text)
    (layout.build_table("edges")).write_bytes(b"edges")
    (layout.build / "lance" / "t.lance").mkdir(parents=True, exist_ok=True)
    (layout.build / "lance" / "t.lance" / "data.lance").write_bytes(b"vectors")


def test_unchanged_version_compares_files_and_the_stable_manifest(tmp_path):
    layout = IndexLayout(tmp_path / "index")
    assert layout.unchanged_version({"corpus": "t"}) is None  # nothing published yet
    _files(layout)
    manifest = {"corpus": "t", "source_fingerprint": "abc", "created_at": "then",
                "build_seconds": 1.0, "stages": {"parse": {"seconds": 1.0}}, "run_id": "r1"}
    assert layout.publish(manifest) == 1
    # only the build's timings and identity differ: the same index
    again = dict(manifest, created_at="now", build_seconds=9.0, run_id="r2",
                 stages={"parse": {"seconds": 0.1}})
    assert layout.unchanged_version(again) == 1
    # a table rewritten whole with the same bytes (a new file, not the hard link)
    layout.build_table("nodes").unlink()
    layout.build_table("nodes").write_bytes(b"rows")
    assert layout.unchanged_version(again) == 1
    # different bytes, an extra file, a missing file, a different stable field: changed
    layout.build_table("nodes").unlink()
    layout.build_table("nodes").write_bytes(b"ROWS")
    assert layout.unchanged_version(again) is None
    layout.build_table("nodes").unlink()
    layout.build_table("nodes").write_bytes(b"rows")
    (layout.build / "lance" / "t.lance" / "more.lance").write_bytes(b"more")
    assert layout.unchanged_version(again) is None
    (layout.build / "lance" / "t.lance" / "more.lance").unlink()
    layout.build_table("edges").unlink()
    assert layout.unchanged_version(again) is None
    layout.build_table("edges").write_bytes(b"edges")
    assert layout.unchanged_version(again) == 1
    assert layout.unchanged_version(dict(again, source_fingerprint="def")) is None
    # a current version whose manifest does not read is never "unchanged"
    (layout.version_dir(1) / "manifest.json").write_text("{")
    assert layout.unchanged_version(again) is None
    write_json_atomic(layout.version_dir(1) / "manifest.json", dict(manifest, version=1))
    assert layout.unchanged_version(again) == 1


# --------------------------------------------------------------------------- real builds


def _publish_meta(result) -> dict:
    (mat,) = result.asset_materializations_for_node("index_manifest")
    return {k: v.value for k, v in mat.metadata.items()}


def _facts_meta(result) -> dict:
    (mat,) = result.asset_materializations_for_node("facts")
    return {k: v.value for k, v in mat.metadata.items()}


def test_an_unchanged_rebuild_keeps_the_version_and_an_edit_publishes(builder, sample_copy,
                                                                      tmp_path):
    out = tmp_path / "index"
    write_corpora(builder.config_path, {"sample": {"root": str(sample_copy), "out": str(out)}})
    built = builder.build("sample")
    first = _publish_meta(built)
    assert first["version"] == 1 and first["unchanged"] is False
    assert _facts_meta(built)["tables_reused"] is False
    layout = IndexLayout(out)
    manifest = (layout.version_dir(1) / "manifest.json").read_text()
    pinned = Index.open(out)  # a reader holding version 1 across the rebuilds

    built = builder.build("sample")
    second = _publish_meta(built)
    assert second["unchanged"] is True and second["version"] == 1
    # the facts step left its tables as they were: the build's files are still
    # the ones version 1 froze (hard links), not rewritten copies
    assert _facts_meta(built)["tables_reused"] is True
    for table in ("entities", "facts"):
        assert os.path.samefile(layout.build_table(table),
                                layout.version_dir(1) / layout.build_table(table).name)
    assert layout.versions() == [1] and (out / "CURRENT").read_text().strip() == "v000001"
    # the kept version is untouched: same manifest (its build time included)
    assert (layout.version_dir(1) / "manifest.json").read_text() == manifest
    assert json.loads((out / "manifest.json").read_text())["version"] == 1
    assert not list(layout.versions_dir.glob(".tmp-*"))
    assert [r.node_id for r in pinned.search("barometric drift", k=5)] == \
        [r.node_id for r in Index.open(out).search("barometric drift", k=5)]

    # the UI's asset history: the unchanged materialization is recorded with its flag
    events = builder.instance.fetch_materializations(
        dg.AssetKey("index_manifest"), limit=10).records
    flags = sorted(e.asset_materialization.metadata["unchanged"].value for e in events)
    assert flags == [False, True]

    # query arrays damaged in place (publish writes them, no stage reads them): the
    # rebuild must publish again rather than keep a version readers cannot open
    vectors = layout.version_dir(1) / "query" / "vectors.npy"
    vectors.write_bytes(vectors.read_bytes()[:100])
    repaired = _publish_meta(builder.build("sample"))
    assert repaired["unchanged"] is False and repaired["version"] == 2
    assert Index.open(out).search("barometric drift", k=5)

    (sample_copy / "docs" / "added.md").write_text("# Added\n\nA page for version three.\n")
    third = _publish_meta(builder.build("sample"))
    assert third["unchanged"] is False and third["version"] == 3
    assert layout.versions() == [1, 2, 3] and Index.open(out).version == 3
    assert Index.open(out).documents().filter(
        Index.open(out).documents()["path"] == "docs/added.md").height == 1


def test_an_unchanged_mirrored_build_uploads_nothing(builder, sample_copy, tmp_path, monkeypatch):
    from strata.core.storage.mirror import remote_current, remote_versions

    with s3_endpoint(monkeypatch, tmp_path / "cache", "indexes") as endpoint:
        uri = s3_uri(endpoint, "indexes/sample")
        write_corpora(builder.config_path, {"mirrored": {
            "root": str(sample_copy), "out": str(tmp_path / "index"), "mirror": uri}})
        builder.build("mirrored")
        assert remote_current(uri) == 1
        result = builder.build("mirrored")
        (mat,) = result.asset_materializations_for_node("mirrored_index")
        assert mat.metadata["unchanged"].value is True
        assert mat.metadata["version"].value == 1
        assert remote_current(uri) == 1
        assert remote_versions(uri) == [1]


def test_the_cli_says_unchanged_and_map_lists_one_version(sample_copy, tmp_path):
    out = tmp_path / "index"
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dh"),
           "STRATA_CORPORA": str(tmp_path / "corpora.yaml")}
    (tmp_path / "dh").mkdir()
    argv = ["index", str(sample_copy), "--corpus", "same", "--out", str(out)]
    # the CLI's main, then which heavy modules the process imported on its way
    code = ("import sys; from strata.pipelines.cli import main; rc = main(sys.argv[1:]); "
            "print('imported:', sorted(m for m in ('bm25s', 'lancedb', 'pandas', 'torch') "
            "if m in sys.modules)); sys.exit(rc)")
    runs, reports = [], []
    for _ in range(2):
        runs.append(subprocess.run([sys.executable, "-c", code, *argv], cwd=REPO, env=env,
                                   capture_output=True, text=True, timeout=900))
        reports.append(json.loads((out / "build" / "build_report.json").read_text()))
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    assert "unchanged, still" not in runs[0].stdout + runs[0].stderr
    assert "unchanged, still version 1" in runs[1].stdout + runs[1].stderr
    # the figures are the rebuild's own, not those of the build that made version 1
    first, second = (re.search(r"parse: (\d+) files parsed, (\d+) reused; embeddings: (\d+) "
                               r"computed, (\d+) reused", run.stdout).groups() for run in runs)
    assert int(first[0]) > 0 and int(first[2]) > 0
    assert (second[0], second[1], second[2]) == ("0", first[0], "0")
    # nothing to encode, read or write: the vector tables are known by their contents
    # file and never opened, and the model is never loaded; a first build loads it in
    # its embedding step, in its own process. Nor is
    # the lexical index loaded, and no table is made through pyarrow's conversion of
    # Python objects, which imports pandas (lancedb imports it too)
    assert "imported: ['bm25s', 'lancedb', 'pandas', 'torch']" in runs[0].stdout
    assert "imported: []" in runs[1].stdout
    assert [r["embedding_shards"]["encoder_kept"] for r in reports] == [False, False]
    listed = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "map", "--index",
                             str(out), "--versions", "--json"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert [(r["version"], r["current"]) for r in json.loads(listed.stdout)] == [(1, True)]
