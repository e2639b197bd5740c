"""What the build's vector tables hold, known without opening them.

The embeddings step writes one Lance table per kind, then two small files beside
the Lance folder:

* ``lance.rows.parquet``, the contents: each row's node id, kind and text hash,
  in table order, with the vectors' dimension, the fingerprint below and each
  kind's table's own fingerprint (so that a build rewrites only the tables whose
  rows changed);
* ``lance.fingerprint``, a digest of every row but its vector (the text hash,
  which names the model and the text, stands for it) and of the dimension,
  written last, once the tables and their contents are whole.

Both are removed before the tables are replaced. A rebuild reads them instead of
the tables: which texts already have a vector (the embedding shards), whether the
tables already hold the rows it would write (the embeddings step), and which
entity vectors the synonymy edges were computed from (the graph step). Why:
opening a Lance table costs the lancedb import and a scan, most of what an
unchanged rebuild spent in those steps, to learn what these files say. They are
trusted only together: the contents must carry the fingerprint the stamp holds
and the digest of their own rows, every table they name must be there, and no
data file may lack its Lance footer;
otherwise :func:`read_contents` gives None and the caller reads the tables.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from strata.core.storage.layout import damaged_lance_file, read_parquet_file, write_parquet_atomic
from strata.core.config.schema import vector_table_name

FINGERPRINT_SUFFIX = ".fingerprint"
CONTENTS_SUFFIX = ".rows.parquet"
CONTENTS_COLUMNS = ["node_id", "kind", "text_hash"]


@dataclass(frozen=True)
class VectorContents:
    """The rows of the vector tables (``CONTENTS_COLUMNS``, in table order), the
    vectors' dimension and the fingerprint of the tables."""

    rows: pa.Table
    dim: int
    fingerprint: str
    kinds: dict[str, str] = field(default_factory=dict)  # kind → its table's fingerprint

    def hashes(self) -> set[str]:
        return set(self.rows.column("text_hash").to_pylist())

    def of_kind(self, kind: str) -> pa.Table:
        """The rows of one kind's table, in its order (filtered in polars: a Python
        value compared in pyarrow would import pandas, see python_table)."""
        return pl.from_arrow(self.rows).filter(pl.col("kind") == kind).to_arrow()

    def vectors_key(self, kind: str) -> str:
        """A digest that stands for one kind's vectors, in table order: their text
        hashes (which name the model and the text) and the dimension, so a cache
        of what was computed from those vectors is found without reading them."""
        digest = hashlib.sha256(f"{self.dim}:".encode())
        digest.update("\x00".join(self.of_kind(kind).column("text_hash").to_pylist()).encode())
        return digest.hexdigest()


def fingerprint(rows: pa.Table, dim: int) -> str:
    """A digest of ``rows`` (the vector tables' rows without their vectors) and of
    the dimension: the Arrow IPC stream of ``rows``, hashed as it is written rather
    than held as one more copy of every text."""
    digest = _Digest(hashlib.sha256(f"{dim}:".encode()))
    with pa.ipc.new_stream(pa.PythonFile(digest, mode="w"), rows.schema) as writer:
        writer.write_table(rows)
    return digest.hash.hexdigest()


FINGERPRINT_BLOCK = 4096  # rows of one kind copied at a time to be hashed


def rows_by_kind(kinds: list[str]) -> dict[str, np.ndarray]:
    """Each kind's table as positions into the rows whose kinds are ``kinds``: the
    kinds in sorted order, each one's rows in their order (the tables' order), as
    int64 arrays (a build holds them while it writes the tables)."""
    if not kinds:
        return {}
    names, inverse = np.unique(np.asarray(kinds), return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse, minlength=len(names)))[:-1]
    return {str(name): part.astype(np.int64, copy=False)
            for name, part in zip(names, np.split(order, bounds))}


def kind_fingerprints(rows: pa.Table, tables: dict[str, np.ndarray], dim: int) -> dict[str, str]:
    """A digest of each kind's table: its rows (``tables``: :func:`rows_by_kind`
    of ``rows``) and the dimension. The rows are gathered ``FINGERPRINT_BLOCK``
    at a time, so hashing a kind does not copy its texts whole."""
    out = {}
    for kind, at in tables.items():
        digest = _Digest(hashlib.sha256(f"{dim}:".encode()))
        with pa.ipc.new_stream(pa.PythonFile(digest, mode="w"), rows.schema) as writer:
            for start in range(0, len(at), FINGERPRINT_BLOCK):
                writer.write_table(rows.take(pa.array(at[start:start + FINGERPRINT_BLOCK],
                                                      pa.int64())))
        out[kind] = digest.hash.hexdigest()
    return out


def stamp_path(lance_dir: Path) -> Path:
    return lance_dir.with_name(lance_dir.name + FINGERPRINT_SUFFIX)


def contents_path(lance_dir: Path) -> Path:
    return lance_dir.with_name(lance_dir.name + CONTENTS_SUFFIX)


def read_stamp(lance_dir: Path) -> str | None:
    try:
        return stamp_path(lance_dir).read_text().strip() or None
    except OSError:
        return None


def stamp(lance_dir: Path, rows: pa.Table, dim: int, digest: str,
          kinds: dict[str, str] | None = None) -> None:
    """Record that the tables in ``lance_dir`` hold ``rows`` of ``dim``-long vectors
    (``digest``: their :func:`fingerprint`; ``kinds``: :func:`kind_fingerprints`,
    made here when not given): the contents first, the stamp last."""
    if kinds is None:
        kinds = kind_fingerprints(rows, rows_by_kind(rows.column("kind").to_pylist()), dim)
    contents = rows.select(CONTENTS_COLUMNS)
    contents = contents.replace_schema_metadata(
        {"dim": str(dim), "fingerprint": digest, "rows": fingerprint(contents, dim),
         "kinds": json.dumps(kinds, sort_keys=True)})
    write_parquet_atomic(contents, contents_path(lance_dir))
    stamp_path(lance_dir).write_text(digest + "\n")


def unstamp(lance_dir: Path) -> None:
    """Claim nothing about the tables (they are being replaced, or did not read)."""
    stamp_path(lance_dir).unlink(missing_ok=True)
    contents_path(lance_dir).unlink(missing_ok=True)


def read_contents(lance_dir: Path) -> VectorContents | None:
    """What the tables in ``lance_dir`` hold, read from the files beside them; None
    when those are missing, disagree, or a table they name is missing or damaged."""
    digest = read_stamp(lance_dir)
    if digest is None or not lance_dir.is_dir():
        return None
    try:
        table = read_parquet_file(contents_path(lance_dir))
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        dim = int(meta["dim"])
        kinds = json.loads(meta.get("kinds", "{}"))  # absent from files written before it
        if not isinstance(kinds, dict):
            kinds = {}
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return None
    if meta.get("fingerprint") != digest or table.column_names != CONTENTS_COLUMNS:
        return None
    table = table.replace_schema_metadata(None)
    if meta.get("rows") != fingerprint(table, dim):  # the file itself changed since
        return None
    for kind in set(table.column("kind").to_pylist()):
        folder = lance_dir / f"{vector_table_name(kind)}.lance"
        if not folder.is_dir() or damaged_lance_file(folder) is not None:
            return None
    return VectorContents(table, dim, digest, {str(k): str(v) for k, v in kinds.items()})


class _Digest:
    """A write-only file that hashes what is written to it."""

    def __init__(self, digest):
        self.hash = digest
        self.closed = False

    def write(self, data) -> int:
        self.hash.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
