"""What opening a version's query arrays checks before a query reads them.

A file of ``query/`` can be damaged so that it still reads: an Arrow table of
another schema, vectors of another dimension or dtype, a CSR whose offsets run
backwards or whose targets lie past the last node. Read as they are, these fail
deep inside a query (a ``KeyError``, numpy's shape message, a wrong answer) and
never name the file. Each check here raises :class:`DamagedArrays` with the
file and what is wrong in one line, so a reader, the service at start and its
hot reload refuse the same versions the same way. (The error is defined here,
below :mod:`strata.core.query_arrays` which maps the files and raises it too.)

The checks are cheap next to what a query costs: column names and types, array
shapes and dtypes, and one pass over each offset and target array (a minimum, a
maximum and a comparison of neighbours), which numpy does at memory speed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from strata.core.config.schema import NODES

#: the dtype of every vector file, as :func:`strata.core.query_arrays.save` writes it
VECTOR_DTYPE = np.dtype(np.float32)


class DamagedArrays(RuntimeError):
    """A file of ``query/`` that does not read (truncated, overwritten) or reads as
    something else than the format defines: ``path`` names it, ``cause`` says why."""

    def __init__(self, path: Path, cause: BaseException):
        super().__init__(f"{path}: {cause}")
        self.path, self.cause = path, cause


def _fail(path: Path, problem: str) -> DamagedArrays:
    return DamagedArrays(path, ValueError(problem))


def _family(t) -> str:
    """The kind of an Arrow type as a query reads it: text, integer, floating, boolean,
    or the type itself (string, large_string and string_view all read as text)."""
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "text"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t):
        return "floating"
    if pa.types.is_boolean(t):
        return "boolean"
    return str(t)


def check_columns(path: Path, table, expected: dict[str, object]):
    """``table`` (read from ``path``) when it has each column of ``expected``
    (name → Arrow type) of the same kind (:func:`_family`); else the first
    missing or retyped column, named."""
    names = table.schema.names
    for name, want in expected.items():
        if name not in names:
            raise _fail(path, f"no column {name!r} (it has {', '.join(names[:8]) or 'none'})")
        got = table.schema.field(name).type
        if _family(got) != _family(want):
            raise _fail(path, f"column {name!r} is {got}, not {_family(want)}")
    return table


def node_columns(fields: tuple[str, ...]) -> dict[str, object]:
    """The columns ``fields`` of ``nodes.arrow`` and their types, from the nodes schema."""
    return {name: NODES.field(name).type for name in fields}


def _array(path: Path, a: np.ndarray, what: str, rows: int | None, ndim: int = 1) -> None:
    """``a`` is a numpy array of ``ndim`` dimensions, of ``rows`` rows when given,
    whose dtype is of ``what`` ("integer", "bool" or "float32")."""
    if a.ndim != ndim:
        raise _fail(path, f"{a.ndim}-dimensional array, not {ndim}-dimensional")
    if what == "integer" and not np.issubdtype(a.dtype, np.integer):
        raise _fail(path, f"dtype {a.dtype}, not an integer type")
    if what == "bool" and a.dtype != np.bool_:
        raise _fail(path, f"dtype {a.dtype}, not bool")
    if what == "float32" and a.dtype != VECTOR_DTYPE:
        raise _fail(path, f"dtype {a.dtype}, not {VECTOR_DTYPE}")
    if what == "floating" and not np.issubdtype(a.dtype, np.floating):
        raise _fail(path, f"dtype {a.dtype}, not a floating type")
    if rows is not None and len(a) != rows:
        raise _fail(path, f"{len(a)} rows, not {rows}")


def _within(path: Path, a: np.ndarray, lo: int, hi: int) -> None:
    """Every value of ``a`` lies in ``lo..hi-1`` (rows of the graph)."""
    if len(a):
        low, high = int(a.min()), int(a.max())
        if low < lo or high >= hi:
            bad = low if low < lo else high
            raise _fail(path, f"holds {bad}, outside {lo}..{hi - 1}")


def check_csr(ptr_path: Path, ptr: np.ndarray, idx_path: Path, idx: np.ndarray, n: int) -> None:
    """A CSR of ``n`` rows: ``n + 1`` offsets from 0, never decreasing, ending at
    the number of targets; every target a row of the graph."""
    _array(ptr_path, ptr, "integer", n + 1)
    _array(idx_path, idx, "integer", None)
    if int(ptr[0]) != 0:
        raise _fail(ptr_path, f"starts at {int(ptr[0])}, not 0")
    down = np.flatnonzero(ptr[1:] < ptr[:-1])
    if len(down):
        raise _fail(ptr_path, f"decreases after offset {int(down[0])} "
                              f"({int(ptr[down[0]])} then {int(ptr[down[0] + 1])})")
    if int(ptr[-1]) != len(idx):
        raise _fail(ptr_path, f"ends at {int(ptr[-1])}, but {idx_path.name} holds {len(idx)}")
    _within(idx_path, idx, 0, n)


def check_arrays(q: Path, arrays, dim: int | None) -> None:
    """Every array of ``arrays`` (a :class:`strata.core.query_arrays.QueryArrays`
    mapped from the ``query/`` folder ``q``) has the shape, dtype and bounds the
    format defines; vectors have ``dim`` columns when given (the manifest's
    dimension). Raises :class:`DamagedArrays` naming the first file that does not."""
    g = arrays.graph
    n = arrays.nodes.num_rows
    graph = q / "graph"
    _array(graph / "kind.npy", g.kind, "integer", n)
    _array(graph / "parent.npy", g.parent, "integer", n)
    _within(graph / "parent.npy", g.parent, -1, n)
    check_csr(graph / "child_ptr.npy", g.child_ptr, graph / "child_idx.npy", g.child_idx, n)
    check_csr(graph / "indptr.npy", g.indptr, graph / "indices.npy", g.indices, n)
    edges = len(g.indices)
    _array(graph / "etype.npy", g.etype, "integer", edges)
    _array(graph / "weight.npy", g.weight, "floating", edges)
    if len(g._relation) != edges:
        raise _fail(q / "relations.arrow", f"{len(g._relation)} rows for {edges} edges")
    _array(q / "has_vector.npy", arrays.has_vector, "bool", n)
    for name, matrix, rows in (("vectors.npy", arrays.vectors, n),
                               ("fact_vectors.npy", arrays.fact_vectors, len(arrays.fact_ids)),
                               ("probe_vectors.npy", arrays.probe_vectors,
                                len(arrays.probe_texts)),
                               *([("background.npy", arrays.background, None)]
                                 if arrays.background is not None else [])):
        _array(q / name, matrix, "float32", rows, ndim=2)
        if dim is not None and matrix.shape[1] != dim:
            raise _fail(q / name, f"vectors of dimension {matrix.shape[1]}; the manifest "
                                  f"says {dim}")

