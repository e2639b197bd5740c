"""Software-defined assets, one module per stage; each is a thin wrapper over
plain functions in :mod:`stages`, adding config, partitions, retries,
metadata and checks."""

from assets.embed import embeddings
from assets.graph import edges
from assets.images import captions, image_groups
from assets.openie import facts
from assets.parse import nodes
from assets.partitions import corpora_partitions
from assets.publish import index_manifest, mirrored_index
from assets.shards import embedding_shards, parsed_shards
from assets.summarize import summaries

all_assets = [parsed_shards, nodes, summaries, image_groups, captions, facts, embedding_shards,
              embeddings, edges, index_manifest, mirrored_index]

__all__ = ["all_assets", "captions", "corpora_partitions", "edges", "embedding_shards",
           "embeddings", "facts", "image_groups", "index_manifest", "mirrored_index", "nodes",
           "parsed_shards", "summaries"]
