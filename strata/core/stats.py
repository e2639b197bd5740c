"""Summary figures of an index, computed from its tables.

Shared by the pipeline (asset metadata, manifest) and by ``strata map`` so the
UI and the terminal report the same numbers.
"""

from __future__ import annotations

import polars as pl


def _counts(df: pl.DataFrame, col: str) -> dict[str, int]:
    if df.height == 0:
        return {}
    vc = df.group_by(col).len().sort(col)
    return {str(k): int(v) for k, v in zip(vc[col].to_list(), vc["len"].to_list())}


def nodes_by_kind(nodes: pl.DataFrame) -> dict[str, int]:
    return _counts(nodes, "kind")


def edges_by_type(edges: pl.DataFrame) -> dict[str, int]:
    return _counts(edges, "type")


def depth_distribution(nodes: pl.DataFrame) -> dict[str, int]:
    return dict(sorted(_counts(nodes, "depth").items(), key=lambda kv: int(kv[0])))


def files_by_format(documents: pl.DataFrame) -> dict[str, int]:
    return _counts(documents, "format")


def index_stats(nodes: pl.DataFrame, edges: pl.DataFrame, documents: pl.DataFrame,
                skipped: pl.DataFrame) -> dict:
    indexed = documents.filter(pl.col("status") == "indexed") if documents.height else documents
    noted = documents.filter(pl.col("notes").fill_null("") != "") if documents.height else documents
    return {
        "files": int(indexed.height),
        "files_by_format": files_by_format(indexed),
        "nodes": int(nodes.height),
        "nodes_by_kind": nodes_by_kind(nodes),
        "edges": int(edges.height),
        "edges_by_type": edges_by_type(edges),
        "depth_distribution": depth_distribution(nodes),
        "max_depth": int(nodes["depth"].max()) if nodes.height else 0,
        "skipped": [{"path": p, "stage": s, "reason": r}
                    for p, s, r in skipped.select("path", "stage", "reason").iter_rows()],
        "notes": [{"path": p, "note": n} for p, n in noted.select("path", "notes").iter_rows()],
    }


def markdown_table(rows: list[dict] | dict, headers: tuple[str, str] = ("key", "count"),
                   limit: int = 50) -> str:
    """A small Markdown table for Dagster metadata (dict → two columns)."""
    if isinstance(rows, dict):
        rows = [{headers[0]: k, headers[1]: v} for k, v in rows.items()]
        cols = list(headers)
    else:
        cols = list(rows[0].keys()) if rows else list(headers)
    def cell(v) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")[:200]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in rows[:limit]]
    if len(rows) > limit:
        out.append(f"\n… and {len(rows) - limit} more")
    if not rows:
        out.append("| " + " | ".join("—" for _ in cols) + " |")
    return "\n".join(out)
