"""Real Dagster runs of every asset on the sample corpus: checks, metadata,
per-document reuse, stable ids."""

from __future__ import annotations

import polars as pl
import pytest

from strata.retrieval import Index
from tests.conftest import write_corpora


def _meta(result, asset: str) -> dict:
    (mat,) = result.asset_materializations_for_node(asset)
    return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}


@pytest.fixture
def sample_build(builder, sample_copy, tmp_path):
    write_corpora(builder.config_path,
                  {"sample": {"root": str(sample_copy), "out": str(tmp_path / "index")}})
    return builder, sample_copy, tmp_path / "index"


def test_first_build_passes_checks_and_reports(sample_build):
    builder, root, out = sample_build
    result = builder.build("sample")
    assert result.success
    checks = result.get_asset_check_evaluations()
    assert {c.check_name for c in checks} == {
        "parents_exist", "no_empty_text", "endpoints_exist", "one_vector_per_embedded_node"}
    assert all(c.passed for c in checks), [(c.check_name, c.metadata) for c in checks]

    nodes_meta = _meta(result, "nodes")
    idx = Index.open(out)
    files = idx.documents().filter(pl.col("status") == "indexed").height
    assert nodes_meta["files_parsed"] == files > 15
    assert nodes_meta["files_reused"] == 0
    # The unreadable file is recorded with its reason and shown in the metadata.
    assert "notes/corrupted.md" in nodes_meta["skipped_files"]
    assert "NUL" in nodes_meta["skipped_files"]
    assert "scripts/legacy_import.py" in nodes_meta["parser_notes"]
    emb = _meta(result, "embeddings")
    facts = idx.facts()["fact_id"].n_unique()
    assert emb["embeddings_computed"] == idx.nodes().filter(pl.col("embedded")).height + facts
    assert emb["embeddings_reused"] == 0
    assert set(idx.stats()["nodes_by_kind"]) == {"file", "section", "chunk", "code", "table", "image",
                                                 "entity"}
    assert idx.version == 1 and idx.manifest["dim"] == 384
    _check_pictures_and_llm_figures(result)
    _check_rows_read_by_a_filter(out)


def _check_rows_read_by_a_filter(out) -> None:
    """A step that reads some rows of a build table (the image steps: the image
    nodes) gets exactly those rows of the table, in its order."""
    from strata.assets.common import read_build_table
    from strata.core.storage.layout import IndexLayout

    layout = IndexLayout(out)
    image = pl.col("kind") == "image"
    whole = read_build_table(layout, "nodes")
    assert read_build_table(layout, "nodes", where=image).equals(whole.filter(image))
    picked = read_build_table(layout, "nodes", columns=["node_id", "path"], where=image)
    assert picked.height >= 4 and picked.columns == ["node_id", "path"]
    assert picked.equals(whole.filter(image).select("node_id", "path"))


def _png_of(markdown: str) -> bytes:
    import base64
    import re

    m = re.fullmatch(r"!\[[^\]]*\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", markdown)
    assert m, markdown[:120]
    png = base64.b64decode(m.group(1))
    assert png.startswith(b"\x89PNG") and 1_000 < len(png) < 200_000
    return png


def _check_pictures_and_llm_figures(result) -> None:
    """Charts travel inline with the materialization (PNG data URIs in Markdown
    metadata): node depths and kinds, edge types, the near-duplicate groups as
    thumbnails; the LLM stages report calls, cache hits and cost."""
    import io

    from PIL import Image

    nodes_meta = _meta(result, "nodes")
    for key in ("depth_chart", "kinds_chart"):
        _png_of(nodes_meta[key])
    _png_of(_meta(result, "edges")["edges_chart"])
    sheet = Image.open(io.BytesIO(_png_of(_meta(result, "image_groups")["groups_picture"])))
    groups = _meta(result, "image_groups")["duplicate_groups"]
    assert groups >= 2 and sheet.height >= groups * 72  # one row of thumbnails per group
    for asset in ("summaries", "captions", "facts"):
        meta = _meta(result, asset)
        assert meta["llm_cost_usd"] == 0.0 and meta["llm_backend"].startswith("offline")
        assert 0.0 <= meta["llm_cache_hit_rate"] <= 1.0


