"""Faults in the middle of a build: a full disk while writing, a
file that vanishes between listing and reading. After each, the previous
version still serves and the next run completes without redoing finished
work."""

from __future__ import annotations

import errno
import json

import dagster as dg

from strata.retrieval import Index
from tests.conftest import Builder, write_corpora


def test_a_full_disk_mid_build_leaves_the_old_version_and_the_next_run_finishes(
        sample_copy, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    out = tmp_path / "index"
    cfg = write_corpora(tmp_path / "corpora.yaml", {"disk": {"root": str(sample_copy),
                                                            "out": str(out)}})
    with dg.instance_for_test() as instance:
        builder = Builder(instance, cfg)
        builder.build("disk")
        before = [r.node_id for r in Index.open(out).search("barometric drift", k=5)]
        (sample_copy / "docs" / "full-disk.md").write_text("# Full disk\n\nWritten late.\n")

        real_write = pq.write_table
        calls = {"n": 0}

        def write_until_full(table, where, *args, **kwargs):
            calls["n"] += 1
            if calls["n"] > 10:  # the parse tables fit; a later stage hits a full disk
                raise OSError(errno.ENOSPC, "No space left on device", str(where))
            return real_write(table, where, *args, **kwargs)

        monkeypatch.setattr(pq, "write_table", write_until_full)
        failed = builder.build("disk", raise_on_error=False)
        assert not failed.success
        errors = " ".join(e.step_failure_data.error.to_string() for e in failed.all_events
                          if e.is_step_failure)
        assert "No space left on device" in errors
        # readers: still version 1, whole
        idx = Index.open(out)
        assert idx.version == 1 and [r.node_id for r in idx.search("barometric drift", k=5)] == before
        assert not list((out / "build").glob("**/.*.tmp"))  # no half-written file left behind

        monkeypatch.setattr(pq, "write_table", real_write)
        assert builder.build("disk").success
    report = json.loads((out / "build" / "build_report.json").read_text())
    assert report["parse"]["parsed"] == 0  # the page was parsed before the disk filled
    v2 = Index.open(out)
    assert v2.version == 2 and "docs/full-disk.md" in set(v2.documents()["path"])


def test_a_file_vanishing_mid_run_is_recorded_and_indexed_next_run(tmp_path):
    from strata.stages.discover import discover, iter_paths, read_source

    root = tmp_path / "root"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nalpha\n")
    (root / "b.md").write_text("# B\n\nbravo\n")
    listed = list(iter_paths(root))
    (root / "b.md").unlink()  # gone between the listing and the read
    got = {rel: read_source(root, rel, full) for rel, full in listed}
    assert got["a.md"].text and got["b.md"].text is None
    assert "cannot read" in got["b.md"].reason and "FileNotFoundError" in got["b.md"].reason
    (root / "b.md").write_text("# B\n\nbravo again\n")
    assert {s.path: s.text for s in discover(root)}["b.md"].startswith("# B")


def test_a_file_changing_mid_run_is_indexed_as_read_and_updated_next_run(tmp_path):
    """A file is read once and hashed from the bytes read, so the index holds one
    consistent snapshot of it; the next run sees the new hash and parses again."""
    from strata.stages.discover import discover
    from strata.stages.nodes import PreviousBuild, build_nodes

    root = tmp_path / "root"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nfirst version\n")
    sources = discover(root)
    (root / "a.md").write_text("# A\n\nsecond version\n")  # changed after it was read
    first = build_nodes("c", sources)
    texts = " ".join(first.nodes.column("text").to_pylist())
    assert "first version" in texts and "second version" not in texts
    prev = PreviousBuild(*(pl_from(t) for t in (first.documents, first.nodes, first.references)))
    again = build_nodes("c", discover(root), previous=prev)
    assert again.parsed == ["a.md"]
    assert "second version" in " ".join(again.nodes.column("text").to_pylist())


def pl_from(table):
    import polars as pl

    return pl.from_arrow(table)
