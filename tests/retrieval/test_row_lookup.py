"""Where each node id's row is in the query arrays: the same answer whether the
ids asked about are a batch of vectors (binary search) or every edge's ends (a
join), for the ids of a real build and for ids that are not nodes."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from strata.core.storage.layout import IndexLayout
from strata.core.query_arrays import JOIN_SHARE, row_lookup, rows_of
from strata.core.config.schema import TABLE_FILES


def _reference(ids: list, asked: list) -> np.ndarray:
    """What a dict built in row order says (a repeated id: its last row)."""
    where = {nid: i for i, nid in enumerate(ids) if nid is not None}
    return np.array([where.get(a, -1) if a is not None else -1 for a in asked], dtype=np.int64)


@pytest.fixture(scope="module")
def node_ids(sample_index) -> list:
    ids = pl.read_parquet(IndexLayout(sample_index).resolve() / TABLE_FILES["nodes"],
                          columns=["node_id"])["node_id"].to_list()
    # a repeated id (its last row counts) and a null, as a table may hold
    return ids + [ids[3], None]


def test_a_batch_and_a_join_find_the_same_rows(node_ids):
    lookup = row_lookup(pl.Series(node_ids, dtype=pl.String))
    present = [i for i in node_ids if i is not None]
    absent = ["", "sample:nowhere", present[0] + "x", present[-1][:-1], None]
    batch = present[::max(1, len(present) // 25)][:25] + absent + [node_ids[3]]
    assert len(batch) * JOIN_SHARE < len(lookup)  # the binary search's side
    everything = node_ids + absent  # the join's side
    assert len(everything) * JOIN_SHARE >= len(lookup)
    for asked in (batch, everything, list(reversed(batch))):
        got = rows_of(lookup, pl.Series(asked, dtype=pl.String))
        assert got.dtype == np.int64
        assert np.array_equal(got, _reference(node_ids, asked))
    # the repeated id answers with its last row on both sides
    assert rows_of(lookup, [node_ids[3]])[0] == len(node_ids) - 2


def test_an_empty_lookup_or_question_answers_with_nothing(node_ids):
    empty = row_lookup(pl.Series([], dtype=pl.String))
    assert rows_of(empty, ["a", None]).tolist() == [-1, -1]
    assert rows_of(row_lookup(pl.Series(node_ids, dtype=pl.String)), []).shape == (0,)
