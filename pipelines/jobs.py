"""Jobs of the code location (kept apart so sensors and schedules can target them)."""

import dagster as dg

JOB_NAME = "index_corpus"

# The one definition of the job: the code location, the change sensor, the nightly
# schedule and `strata index --workers` (pipelines.definitions) all run it. It
# selects every asset of the Definitions it is given, whatever their shard count; its
# partitions (one per corpus) are the assets' own.
index_corpus_job = dg.define_asset_job(
    name=JOB_NAME,
    selection=dg.AssetSelection.all(),
    description="Build (or incrementally rebuild) the full index of one corpus partition: "
                "ingest → enrich → index. Every step runs in the run's process unless the "
                "launch (run config execution.config.workers) or the corpus (workers: N) asks "
                "for step processes.",
)