def test_the_steps_after_the_embeddings_hold_no_encoder(sample_build):
    """A build in one process: the encoder the embedding shards loaded is let go by the
    embeddings step, so the graph and publish steps do not carry the model."""
    import gc
    import weakref

    from strata.core.encoders.embedding import load_encoder, release_encoders
    from strata.resources import EmbedderResource

    builder, _, _ = sample_build
    # the encoder the shards will be handed (load_encoder keeps one per spec and process)
    shards_encoder = weakref.ref(load_encoder(EmbedderResource().spec_for(None, None)))
    gc.collect()
    assert shards_encoder() is not None  # held by the process-wide cache, not by this test
    result = builder.build("sample")
    assert result.success
    assert _meta(result, "embeddings")["embeddings_computed_in_shards"] > 0  # with it
    gc.collect()
    assert shards_encoder() is None
    release_encoders()  # the query encoder publish readied is not this test's business


def test_unchanged_rebuild_reuses_everything(sample_build):
    builder, root, out = sample_build
    builder.build("sample")
    first = Index.open(out)
    result = builder.build("sample")
    nodes_meta, emb = _meta(result, "nodes"), _meta(result, "embeddings")
    assert nodes_meta["files_parsed"] == 0
    assert nodes_meta["files_reused"] == first.documents().filter(
        pl.col("status") == "indexed").height
    assert emb["embeddings_computed"] == 0
    assert emb["encoder_loaded"] is False  # nothing to encode: the model is not even loaded
    assert emb["tables_rewritten"] is False  # the vector tables on disk already hold these rows
    # nothing new to publish: the current version is kept, not copied to a version 2
    assert _meta(result, "index_manifest")["unchanged"] is True
    second = Index.open(out)
    assert second.version == first.version == 1
    assert first.nodes().equals(second.nodes())
    assert first.edges().equals(second.edges())
    q = first.embed_query("barometric drift")
    assert first.dense(q, 5) == second.dense(q, 5)  # version 2 serves the same vectors


def test_editing_one_document_recomputes_only_its_items(sample_build):
    builder, root, out = sample_build
    builder.build("sample")
    before = Index.open(out).nodes()
    doc = root / "docs" / "exporting.md"
    doc.write_text(doc.read_text() + "\n## Compression\n\nParquet files are written with zstd.\n")
    result = builder.build("sample")
    nodes_meta, emb = _meta(result, "nodes"), _meta(result, "embeddings")
    assert nodes_meta["files_parsed"] == 1
    after = Index.open(out).nodes()
    changed = after.join(before.select("node_id", "content_hash"), on="node_id", how="left") \
        .filter((pl.col("content_hash") != pl.col("content_hash_right"))
                | pl.col("content_hash_right").is_null())
    assert set(changed["path"]) == {"docs/exporting.md"}
    # Only nodes whose embedded text changed are encoded: the new section, the
    # file node and sections whose end moved do not exceed a handful.
    assert 1 <= emb["embeddings_computed"] <= changed.height + 2
    assert emb["tables_rewritten"] is True
    new = after.filter(pl.col("title") == "Compression")
    assert new.height == 1 and new["kind"][0] == "section"
    # Ids of untouched documents are unchanged.
    untouched = before.filter(pl.col("path") != "docs/exporting.md")["node_id"].sort()
    assert untouched.equals(after.filter(pl.col("path") != "docs/exporting.md")["node_id"].sort())


