"""Where a run's steps execute (pipelines/scaleout.py, issue 18): in the run's own
process unless the launch or the corpus asks for workers. The job here is the
code location's own `index_corpus` with its own executor, run through
`dg.execute_job` (the path a run worker takes; `dg.materialize` would force the
in-process executor and prove nothing). The UI's launch path is driven in
`make e2e`; `strata index --workers 2` (tests/test_scale_out.py) takes the
multiprocess branch."""

from __future__ import annotations

import os

import dagster as dg

from pipelines.scaleout import workers_for_run
from tests.conftest import write_corpora


def test_a_runs_workers_come_from_its_launch_then_its_corpus(tmp_path, monkeypatch):
    cfg = write_corpora(tmp_path / "corpora.yaml", {
        "big": {"root": str(tmp_path), "workers": 3}, "small": {"root": str(tmp_path)}})
    monkeypatch.setenv("STRATA_CORPORA", str(cfg))
    small, big = {"dagster/partition": "small"}, {"dagster/partition": "big"}
    assert workers_for_run(0, small)[0] == 1
    n, why = workers_for_run(0, big)
    assert n == 3 and "corpus 'big'" in why
    assert workers_for_run(0, {**big, "strata/workers": "2"})[0] == 2  # the launch's tag
    assert workers_for_run(4, {**big, "strata/workers": "2"})[0] == 4  # its run config
    assert workers_for_run(0, {**small, "strata/workers": "many"})[0] == 1
    assert workers_for_run(1, big)[0] == 1  # asked for one process: in process


def test_the_index_job_runs_every_step_in_the_runs_process(tmp_path, monkeypatch):
    from pipelines.definitions import index_job

    root = tmp_path / "pages"
    root.mkdir()
    (root / "tides.md").write_text("# Tides\n\nThe harbour gauge reads the tide.\n")
    cfg = write_corpora(tmp_path / "corpora.yaml",
                        {"pages": {"root": str(root), "out": str(tmp_path / "index")}})
    monkeypatch.setenv("STRATA_CORPORA", str(cfg))
    (tmp_path / "dh").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dh")) as instance:
        instance.add_dynamic_partitions("corpora", ["pages"])
        with dg.execute_job(dg.reconstructable(index_job), instance=instance,
                            tags={"dagster/partition": "pages"}) as result:
            assert result.success
            run = instance.get_run_by_id(result.run_id)
            events = result.all_events
    assert run.job_name == "index_corpus"
    starts = {e.pid for e in events if e.event_type_value == "STEP_START"}
    assert starts == {os.getpid()}
    engine = [e.message for e in events if e.event_type_value == "ENGINE_EVENT"]
    assert any("strata executor: every step in this process (neither the launch nor the "
               "corpus asks" in m for m in engine), engine
    assert (tmp_path / "index" / "CURRENT").exists()
