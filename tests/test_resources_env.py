"""Resources configured through ``dg.EnvVar``: the code location names
the variables (so the UI shows where a setting comes from) and a run reads them
when it starts, not when the definitions were loaded; a corpus's remembered
settings still win over them. Real Dagster runs on a tiny corpus."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest

from tests.conftest import write_corpora


@pytest.fixture
def pages(tmp_path):
    root = tmp_path / "pages"
    root.mkdir()
    (root / "tides.md").write_text("# Tides\n\n## Gauge\n\nThe harbour gauge reads the tide "
                                   "every minute and files it with the port office.\n")
    return root


def _summaries(out) -> pl.DataFrame:
    return pl.read_parquet(out / "build" / "summaries.parquet")


def test_settings_are_read_when_the_run_starts_and_remembered_ones_win(pages, tmp_path,
                                                                      monkeypatch):
    from strata.assets import nodes, summaries
    from strata.assets.run_tags import LLM_TAG
    from strata.pipelines.definitions import make_resources

    cfg = write_corpora(tmp_path / "corpora.yaml", {
        "plain": {"root": str(pages), "out": str(tmp_path / "plain")},
        # what `strata index --llm-backend offline` remembers for a corpus
        "pinned": {"root": str(pages), "out": str(tmp_path / "pinned"),
                   "llm": {"backend": "offline"}}})
    monkeypatch.setenv("STRATA_CORPORA", str(cfg))
    monkeypatch.setenv("STRATA_LLM_BACKEND", "callable")
    monkeypatch.setenv("STRATA_LLM_CALLABLE", "tests.llm_callables:answer")
    monkeypatch.delenv("STRATA_LLM_MODEL", raising=False)
    resources = make_resources()

    # the code location holds the variables' names, not their values ...
    llm = resources["llm"]
    assert isinstance(llm.backend, dg.EnvVar) and llm.backend.env_var_name == "STRATA_LLM_BACKEND"
    assert isinstance(llm.callable_path, dg.EnvVar)
    assert isinstance(resources["corpora"].config_path, dg.EnvVar)
    assert llm.model == "gpt-4o-mini" and not isinstance(llm.model, dg.EnvVar)  # unset: default

    # ... so a value changed after the definitions loaded is what the run uses
    monkeypatch.setenv("STRATA_LLM_CALLABLE", "tests.llm_callables:other")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("corpora", ["plain", "pinned"])
        runs = {}
        for corpus in ("plain", "pinned"):
            runs[corpus] = dg.materialize([nodes, summaries], partition_key=corpus,
                                          instance=instance, resources=resources)
            assert runs[corpus].success
        tags = {c: instance.get_run_by_id(r.run_id).tags for c, r in runs.items()}
    plain = _summaries(tmp_path / "plain")
    assert set(plain["source"]) == {"llm"}
    assert all(s.startswith("Other model:") for s in plain["summary"])  # read at run time
    assert tags["plain"][LLM_TAG] == "callable:tests.llm_callables:other"
    # the corpus that remembers its LLM keeps it, whatever the environment says
    assert set(_summaries(tmp_path / "pinned")["source"]) == {"offline"}
    assert tags["pinned"][LLM_TAG] == "offline"


def test_a_price_that_is_not_a_number_stops_the_llm_stage_before_it_starts(pages, tmp_path,
                                                                    monkeypatch):
    from strata.assets import nodes, summaries
    from strata.pipelines.definitions import make_resources

    cfg = write_corpora(tmp_path / "corpora.yaml",
                        {"plain": {"root": str(pages), "out": str(tmp_path / "plain")}})
    monkeypatch.setenv("STRATA_CORPORA", str(cfg))
    monkeypatch.setenv("STRATA_LLM_USD_PER_M_PROMPT", "0.15")
    resources = make_resources()  # loads: the value is not read yet
    monkeypatch.setenv("STRATA_LLM_USD_PER_M_PROMPT", "cheap")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("corpora", ["plain"])
        result = dg.materialize([nodes, summaries], partition_key="plain", instance=instance,
                                resources=resources, raise_on_error=False)
    assert not result.success
    errors = " ".join(str(e.event_specific_data.error.message) for e in result.all_events
                      if e.event_type_value in ("RESOURCE_INIT_FAILURE", "STEP_FAILURE",
                                                "PIPELINE_FAILURE")
                      and getattr(e.event_specific_data, "error", None))
    assert "STRATA_LLM_USD_PER_M_PROMPT" in errors and "'cheap'" in errors
    assert not (tmp_path / "plain" / "build" / "summaries.parquet").exists()


@pytest.mark.parametrize("value", ["1.5", "1e3", "abc"])
def test_an_integer_setting_that_is_not_an_integer_is_one_line(value, tmp_path):
    """Integer settings reach the resources as Dagster EnvVars; a bad value is
    refused by the settings model in one line naming the variable (exit 2), not
    by Dagster with a page of traceback when the run starts."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.md").write_text("# Tides\n\nThe gauge reads the tide.\n")
    env = {**os.environ, "STRATA_LLM_MAX_TOKENS": value, "DAGSTER_HOME": str(tmp_path / "dh"),
           "STRATA_CORPORA": str(tmp_path / "corpora.yaml")}
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "index",
                           str(tmp_path / "c"), "--corpus", "c", "--out", str(tmp_path / "o")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: $STRATA_LLM_MAX_TOKENS='{value}'")
    assert "Traceback" not in proc.stderr
