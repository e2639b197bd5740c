"""Jobs of the code location (kept apart so sensors and schedules can target them)."""

import dagster as dg

from assets import all_assets, corpora_partitions

index_corpus_job = dg.define_asset_job(
    name="index_corpus",
    selection=dg.AssetSelection.assets(*all_assets),
    partitions_def=corpora_partitions,
    description="Build (or incrementally rebuild) the full index of one corpus partition.",
)
