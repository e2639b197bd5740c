"""Publish stage: freeze the build as a new index version and switch readers to it
(or keep the current version when the build holds nothing new)."""


import json

import dagster as dg

from strata.assets.common import (BUILD_REPORT, claim_mirror_lease, corpus_and_layout, md,
                                  path_metadata, read_build_table, stoppable)
from strata.assets.groups import INDEX
from strata.assets.partitions import corpora_partitions
from strata.resources.corpora import CorpusRegistry
from datetime import UTC


class PublishConfig(dg.Config):
    keep_versions: int = 3
    """Published versions kept on disk (the current one is never removed)."""
    prune_grace_s: float = 600.0
    """An old version is removed only this long after a newer one replaced it, so
    readers that opened it just before the publish can finish loading it."""


@dg.asset(
    partitions_def=corpora_partitions,
    group_name=INDEX,
    kinds={"json"},
    deps=["nodes", "edges", "embeddings", "summaries", "captions", "facts", "image_groups"],
    description=(
        "manifest.json of a new index version (format version, corpus, model and dimension, counts, "
        "source fingerprint, build time). The build is hard-linked into versions/vNNNNNN/ and the "
        "CURRENT pointer swapped atomically: readers see the old index or the new one, never a mix. "
        "A build identical to the current version (same files, same manifest but for its timings) "
        "publishes nothing: the materialization says unchanged: true and the version kept."),
)
@stoppable
def index_manifest(context: dg.AssetExecutionContext, config: PublishConfig,
                   corpora: CorpusRegistry) -> dg.MaterializeResult:
    from datetime import datetime

    from strata.stages.parse.finalize import stable_hash
    from strata.core.storage.layout import read_json_or_empty
    from strata.core.query_arrays import graph_nodes, write as write_query_arrays
    from strata.core.config.schema import FORMAT_VERSION
    from strata.core.stats import index_stats

    spec, layout = corpus_and_layout(context, corpora)
    # what the counts use; the query arrays read the columns they need themselves,
    # and let each table go once it is used
    columns = ["kind", "depth"]
    nodes = graph_nodes(read_build_table(layout, "nodes", columns=columns),
                        read_build_table(layout, "entities", required=False, columns=columns))
    edges = read_build_table(layout, "edges", columns=["type"])
    documents = read_build_table(layout, "documents")
    skipped = read_build_table(layout, "skipped")
    encoder_path = layout.build / "encoder.json"
    if not encoder_path.exists():
        raise FileNotFoundError(f"{encoder_path} missing: materialize embeddings first")
    encoder = json.loads(encoder_path.read_text())
    report_path = layout.build / BUILD_REPORT
    report = read_json_or_empty(report_path)
    stats = index_stats(nodes, edges, documents, skipped)
    fingerprint = stable_hash(*[f"{p}:{h}" for p, h in
                                sorted(documents.select("path", "content_hash").iter_rows())], size=32)
    manifest = {
        "format_version": FORMAT_VERSION,
        "corpus": spec.name,
        "root": str(spec.root),
        "url_template": spec.url_template,
        "embedding": encoder,
        "model": encoder["model"],
        "dim": encoder["dim"],
        "counts": {k: stats[k] for k in ("files", "nodes", "edges", "nodes_by_kind",
                                          "edges_by_type", "depth_distribution")},
        "skipped": len(stats["skipped"]),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "source_fingerprint": fingerprint,
        "stages": report,
        "build_seconds": round(sum(v.get("seconds", 0) for v in report.values()), 3),
        "run_id": context.run.run_id,
    }
    from strata.core.storage.buildlock import release_for_run

    # nothing new to readers (same manifest but for build time and timings, every file
    # byte-identical to the current version's): keep the current version instead of
    # publishing a copy of it. The query arrays follow from those files, so the current
    # version's are reused when they are of the current format and read (they are
    # written here, not by a stage, so only publishing again repairs damaged ones).
    current = layout.unchanged_version(manifest)
    if current is not None and _query_arrays_readable(layout.version_dir(current)):
        layout.prune(config.keep_versions, config.prune_grace_s)  # retention still applies
        context.log.info(f"{spec.name} unchanged, still version {current} "
                         f"({layout.version_dir(current)})")
        release_for_run(layout.root, context.run.run_id)
        return dg.MaterializeResult(metadata={
            "unchanged": True,
            "version": current,
            "files": stats["files"],
            "nodes": stats["nodes"],
            "edges": stats["edges"],
            "build_seconds": manifest["build_seconds"],
            "source_fingerprint": fingerprint,
            "path": path_metadata(layout.version_dir(current)),
        })
    # what queries memory-map (strata.core.query_arrays), and the query runtime readied (its ONNX
    # graph exported, its agreement with the built runtime recorded): the first query of
    # the new version then imports no torch and loads nothing whole
    from strata.core.encoders.embedding import EncoderSpec
    from strata.core.encoders.query_runtime import prepare


    del nodes, edges, documents, skipped
    # the vector tables the build kept as they were are copied from the arrays of
    # the version they were published in, not read and made unit again
    live = layout.current_version()
    write_query_arrays(layout.build, int(encoder["dim"]),
                       previous=layout.version_dir(live) if live is not None else None)
    query_side = prepare(layout.build, EncoderSpec.from_manifest(encoder))
    manifest["query"] = query_side
    version = layout.publish(manifest, keep=config.keep_versions, grace_s=config.prune_grace_s)
    context.log.info(f"published {spec.name} version {version} at {layout.version_dir(version)}")
    # a build kept on an object store publishes there, where its workers and readers are
    from strata.core.storage.kinds import step_storage

    line = step_storage(spec.shared, spec.mirror, layout.root).publish(layout.version_dir(version))
    if line:
        context.log.info(f"{spec.name} version {version} {line}")

    release_for_run(layout.root, context.run.run_id)  # published: the next build may start
    return dg.MaterializeResult(
        metadata={
            "unchanged": False,
            "version": version,
            "files": stats["files"],
            "nodes": stats["nodes"],
            "edges": stats["edges"],
            "build_seconds": manifest["build_seconds"],
            "stage_seconds": md({k: round(v.get("seconds", 0), 3) for k, v in report.items()},
                                ("stage", "seconds")),
            "source_fingerprint": fingerprint,
            "query_runtime": query_side.get("query_runtime", ""),
            "path": path_metadata(layout.version_dir(version)),
        },
    )


