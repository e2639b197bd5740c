"""Node lookups of an opened index that do not build what a query does not need.

A million-node index must answer a flat query without turning every node id
into a Python string or every text into a list: rows are looked up in the
memory-mapped Arrow columns (:mod:`strata.core.query_arrays`), and the Python
objects are built only when a mode asks for a whole column or the whole map.
"""

from __future__ import annotations

from strata.core.query_arrays import NODE_FIELDS


class RowOf:
    """node id → graph row. A query that found its hits by row (dense search)
    looks them up among the rows it has just seen; anything else builds the
    whole map once (:attr:`Graph.index`), which a large index defers until a
    mode needs it."""

    def __init__(self, graph):
        self._graph = graph
        self._seen: dict[str, int] = {}

    def remember(self, node_id: str, row: int) -> None:
        if len(self._seen) > 65536:
            self._seen.clear()
        self._seen[node_id] = row

    def __getitem__(self, node_id: str) -> int:
        row = self._seen.get(node_id)
        return row if row is not None else self._graph.index[node_id]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._seen or node_id in self._graph.index

    def get(self, node_id: str, default=None):
        row = self._seen.get(node_id)
        return row if row is not None else self._graph.index.get(node_id, default)


class NodeColumns(dict):
    """Node fields by name, each a list aligned with the graph, converted from the
    mapped Arrow table when first asked for (a mode that reads titles does not
    pay for the texts)."""

    def __init__(self, table):
        super().__init__()
        self._table = table

    def __missing__(self, name: str) -> list:
        if name not in NODE_FIELDS:
            raise KeyError(name)
        value = self[name] = self._table.column(name).to_pylist()
        return value
