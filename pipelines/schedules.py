"""The nightly rebuild: every corpus, whatever the sensor saw.

Nearly free when nothing changed (unchanged files are not parsed, embedded or
sent to an LLM again; an unchanged MuSiQue-100 rebuild takes 6 s), and it
catches what a sensor cannot: a corpus changed while the daemon was down, or a
new model or stage version that marks every asset stale.
"""

import dagster as dg

from strata.assets.partitions import corpora_partitions
from strata.assets.run_tags import LAUNCHED_BY_TAG, build_tags
from strata.pipelines.jobs import index_corpus_job
from strata.resources.corpora import CorpusRegistry
from strata.resources.embedder import EmbedderResource
from strata.resources.llm import LLMResource


@dg.schedule(job=index_corpus_job, cron_schedule="0 3 * * *",
             default_status=dg.DefaultScheduleStatus.STOPPED,
             description="03:00 every night: rebuild every registered corpus partition.")
def nightly_rebuild_schedule(context: dg.ScheduleEvaluationContext, corpora: CorpusRegistry,
                             llm: LLMResource, embedder: EmbedderResource):
    names = sorted(context.instance.get_dynamic_partitions(corpora_partitions.name))
    if not names:
        return dg.SkipReason("no corpus registered yet")
    day = context.scheduled_execution_time.strftime("%Y-%m-%d") \
        if context.scheduled_execution_time else "manual"
    try:
        specs = corpora.all()
    except Exception:  # noqa: BLE001 - the runs' first step says what is wrong with the file
        specs = {}
    return [dg.RunRequest(partition_key=n, run_key=f"nightly:{day}:{n}",
                          tags={**(build_tags(specs[n], llm, embedder) if n in specs else {}),
                                LAUNCHED_BY_TAG: "schedule nightly_rebuild_schedule",
                                "strata/trigger": "nightly"}) for n in names]
