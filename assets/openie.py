"""OpenIE stage: entities and (head, relation, tail) facts from every prose chunk."""

import dagster as dg

from strata.assets.common import (corpus_and_layout, llm_client, llm_metadata, md, output_version,
                           path_metadata, progress_logger, read_build_table, record_stage,
                           stop_on_dead_endpoint, stoppable, write_failures)
from strata.assets.groups import ENRICH
from strata.assets.partitions import corpora_partitions
from strata.resources.corpora import CorpusRegistry
from strata.resources.llm import LLMResource
from strata.stages.enrich.openie import OFFLINE_VERSION, TEMPLATE

SEMANTIC_EDGES = "semantic_edges.parquet"  # build-only: merged into edges.parquet
# What openie_units reads of the nodes table; the rest is let go before the LLM calls.
UNIT_COLUMNS = ["node_id", "parent_id", "kind", "subkind", "language", "path", "title",
                "breadcrumb", "text"]


class OpenIEConfig(dg.Config):
    import_path: str = ""
    """A HippoRAG `openie_results` JSON file (docs[i] with passage, extracted_entities,
    extracted_triples): matched to chunks by text and used instead of LLM calls."""


@dg.asset(
    partitions_def=corpora_partitions,
    group_name=ENRICH,
    kinds={"python", "parquet"},
    deps=["nodes"],
    # a new prompt template or offline heuristic reruns the stage (cached per item)
    code_version=f"{TEMPLATE}+offline/{OFFLINE_VERSION}",
    retry_policy=dg.RetryPolicy(max_retries=2, delay=10, backoff=dg.Backoff.EXPONENTIAL),
    description=(
        "facts.parquet and entities.parquet: entities (name + description, deduplicated by "
        "normalized name) and validated (head, relation, tail) triples per chunk, extracted from "
        "section text without code/table/image bodies. From the LLM (JSON mode, repaired and "
        "validated: both ends must occur in the text), from an imported HippoRAG OpenIE file, or "
        "offline from a heuristic stand-in. Cached: unchanged chunks cost nothing."),
)
@stoppable
def facts(context: dg.AssetExecutionContext, config: OpenIEConfig, corpora: CorpusRegistry,
          llm: LLMResource) -> dg.MaterializeResult:
    import json

    from strata.stages.enrich.openie import match_import_cached, openie_units, run_openie
    from strata.stages.enrich.semantic_tables import write_semantic_tables

    spec, layout = corpus_and_layout(context, corpora)
    units = openie_units(read_build_table(layout, "nodes", columns=UNIT_COLUMNS))
    imported, unmatched = None, []
    if config.import_path:
        imported, unmatched, cached = match_import_cached(config.import_path, units, layout.cache)
        context.log.info(f"OpenIE import: {len(imported)} chunks matched, {len(unmatched)} "
                         f"unmatched{' (cached match)' if cached else ''}")
    from strata.core.storage.layout import write_text_atomic

    offline_path = layout.cache / "openie_offline.json"
    try:
        offline_cache = json.loads(offline_path.read_text()) if offline_path.exists() else {}
    except ValueError:
        offline_cache = {}  # a damaged cache only costs recomputation
    client = llm_client(llm, spec, layout)
    try:
        with stop_on_dead_endpoint():
            result = run_openie(units, client, imported=imported, offline_cache=offline_cache,
                                progress=progress_logger(context, "openie"))
    finally:
        client.close()
    if result.offline_cache != offline_cache:
        offline_path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(offline_path, json.dumps(result.offline_cache, separators=(",", ":")))
    tables = write_semantic_tables(spec.name, result.per_unit, layout.build_table("entities"),
                                   layout.build_table("facts"), layout.build / SEMANTIC_EDGES)
    write_failures(layout, "openie", result.failures)
    sources: dict[str, int] = {}
    for s in result.source.values():
        sources[s] = sources.get(s, 0) + 1
    # units_by_source tells the query side whether the facts came from a model
    # (import, llm, cache) or from the offline heuristic (diffusion's walk="auto")
    record_stage(layout, "openie", seconds=result.stats.seconds, calls=result.stats.calls,
                 cache_hits=result.stats.cache_hits, failures=len(result.failures),
                 retries=result.stats.retries, prompt_tokens=result.stats.prompt_tokens,
                 completion_tokens=result.stats.completion_tokens,
                 entities=tables.entities, facts=tables.facts, tables_reused=tables.reused,
                 imported_unmatched=len(unmatched), units_by_source=sources)
    return dg.MaterializeResult(data_version=output_version(
        layout.build_table("entities"), layout.build_table("facts"), layout.build / SEMANTIC_EDGES),
        metadata={
        "dagster/row_count": tables.facts,
        "units": units.height,
        "entities": tables.entities,
        "facts": tables.facts,
        "tables_reused": tables.reused,
        "dropped_triples": result.dropped_triples,
        "dropped_entities": result.dropped_entities,
        "units_by_source": md(sources, ("source", "units")),
        "import_unmatched": len(unmatched),
        "import_unmatched_passages": md(unmatched[:50], ("idx", "passage_head")),
        **llm_metadata(result.stats, result.failures, client.offline, llm, label=client.name),
        "path": path_metadata(layout.build_table("facts")),
    })
