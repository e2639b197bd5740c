"""Compare two published index versions table by table, for the incremental ==
fresh-build property. Differences come back as readable strings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from strata.core.config.schema import LANCE_DIR, LEXICAL_DIR, TABLE_FILES

# Columns that legitimately differ between an incremental and a fresh build:
# timings, run bookkeeping and the stage that produced a row's attempts.
VOLATILE = {"seconds", "created_at", "attempts", "run_id"}
SORT_HINTS = ("node_id", "src", "dst", "type", "path", "group_id", "fact_id", "entity_id")


def _canonical(df: pl.DataFrame) -> pl.DataFrame:
    df = df.drop([c for c in df.columns if c in VOLATILE])
    keys = [c for c in SORT_HINTS if c in df.columns] or df.columns
    # Lists/structs cannot be sort keys; compare them through their string form.
    keys = [c for c in keys if not isinstance(df.schema[c], (pl.List, pl.Struct, pl.Array))]
    return df.sort(keys or df.columns[:1], nulls_last=True)


def float_tolerance(a: Path) -> tuple[float, float]:
    """(float columns, vector elements) tolerances for an index built in ``a``.

    None for the torch runtimes, the defaults: each text is encoded at a padded
    length of its own (strata.core.encoders.embedding), so its vector does not depend on the
    batch it was encoded in, and an incremental build equals a fresh one bit for
    bit — vectors, and the edges and weights computed from them. The ONNX runtimes
    are held to the float noise of their kernels."""
    import json

    runtime = json.loads((a / "manifest.json").read_text()).get("embedding", {}).get("runtime")
    return (0.0, 0.0) if runtime in ("torch", "torch-bf16") else (1e-5, 1e-4)


def _close(x, y, atol: float) -> bool:
    return np.array_equal(x, y, equal_nan=True) if atol == 0 else \
        np.allclose(x, y, atol=atol, equal_nan=True)


def table_differences(a: Path, b: Path, name: str) -> list[str]:
    pa_, pb = a / TABLE_FILES[name], b / TABLE_FILES[name]
    if not pa_.exists() and not pb.exists():
        return []
    if pa_.exists() != pb.exists():
        return [f"{name}: present in only one build"]
    da, db = _canonical(pl.read_parquet(pa_)), _canonical(pl.read_parquet(pb))
    if da.columns != db.columns:
        return [f"{name}: columns {da.columns} != {db.columns}"]
    if da.height != db.height:
        only_a = da.join(db, on=da.columns[:1], how="anti").head(5).to_dicts()
        only_b = db.join(da, on=db.columns[:1], how="anti").head(5).to_dicts()
        return [f"{name}: {da.height} rows vs {db.height}; only incremental: {only_a}; "
                f"only fresh: {only_b}"]
    out = []
    for col in da.columns:
        sa, sb = da[col], db[col]
        if sa.dtype in (pl.Float32, pl.Float64):
            if not _close(sa.fill_null(np.nan).to_numpy(), sb.fill_null(np.nan).to_numpy(),
                          float_tolerance(a)[0]):
                out.append(f"{name}.{col}: floats differ")
        elif not sa.equals(sb, check_names=False):
            bad = (sa.cast(pl.Utf8, strict=False) != sb.cast(pl.Utf8, strict=False)).arg_true()
            i = int(bad[0]) if len(bad) else 0
            out.append(f"{name}.{col}: first difference at row {i}: {sa[i]!r} vs {sb[i]!r}")
    return out


def vector_differences(a: Path, b: Path, atol: float | None = None) -> list[str]:
    import lancedb

    atol = float_tolerance(a)[1] if atol is None else atol
    da, db = lancedb.connect(str(a / LANCE_DIR)), lancedb.connect(str(b / LANCE_DIR))
    names_a = set(da.table_names())
    names_b = set(db.table_names())
    if names_a != names_b:
        return [f"vector tables {sorted(names_a)} != {sorted(names_b)}"]
    out = []
    for t in sorted(names_a):
        ta = pl.from_arrow(da.open_table(t).to_arrow().select(["node_id", "vector"])).sort("node_id")
        tb = pl.from_arrow(db.open_table(t).to_arrow().select(["node_id", "vector"])).sort("node_id")
        if ta["node_id"].to_list() != tb["node_id"].to_list():
            sa, sb = set(ta["node_id"]), set(tb["node_id"])
            out.append(f"{t}: ids differ; only incremental {sorted(sa - sb)[:5]}, "
                       f"only fresh {sorted(sb - sa)[:5]}")
            continue
        va = np.asarray(ta["vector"].to_list(), dtype=np.float32)
        vb = np.asarray(tb["vector"].to_list(), dtype=np.float32)
        if va.shape != vb.shape or not _close(va, vb, atol):
            worst = int(np.abs(va - vb).max(axis=1).argmax()) if va.shape == vb.shape else 0
            out.append(f"{t}: vectors differ (worst row {ta['node_id'][worst]})")
    return out


def lexical_differences(a: Path, b: Path) -> list[str]:
    """The BM25 index, file by file: its bytes follow from the documents and their
    tokens alone (the vocabulary is numbered in order of first use), so tokens
    kept from an earlier build must give the very files a fresh build writes."""
    import filecmp

    files_a = {p.relative_to(a).as_posix() for p in (a / LEXICAL_DIR).rglob("*") if p.is_file()}
    files_b = {p.relative_to(b).as_posix() for p in (b / LEXICAL_DIR).rglob("*") if p.is_file()}
    if files_a != files_b:
        return [f"lexical files differ: only incremental {sorted(files_a - files_b)}, "
                f"only fresh {sorted(files_b - files_a)}"]
    return [f"{name}: bytes differ" for name in sorted(files_a)
            if not filecmp.cmp(a / name, b / name, shallow=False)]


def index_differences(a: Path, b: Path) -> list[str]:
    """Every table except failures (bookkeeping), all vector tables and the
    lexical index."""
    diffs: list[str] = []
    for name in TABLE_FILES:
        if name != "failures":
            diffs += table_differences(a, b, name)
    return diffs + vector_differences(a, b) + lexical_differences(a, b)