def _query_arrays_readable(version_dir) -> bool:
    """Whether the version's query arrays are of the current format and open as
    a reader opens them (every file present, none truncated)."""
    from strata.core.query_arrays import ARRAYS_FORMAT, arrays_format, open_arrays

    try:
        return arrays_format(version_dir) == ARRAYS_FORMAT and open_arrays(version_dir) is not None
    except Exception:  # noqa: BLE001 - DamagedArrays or any reader error: publish anew
        return False


@dg.asset(
    partitions_def=corpora_partitions,
    group_name=INDEX,
    kinds={"s3"},
    deps=["index_manifest"],
    retry_policy=dg.RetryPolicy(max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL),
    description=(
        "The current version copied to the corpus's `mirror` URI (s3://, gs://, ...; set in "
        "data/corpora.yaml), CURRENT written last so remote readers never see a partial version. "
        "Does nothing for a corpus without a mirror. Readers open the URI with Index.open."),
)
@stoppable
def mirrored_index(context: dg.AssetExecutionContext,
                   corpora: CorpusRegistry) -> dg.MaterializeResult:
    from strata.core.storage.object_store import clean_uri
    from strata.core.storage.mirror import mirror_serves, push_version
    from strata.core.storage.store_lease import LeaseHeld

    spec, layout = corpus_and_layout(context, corpora, write=False)
    version = layout.current_version()
    if not spec.mirror or version is None:
        return dg.MaterializeResult(metadata={"mirror": "none configured" if not spec.mirror
                                              else "nothing published yet"})
    # the store's lease (taken by the build's first step) is renewed for the upload
    # and given back after it, however it ends
    try:
        lease = claim_mirror_lease(context, spec.mirror)
    except LeaseHeld as e:
        raise dg.Failure(description=f"{e}: the upload waits for that build", allow_retries=False) \
            from None
    try:
        if mirror_serves(layout.version_dir(version), spec.mirror):
            # an unchanged build kept the version the store already serves in full (its
            # CURRENT is written after the version's files): nothing to upload again
            context.log.info(f"{spec.name} mirror unchanged, still version {version}")
            target = f"{clean_uri(spec.mirror)}/versions/v{version:06d}"
            return dg.MaterializeResult(metadata={"unchanged": True, "version": version,
                                                  "mirror": dg.MetadataValue.url(target)})
        # a failed upload leaves the store on its previous version; the retry uploads again
        target = push_version(layout.version_dir(version), spec.mirror)
        context.log.info(f"mirrored {spec.name} version {version} to {target}")
        return dg.MaterializeResult(metadata={"unchanged": False, "version": version,
                                              "mirror": dg.MetadataValue.url(target)})
    finally:
        lease.release(context.run.run_id)
