"""Software-defined assets, one module per stage; each is a thin wrapper over
plain functions in :mod:`stages`, adding config, partitions, retries,
metadata and checks.

:func:`build_assets` gives every asset of a build, its parse and embedding work
split into a number of shard steps (:mod:`assets.shards`) that the caller
chooses, or ``STRATA_SHARDS`` read at that call: importing this package reads
no environment. ``assets.all_assets`` is kept for scripts and notebooks: it is
``build_assets()`` at the moment it is looked up.
"""

import dagster as dg

from strata.assets.embed import embeddings
from strata.assets.graph import edges
from strata.assets.images import captions, image_groups
from strata.assets.openie import facts
from strata.assets.parse import nodes
from strata.assets.partitions import corpora_partitions
from strata.assets.publish import index_manifest, mirrored_index
from strata.assets.shards import shard_assets, shard_count
from strata.assets.summarize import summaries


def build_assets(shards: int | None = None) -> list[dg.AssetsDefinition]:
    """Every asset of an index build; ``shards``: the parse and embedding shard
    steps each (default: ``STRATA_SHARDS``, else 2)."""
    parsed_shards, embedding_shards = shard_assets(shard_count() if shards is None
                                                   else max(1, shards))
    return [parsed_shards, nodes, summaries, image_groups, captions, facts, embedding_shards,
            embeddings, edges, index_manifest, mirrored_index]


def __getattr__(name: str):
    if name == "all_assets":
        return build_assets()
    raise AttributeError(f"module 'assets' has no attribute {name!r}")


__all__ = ["build_assets", "captions", "corpora_partitions", "edges", "embeddings", "facts",
           "image_groups", "index_manifest", "mirrored_index", "nodes", "summaries"]
