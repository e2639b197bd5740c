"""Scale-out: the parse and embedding work of one corpus split into
document-hash shards, one Dagster step per shard.

Each shard is its own op, so the run's executor decides where shards run: in
process (``dg.materialize``, the CLI), in parallel processes (the multiprocess
executor, the UI's default), or on other machines (dagster-dask, dagster-celery,
dagster-k8s). Shards are static because every executor supports a static
plan, while dynamic fan-out is not supported by all of them: :func:`shard_assets`
builds the two shard graphs for a given count, which :func:`assets.build_assets`
takes from its caller or from ``STRATA_SHARDS`` (default 2) when it is called,
never when a module is imported.

A shard writes only a cache below ``build/shards/``: parsed rows keyed by parse
key, vectors keyed by text hash. The ``nodes`` and ``embeddings`` assets merge
those caches into the real tables, so what a shard produced can never differ
from what an unsharded build produces, and a shard that did not run costs only
speed (the merging asset parses or encodes what is missing itself).
"""


import functools
import os
import time

import dagster as dg

from strata.assets.common import (corpus_and_layout, md, progress_logger, record_stage,
                           stop_on_dead_endpoint, stoppable)
from strata.assets.parse_config import ParseConfig
from strata.assets.groups import INDEX, INGEST
from strata.assets.partitions import corpora_partitions
from strata.core.encoders.corpus_encoder import built_encoder
from strata.assets.shard_cache import (PARSED_PATHS, SUMMARY, load_embedding_items,
                                      parse_shard_dir, parse_shards_root, previous_build,
                                      shard_summaries, vector_cache_dir)
from strata.resources.corpora import CorpusRegistry
from strata.resources.embedder import EmbedderResource
from strata.core.storage.layout import write_json_atomic
from strata.core.config.schema import TABLE_FILES
from strata.core.config.settings import BuildSettings, load


def shard_count() -> int:
    """``STRATA_SHARDS`` (:class:`strata.core.config.settings.BuildSettings`), read when called;
    a bad value is a one-line :class:`strata.core.config.settings.SettingsError` (a ValueError)."""
    return load(BuildSettings).shards


STEP_PROCESSES_TAG = "strata/step_processes"  # the executor's: steps it runs side by side


def encoding_processes(shards: int, tags: dict) -> int:
    """How many embedding shards encode at the same time: as many as the run's
    step processes (the run tag ``strata/step_processes``, which the strata
    executor adds when it starts them; absent: every step in one process),
    never more than the shards. ``STRATA_ENCODING_PROCESSES`` set by an
    operator (other executors, a shared machine) wins."""
    from strata.core.config.settings import EmbedSettings, load

    explicit = load(EmbedSettings).encoding_processes  # checked by the model
    if explicit:
        return explicit
    steps = str(tags.get(STEP_PROCESSES_TAG, "1"))
    return max(1, min(int(steps) if steps.isdigit() else 1, shards))


def _parse_shard_op(shard: int, shards: int) -> dg.OpDefinition:
    @dg.op(name=f"parse_shard_{shard}", out=dg.Out(dg.Nothing),
           tags={"strata/shard": f"{shard}/{shards}"},
           retry_policy=dg.RetryPolicy(max_retries=1, delay=5),
           description=f"Parse the documents whose path hash falls in shard {shard} of {shards}.")
    @stoppable
    def parse_shard(context: dg.OpExecutionContext, config: ParseConfig,
                    corpora: CorpusRegistry) -> None:
        import pyarrow as pa

        from strata.stages.discover import detect_format, discover, iter_paths
        from strata.stages.embed import shard_of
        from strata.stages.nodes import build_nodes, overlay, read_previous
        from strata.stages.parse.finalize import ParseSettings
        from strata.core.storage.layout import write_parquet_atomic
        from strata.core.config.schema import python_table

        spec, layout = corpus_and_layout(context, corpora)
        # every path (module names need the whole package layout), this shard's read
        listing = list(iter_paths(spec.root, spec.include, spec.exclude))
        python_paths = [rel for rel, _ in listing if detect_format(rel) == "python"]
        sources = discover(spec.root, select=lambda rel: shard_of(rel, shards) == shard,
                           listing=listing)
        out = parse_shard_dir(layout, shard)
        # what this shard parsed in an interrupted earlier run is not parsed again
        earlier = read_previous(out)
        cache = overlay(previous_build(layout), [earlier] if earlier else [])
        result = build_nodes(spec.name, sources, ParseSettings(config.chunk_tokens,
                                                               config.context_lines),
                             cache, blob_dir=layout.build_blobs,
                             progress=progress_logger(context, f"parse shard {shard}"),
                             python_paths=python_paths)
        for name, table in (("nodes", result.nodes), ("references", result.references),
                            ("documents", result.documents)):  # the cache index last
            write_parquet_atomic(table, out / TABLE_FILES[name])
        write_parquet_atomic(python_table({"path": result.parsed},
                                          pa.schema([("path", pa.string())])), out / PARSED_PATHS)
        summary = {"shard": shard, "shards": shards, "run_id": context.run.run_id,
                   "files": len(sources), "parsed": len(result.parsed),
                   "reused": len(result.reused), "seconds": round(result.seconds, 3),
                   "pid": os.getpid()}
        write_json_atomic(out / SUMMARY, summary)
        context.log.info(f"parse shard {shard}/{shards}: {len(sources)} files, "
                         f"{len(result.parsed)} parsed, {len(result.reused)} reused")

    return parse_shard


