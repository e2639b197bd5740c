"""Jobs of the code location (kept apart so sensors and schedules can target them)."""

import dagster as dg

from assets import all_assets, corpora_partitions
from pipelines.scaleout import JOB_NAME

# The one definition of the job: the UI's launchpad, the change sensor, the nightly
# schedule and `strata index` all run it (its executor: pipelines.scaleout).
index_corpus_job = dg.define_asset_job(
    name=JOB_NAME,
    selection=dg.AssetSelection.assets(*all_assets),
    partitions_def=corpora_partitions,
    description="Build (or incrementally rebuild) the full index of one corpus partition: "
                "ingest → enrich → index. Every step runs in the run's process unless the "
                "launch (run config execution.config.workers) or the corpus (workers: N) asks "
                "for step processes.",
)
