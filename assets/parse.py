"""Parse stage: corpus folder → ``nodes`` (the document/code hierarchy)."""


import dagster as dg
import polars as pl

from strata.assets.charts import bar_chart, md_image
from strata.assets.common import (corpus_and_layout, md, output_version, path_metadata, progress_logger,
                           record_stage, stoppable)
from strata.assets.groups import INGEST
from strata.assets.parse_config import ParseConfig
from strata.assets.partitions import corpora_partitions
from strata.assets.shard_cache import parse_shard_outputs, parse_shards_root, previous_build
from strata.resources.corpora import CorpusRegistry
from strata.stages.parse.finalize import PARSER_VERSION
from strata.core.console import file_changes_line
from strata.core.storage.layout import write_parquet_atomic
from strata.core.stats import depth_distribution, files_by_format, nodes_by_kind


@dg.asset(
    partitions_def=corpora_partitions,
    group_name=INGEST,
    kinds={"python", "parquet"},
    code_version=PARSER_VERSION,
    deps=["parsed_shards"],
    description=(
        "Every file of the corpus parsed into one hierarchy: file → section → sub-section → "
        "chunk/code/table/image for documents, module → class → method for code. Writes "
        "nodes.parquet, documents.parquet (per-file hashes: the parse cache), references.parquet "
        "(unresolved links/imports) and skipped.parquet (files that could not be read, with why). "
        "Unchanged files are copied from the previous build, not parsed again; files the parse "
        "shards already parsed are merged, not parsed twice."),
    check_specs=[
        dg.AssetCheckSpec("parents_exist", asset="nodes",
                          description="Every parent_id names a node of the same build."),
        dg.AssetCheckSpec("no_empty_text", asset="nodes",
                          description="No node has empty text."),
    ],
)
@stoppable
def nodes(context: dg.AssetExecutionContext, config: ParseConfig,
          corpora: CorpusRegistry) -> dg.MaterializeResult:
    import shutil

    from strata.stages.discover import discover
    from strata.stages.nodes import build_nodes, overlay
    from strata.stages.parse.finalize import ParseSettings

    from strata.assets.run_tags import CORPUS_TAG, LAUNCHED_BY_TAG, fill_run_tags, launched_by

    spec, layout = corpus_and_layout(context, corpora)
    fill_run_tags(context, {CORPUS_TAG: spec.name, LAUNCHED_BY_TAG: launched_by(context.run.tags)})
    context.log.info(f"corpus {spec.name}: scanning {spec.root}")
    sources = discover(spec.root, spec.include, spec.exclude)
    parts, shards_run, shard_parsed = parse_shard_outputs(layout, context.run.run_id)
    previous = previous_build(layout)
    before = set(previous.documents["path"].to_list()) if previous is not None else set()
    result = build_nodes(spec.name, sources,
                         ParseSettings(config.chunk_tokens, config.context_lines),
                         overlay(previous, parts),
                         progress=progress_logger(context, "parse"), blob_dir=layout.build_blobs)
    # documents.parquet last: it is the parse cache's index, so a run killed
    # between these writes never claims rows the other tables do not hold
    for name, table in (("nodes", result.nodes), ("references", result.references),
                        ("skipped", result.skipped), ("documents", result.documents)):
        write_parquet_atomic(table, layout.build_table(name))
    # the shards' rows now live in the build tables (the next run's cache)
    shutil.rmtree(parse_shards_root(layout), ignore_errors=True)
    del sources, previous, parts  # the corpus's texts and the parse cache: written out now
    parsed_in_shards = len(shard_parsed & set(result.reused))
    parsed = len(result.parsed) + parsed_in_shards
    reused = len(result.reused) - parsed_in_shards

    df = pl.from_arrow(result.nodes)
    docs = pl.from_arrow(result.documents)
    changes = file_changes(before, set(docs["path"].to_list()),
                           set(result.parsed) | (shard_parsed & set(result.reused)))
    skipped = pl.from_arrow(result.skipped)
    orphans = df.filter(pl.col("parent_id").is_not_null()
                        & ~pl.col("parent_id").is_in(df["node_id"].implode())).height
    empty = df.filter(pl.col("text").str.strip_chars() == "").height
    record_stage(layout, "parse", seconds=result.seconds, parsed=parsed, reused=reused,
                 nodes=df.height, shards=shards_run, parsed_in_shards=parsed_in_shards,
                 **changes)
    noted = docs.filter(pl.col("notes") != "").select("path", "notes").to_dicts()
    context.log.info(f"parsed {parsed} files ({parsed_in_shards} in {shards_run} shards), "
                     f"reused {reused}; files {file_changes_line(changes)}; "
                     f"{df.height} document nodes; {skipped.height} skipped")
    return dg.MaterializeResult(
        data_version=output_version(*(layout.build_table(n) for n in
                                      ("nodes", "documents", "references", "skipped"))),
        metadata={
            # the document nodes parsed from the corpus (files, sections, chunks, code,
            # tables, images); the index's node count also holds the entities the
            # graph step adds, which is why `strata map` says more
            "dagster/row_count": df.height,
            "rows_are": "document nodes: files, sections, chunks, code, tables and images "
                        "(entities join the index's nodes in the graph step)",
            "files_added": changes["added"],
            "files_changed": changes["changed"],
            "files_removed": changes["removed"],
            "files_parsed": parsed,
            "files_parsed_in_shards": parsed_in_shards,
            "files_reused": reused,
            "files_skipped": skipped.height,
            "nodes_by_kind": md(nodes_by_kind(df), ("kind", "nodes")),
            "depth_distribution": md(depth_distribution(df), ("depth", "nodes")),
            "depth_chart": md_image(bar_chart(depth_distribution(df), "nodes by depth", "depth"),
                                    "nodes by depth"),
            "kinds_chart": md_image(bar_chart(nodes_by_kind(df), "nodes by kind", "kind",
                                              log=True), "nodes by kind"),
            "files_by_type": md(files_by_format(docs), ("format", "files")),
            "skipped_files": md(skipped.to_dicts(), ("path", "reason")),
            "parser_notes": md(noted, ("path", "notes")),
            "seconds": round(result.seconds, 3),
            "path": path_metadata(layout.build_table("nodes")),
        },
        check_results=[
            dg.AssetCheckResult(check_name="parents_exist", passed=not orphans,
                                metadata={"missing_parents": orphans}),
            dg.AssetCheckResult(check_name="no_empty_text", passed=empty == 0,
                                metadata={"empty_nodes": empty}),
        ],
    )


def file_changes(before: set[str], after: set[str], parsed: set[str]) -> dict[str, int]:
    """What this build did to the corpus's files against the previous build:
    files new to it, files parsed again because they changed, files gone."""
    return {"added": len(after - before), "changed": len((parsed & after) & before),
            "removed": len(before - after)}

