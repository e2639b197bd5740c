"""The code location: `dagster dev -w workspace.yaml` loads these Definitions.

Heavy libraries (torch, lancedb, sentence-transformers) are imported inside
asset bodies, so loading this module stays fast.
"""

from __future__ import annotations

import dagster as dg

from assets import all_assets, corpora_partitions
from pipelines.sensors import corpora_partitions_sensor
from resources import CorpusRegistry, EmbedderResource

index_corpus_job = dg.define_asset_job(
    name="index_corpus",
    selection=dg.AssetSelection.assets(*all_assets),
    partitions_def=corpora_partitions,
    description="Build (or incrementally rebuild) the full index of one corpus partition.",
)


def make_resources() -> dict:
    return {
        "corpora": CorpusRegistry(
            config_path=dg.EnvVar("STRATA_CORPORA").get_value(""),
            index_dir=dg.EnvVar("STRATA_INDEX_DIR").get_value(""),
        ),
        "embedder": EmbedderResource(
            backend=dg.EnvVar("STRATA_EMBED_BACKEND").get_value("sentence-transformers"),
            model=dg.EnvVar("STRATA_EMBED_MODEL").get_value(
                "sentence-transformers/all-MiniLM-L6-v2"),
            base_url=dg.EnvVar("STRATA_EMBED_BASE_URL").get_value(None),
        ),
    }


defs = dg.Definitions(
    assets=all_assets,
    jobs=[index_corpus_job],
    sensors=[corpora_partitions_sensor],
    resources=make_resources(),
)
