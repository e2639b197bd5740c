"""Sensors: keep the corpus partitions in step with data/corpora.yaml, and
rebuild a corpus when its files change."""

import json
from datetime import UTC

import dagster as dg

from strata.assets.partitions import corpora_partitions
from strata.assets.run_tags import LAUNCHED_BY_TAG, build_tags
from strata.pipelines.jobs import index_corpus_job
from strata.resources.corpora import CorpusRegistry
from strata.resources.embedder import EmbedderResource
from strata.resources.llm import LLMResource


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


@dg.sensor(
    job=index_corpus_job,
    description="Watches every corpus root and requests a build of that corpus partition when "
                "its files changed (added, edited, renamed, deleted). Each tick costs one stat "
                "per file; contents are re-hashed only when sizes or times moved, and a touched "
                "but unchanged file does not trigger a build. A corpus with a build in progress "
                "(a run of it here, or `strata index` holding its lock) waits for the next "
                "tick. The cursor keeps one fingerprint per corpus. It also closes `strata index` "
                "runs left Started by a killed process (they would hold the corpus's queue).",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def corpus_change_sensor(context: dg.SensorEvaluationContext, corpora: CorpusRegistry,
                         llm: LLMResource, embedder: EmbedderResource
                         ) -> dg.SensorResult | dg.SkipReason:
    from strata.pipelines.abandoned import cli_run_is_alive, close_abandoned_cli_runs
    from strata.stages.fingerprint import fingerprint
    from strata.core.storage.buildlock import is_held

    closed = close_abandoned_cli_runs(context.instance, cli_run_is_alive,
                                      by="corpus_change_sensor")
    if closed:
        context.log.info(f"closed {len(closed)} `strata index` run(s) whose process is gone: "
                         f"{', '.join(r[:8] for r in closed)}")
    cursor = json.loads(context.cursor) if context.cursor else {}
    registered = set(context.instance.get_dynamic_partitions(corpora_partitions.name))
    active = _partitions_in_progress(context.instance)
    requests, seen, notes = [], {}, []
    for name, spec in sorted(corpora.all().items()):
        if name not in registered:
            continue  # corpora_partitions_sensor adds it first
        if not spec.root.is_dir():
            notes.append(f"{name}: root {spec.root} is missing")
            continue
        if name in active or is_held(spec.out):
            # one build per index: a change seen now is seen again at the next tick
            # (its cursor entry is left as it was)
            notes.append(f"{name}: a build is in progress")
            continue
        before = cursor.get(name)
        fp = fingerprint(spec.root, spec.include, spec.exclude, previous=before)
        seen[name] = fp.to_dict()
        published = (spec.out / "CURRENT").exists()
        if before is None and published:
            continue  # first look at a built corpus: this is the baseline
        if before is None or before.get("content") != fp.content:
            requests.append(dg.RunRequest(partition_key=name, run_key=f"{name}:{fp.content}",
                                          tags={**build_tags(spec, llm, embedder),
                                                LAUNCHED_BY_TAG: "sensor corpus_change_sensor",
                                                "strata/trigger": "files changed",
                                                "strata/files": str(fp.files)}))
    new_cursor = json.dumps({**cursor, **seen}, sort_keys=True)
    if not requests:
        context.update_cursor(new_cursor)
        return dg.SkipReason("; ".join(notes) or f"{len(seen)} corpora unchanged")
    return dg.SensorResult(run_requests=requests, cursor=new_cursor)


IN_PROGRESS_WINDOW_S = 6 * 3600


def _partitions_in_progress(instance) -> set[str]:
    """Corpora with a run queued or running in this instance. Only runs updated in
    the last hours count: a run whose process died without Dagster noticing stays
    "Started" for ever, and must not hold a corpus's rebuilds back for good (a
    run launched beside a live one is refused by the index's lock anyway)."""
    from datetime import datetime, timedelta

    statuses = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED,
                dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
                dg.DagsterRunStatus.CANCELING]
    since = datetime.now(UTC) - timedelta(seconds=IN_PROGRESS_WINDOW_S)
    runs = instance.get_runs(filters=dg.RunsFilter(statuses=statuses, updated_after=since),
                             limit=200)
    return {r.tags.get("dagster/partition") for r in runs if r.tags.get("dagster/partition")}
