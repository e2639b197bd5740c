"""Image stages: near-duplicate grouping, then captions for each group's representative."""

import dagster as dg

from strata.assets.charts import contact_sheet, md_image
from strata.assets.common import (corpus_and_layout, llm_client, llm_metadata, md, output_version,
                           path_metadata, progress_logger, read_build_table, record_stage,
                           stop_on_dead_endpoint, stoppable, write_failures)
from strata.assets.groups import ENRICH
from strata.assets.partitions import corpora_partitions
from strata.resources.corpora import CorpusRegistry
from strata.resources.llm import LLMResource
from strata.stages.enrich.captions import TEMPLATE as CAPTION_TEMPLATE


class DedupConfig(dg.Config):
    method: str = "dhash"
    """Perceptual hash: dhash or phash."""
    hamming_threshold: int = 6
    """Hashes at most this many bits apart are near-duplicates."""
    use_ssim: bool = False
    """Confirm each candidate pair with SSIM (scikit-image) before merging."""
    ssim_threshold: float = 0.90


def _image_nodes(layout):
    """The image rows of the build's nodes table, read as such: image_records makes a
    Python dict of every row it is given, and given the whole table (every text of the
    corpus) that was a peak of both image steps that grew with the corpus."""
    import polars as pl

    return read_build_table(layout, "nodes", where=pl.col("kind") == "image")


def _group_sheet(df, records) -> bytes | None:
    """Thumbnails of each near-duplicate group, the representative first."""
    from pathlib import Path

    import polars as pl

    where = {r.node_id: r.location for r in records if r.location}
    multi = (df.filter(pl.col("status") == "ok").group_by("group_id").len()
             .filter(pl.col("len") > 1)["group_id"])
    rows = []
    for gid in sorted(multi.to_list()):
        members = df.filter(pl.col("group_id") == gid).sort("is_representative",
                                                             descending=True)
        rows.append([(Path(where[n]), rep) for n, rep in
                     members.select("node_id", "is_representative").iter_rows() if n in where])
    return contact_sheet(rows)


@dg.asset(
    partitions_def=corpora_partitions,
    group_name=ENRICH,
    kinds={"python", "parquet"},
    deps=["nodes"],
    code_version="1",
    description=(
        "images.parquet: every image node with its file (or extracted blob), status (ok, missing, "
        "broken, outside the root...), perceptual hash and duplicate group. Near-duplicates (dHash/"
        "pHash, LSH buckets, optional SSIM) merge into the highest-resolution representative; "
        "edges to duplicates are redirected to it in the graph."),
)
@stoppable
def image_groups(context: dg.AssetExecutionContext, config: DedupConfig,
                 corpora: CorpusRegistry) -> dg.MaterializeResult:
    import time

    import polars as pl

    from strata.stages.enrich.images import dedup_images, image_records
    from strata.core.storage.layout import write_parquet_atomic

    t0 = time.perf_counter()
    spec, layout = corpus_and_layout(context, corpora)
    nodes = _image_nodes(layout)
    records = image_records(nodes, spec.root, layout.build_blobs)
    table = dedup_images(records, method=config.method, hamming_threshold=config.hamming_threshold,
                         use_ssim=config.use_ssim, ssim_threshold=config.ssim_threshold)
    write_parquet_atomic(table, layout.build_table("images"))
    df = pl.from_arrow(table)
    seconds = time.perf_counter() - t0
    groups = df.filter(pl.col("status") == "ok").group_by("group_id").len().filter(pl.col("len") > 1)
    record_stage(layout, "dedup", seconds=seconds, images=df.height, duplicate_groups=groups.height)
    dup_rows = df.filter(pl.col("group_id").is_in(groups["group_id"].implode())).select(
        "group_id", "path", "width", "height", "is_representative").sort("group_id")
    problems = df.filter(pl.col("status") != "ok").select("path", "status").to_dicts()
    return dg.MaterializeResult(data_version=output_version(layout.build_table("images")), metadata={
        "dagster/row_count": df.height,
        "duplicate_groups": groups.height,
        "merged_images": int(df.filter(~pl.col("is_representative")).height),
        "groups": md(dup_rows.to_dicts(), ("group_id", "path")),
        "groups_picture": md_image(_group_sheet(df, records), "near-duplicate groups "
                                   "(one row per group; green: the image kept)"),
        "unreadable_images": md(problems, ("path", "status")),
        "seconds": round(seconds, 3),
        "path": path_metadata(layout.build_table("images")),
    })


@dg.asset(
    partitions_def=corpora_partitions,
    group_name=ENRICH,
    kinds={"python", "parquet"},
    deps=["nodes", "image_groups"],
    code_version=CAPTION_TEMPLATE,  # a new prompt template reruns the stage (cached per item)
    retry_policy=dg.RetryPolicy(max_retries=2, delay=10, backoff=dg.Backoff.EXPONENTIAL),
    description=(
        "captions.parquet: a caption per image from a vision-capable LLM, or offline from its alt "
        "text, figure caption and surrounding text. Only each duplicate group's representative is "
        "captioned; duplicates inherit it. Missing or broken image files are recorded as failures "
        "and still get an offline caption."),
)
@stoppable
def captions(context: dg.AssetExecutionContext, corpora: CorpusRegistry,
             llm: LLMResource) -> dg.MaterializeResult:
    import polars as pl

    from strata.stages.enrich.captions import run_captions
    from strata.stages.enrich.images import duplicate_mapping, image_records
    from strata.core.storage.layout import write_parquet_atomic

    spec, layout = corpus_and_layout(context, corpora)
    nodes = _image_nodes(layout)
    groups = read_build_table(layout, "images")
    records = image_records(nodes, spec.root, layout.build_blobs)
    client = llm_client(llm, spec, layout, vision=True)
    try:
        with stop_on_dead_endpoint():
            result = run_captions(records, client, mapping=duplicate_mapping(groups.to_arrow()),
                                  progress=progress_logger(context, "caption"))
    finally:
        client.close()
    write_parquet_atomic(result.table, layout.build_table("captions"))
    write_failures(layout, "caption", result.failures)
    record_stage(layout, "caption", seconds=result.stats.seconds, calls=result.stats.calls,
                 cache_hits=result.stats.cache_hits, failures=len(result.failures),
                 retries=result.stats.retries, prompt_tokens=result.stats.prompt_tokens,
                 completion_tokens=result.stats.completion_tokens)
    df = pl.from_arrow(result.table)
    return dg.MaterializeResult(data_version=output_version(layout.build_table("captions")), metadata={
        "dagster/row_count": df.height,
        "by_source": md(dict(df.group_by("source").len().iter_rows()), ("source", "captions")),
        "sample": md(df.head(5).select("node_id", "caption").to_dicts()),
        **llm_metadata(result.stats, result.failures, client.offline, llm, label=client.name),
        "path": path_metadata(layout.build_table("captions")),
    })
