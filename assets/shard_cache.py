"""What the shard steps (:mod:`assets.shards`) leave under ``build/shards/``,
and the readers the merging assets (``nodes``, ``embeddings``) share with them.

Its own module so that the shard steps and the assets that merge their output
import one common place instead of each other (``assets.parse`` and
``assets.shards`` used to, hidden inside functions, and so did ``assets.embed``
and ``assets.shards``). Nothing here is a Dagster definition.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from strata.assets.common import read_build_table
from strata.core.storage.layout import IndexLayout

SHARDS_DIR = "shards"
SUMMARY = "summary.json"
PARSED_PATHS = "parsed.parquet"  # the files a parse shard actually parsed in its run


def parse_shards_root(layout: IndexLayout) -> Path:
    return layout.build / SHARDS_DIR / "parse"


def parse_shard_dir(layout: IndexLayout, shard: int) -> Path:
    return parse_shards_root(layout) / f"{shard:03d}"


def vector_cache_dir(layout: IndexLayout) -> Path:
    return layout.build / SHARDS_DIR / "embed"


def shard_summaries(folder: Path, pattern: str, run_id: str) -> list[dict]:
    """The summaries shards wrote during this run (older leftovers are ignored)."""
    out = []
    for f in sorted(folder.glob(pattern)) if folder.is_dir() else []:
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if data.get("run_id") == run_id:
            out.append(data)
    return out


def previous_build(layout: IndexLayout):
    """The last build's parse tables (the per-document cache), if complete."""
    from strata.stages.nodes import read_previous

    return read_previous(layout.build)


def parse_shard_outputs(layout: IndexLayout, run_id: str):
    """What the parse shards wrote, how many ran in this run, and the files they
    parsed in this run (not those an interrupted earlier run had parsed)."""
    from strata.stages.nodes import read_previous

    root = parse_shards_root(layout)
    parts = [p for p in (read_previous(d) for d in (sorted(root.iterdir()) if root.is_dir()
                                                     else [])) if p is not None]
    done = shard_summaries(root, f"*/{SUMMARY}", run_id)
    parsed: set[str] = set()
    for s in done:
        f = root / f"{s['shard']:03d}" / PARSED_PATHS
        if f.exists():
            parsed.update(pl.read_parquet(f)["path"].to_list())
    return parts, len(done), parsed


def load_embedding_items(layout: IndexLayout):
    """Every node, entity and fact that gets a vector, from the build's tables."""
    from strata.stages.embed import ITEM_COLUMNS, embedding_items

    return embedding_items(
        read_build_table(layout, "nodes", columns=ITEM_COLUMNS["nodes"]),
        *(read_build_table(layout, name, required=False, columns=ITEM_COLUMNS[name])
          for name in ("summaries", "captions", "entities", "facts")))
