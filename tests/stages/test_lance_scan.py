"""Reading a Lance table a range of rows at a time: every row once, in the table's
order, no batch larger than asked for, only the columns asked for. Real LanceDB
tables of several fragments, one with a deleted row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from strata.core.storage.lance_scan import connect, scan, vector_matrix

DIM = 8


def _rows(start: int, stop: int) -> pa.Table:
    rng = np.random.default_rng(start)
    flat = pa.array(rng.standard_normal((stop - start) * DIM).astype(np.float32))
    return pa.table({"node_id": [f"n{i:03d}" for i in range(start, stop)],
                     "text": [f"text of {i} " * (i % 7 + 1) for i in range(start, stop)],
                     "vector": pa.FixedSizeListArray.from_arrays(flat, DIM)})


def _table(tmp_path, sizes=(11, 7, 9)):
    """A table written by a create and two appends (three fragments) of ``sizes`` rows."""
    db = connect(tmp_path / "lance")
    bounds = np.cumsum((0, *sizes)).tolist()
    table = db.create_table("t", data=_rows(bounds[0], bounds[1]))
    for a, b in zip(bounds[1:-1], bounds[2:]):
        table.add(_rows(a, b))
    return table


def _whole(table, columns):
    return table.search().select(columns).limit(None).to_arrow()


def test_a_scan_reads_every_row_once_in_order_a_range_at_a_time(tmp_path):
    table = _table(tmp_path)
    table.delete("node_id = 'n012'")  # a row gone from the middle fragment
    whole = _whole(table, ["node_id", "vector"])
    assert whole.num_rows == 26
    for batch_rows in (1, 4, 10, 26, 100):
        batches = list(scan(table, ["node_id", "vector"], batch_rows))
        assert all(0 < b.num_rows <= batch_rows for b in batches)
        assert all(b.schema.names == ["node_id", "vector"] for b in batches)
        got = pa.Table.from_batches(batches)
        assert got.column("node_id").to_pylist() == whole.column("node_id").to_pylist()
        assert np.array_equal(vector_matrix(got.column("vector")),
                              vector_matrix(whole.column("vector")))
        assert "n012" not in got.column("node_id").to_pylist()


def test_an_empty_table_gives_no_batch(tmp_path):
    db = connect(tmp_path / "lance")
    table = db.create_table("empty", schema=_rows(0, 1).schema)
    assert list(scan(table, ["node_id"], 4)) == []
