"""Damage that still reads: a query file of another schema, dtype, dimension or
with graph offsets out of bounds opens as the format defines or is named in one
line, by the command line, by `strata serve` at start and by its hot reload
alike; a version pruned under an open reader says so rather than "damaged";
`strata upgrade` on a folder that is no index says so in one line.

Each test damages a copy of the real sample index the way a disk, a stray
script or an older writer could, then runs the real command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from strata.core.storage.layout import IndexDamaged, IndexLayout
from strata.retrieval import Index
from tests.serving.helpers import free_port

REPO = Path(__file__).resolve().parents[2]


def strata(*args: str | bytes, timeout: float = 300) -> subprocess.CompletedProcess:
    """The real `strata` command, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "strata.pipelines.cli", *args], cwd=REPO,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True,
                          timeout=timeout)


def one_line(proc: subprocess.CompletedProcess) -> str:
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err[-3000:]
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


def _copy(sample_index: Path, dst: Path) -> tuple[Path, Path]:
    shutil.copytree(sample_index, dst, symlinks=True)
    return dst, IndexLayout(dst).resolve() / "query"


def _replace_arrow(path: Path, change) -> None:
    """``path`` (an Arrow IPC file) rewritten as ``change(table)``: a new file, so a
    hard link of the old one elsewhere keeps the old bytes."""
    with pa.OSFile(str(path)) as f:
        table = pa.ipc.open_file(f).read_all()
    path.unlink()
    table = change(table)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)


def _replace_npy(path: Path, change) -> None:
    array = np.load(path)
    path.unlink()
    np.save(path, change(array))


def _kind_as_numbers(q: Path) -> None:
    def change(t):
        at = t.schema.get_field_index("kind")
        return t.set_column(at, "kind", pa.array(np.arange(t.num_rows), pa.int64()))
    _replace_arrow(q / "nodes.arrow", change)


def _big_target(a):
    a = a.copy()
    a[len(a) // 2] = 10 ** 9
    return a


DAMAGE = {
    # what is damaged → (how, the file named, what the line says is wrong)
    "schema": (_kind_as_numbers, "query/nodes.arrow", "column 'kind' is int64, not text"),
    "dimension": (lambda q: _replace_npy(q / "vectors.npy", lambda a: a[:, :100].copy()),
                  "query/vectors.npy", "dimension 100"),
    "dtype": (lambda q: _replace_npy(q / "vectors.npy", lambda a: a.astype(np.complex64)),
              "query/vectors.npy", "dtype complex64, not float32"),
    "targets": (lambda q: _replace_npy(q / "graph" / "indices.npy", _big_target),
                "query/graph/indices.npy", "holds 1000000000, outside 0.."),
    "offsets": (lambda q: _replace_npy(q / "graph" / "indptr.npy", lambda a: a[::-1].copy()),
                "query/graph/indptr.npy", "not 0"),
}


@pytest.mark.parametrize("what", sorted(DAMAGE))
def test_damage_that_still_reads_is_named_in_one_line(sample_index, tmp_path, what):
    damage, file, problem = DAMAGE[what]
    copy, q = _copy(sample_index, tmp_path / "index")
    damage(q)

    proc = strata("search", "--index", str(copy), "barometric drift")
    line = one_line(proc)
    assert proc.returncode == 1, line  # as every damaged index: not "bad usage"
    assert f"versions/v000001/{file} of version 1" in line and problem in line, line
    assert "rebuild it with: strata index" in line

    with pytest.raises(IndexDamaged, match=problem):  # the library says the same
        Index.open(copy).search("barometric drift", mode="flat")


def test_reversed_offsets_that_start_at_zero_are_named(sample_index, tmp_path):
    """Offsets that begin at 0 and end at the edge count but run backwards
    somewhere in between are caught by the order check, not only the ends."""
    copy, q = _copy(sample_index, tmp_path / "index")

    def swap(a):
        a = a.copy()
        inner = np.flatnonzero(np.diff(a) > 0)[0] + 1  # an offset above its predecessor
        a[inner] = a[inner - 1] - 1 if a[inner - 1] > 0 else a[inner] + 10 ** 6
        return a
    _replace_npy(q / "graph" / "indptr.npy", swap)
    with pytest.raises(IndexDamaged, match=r"indptr\.npy of version 1 .*(decreases|ends at)"):
        Index.open(copy).verify()


def test_serve_refuses_at_start_the_version_its_reload_refuses(sample_index, tmp_path):
    from strata.service.registry import Registry

    # at start: the real command exits at once with the one line
    copy, q = _copy(sample_index, tmp_path / "damaged")
    _kind_as_numbers(q)
    proc = strata("serve", "--index", str(copy), "--port", str(free_port()), "-q", timeout=120)
    line = one_line(proc)
    assert proc.returncode == 1, line
    assert "query/nodes.arrow of version 1" in line and "column 'kind' is int64" in line

    # on a reload: the same version published after a good one is refused the same way
    live, _ = _copy(sample_index, tmp_path / "live")
    registry = Registry([str(live)], reload_interval_s=0.0, warm_up=False, background=False)
    slot = next(iter(registry.slots.values()))
    layout = IndexLayout(live)
    manifest = json.loads((layout.version_dir(1) / "manifest.json").read_text())
    v2 = layout.publish(manifest, keep=5)
    _kind_as_numbers(layout.version_dir(v2) / "query")
    slot.check(wait=True)
    assert slot.current.index.version == 1  # still serving the good version
    assert f"query/nodes.arrow of version {v2}" in slot.reload_error
    assert "column 'kind' is int64, not text" in slot.reload_error


def test_an_open_index_whose_version_was_pruned_says_so(sample_index, tmp_path):
    copy, _ = _copy(sample_index, tmp_path / "index")
    idx = Index.open(copy)  # opened, nothing read yet
    layout = IndexLayout(copy)
    manifest = json.loads((layout.version_dir(1) / "manifest.json").read_text())
    layout.publish(manifest, keep=1)  # a newer publish that keeps one version: v1 goes
    assert not layout.version_dir(1).exists()
    for read in (idx.stats, lambda: idx.search("barometric drift")):
        with pytest.raises(IndexDamaged) as caught:
            read()
        message = str(caught.value)
        assert "version 1 is no longer on disk" in message and "pruned" in message
        assert "rebuild" not in message and "Index.open(" in message
    assert Index.open(copy).search("barometric drift")  # opening again reads the new one


def test_upgrade_of_a_folder_that_is_no_index_is_one_line(tmp_path):
    not_index = tmp_path / "etc"
    not_index.mkdir()
    (not_index / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    half = tmp_path / "half"  # CURRENT, but no versions/
    half.mkdir()
    (half / "CURRENT").write_text("v000001\n")
    for folder, said in ((not_index, "no published index"), (half, "not found"),
                         (tmp_path / "missing", "is not a folder"),
                         (not_index / "passwd", "is not a folder")):
        proc = strata("upgrade", "--index", str(folder), timeout=120)
        line = one_line(proc)
        assert proc.returncode == 2 and line.startswith("error: ") and said in line, line
