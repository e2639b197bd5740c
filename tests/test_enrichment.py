"""Enrichment stages in real Dagster runs: offline defaults, the OpenAI backend
over real HTTP with injected faults, the cache, and resume after a crash."""

from __future__ import annotations

import json

import polars as pl
import pytest

from strata.retrieval import Index
from tests.conftest import write_corpora
from tests.fake_openai import FakeOpenAI, prompt_of

LLM_ASSETS = ("summaries", "captions", "facts")


def _meta(result, asset: str) -> dict:
    (mat,) = result.asset_materializations_for_node(asset)
    return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}


@pytest.fixture
def corpus(builder, sample_copy, tmp_path):
    write_corpora(builder.config_path,
                  {"sample": {"root": str(sample_copy), "out": str(tmp_path / "index")}})
    return tmp_path / "index"


def test_offline_enrichment_builds_the_semantic_layer(builder, corpus):
    result = builder.build("sample")
    for asset in LLM_ASSETS:
        meta = _meta(result, asset)
        assert meta["llm_backend"] == "offline stand-in" and meta["llm_calls"] == 0
    assert _meta(result, "image_groups")["duplicate_groups"] >= 1
    idx = Index.open(corpus)
    stats = idx.stats()
    assert stats["entities"] > 20 and stats["facts"] > 10
    assert {"passage", "semantic", "synonymy"} <= set(stats["edges_by_type"])
    # the near-duplicate chart: one representative, the other redirected away
    images = idx.table("images")
    charts = images.filter(pl.col("path").str.contains("tide-chart"))
    assert charts["group_id"].n_unique() == 1
    rep = charts.filter(pl.col("is_representative"))["path"].unique().to_list()
    assert rep == ["docs/images/tide-chart-large.png"]
    dup_ids = set(charts.filter(~pl.col("is_representative"))["node_id"])
    assert not dup_ids & set(idx.edges().filter(pl.col("type") != "structural")["dst"])
    # the broken image path is recorded, not fatal
    failures = idx.table("failures")
    missing = failures.filter(pl.col("error").str.contains("missing-diagram.png"))
    assert missing["stage"].to_list() == ["caption"]
    assert missing["cause"].to_list() == ["input"]  # the file's problem, not the LLM's
    summaries = idx.table("summaries")
    assert set(summaries["source"]) == {"offline"}
    assert summaries.filter(pl.col("kind") == "file").height == stats["files"]


def test_openai_backend_faults_are_isolated_and_the_cache_makes_reruns_free(builder, corpus):
    from strata.resources import LLMResource

    with FakeOpenAI() as server:
        server.reply = lambda body: _reply(prompt_of(body))
        server.add_fault("429", 1)
        server.add_fault("500")
        # one OpenIE prompt answers garbage every time: it must fail alone
        server.add_fault("malformed", match="Aligning barometer timestamps", times=None)
        llm = LLMResource(backend="openai", base_url=server.base_url, model="fake-model",
                          concurrency=4, max_retries=3, timeout_s=10)
        first = builder.build("sample", llm=llm)
        calls_first = len(server.chat_requests())
        meta = {a: _meta(first, a) for a in LLM_ASSETS}
        assert meta["summaries"]["llm_calls"] > 50 and meta["summaries"]["failures"] == 0
        assert sum(m["llm_retries"] for m in meta.values()) >= 2  # the 429 and the 500
        assert meta["facts"]["failures"] == 1
        failures = Index.open(corpus).table("failures")
        assert failures.filter(pl.col("stage") == "openie").height == 1

        server.faults.clear()
        second = builder.build("sample", llm=llm)
        # only the item that failed is asked again
        assert _meta(second, "facts")["llm_calls"] == 1
        assert _meta(second, "summaries")["llm_calls"] == 0
        assert len(server.chat_requests()) == calls_first + 1
        third = builder.build("sample", llm=llm)
        assert sum(_meta(third, a)["llm_calls"] for a in LLM_ASSETS) == 0
        assert Index.open(corpus).table("failures").filter(pl.col("stage") == "openie").height == 0
        # Editing one document calls the LLM only for that document's items.
        doc = corpus.parent / "sample" / "docs" / "exporting.md"
        doc.write_text(doc.read_text() + "\n## Compression\n\nParquet files use Zstandard.\n")
        fourth = builder.build("sample", llm=llm)
        new_prompts = [r.prompt for r in server.chat_requests()[calls_first + 1:]]
        assert 1 <= _meta(fourth, "summaries")["llm_calls"] <= 3  # the new section + its file
        assert _meta(fourth, "facts")["llm_calls"] == 1
        assert all("xporting" in p or "Compression" in p or "Zstandard" in p for p in new_prompts)
    # image content parts reached the endpoint for captions
    assert any("image_url" in str(r.body) for r in server.chat_requests())


def _reply(prompt: str) -> str:
    if "triples" in prompt:
        import re

        words = re.findall(r"\b[A-Z][a-z]{3,}\b", prompt.split("```")[-2] if "```" in prompt else prompt)
        pair = words[:2] if len(words) >= 2 else ["Tidewater", "Tidewater"]
        return json.dumps({"entities": [{"name": pair[0], "description": "x"},
                                        {"name": pair[1], "description": "y"}],
                           "triples": [[pair[0], "is near", pair[1]]]})
    return "A short factual summary of the material."


