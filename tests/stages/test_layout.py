"""Tests for strata.core.storage.layout.IndexLayout: atomic publish with hard links,
version resolution and pruning, on real Parquet files and a LanceDB table."""

from __future__ import annotations

import json
import os
from pathlib import Path

import lancedb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.core.storage.layout import IndexLayout, IndexNotFound, read_manifest, write_parquet_atomic
from strata.core.config.schema import DOCUMENTS, EDGES, NODES, vector_schema

DIM = 4


def _node(i: int, text: str = "text") -> dict:
    return {"node_id": f"file-{i}", "corpus": "t", "kind": "file", "subkind": "markdown",
            "path": f"doc{i}.md", "node_path": f"doc{i}.md", "parent_id": None, "depth": 0,
            "ordinal": 0, "title": f"Doc {i}", "breadcrumb": f"doc{i}.md", "text": text,
            "start_line": 1, "end_line": 1, "page": None, "language": None,
            "content_hash": f"h{i}", "embedded": True, "attrs": "{}"}


def _vec(i: int) -> dict:
    return {"node_id": f"file-{i}", "kind": "file", "subkind": "markdown", "path": f"doc{i}.md",
            "language": None, "depth": 0, "text_hash": f"t{i}", "text": f"doc {i}",
            "vector": [float(i)] * DIM}


def _write_build(layout: IndexLayout, node_ids: list[int], text: str = "text") -> None:
    write_parquet_atomic(pa.Table.from_pylist([_node(i, text) for i in node_ids], schema=NODES),
                         layout.build_table("nodes"))
    write_parquet_atomic(pa.Table.from_pylist(
        [{"src": "file-1", "dst": f"file-{i}", "type": "jump", "relation": "links_to",
          "weight": 1.0} for i in node_ids if i != 1], schema=EDGES), layout.build_table("edges"))
    write_parquet_atomic(pa.Table.from_pylist(
        [{"path": f"doc{i}.md", "format": "markdown", "size": 10, "content_hash": f"h{i}",
          "parse_key": "k", "status": "indexed", "notes": ""} for i in node_ids],
        schema=DOCUMENTS), layout.build_table("documents"))


def _lance_rows(folder: Path) -> list[str]:
    table = lancedb.connect(str(folder)).open_table("file_vectors")
    return sorted(table.to_arrow()["node_id"].to_pylist())


def _node_ids(parquet: Path) -> list[str]:
    return pq.read_table(parquet)["node_id"].to_pylist()


@pytest.fixture
def layout(tmp_path) -> IndexLayout:
    lay = IndexLayout(tmp_path / "index")
    _write_build(lay, [1, 2])
    db = lancedb.connect(str(lay.build_lance))
    db.create_table("file_vectors",
                    data=pa.Table.from_pylist([_vec(1), _vec(2)], schema=vector_schema(DIM)))
    return lay


def test_first_publish_creates_version_one(layout):
    v = layout.publish({"corpus": "t", "nodes": 2})
    assert v == 1
    assert layout.versions() == [1]
    assert layout.current_version() == 1
    assert (layout.root / "CURRENT").read_text() == "v000001\n"
    vdir = layout.resolve()
    assert vdir == layout.root / "versions" / "v000001"
    assert read_manifest(vdir) == {"corpus": "t", "nodes": 2, "version": 1}
    assert json.loads((layout.root / "manifest.json").read_text()) == {
        "corpus": "t", "nodes": 2, "version": 1}
    assert sorted(p.name for p in vdir.iterdir()) == [
        "documents.parquet", "edges.parquet", "lance", "manifest.json", "nodes.parquet"]
    assert _node_ids(vdir / "nodes.parquet") == ["file-1", "file-2"]
    assert _lance_rows(vdir / "lance") == ["file-1", "file-2"]
    # no temp folders or files left behind
    assert [p.name for p in layout.versions_dir.iterdir()] == ["v000001"]
    assert sorted(p.name for p in layout.root.iterdir()) == [
        "CURRENT", "build", "manifest.json", "versions"]


def test_published_files_are_hard_links_of_the_build(layout):
    layout.publish({})
    vdir = layout.resolve(1)
    for name in ("nodes.parquet", "edges.parquet", "documents.parquet"):
        built, published = os.stat(layout.build / name), os.stat(vdir / name)
        assert published.st_ino == built.st_ino
        assert published.st_nlink >= 2
    lance_files = [p for p in layout.build_lance.rglob("*") if p.is_file()]
    assert any(p.suffix == ".lance" for p in lance_files)
    for p in lance_files:
        twin = vdir / "lance" / p.relative_to(layout.build_lance)
        assert twin.is_file(), twin
        assert os.stat(twin).st_ino == os.stat(p).st_ino


