"""Software-defined assets, one module per stage; each is a thin wrapper over
plain functions in :mod:`stages`, adding config, partitions, retries,
metadata and checks."""

from assets.embed import embeddings
from assets.graph import edges
from assets.parse import nodes
from assets.partitions import corpora_partitions
from assets.publish import index_manifest

all_assets = [nodes, edges, embeddings, index_manifest]

__all__ = ["all_assets", "corpora_partitions", "edges", "embeddings", "index_manifest", "nodes"]
