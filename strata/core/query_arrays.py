"""What a query reads, as arrays a querying process memory-maps instead of loading.

A published version keeps its tables as Parquet and its vectors in LanceDB:
the formats a build writes and people inspect. A query needs something else:
the graph as CSR arrays, one row-normalised vector per node aligned with it,
and a handful of node fields, opened in milliseconds with nothing heavy
imported. Reading the Parquet and Lance files at query time cost an import
of lancedb and a copy of every vector in every querying process; the arrays
here are written once, at publish, into ``<version>/query/``:

* ``nodes.arrow``: node id, kind, path, node path, breadcrumb, text, title,
  lines, page, language of every node (hierarchy nodes, then entities), in the
  graph's dense order; Arrow IPC, so it is mapped, not parsed.
* ``graph/*.npy``: :class:`Graph`'s arrays; ``relations.arrow`` each edge's
  relation in CSR order.
* ``vectors.npy`` (float32, unit rows, zeros for nodes without a vector) and
  ``has_vector.npy``; ``fact_vectors.npy`` with ``facts.arrow`` (fact ids).
* ``probe.arrow`` and ``probe_vectors.npy``: a few embedded texts of each
  vector table with their stored vectors, so another runtime's agreement can be checked without LanceDB.
* ``background.npy``: the even sample of unit rows a query's relevance is
  measured against (:func:`background_sample`): a few megabytes read whole,
  where rows spread over the whole of ``vectors.npy`` each fault in the page
  cache's block around them (format 2; a format-1 folder has none, and its
  sample is taken from the vectors, the same rows).
* ``ann.faiss``, only for large indexes: an approximate index over the
  vectors (:mod:`strata.core.ann`).
* ``arrays.json``, written last: the format and the counts. A folder without
  it is incomplete and is not used.

An index published before these arrays existed has no ``query/``: the same
arrays are then computed in memory from the Parquet and Lance files
(:func:`compute`), and ``strata upgrade`` writes them into the version folder
without encoding anything again.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from strata.core.config.schema import (EDGE_TYPES, EMBEDDED_KINDS, FACT, LANCE_DIR, NODE_KINDS, QUERY_DIR,
                           TABLE_FILES, VECTOR_KINDS, vector_table_name)
from strata.core.query_checks import DamagedArrays, check_arrays, check_columns, node_columns
from strata.core.npy_files import npy as _npy

ARRAYS_FORMAT = 2  # bump when a file here changes meaning: a format not read below is recomputed
READ_FORMATS = (1, ARRAYS_FORMAT)  # read as they are: format 1 lacks background.npy
META = "arrays.json"
NODE_FIELDS = ("node_id", "kind", "path", "node_path", "breadcrumb", "text", "title",
               "start_line", "end_line", "page", "language")
GRAPH_ARRAYS = ("kind", "parent", "child_ptr", "child_idx", "indptr", "indices", "etype",
                "weight")
# the columns of the nodes and entities tables the graph is made from
GRAPH_COLUMNS = ["node_id", "kind", "parent_id", "ordinal"]
PROBE_PER_TABLE = 16

EDGE_CODE = {t: i for i, t in enumerate(EDGE_TYPES)}
KIND_CODE = {k: i for i, k in enumerate(NODE_KINDS)}
BACKGROUND_ROWS = 4096  # units sampled (evenly) for a query's background
BACKGROUND_FILE = "background.npy"


def background_sample(vectors: np.ndarray, has_vector: np.ndarray,
                      kind: np.ndarray) -> np.ndarray:
    """The unit vectors a query's relevance background is measured against
    (:mod:`retrieval.relevance`): up to :data:`BACKGROUND_ROWS` rows spread evenly
    over the rows of the embedded kinds (what a search ranks by default) that have
    a vector of their own, in row order; (rows, dim) float32."""
    codes = [KIND_CODE[k] for k in EMBEDDED_KINDS if k in KIND_CODE]
    rows = np.nonzero(np.asarray(has_vector, dtype=bool) & np.isin(kind, codes))[0]
    if len(rows) > BACKGROUND_ROWS:
        rows = rows[np.linspace(0, len(rows) - 1, BACKGROUND_ROWS).astype(np.int64)]
    return np.asarray(vectors[rows], dtype=np.float32).reshape(len(rows), vectors.shape[1])


def row_lookup(ids):
    """A polars table from each node id (``ids``, a polars Series) to its dense
    row, sorted by id; for an id given twice, its last row (as a dict built in
    order would).

    Sorted so that :func:`rows_of` finds a batch's rows by binary search. A join
    would hash the whole table again for every batch it is asked about, and the
    publish asks once per batch of vectors read: a cost that grew with the square
    of the corpus."""
    import polars as pl

    return pl.DataFrame({"node_id": ids.cast(pl.String),
                         "row": pl.int_range(len(ids), dtype=pl.Int64, eager=True)}) \
        .unique("node_id", keep="last").sort("node_id")


def rows_of(lookup, ids) -> np.ndarray:
    """The dense rows of ``ids`` (a polars Series, or anything polars makes one of)
    in their order, -1 for an id that is not a node (or null); ``lookup`` is
    :func:`row_lookup`'s.

    A few ids (a batch of vectors) are found by binary search, whatever the size
    of ``lookup``; many (every edge's ends) by a join, whose hashing of the whole
    lookup is then the cheaper part (at about an eighth of its size the two cost
    the same)."""
    import polars as pl

    ids = ids.cast(pl.String) if isinstance(ids, pl.Series) else pl.Series(ids, dtype=pl.String)
    keys = lookup["node_id"]
    if not len(keys) or not len(ids):
        return np.full(len(ids), -1, dtype=np.int64)
    if len(ids) * JOIN_SHARE >= len(keys):
        return pl.DataFrame({"node_id": ids}).join(lookup, on="node_id", how="left",
                                                   maintain_order="left")["row"] \
            .fill_null(-1).to_numpy()
    at = np.minimum(keys.search_sorted(ids, side="left").to_numpy(), len(keys) - 1)
    found = (keys.gather(at) == ids).fill_null(False).to_numpy()
    return np.where(found, lookup["row"].to_numpy()[at], -1).astype(np.int64, copy=False)


JOIN_SHARE = 8  # rows_of joins when asked about at least 1/JOIN_SHARE of the lookup's ids


class Graph:
    """The index graph as compact arrays: dense integer ids, a CSR adjacency
    (``indptr``, ``indices``, per-edge type code and weight), the hierarchy as a
    parent array plus a children CSR. Query-time walks are array lookups.

    ``ids`` (dense id → node id), ``index`` (node id → dense id) and
    ``relation`` (per edge) are Python objects built on first use from the
    Arrow columns they come from, so opening a large index does not pay for
    them until a query needs them."""

    def __init__(self, ids, kind, parent, child_ptr, child_idx, indptr, indices, etype, weight,
                 relation):
        self._ids, self._relation = ids, relation  # lists, or Arrow arrays turned into lists
        self.kind, self.parent = kind, parent
        self.child_ptr, self.child_idx = child_ptr, child_idx
        self.indptr, self.indices, self.etype, self.weight = indptr, indices, etype, weight

    def __len__(self) -> int:
        return len(self.kind)

    @cached_property
    def ids(self) -> list[str]:
        return self._ids if isinstance(self._ids, list) else self._ids.to_pylist()

    @cached_property
    def index(self) -> dict[str, int]:
        return {nid: i for i, nid in enumerate(self.ids)}

    @cached_property
    def relation(self) -> list[str]:
        r = self._relation
        return r if isinstance(r, list) else r.to_pylist()

    @classmethod
    def build(cls, nodes, edges, lookup=None) -> Graph:
        """From the nodes (hierarchy and entities) and edges tables (polars);
        ``lookup``: their :func:`row_lookup`, when the caller made it already.

        Ids become dense rows through polars joins, not Python dicts and lists:
        at a hundred thousand nodes and a few hundred thousand edges those
        objects weighed more than the arrays they produce."""
        import polars as pl
        import pyarrow as pa

        if lookup is None:
            lookup = row_lookup(nodes["node_id"])
        n = nodes.height
        kind = nodes["kind"].replace_strict(KIND_CODE, default=-1, return_dtype=pl.Int8).to_numpy()
        parent = rows_of(lookup, nodes["parent_id"]).astype(np.int32)
        ordinal = nodes["ordinal"].fill_null(0).to_numpy() if "ordinal" in nodes.columns \
            else np.zeros(n, dtype=np.int32)
        has_parent = np.nonzero(parent >= 0)[0]
        order = has_parent[np.lexsort((ordinal[has_parent], parent[has_parent]))]
        child_ptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(child_ptr, parent[order] + 1, 1)
        child_ptr = np.cumsum(child_ptr)
        child_idx = order.astype(np.int32)

        src, dst = rows_of(lookup, edges["src"]), rows_of(lookup, edges["dst"])
        keep = np.nonzero((src >= 0) & (dst >= 0))[0]  # edges whose two ends are nodes here
        src, dst = src[keep], dst[keep].astype(np.int32)
        et = edges["type"].replace_strict(EDGE_CODE, default=len(EDGE_CODE),
                                          return_dtype=pl.Int8).to_numpy()[keep]
        w = edges["weight"].cast(pl.Float32).to_numpy()[keep]
        srt = np.argsort(src, kind="stable")
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, src + 1, 1)
        indptr = np.cumsum(indptr)
        relation = edges["relation"].to_arrow().take(pa.array(keep[srt]))
        return cls(nodes["node_id"].to_arrow(), kind, parent, child_ptr, child_idx, indptr,
                   dst[srt], et[srt], w[srt], relation)

    def children(self, i: int) -> np.ndarray:
        return self.child_idx[self.child_ptr[i]:self.child_ptr[i + 1]]

    def siblings(self, i: int) -> np.ndarray:
        p = self.parent[i]
        if p < 0:
            return np.zeros(0, dtype=np.int32)
        kids = self.children(p)
        return kids[kids != i]

    def neighbours(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, slice]:
        """(dense ids, type codes, weights, edge slice) of i's out-edges."""
        a, b = self.indptr[i], self.indptr[i + 1]
        return self.indices[a:b], self.etype[a:b], self.weight[a:b], slice(a, b)


@dataclass
class QueryArrays:
    """Everything of one version that a query reads (see the module docstring)."""

    graph: Graph
    nodes: object  # pyarrow.Table of NODE_FIELDS, aligned with the graph
    vectors: np.ndarray  # (nodes, dim) float32 unit rows; zeros where a node has none
    has_vector: np.ndarray  # bool per node
    fact_ids: object  # pyarrow array of fact ids
    fact_vectors: np.ndarray  # (facts, dim) float32 unit rows
    probe_texts: list[str]
    probe_vectors: np.ndarray
    mapped: bool = False  # read from query/ (True) or computed from the tables (False)
    background: np.ndarray | None = None  # background.npy; None: sample the vectors


# --------------------------------------------------------------------------- compute

def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    n = np.linalg.norm(v, axis=1, keepdims=True) if len(v) else np.zeros((0, 1), np.float32)
    return v / np.where(n > 0, n, 1.0)


def graph_nodes(nodes, entities):
    """The graph's nodes (polars): the hierarchy, then the entities OpenIE found
    (``entities`` may be None), in the dense order every array here follows."""
    import polars as pl

    if entities is None or not entities.height:
        return nodes
    return pl.concat([nodes, entities.select(nodes.columns)], how="vertical_relaxed")


class _VectorRows:
    """The (nodes, dim) float32 matrix of unit rows, filled a batch of rows at a
    time: in memory, or, given ``path``, straight into a ``.npy`` file (the header
    np.save writes, the body sparse zeros) with one positioned write per run of
    consecutive rows. A publish writes into the file, so it never holds the matrix
    whose size grows with the corpus."""

    def __init__(self, rows: int, dim: int, path: Path | None):
        self.path, self.shape = path, (rows, dim)
        if path is None:
            self.matrix = np.zeros(self.shape, dtype=np.float32)
            return
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": np.dtype(np.float32).str, "fortran_order": False, "shape": self.shape})
            self.offset = f.tell()
            f.truncate(self.offset + rows * dim * 4)
        self.fd = os.open(path, os.O_WRONLY)

    def put(self, rows: np.ndarray, vecs: np.ndarray) -> None:
        if self.path is None:
            self.matrix[rows] = vecs
            return
        if not len(rows):
            return
        order = np.argsort(rows, kind="stable")  # a row given twice: the later wins
        rows, vecs = rows[order], np.ascontiguousarray(vecs[order], dtype=np.float32)
        width = self.shape[1] * 4
        starts = np.concatenate([[0], np.nonzero(np.diff(rows) != 1)[0] + 1, [len(rows)]])
        for a, b in zip(starts[:-1].tolist(), starts[1:].tolist()):
            data, at = memoryview(vecs[a:b].tobytes()), self.offset + int(rows[a]) * width
            while data:  # a positioned write may write less than it was given
                done = os.pwrite(self.fd, data, at)
                data, at = data[done:], at + done

    def close(self) -> np.ndarray:
        """The matrix: in memory, or the file memory-mapped read-only."""
        if self.path is None:
            return self.matrix
        os.close(self.fd)
        return _npy(self.path)


NODES_FILE = "nodes.arrow"
NODE_SLICE = 16_384  # nodes made Arrow and written at a time


def _large_strings(table):
    """``table`` with its string columns as ``large_string``: a million nodes' text
    can pass the 2 GiB a plain string column holds. No copy where they are already."""
    import pyarrow as pa

    return table.cast(pa.schema([pa.field(f.name, pa.large_string())
                                 if f.type in (pa.string(), pa.string_view()) else f
                                 for f in table.schema]))


def _node_table(folder: Path, path: Path | None):
    """The query columns (:data:`NODE_FIELDS`) of the nodes, then the entities, of
    ``folder`` as one Arrow table, strings as ``large_string``
    (:func:`_large_strings`): in memory, or, given ``path``, written there as
    Arrow IPC a batch of ``NODE_SLICE`` rows at a time as the Parquet files are
    read, and mapped back. A publish writes into the file, so it never holds
    every node's text."""
    import polars as pl
    import pyarrow.parquet as pq

    files = [folder / TABLE_FILES["nodes"]]
    if (folder / TABLE_FILES["entities"]).exists():
        files.append(folder / TABLE_FILES["entities"])

    schema = _large_strings(pl.read_parquet(files[0], columns=list(NODE_FIELDS), n_rows=0)
                            .to_arrow()).schema

    def parts():
        for f in files:
            for batch in pq.ParquetFile(f).iter_batches(NODE_SLICE, columns=list(NODE_FIELDS)):
                # through polars, as the graph's frame is read: the same types
                yield pl.from_arrow(batch).to_arrow().cast(schema)

    if path is None:
        import pyarrow as pa

        return pa.Table.from_batches([b for part in parts() for b in part.to_batches()], schema)
    _write_arrow_parts(path, schema, parts())
    return _read_arrow(path)


def _previous_arrays(previous: Path | None, dim: int) -> QueryArrays | None:
    """The arrays of the version in ``previous`` when they read and have ``dim``."""
    if previous is None:
        return None
    try:
        arrays = open_arrays(previous)
    except (DamagedArrays, OSError, ValueError):
        return None
    if arrays is None or arrays.vectors.shape[1:] != (dim,) \
            or arrays.fact_vectors.shape[1:] != (dim,):
        return None
    return arrays


def compute(folder: Path, dim: int, vectors_file: Path | None = None,
            previous: Path | None = None) -> QueryArrays:
    """The arrays of the version (or build) in ``folder``, from its Parquet
    tables and Lance vector tables. With ``vectors_file`` the node vectors go
    straight into that ``.npy`` file and come back mapped from it, and the
    nodes' text into ``nodes.arrow`` beside it (:func:`_node_table`).

    ``previous``: the folder of the version published before, whose arrays
    hold the unit vectors of every table ``folder`` kept as it was (the same
    files: :func:`strata.core.storage.layout.linked_folders`); those are copied from its arrays by node id
    instead of read from the table and made unit again. A small edit then
    reads the vectors of the kinds it touched, not every entity's and fact's.

    Each table is read when it is needed and let go once used: the graph is
    made from the nodes' ids and hierarchy and the edges, then the node table
    from their query columns, then the vectors are read. Raises what the
    readers raise; callers that answer users turn that into one line naming the
    file."""
    import polars as pl
    import pyarrow as pa

    from strata.core.storage.lance_scan import connect, scan, table_names, vector_matrix
    from strata.core.storage.layout import linked_folders

    ent_path = folder / TABLE_FILES["entities"]
    nodes = graph_nodes(pl.read_parquet(folder / TABLE_FILES["nodes"], columns=GRAPH_COLUMNS),
                        pl.read_parquet(ent_path, columns=GRAPH_COLUMNS)
                        if ent_path.exists() else None)
    lookup = row_lookup(nodes["node_id"])  # the graph's rows, and where each vector goes
    graph = Graph.build(nodes, pl.read_parquet(folder / TABLE_FILES["edges"]), lookup)
    del nodes
    table = _node_table(folder, vectors_file.with_name(NODES_FILE) if vectors_file else None)

    # The vector tables are read a batch at a time, ids and vectors only (texts only
    # for the probe rows), and each batch's rows are made unit and put in place: what
    # this holds beyond the arrays it returns is one batch.
    rows_out = _VectorRows(len(graph), dim, vectors_file)
    has = np.zeros(len(graph), dtype=bool)
    fact_ids: list = []
    fact_blocks: list[np.ndarray] = []
    probe_texts: list[str] = []
    probe_vecs: list[np.ndarray] = []
    lance_dir = folder / LANCE_DIR
    db = connect(lance_dir) if lance_dir.exists() else None
    names = set(table_names(db)) if db is not None else set()
    before = _previous_arrays(previous, dim)
    try:
        for kind in VECTOR_KINDS:
            name = vector_table_name(kind)
            if name not in names:
                continue
            t = db.open_table(name)
            if kind in EMBEDDED_KINDS:
                head = t.search().select(["text", "vector"]).limit(PROBE_PER_TABLE).to_arrow()
                probe_texts += head.column("text").to_pylist()
                probe_vecs.append(vector_matrix(head.column("vector")).reshape(head.num_rows, dim))
            if before is not None and linked_folders(lance_dir / f"{name}.lance",
                                                     previous / LANCE_DIR / f"{name}.lance"):
                if kind == FACT:  # the same table: its rows in the same order
                    fact_ids.append(before.fact_ids.combine_chunks().cast(pa.string()))
                    fact_blocks.append(np.asarray(before.fact_vectors, dtype=np.float32))
                    continue
                old = np.nonzero((np.asarray(before.graph.kind) == KIND_CODE[kind])
                                 & np.asarray(before.has_vector))[0]
                rows = rows_of(lookup, before.nodes.column("node_id").take(old))
                found = rows >= 0
                rows_out.put(rows[found], np.asarray(before.vectors[old[found]]))
                has[rows[found]] = True  # a row without a vector is zeros either way
                continue
            for batch in scan(t, ["node_id", "vector"]):
                if not batch.num_rows:
                    continue
                ids = batch.column("node_id")
                vecs = _unit(vector_matrix(batch.column("vector")))
                if kind == FACT:
                    fact_ids.append(ids.cast(pa.string()))
                    fact_blocks.append(vecs)
                    continue
                rows = rows_of(lookup, ids)
                found = rows >= 0
                rows_out.put(rows[found], vecs[found])
                has[rows[found]] = np.linalg.norm(vecs[found], axis=1) > 0
    finally:
        vectors = rows_out.close()
    fact_vecs = np.concatenate(fact_blocks) if fact_blocks else np.zeros((0, dim), np.float32)
    probe = np.concatenate(probe_vecs) if probe_vecs else np.zeros((0, dim), np.float32)
    return QueryArrays(graph=graph, nodes=table, vectors=vectors, has_vector=has,
                       fact_ids=pa.concat_arrays(fact_ids) if fact_ids else pa.array([], pa.string()),
                       fact_vectors=fact_vecs, probe_texts=probe_texts, probe_vectors=probe)


# --------------------------------------------------------------------------- save, open

def _write_arrow(table, path: Path) -> None:
    _write_arrow_parts(path, table.schema, [table])


def _write_arrow_parts(path: Path, schema, tables) -> None:
    """``tables`` (each of ``schema``) as one Arrow IPC file at ``path``, each written
    as it comes: a caller that makes them one at a time holds one at a time."""
    import pyarrow as pa

    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as w:
        for table in tables:
            w.write_table(table)


def _read_arrow(path: Path):
    import pyarrow as pa

    with pa.memory_map(str(path), "r") as source:
        return pa.ipc.open_file(source).read_all()  # zero-copy: the table maps the file


def _staging(folder: Path) -> Path:
    """An empty temporary folder beside ``folder/query`` to write the arrays into."""
    tmp = folder / f".{QUERY_DIR}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "graph").mkdir(parents=True)
    return tmp


def save(arrays: QueryArrays, folder: Path, ann_min_vectors: int | None = None,
         staged: Path | None = None) -> Path:
    """Write ``arrays`` into ``folder/query`` (a temporary folder renamed into
    place, so a reader never sees half of it), with an approximate index
    (:mod:`strata.core.ann`) when they hold at least ``ann_min_vectors`` vectors
    (default ``STRATA_ANN_MIN_VECTORS``). ``staged``: the temporary folder when
    :func:`compute` already wrote the vectors into it. Returns the folder."""
    import pyarrow as pa

    target = folder / QUERY_DIR
    tmp = staged if staged is not None else _staging(folder)
    g = arrays.graph
    if not (tmp / NODES_FILE).exists():  # compute wrote them there already
        _write_arrow(_large_strings(arrays.nodes), tmp / NODES_FILE)
    for name in GRAPH_ARRAYS:
        np.save(tmp / "graph" / f"{name}.npy", np.ascontiguousarray(getattr(g, name)))
    relation = g._relation
    relation = pa.array(relation, pa.large_string()) if isinstance(relation, list) \
        else relation.cast(pa.large_string())
    _write_arrow(pa.table({"relation": relation}), tmp / "relations.arrow")
    if not (tmp / "vectors.npy").exists():  # compute wrote them there already
        np.save(tmp / "vectors.npy", np.ascontiguousarray(arrays.vectors, dtype=np.float32))
    np.save(tmp / "has_vector.npy", np.asarray(arrays.has_vector, dtype=bool))
    np.save(tmp / "fact_vectors.npy", np.ascontiguousarray(arrays.fact_vectors, np.float32))
    _write_arrow(pa.table({"node_id": arrays.fact_ids.cast(pa.large_string())}),
                 tmp / "facts.arrow")
    dim = arrays.vectors.shape[1]
    _write_arrow(pa.table({"text": pa.array(arrays.probe_texts, pa.large_string())}),
                 tmp / "probe.arrow")
    np.save(tmp / "probe_vectors.npy", np.asarray(arrays.probe_vectors, np.float32))
    np.save(tmp / BACKGROUND_FILE, background_sample(arrays.vectors, arrays.has_vector, g.kind))
    rows = np.nonzero(np.asarray(arrays.has_vector))[0]
    if ann_min_vectors is None:
        from strata.core.config.settings import QuerySettings, load

        ann_min_vectors = load(QuerySettings).ann_min_vectors  # $STRATA_ANN_MIN_VECTORS
    ann = bool(ann_min_vectors) and len(rows) >= ann_min_vectors
    if ann:
        from strata.core.ann import ANN_FILE, build

        build(arrays.vectors, rows, tmp / ANN_FILE)
    meta = {"format": ARRAYS_FORMAT, "nodes": len(g), "edges": int(len(g.indices)),
            "dim": int(dim), "facts": int(len(arrays.fact_vectors)), "ann": ann}
    (tmp / META).write_text(json.dumps(meta, indent=2) + "\n")
    if target.exists():
        old = folder / f".{QUERY_DIR}.{os.getpid()}.old"
        target.rename(old)
        tmp.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(target)
    return target


def write(folder: Path, dim: int, previous: Path | None = None) -> Path:
    """Compute the arrays of ``folder`` (a build or a version) and save them there
    (``previous``: see :func:`compute`)."""
    staged = _staging(folder)
    try:
        arrays = compute(folder, dim, vectors_file=staged / "vectors.npy", previous=previous)
        return save(arrays, folder, staged=staged)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise


def arrays_format(folder: Path) -> int | None:
    """The format of the complete arrays ``folder`` holds, else None."""
    try:
        return json.loads((folder / QUERY_DIR / META).read_text()).get("format")
    except (OSError, ValueError, AttributeError):
        return None


def present(folder: Path) -> bool:
    """Whether ``folder`` holds complete arrays of a format this Strata reads."""
    return arrays_format(folder) in READ_FORMATS


def _arrow(path: Path):
    try:
        return _read_arrow(path)
    except Exception as e:  # noqa: BLE001
        raise DamagedArrays(path, e) from None


def open_arrays(folder: Path, dim: int | None = None) -> QueryArrays | None:
    """The arrays of the version in ``folder``, memory-mapped; None when the
    version has none (published before they existed, or another format). A file
    that does not read, or not as the format defines (columns, dtypes, shapes,
    vectors of ``dim`` columns, CSR bounds: :mod:`strata.core.query_checks`),
    raises :class:`DamagedArrays` naming it."""
    import pyarrow as pa

    fmt = arrays_format(folder)
    if fmt not in READ_FORMATS:
        return None
    q, text = folder / QUERY_DIR, pa.large_string()
    nodes, relations, facts, probe = (
        check_columns(q / name, _arrow(q / name), columns) for name, columns in (
            (NODES_FILE, node_columns(NODE_FIELDS)), ("relations.arrow", {"relation": text}),
            ("facts.arrow", {"node_id": text}), ("probe.arrow", {"text": text})))
    graph = Graph(nodes.column("node_id"), *[_npy(q / "graph" / f"{n}.npy")
                                              for n in GRAPH_ARRAYS],
                  relation=relations.column("relation"))
    arrays = QueryArrays(graph=graph, nodes=nodes, vectors=_npy(q / "vectors.npy"),
                         has_vector=_npy(q / "has_vector.npy"),
                         fact_ids=facts.column("node_id"),
                         fact_vectors=_npy(q / "fact_vectors.npy"),
                         probe_texts=probe.column("text").to_pylist(),
                         probe_vectors=_npy(q / "probe_vectors.npy", mmap=False), mapped=True,
                         background=_npy(q / BACKGROUND_FILE) if fmt >= 2 else None)
    check_arrays(q, arrays, dim)
    return arrays