def test_a_crash_mid_stage_resumes_without_repeating_finished_items(builder, corpus, tmp_path):
    from strata.resources import LLMResource
    from tests import llm_callables
    from tests.conftest import SAMPLE

    llm = LLMResource(backend="callable", callable_path="tests.llm_callables:answer",
                      max_retries=0, concurrency=1)
    llm_callables.STATE.update(calls=0, answered=0, fail_after=40)
    try:
        crashed = builder.build("sample", llm=llm, raise_on_error=False)
        assert not crashed.success
    except llm_callables.Interrupted:
        pass
    answered = llm_callables.STATE["answered"]
    assert answered == 40  # 40 answered (and cached) before the crash
    llm_callables.STATE.update(calls=0, fail_after=None)
    assert builder.build("sample", llm=llm).success
    resumed = llm_callables.STATE["calls"]
    # The same corpus from scratch (fresh index folder, empty cache) needs:
    write_corpora(builder.config_path, {"fresh": {"root": str(SAMPLE), "out": str(tmp_path / "f")}})
    llm_callables.STATE.update(calls=0)
    assert builder.build("fresh", llm=llm).success
    full = llm_callables.STATE["calls"]
    assert full > 100
    assert resumed == full - 40


def test_dry_run_estimates_tokens_and_dollars_and_leaves_nothing_behind(tmp_path):
    """`strata index --dry-run` with prices configured: per LLM stage the calls the
    cache cannot answer, prompt and completion tokens and dollars; no request is
    sent, no Dagster run is recorded, nothing is written (not even the index
    folder, its lock or the corpus's registration)."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO, SAMPLE

    home = tmp_path / "home"
    with FakeOpenAI() as server:
        env = {**os.environ, "DAGSTER_HOME": str(home),
               "STRATA_CORPORA": str(tmp_path / "corpora.yaml"), "OPENAI_API_KEY": "sk-dry-run",
               "STRATA_LLM_USD_PER_M_PROMPT": "0.15", "STRATA_LLM_USD_PER_M_COMPLETION": "0.60"}
        cmd = [sys.executable, "-m", "strata.pipelines.cli", "index", str(SAMPLE), "--corpus", "dry",
               "--out", str(tmp_path / "idx"), "--dry-run", "--llm-backend", "openai",
               "--llm-base-url", server.base_url, "--llm-model", "fake"]
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        as_json = subprocess.run(cmd + ["--json"], cwd=REPO, env=env, capture_output=True,
                                 text=True, timeout=600)
        assert as_json.returncode == 0, as_json.stderr[-2000:]
        assert server.requests == []  # nothing was spent, not even a probe
    figures = json.loads(as_json.stdout)
    assert figures["llm"] == "openai:fake" and figures["dry_run"] is True
    stages = {s["stage"]: s for s in figures["stages"]}
    assert set(stages) == {"summarize", "openie", "caption"}
    summarize = stages["summarize"]
    # every section, code block, table and file of the sample, none cached
    assert summarize["requests"] == summarize["calls"] > 250 and summarize["cached"] == 0
    from strata.stages.enrich import captions, openie, summarize as summarize_stage

    for name, typical in (("summarize", summarize_stage.TYPICAL_COMPLETION_TOKENS),
                          ("openie", openie.TYPICAL_COMPLETION_TOKENS),
                          ("caption", captions.TYPICAL_COMPLETION_TOKENS)):
        s = stages[name]
        assert s["calls"] > 0 and s["prompt_tokens"] > 10 * s["calls"], s
        # an empty cache: the stage's typical answer is assumed for each call
        assert s["completion_tokens"] == s["calls"] * typical and "assumed" in s["completion_basis"]
        assert s["usd"] == round((s["prompt_tokens"] * 0.15 + s["completion_tokens"] * 0.60)
                                 / 1e6, 6)
    # images: one call per near-duplicate group's readable representative, image tokens in
    assert stages["caption"]["calls"] < 9  # the sample's nine image nodes
    assert stages["caption"]["prompt_tokens"] > 765 * stages["caption"]["calls"]
    total = figures["total"]
    assert total["calls"] == sum(s["calls"] for s in stages.values())
    assert abs(total["usd"] - sum(s["usd"] for s in stages.values())) < 1e-6
    assert figures["usd_per_million_prompt_tokens"] == 0.15
    out = proc.stdout
    assert "dry run for corpus 'dry' with openai:fake" in out and "nothing written" in out
    row = next(line.split() for line in out.splitlines() if line.split()[:1] == ["summarize"])
    assert row[1:4] == [str(summarize["requests"]), "0", str(summarize["calls"])]
    assert row[6] == f"{summarize['usd']:.4f}"
    # nothing left behind
    assert not (tmp_path / "idx").exists()
    assert not (tmp_path / "corpora.local.yaml").exists()
    assert not home.exists()  # no Dagster instance was even opened: no run


def test_openai_compatible_embeddings_end_to_end(builder, sample_copy, tmp_path):
    """A corpus can embed through an OpenAI-compatible /embeddings endpoint; the
    index records it and queries go to the same endpoint."""
    with FakeOpenAI(embedding_dim=16) as server:
        write_corpora(builder.config_path, {"remote": {
            "root": str(sample_copy), "out": str(tmp_path / "remote"),
            "embedding": {"backend": "openai", "model": "fake-embed", "base_url": server.base_url}}})
        builder.build("remote")
        idx = Index.open(tmp_path / "remote")
        assert idx.manifest["embedding"]["backend"] == "openai" and idx.manifest["dim"] == 16
        hits = idx.search("barometric drift", k=3, min_relevance=0)  # fake vectors: no meaning
        assert len(hits) == 3
        assert any(r.path == "/v1/embeddings" for r in server.requests)