@pytest.mark.slow  # also covered in `make test` by test_incremental_equivalence (fresh vs incremental)
def test_ids_are_stable_across_independent_builds(builder, tmp_path):
    from tests.conftest import SAMPLE

    write_corpora(builder.config_path, {
        "a": {"root": str(SAMPLE), "out": str(tmp_path / "a")},
        "b": {"root": str(SAMPLE), "out": str(tmp_path / "b")},
    })
    builder.build("a")
    builder.build("b")
    a, b = Index.open(tmp_path / "a"), Index.open(tmp_path / "b")
    # Ids include the corpus name; with that fixed, everything else is equal.
    strip = lambda s: s.str.replace(r"^(\w+)-.*$", "$1")  # noqa: E731
    assert a.nodes().height == b.nodes().height
    cols = ["node_path", "kind", "content_hash"]
    assert a.nodes().select(cols).sort(cols).equals(b.nodes().select(cols).sort(cols))
    assert strip(a.nodes()["node_id"]).sort().equals(strip(b.nodes()["node_id"]).sort())
    # Rebuilding corpus "a" from scratch into a new folder reproduces its ids exactly.
    write_corpora(builder.config_path, {"a": {"root": str(SAMPLE), "out": str(tmp_path / "a2")}})
    builder.build("a")
    assert Index.open(tmp_path / "a2").nodes()["node_id"].sort().equals(a.nodes()["node_id"].sort())


def test_asset_groups_and_definitions_load():
    from strata.pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    groups = {key.to_user_string(): graph.get(key).group_name for key in graph.get_all_asset_keys()}
    # three stages, as the lineage view shows them (one box each, collapsed)
    assert groups == {"parsed_shards": "ingest", "nodes": "ingest",
                      "summaries": "enrich", "image_groups": "enrich", "captions": "enrich",
                      "facts": "enrich",
                      "embedding_shards": "index", "embeddings": "index", "edges": "index",
                      "index_manifest": "index", "mirrored_index": "index"}
    for key in graph.get_all_asset_keys():
        assert graph.get(key).description


def test_partition_sensor_adds_declared_corpora(tmp_path):
    import dagster as dg

    from strata.pipelines.sensors import corpora_partitions_sensor
    from strata.resources import CorpusRegistry

    cfg = write_corpora(tmp_path / "c.yaml", {"x": {"root": str(tmp_path)},
                                              "y": {"root": str(tmp_path)}})
    with dg.instance_for_test() as instance:
        ctx = dg.build_sensor_context(instance=instance,
                                      resources={"corpora": CorpusRegistry(config_path=str(cfg))})
        res = corpora_partitions_sensor(ctx)
        (req,) = res.dynamic_partitions_requests
        assert sorted(req.partition_keys) == ["x", "y"]
        instance.add_dynamic_partitions("corpora", ["x", "y"])
        again = corpora_partitions_sensor(ctx)
        assert isinstance(again, dg.SkipReason)


def test_workspace_validates(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import REPO

    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    dagster = Path(sys.executable).with_name("dagster")
    proc = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
                          cwd=REPO, env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "All code locations passed validation" in proc.stderr + proc.stdout


def test_llm_cost_comes_from_the_configured_prices():
    from types import SimpleNamespace

    from strata.assets.common import llm_metadata
    from strata.core.llm import StageStats

    stats = StageStats(calls=30, cache_hits=10, prompt_tokens=2_000_000,
                       completion_tokens=500_000)
    priced = SimpleNamespace(backend="openai", model="m", usd_per_million_prompt_tokens=0.15,
                             usd_per_million_completion_tokens=0.6)
    meta = llm_metadata(stats, [], offline=False, resource=priced)
    assert meta["llm_cost_usd"] == 0.6  # 2 M × $0.15 + 0.5 M × $0.60
    assert meta["llm_backend"] == "openai:m" and meta["llm_cache_hit_rate"].value == 0.25
    unpriced = SimpleNamespace(backend="openai", model="m", usd_per_million_prompt_tokens=None,
                               usd_per_million_completion_tokens=None)
    assert "unknown" in llm_metadata(stats, [], offline=False, resource=unpriced)["llm_cost_usd"]