def _embed_shard_op(shard: int, shards: int) -> dg.OpDefinition:
    @dg.op(name=f"embed_shard_{shard}", ins={"ready": dg.In(dg.Nothing)}, out=dg.Out(dg.Nothing),
           tags={"strata/shard": f"{shard}/{shards}"},
           retry_policy=dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL),
           description=f"Encode the new texts whose hash falls in shard {shard} of {shards}.")
    @stoppable
    def embed_shard(context: dg.OpExecutionContext, corpora: CorpusRegistry,
                    embedder: EmbedderResource) -> None:
        import pyarrow as pa

        from strata.stages.embed import encode_shard
        from strata.core.encoders.embedding import encoder_threads, is_loaded
        from strata.core.storage.layout import read_cache_table, write_parquet_atomic

        spec, layout = corpus_and_layout(context, corpora)
        items = load_embedding_items(layout)
        enc_spec = embedder.spec_for(spec.embedding, built_encoder(layout))
        cache = vector_cache_dir(layout)
        cache.mkdir(parents=True, exist_ok=True)
        # what this shard wrote in an interrupted earlier attempt is not encoded again
        parts = sorted(cache.glob(f"{shard:03d}*.parquet"))
        known: set[str] = set()
        for part in parts:
            t = read_cache_table(part, "vector cache")
            if t is None:  # damaged: encode its share again
                part.unlink(missing_ok=True)
            else:
                known.update(t["text_hash"].to_list())
        counter = [len(parts)]

        def sink(text_hashes: list[str], vectors) -> None:
            flat = pa.array(vectors.reshape(-1), pa.float32())
            table = pa.table({"text_hash": pa.array(text_hashes, pa.string()),
                              "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])})
            while (cache / f"{shard:03d}-{counter[0]:05d}.parquet").exists():
                counter[0] += 1
            write_parquet_atomic(table, cache / f"{shard:03d}-{counter[0]:05d}.parquet")

        # the tag the executor added after the run started: read back from the instance
        # (a step process is handed the run as it was at launch)
        stored = context.instance.get_run_by_id(context.run.run_id)
        processes = encoding_processes(shards, dict((stored or context.run).tags))
        threads = encoder_threads(processes)

        used: dict = {}  # whether the encoder was kept from an earlier run (--watch)

        def load():
            used["kept"] = is_loaded(enc_spec)
            encoder = embedder.load(enc_spec)
            encoder.set_threads(threads)
            return encoder

        with stop_on_dead_endpoint():
            result = encode_shard(items, enc_spec, load, layout.build_lance, shard, shards, sink,
                                  progress=progress_logger(context, f"embed shard {shard}"),
                                  known=known)
        summary = {"shard": shard, "shards": shards, "run_id": context.run.run_id,
                   "computed": result.computed, "seconds": round(result.seconds, 3),
                   "pid": os.getpid(), "threads": threads, "encoding_processes": processes,
                   "encoder_kept": used.get("kept", False)}
        write_json_atomic(cache / f"{shard:03d}.json", summary)
        context.log.info(f"embed shard {shard}/{shards}: {result.computed} texts encoded "
                         f"({threads} threads, {processes} encoding processes)")

    return embed_shard


def _collect_op(name: str, what: str) -> dg.OpDefinition:
    @dg.op(name=name, ins={"shards": dg.In(dg.Nothing)},
           description=f"Gather the {what} shards' figures for the UI.")
    @stoppable
    def collect(context: dg.OpExecutionContext, corpora: CorpusRegistry) -> dg.Output:
        _, layout = corpus_and_layout(context, corpora)
        # Read from the shards' summary files, not from op outputs: some executors
        # (dagster-dask) do not pass fanned-in outputs along.
        folder, pattern = ((parse_shards_root(layout), f"*/{SUMMARY}") if what == "parse"
                           else (vector_cache_dir(layout), "*.json"))
        rows = sorted(shard_summaries(folder, pattern, context.run.run_id),
                      key=lambda s: s["shard"])
        busiest = max((s["seconds"] for s in rows), default=0.0)
        total = sum(s["seconds"] for s in rows)
        processes = len({s["pid"] for s in rows})
        # the slowest shard stands for the stage's time: shards may run side by side
        extra = {k: max(s.get(k, 0) for s in rows) for k in ("threads", "encoding_processes")
                 if rows and what == "embedding"}  # how the shards shared the cores
        if what == "embedding":  # whether an encoder kept from an earlier run encoded
            extra["encoder_kept"] = any(s.get("encoder_kept") for s in rows)
        record_stage(layout, f"{what}_shards", seconds=busiest, shards=len(rows),
                     shard_seconds_total=round(total, 3), processes=processes, **extra)
        columns = [k for k in (rows[0] if rows else {"shard": 0}) if k not in ("run_id", "shards")]
        return dg.Output(
            {"shards": len(rows), "run_id": context.run.run_id, "at": time.time()},
            metadata={
                "shards": len(rows),
                "processes": processes,
                "by_shard": md([{k: s[k] for k in columns} for s in rows], tuple(columns)),
                "shard_seconds_total": round(total, 3),
                "shard_seconds_max": round(busiest, 3),
            })

    return collect


@functools.cache
def shard_assets(shards: int) -> tuple[dg.AssetsDefinition, dg.AssetsDefinition]:
    """The ``parsed_shards`` and ``embedding_shards`` graph assets, ``shards`` steps
    each (built once per count: the same objects for every caller)."""
    parse_ops = [_parse_shard_op(i, shards) for i in range(shards)]
    embed_ops = [_embed_shard_op(i, shards) for i in range(shards)]
    collect_parse = _collect_op("collect_parse_shards", "parse")
    collect_embed = _collect_op("collect_embedding_shards", "embedding")
    parse_config = dg.ConfigMapping(
        config_schema=ParseConfig.to_config_schema(),  # the nodes asset's fields, mapped to each shard
        config_fn=lambda cfg: {op.name: {"config": cfg} for op in parse_ops},
    )

    @dg.graph_asset(
        partitions_def=corpora_partitions,
        group_name=INGEST,
        kinds={"python"},
        config=parse_config,
        description=(
            f"Parse work split into {shards} document-hash shards (STRATA_SHARDS), one step each, "
            "so the executor can run them in parallel processes or on a cluster. Writes a parse "
            "cache under build/shards/ that `nodes` merges; unchanged documents are not parsed "
            "again."),
    )
    def parsed_shards():
        return collect_parse(shards=[op() for op in parse_ops])

    @dg.graph_asset(
        partitions_def=corpora_partitions,
        group_name=INDEX,
        kinds={"pytorch"},
        ins={name: dg.AssetIn(name, dagster_type=dg.Nothing)
             for name in ("nodes", "summaries", "captions", "facts")},
        description=(
            f"Embedding work split into {shards} shards by text hash, one step each: every shard "
            "loads the encoder and encodes only new texts. Writes a vector cache under "
            "build/shards/ that `embeddings` turns into the LanceDB tables."),
    )
    def embedding_shards(nodes, summaries, captions, facts):
        ready = [nodes, summaries, captions, facts]
        return collect_embed(shards=[op(ready=ready) for op in embed_ops])

    return parsed_shards, embedding_shards