def test_second_publish_leaves_the_first_intact(layout):
    layout.publish({"run": "a"})
    _write_build(layout, [1, 2, 3], text="changed")
    lancedb.connect(str(layout.build_lance)).open_table("file_vectors").add(
        pa.Table.from_pylist([_vec(3)], schema=vector_schema(DIM)))

    assert layout.publish({"run": "b"}) == 2
    assert layout.versions() == [1, 2]
    assert (layout.root / "CURRENT").read_text().strip() == "v000002"
    assert layout.resolve() == layout.resolve(2) == layout.root / "versions" / "v000002"
    v1, v2 = layout.resolve(1), layout.resolve(2)
    assert read_manifest(v1) == {"run": "a", "version": 1}
    assert read_manifest(v2) == {"run": "b", "version": 2}
    assert json.loads((layout.root / "manifest.json").read_text())["version"] == 2

    assert _node_ids(v1 / "nodes.parquet") == ["file-1", "file-2"]
    assert set(pq.read_table(v1 / "nodes.parquet")["text"].to_pylist()) == {"text"}
    assert pq.read_table(v1 / "edges.parquet").num_rows == 1
    assert _node_ids(v2 / "nodes.parquet") == ["file-1", "file-2", "file-3"]
    assert set(pq.read_table(v2 / "nodes.parquet")["text"].to_pylist()) == {"changed"}
    assert _lance_rows(v1 / "lance") == ["file-1", "file-2"]
    assert _lance_rows(v2 / "lance") == ["file-1", "file-2", "file-3"]
    # the rewritten parquet is a new file: v1 no longer shares its inode
    assert os.stat(v1 / "nodes.parquet").st_ino != os.stat(v2 / "nodes.parquet").st_ino


def test_resolve_unknown_version_is_a_helpful_error(layout):
    layout.publish({})
    layout.publish({})
    with pytest.raises(IndexNotFound) as err:
        layout.resolve(99)
    msg = str(err.value)
    assert "index version 99 not found" in msg
    assert str(layout.root) in msg
    assert "available: [1, 2]" in msg
    assert isinstance(err.value, FileNotFoundError)


