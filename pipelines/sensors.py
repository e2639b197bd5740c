"""Keep the corpus partitions in step with data/corpora.yaml."""


import dagster as dg

from assets.partitions import corpora_partitions
from resources.corpora import CorpusRegistry


@dg.sensor(
    description="Adds a partition for each corpus declared in data/corpora.yaml (or registered "
                "by `strata index`), so every corpus can be materialized from the UI.",
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def corpora_partitions_sensor(context: dg.SensorEvaluationContext,
                              corpora: CorpusRegistry) -> dg.SensorResult | dg.SkipReason:
    declared = sorted(corpora.all())
    existing = set(context.instance.get_dynamic_partitions(corpora_partitions.name))
    new = [name for name in declared if name not in existing]
    if not new:
        return dg.SkipReason(f"{len(declared)} corpora, all registered")
    return dg.SensorResult(
        dynamic_partitions_requests=[corpora_partitions.build_add_request(new)])
