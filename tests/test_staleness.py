"""A new prompt template (the asset's code version) marks exactly that stage
and the stages after it stale in Dagster, and the rebuild redoes exactly that
stage's items (per-stage invalidation)."""

from __future__ import annotations

import importlib
import json

import dagster as dg
from dagster._utils.test.data_versions import get_stale_status_resolver

from strata.resources import LLMResource
from tests import llm_callables
from tests.conftest import SAMPLE, Builder, write_corpora

CORPUS = "stale"
LLM = dict(backend="callable", callable_path="tests.llm_callables:answer", max_retries=0)


def _status(instance, assets) -> dict[str, tuple[str, list[str]]]:
    resolver = get_stale_status_resolver(instance, assets)
    out = {}
    for a in assets:
        key = a.key
        causes = resolver.get_stale_root_causes(key, CORPUS)
        out[key.to_user_string()] = (resolver.get_status(key, CORPUS).value,
                                     sorted({f"{c.key.asset_key.to_user_string()}: {c.reason}"
                                             for c in causes}))
    return out


def test_a_new_prompt_template_invalidates_that_stage_and_what_follows(tmp_path, monkeypatch):
    import strata.assets as assets_pkg
    import strata.assets.summarize as assets_summarize
    import strata.stages.enrich.summarize as stage_summarize

    cfg = write_corpora(tmp_path / "corpora.yaml",
                        {CORPUS: {"root": str(SAMPLE), "out": str(tmp_path / "index")}})
    report = tmp_path / "index" / "build" / "build_report.json"
    with dg.instance_for_test() as instance:
        builder = Builder(instance, cfg)
        llm = LLMResource(**LLM)
        builder.build(CORPUS, llm=llm)
        before = _status(instance, assets_pkg.all_assets)
        assert {k: s for k, (s, _) in before.items()} == dict.fromkeys(before, "FRESH")

        # A developer bumps the summarize prompt template.
        monkeypatch.setattr(stage_summarize, "TEMPLATE",
                            stage_summarize.TEMPLATE + "-bumped")
        try:
            new_summaries = importlib.reload(assets_summarize).summaries
            bumped = [new_summaries if a.key == new_summaries.key else a
                      for a in assets_pkg.all_assets]
            status = _status(instance, bumped)
            stale = {k for k, (s, _) in status.items() if s == "STALE"}
            # Only the stage itself: its outputs carry content data versions, so
            # what follows goes stale only if the new template changes them.
            assert stale == {"summaries"}, status
            assert status["summaries"][1] == ["summaries: has a new code version"]

            # The new template makes the model answer differently: rerun summaries alone.
            llm_callables.STATE.update(calls=0, summary_words=6)
            builder.build(CORPUS, llm=llm, assets=bumped, selection=["summaries"])
            redone = json.loads(report.read_text())["summarize"]
            assert redone["calls"] > 0 and redone["cache_hits"] == 0  # every item: new template
            status = _status(instance, bumped)
            stale = {k for k, (s, _) in status.items() if s == "STALE"}
            # the direct dependents; edges follow once embeddings change
            assert stale == {"embedding_shards", "embeddings", "index_manifest"}, status
            assert status["embeddings"][1] == ["summaries: has a new data version"]

            # The whole job now redoes only what depends on the changed summaries.
            builder.build(CORPUS, llm=llm, assets=bumped)
            run = json.loads(report.read_text())
            assert run["summarize"]["calls"] == 0  # answered from the bumped template's cache
            assert run["openie"]["calls"] == 0 and run["parse"]["parsed"] == 0
            assert 0 < run["embed"]["computed"] < run["embed"]["computed"] + run["embed"]["reused"]
            assert run["embed"]["computed"] <= redone["calls"]
            after = _status(instance, bumped)
            assert {k: s for k, (s, _) in after.items()} == dict.fromkeys(after, "FRESH")
        finally:
            monkeypatch.undo()
            llm_callables.STATE.update(summary_words=12)
            importlib.reload(assets_summarize)