def test_resolve_on_empty_folder_points_to_strata_index(tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    lay = IndexLayout(empty)
    assert lay.versions() == []
    assert lay.current_version() is None
    with pytest.raises(IndexNotFound, match="strata index") as err:
        lay.resolve()
    assert str(empty) in str(err.value)
    with pytest.raises(IndexNotFound):
        IndexLayout(tmp_path / "missing").resolve()


def test_default_keep_prunes_to_three(layout):
    for _ in range(5):
        layout.publish({})
    assert layout.versions() == [3, 4, 5]
    assert not (layout.versions_dir / "v000001").exists()


def test_prune_keeps_newest_two(layout):
    for _ in range(4):
        layout.publish({}, keep=10)
    assert layout.versions() == [1, 2, 3, 4]
    assert layout.prune(keep=2) == [1, 2]
    assert layout.versions() == [3, 4]
    assert layout.resolve() == layout.resolve(4)
    assert _node_ids(layout.resolve(3) / "nodes.parquet") == ["file-1", "file-2"]
    # the build's files survive the removal of the versions linking them
    assert _node_ids(layout.build_table("nodes")) == ["file-1", "file-2"]
    assert _lance_rows(layout.build_lance) == ["file-1", "file-2"]


def test_prune_never_removes_the_current_version(layout):
    for _ in range(4):
        layout.publish({}, keep=10)
    # a rollback: readers were pointed back at v1
    (layout.root / "CURRENT").write_text("v000001\n")
    assert layout.prune(keep=2) == [2]
    assert layout.versions() == [1, 3, 4]
    assert layout.resolve() == layout.version_dir(1)
    assert layout.prune(keep=0) == []
    assert layout.versions() == [1, 3, 4]


def test_leftover_temp_folder_from_a_crash_is_harmless(layout):
    layout.publish({})
    crashed = layout.versions_dir / ".tmp-v000005"
    crashed.mkdir()
    (crashed / "nodes.parquet").write_bytes(b"half a file")
    assert layout.versions() == [1]
    assert layout.publish({}, keep=10) == 2
    assert layout.versions() == [1, 2]
    assert layout.current_version() == 2

    # the crashed folder's name comes round again: it is replaced, not merged
    (crashed / "stale.txt").write_text("junk")
    for expected in (3, 4, 5):
        assert layout.publish({}, keep=10) == expected
    v5 = layout.resolve(5)
    assert not (v5 / "stale.txt").exists()
    assert _node_ids(v5 / "nodes.parquet") == ["file-1", "file-2"]
    assert not crashed.exists()
    assert layout.versions() == [1, 2, 3, 4, 5]


def test_leftover_temp_folder_for_the_next_version(layout):
    layout.publish({})
    nxt = layout.versions_dir / ".tmp-v000002"
    nxt.mkdir()
    (nxt / "junk.bin").write_bytes(b"x")
    assert layout.publish({"n": 2}) == 2
    v2 = layout.resolve()
    assert not (v2 / "junk.bin").exists()
    assert read_manifest(v2) == {"n": 2, "version": 2}
    assert [p.name for p in sorted(layout.versions_dir.iterdir())] == ["v000001", "v000002"]


def test_publish_without_lance_or_optional_tables(tmp_path):
    lay = IndexLayout(tmp_path / "idx")
    lay.build.mkdir(parents=True)
    write_parquet_atomic(pa.Table.from_pylist([_node(7)], schema=NODES), lay.build_table("nodes"))
    assert lay.publish({"x": 1}) == 1
    assert sorted(p.name for p in lay.resolve().iterdir()) == ["manifest.json", "nodes.parquet"]


def test_prune_grace_keeps_versions_replaced_moments_ago(layout):
    import os
    import time

    for _ in range(4):
        layout.publish({}, keep=10)
    # every version was replaced a moment ago: a reader may still be loading it
    assert layout.prune(keep=2, grace_s=600) == []
    assert layout.versions() == [1, 2, 3, 4]
    # v2 was published (replacing v1) an hour ago; v3 (replacing v2) just now
    hour_ago = time.time() - 3600
    os.utime(layout.version_dir(2) / "manifest.json", (hour_ago, hour_ago))
    assert layout.prune(keep=2, grace_s=600) == [1]
    assert layout.versions() == [2, 3, 4]


def test_a_fetched_version_appears_whole_or_not_at_all(tmp_path):
    """fetch_version (the store sync's and the remote reader's one way of bringing a
    version home): a fetch that fails leaves neither its scratch folder nor a
    version; the remains of one that died before its manifest are replaced; a
    version already here is not fetched again."""
    from strata.core.storage.layout import fetch_version

    versions = tmp_path / "versions"
    versions.mkdir()

    def broken(folder: Path) -> None:
        (folder / "nodes.parquet").write_bytes(b"half")
        raise OSError("connection reset")

    with pytest.raises(OSError, match="connection reset"):
        fetch_version(versions, "v000001", broken)
    assert list(versions.iterdir()) == []

    (versions / "v000001").mkdir()
    (versions / "v000001" / "stale.parquet").write_bytes(b"from a dead fetch")

    def whole(folder: Path) -> None:
        (folder / "nodes.parquet").write_bytes(b"rows")
        (folder / "manifest.json").write_text("{}")

    assert fetch_version(versions, "v000001", whole) is True
    assert sorted(p.name for p in (versions / "v000001").iterdir()) == ["manifest.json",
                                                                      "nodes.parquet"]
    assert [p.name for p in versions.iterdir()] == ["v000001"]
    assert fetch_version(versions, "v000001", broken) is False  # here already: not fetched


FILLS_THE_DISK = """
import json, os, resource, signal, sys
from pathlib import Path
import pyarrow as pa
from strata.core.storage.layout import write_bytes_atomic, write_parquet_atomic

# the process may write files of at most 1 MiB: a larger write fails part-way with
# EFBIG, as it would with ENOSPC on a full disk (the signal is ignored so that the
# write returns its error rather than ending the process)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
folder, failed = Path(sys.argv[1]), {}
noise = pa.table({"b": pa.array([os.urandom(4096) for _ in range(1024)], pa.binary())})
for name, write in (("blob.json", lambda p: write_bytes_atomic(p, os.urandom(4 << 20))),
                    ("table.parquet", lambda p: write_parquet_atomic(noise, p))):
    try:
        write(folder / name)
    except OSError as e:
        failed[name] = e.errno
print(json.dumps(failed))
"""


def test_a_write_that_fails_part_way_leaves_the_old_file_and_no_part_of_the_new(tmp_path):
    """A write the disk cannot take in full (4 MiB where 1 MiB fits) fails with the
    disk's error, the file it was to replace is as it was, and nothing of the new
    one is left beside it taking the space."""
    import errno
    import subprocess
    import sys

    from strata.core.storage.layout import write_bytes_atomic

    write_bytes_atomic(tmp_path / "blob.json", b"{}\n")
    write_parquet_atomic(pa.table({"b": [b"old"]}), tmp_path / "table.parquet")
    out = subprocess.run([sys.executable, "-c", FILLS_THE_DISK, str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {"blob.json": errno.EFBIG, "table.parquet": errno.EFBIG}, out
    assert (tmp_path / "blob.json").read_bytes() == b"{}\n"
    assert pq.read_table(tmp_path / "table.parquet").column("b").to_pylist() == [b"old"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob.json", "table.parquet"]
