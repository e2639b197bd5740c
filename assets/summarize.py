"""Summarize stage: a summary for every file, section, code and table node."""

import dagster as dg

from strata.assets.common import (corpus_and_layout, llm_client, llm_metadata, md, output_version,
                           path_metadata, progress_logger, read_build_table, record_stage,
                           stop_on_dead_endpoint, stoppable, write_failures)
from strata.assets.groups import ENRICH
from strata.assets.partitions import corpora_partitions
from strata.resources.corpora import CorpusRegistry
from strata.resources.llm import LLMResource
from strata.stages.enrich.summarize import TEMPLATE


@dg.asset(
    partitions_def=corpora_partitions,
    group_name=ENRICH,
    kinds={"python", "parquet"},
    deps=["nodes"],
    code_version=TEMPLATE,  # a new prompt template reruns the stage (cached per item)
    retry_policy=dg.RetryPolicy(max_retries=2, delay=10, backoff=dg.Backoff.EXPONENTIAL),
    description=(
        "summaries.parquet: one summary per section, code block, table and file (a file's from its "
        "parts' summaries). With an LLM configured each prompt carries the node's breadcrumb and, "
        "for code and tables, the surrounding text; offline the summaries are extractive and marked "
        "so. Responses are cached: an unchanged corpus makes 0 LLM calls. Summaries become the "
        "embedded text of file, code and table nodes."),
)
@stoppable
def summaries(context: dg.AssetExecutionContext, corpora: CorpusRegistry,
              llm: LLMResource) -> dg.MaterializeResult:
    import polars as pl

    from strata.stages.enrich.summarize import COLUMNS, run_summaries
    from strata.core.storage.layout import write_parquet_atomic

    from strata.assets.run_tags import LLM_TAG, fill_run_tags

    spec, layout = corpus_and_layout(context, corpora)
    fill_run_tags(context, {LLM_TAG: llm.label(spec.llm)})
    nodes = read_build_table(layout, "nodes", columns=list(COLUMNS))
    client = llm_client(llm, spec, layout)
    try:
        with stop_on_dead_endpoint():
            result = run_summaries(nodes, client, progress=progress_logger(context, "summarize"))
    finally:
        client.close()
    write_parquet_atomic(result.table, layout.build_table("summaries"))
    write_failures(layout, "summarize", result.failures)
    record_stage(layout, "summarize", seconds=result.stats.seconds, calls=result.stats.calls,
                 cache_hits=result.stats.cache_hits, failures=len(result.failures),
                 retries=result.stats.retries, prompt_tokens=result.stats.prompt_tokens,
                 completion_tokens=result.stats.completion_tokens)
    df = pl.from_arrow(result.table)
    return dg.MaterializeResult(data_version=output_version(layout.build_table("summaries")), metadata={
        "dagster/row_count": df.height,
        "by_source": md(dict(df.group_by("source").len().iter_rows()), ("source", "summaries")),
        "sample": md(df.head(5).select("kind", "summary").to_dicts()),
        **llm_metadata(result.stats, result.failures, client.offline, llm, label=client.name),
        "path": path_metadata(layout.build_table("summaries")),
    })
