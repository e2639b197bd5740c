"""Embedding stage: embedded nodes → one LanceDB vector table per node kind, and
one BM25 index over the same units (lexical search)."""


import dagster as dg

from strata.assets.common import (corpus_and_layout, md, output_version, path_metadata, progress_logger,
                           record_stage, stop_on_dead_endpoint, stoppable)
from strata.assets.groups import INDEX
from strata.assets.partitions import corpora_partitions
from strata.core.encoders.corpus_encoder import built_encoder
from strata.assets.shard_cache import (load_embedding_items, shard_summaries,
                                      vector_cache_dir)
from strata.resources.corpora import CorpusRegistry
from strata.resources.embedder import EmbedderResource
from strata.stages.embed import ENCODE_BATCH


class EmbedConfig(dg.Config):
    batch_size: int = ENCODE_BATCH
    """Texts per encoder call, shortest first (also the progress step)."""


@dg.asset(
    partitions_def=corpora_partitions,
    group_name=INDEX,
    kinds={"lancedb", "pytorch"},
    deps=["nodes", "summaries", "captions", "facts", "embedding_shards"],
    code_version="3",
    retry_policy=dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL),
    description=(
        "Vectors for every embedded node (files and code/tables by their summaries, sections or "
        "their chunks, images by their captions, entities, and OpenIE facts), one LanceDB table "
        "per kind, and one BM25 index over all of them (lexical/). A node whose embedded text is unchanged "
        "reuses its previous vector: an unchanged corpus computes 0 embeddings."),
    check_specs=[dg.AssetCheckSpec(
        "one_vector_per_embedded_node", asset="embeddings",
        description="Exactly one vector row per embedded node, all of the recorded dimension.")],
)
@stoppable
def embeddings(context: dg.AssetExecutionContext, config: EmbedConfig, corpora: CorpusRegistry,
               embedder: EmbedderResource) -> dg.MaterializeResult:
    import shutil

    import polars as pl

    from strata.assets.run_tags import EMBEDDING_TAG, embedding_label, fill_run_tags
    from strata.stages.embed import build_vectors
    from strata.stages.vector_contents import stamp_path
    from strata.stages.stored_vectors import read_vector_cache
    from strata.stages.lexical import FINGERPRINT_FILE, build_lexical
    from strata.core.encoders.embedding import canonical_model, encoder_threads, release_encoders
    from strata.core.storage.layout import write_json_atomic

    # the shards' encoder (kept when they ran in this process): this step loads one only
    # for texts no shard encoded, and the steps after it encode nothing
    release_encoders()
    spec, layout = corpus_and_layout(context, corpora)
    # What gets a vector is read for each phase and handed over, not kept here:
    # the vector tables' write and the lexical index each let it go once they
    # hold their own rows, so neither holds the other's copy. The check needs
    # only the ids.
    expected = load_embedding_items(layout).filter(pl.col("embedded")).get_column("node_id")
    cache = vector_cache_dir(layout)
    in_shards = sum(s["computed"] for s in shard_summaries(cache, "*.json", context.run.run_id))
    previous = built_encoder(layout)  # build/encoder.json, read once
    enc_spec = embedder.spec_for(spec.embedding, previous)
    fill_run_tags(context, {EMBEDDING_TAG: embedding_label(enc_spec)})
    encoder_json = layout.build / "encoder.json"
    same = previous is not None and previous.same_model(enc_spec)

    def load():
        context.log.info(f"loading encoder {enc_spec.backend}:{enc_spec.model}")
        encoder = embedder.load(enc_spec)
        encoder.set_threads(encoder_threads())  # the shards are done: every core is ours
        return encoder

    with stop_on_dead_endpoint():
        result = build_vectors(load_embedding_items(layout), enc_spec, load, layout.build_lance,
                               batch_size=config.batch_size,
                               progress=progress_logger(context, "embed"),
                               dim=previous.dim if same else None,
                               precomputed=read_vector_cache(cache))
    shutil.rmtree(cache, ignore_errors=True)  # the vectors now live in the Lance tables
    release_encoders()  # one this step loaded for texts no shard encoded
    lexical = build_lexical(load_embedding_items(layout), layout.build_lexical,
                            layout.cache / "lexical_tokens")
    computed, reused = result.computed + in_shards, result.reused - in_shards
    write_json_atomic(encoder_json, {**enc_spec.to_manifest(result.dim),
                                     "model": canonical_model(enc_spec.model)})
    record_stage(layout, "embed", seconds=result.seconds, computed=computed, reused=reused,
                 computed_in_shards=in_shards, dim=result.dim,
                 tables_rewritten=not result.unchanged, tables_kept=len(result.tables_kept),
                 lexical_docs=lexical.docs)

    # tables written now are read back; tables left as they were are known by their
    # contents file, trusted only while it agrees with their fingerprint stamp
    contents = result.contents
    if contents is not None:
        ids, bad_dim = pl.Series(contents.rows.column("node_id")), int(contents.dim != result.dim)
    else:
        ids, bad_dim = _written_ids(layout.build_lance, result.by_kind, result.dim)
    ok = (ids.len() == ids.n_unique() == expected.n_unique() and bad_dim == 0
          and ids.sort().equals(expected.unique().sort()))
    return dg.MaterializeResult(
        # the Lance tables' row digest (text hashes stand for the vectors) and the encoder
        data_version=output_version(stamp_path(layout.build_lance), encoder_json,
                                    layout.build_lexical / FINGERPRINT_FILE),
        metadata={
            "dagster/row_count": ids.len(),
            "embeddings_computed": computed,
            "embeddings_computed_in_shards": in_shards,
            "embeddings_reused": reused,
            "tables_rewritten": not result.unchanged,
            # a rewrite keeps the tables of kinds whose rows did not change, as they were
            "tables_kept": ", ".join(result.tables_kept) or "none",
            "vectors_by_kind": md(result.by_kind, ("kind", "vectors")),
            "lexical_docs": lexical.docs,
            "lexical_rewritten": not lexical.unchanged,
            "model": enc_spec.label,
            "encoder_loaded": result.loaded_encoder,
            "dim": result.dim,
            "seconds": round(result.seconds, 3),
            "path": path_metadata(layout.build_lance),
        },
        check_results=[dg.AssetCheckResult(
            check_name="one_vector_per_embedded_node", passed=ok,
            metadata={"vectors": ids.len(), "embedded_nodes": expected.n_unique(),
                      "ids_read_from": "contents file" if contents is not None else "tables",
                      "wrong_dimension_tables": bad_dim})],
    )


def _written_ids(lance_dir, kinds, dim: int):
    """The node ids of the vector tables as written, read back from disk (a
    column), and how many tables have vectors of another length than ``dim``.
    Only the id column is read: the check must not hold every vector and text
    once more."""
    import polars as pl

    from strata.core.storage.lance_scan import connect, scan
    from strata.core.config.schema import vector_table_name

    db = connect(lance_dir)
    ids: list = []
    bad_dim = 0
    for kind in kinds:
        table = db.open_table(vector_table_name(kind))
        bad_dim += int(table.schema.field("vector").type.list_size != dim)
        ids += [pl.Series(batch.column("node_id")) for batch in scan(table, ["node_id"])]
    return (pl.concat(ids) if ids else pl.Series(dtype=pl.Utf8)), bad_dim
