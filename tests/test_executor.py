"""Where a run's steps execute (pipelines/scaleout.py): in the run's own
process unless the launch or the corpus asks for workers. Runs of the code
location's `index_corpus` job with its own executor: `strata index` on a
terminal (tests/test_progress.py: every step in one process), `--workers 2`
(tests/test_scale_out.py: the multiprocess branch), and the UI's launch path in
`make e2e` (tests/e2e/test_dagster_ui.py)."""

from __future__ import annotations

from pathlib import Path

from strata.pipelines.scaleout import workers_for_run
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


class _Node:
    pass


def _probe_job():
    """A one-asset job on the strata executor whose step records what the cycle
    collector sees (``execute_in_process`` would replace the executor)."""
    import gc
    import json
    import os
    import weakref

    import dagster as dg

    from strata.pipelines.scaleout import strata_executor

    @dg.asset
    def probe() -> None:
        frozen = gc.get_freeze_count()
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle only the collector can free
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        Path(os.environ["STRATA_TEST_PROBE"]).write_text(
            json.dumps({"frozen": frozen, "cycle_collected": gone() is None}))

    return dg.Definitions(assets=[probe], jobs=[dg.define_asset_job("probe_job")],
                          executor=strata_executor).resolve_job_def("probe_job")


def test_a_run_in_process_leaves_the_collector_as_it_was(tmp_path, monkeypatch):
    """Every step in the run's process: the executor freezes nothing and turns
    nothing off, a cycle a step makes is collected, and the executor says in the
    run's log where the steps run."""
    import gc
    import json

    import dagster as dg

    monkeypatch.setenv("STRATA_TEST_PROBE", str(tmp_path / "probe.json"))
    assert gc.get_freeze_count() == 0
    with dg.instance_for_test() as instance:
        result = dg.execute_job(dg.reconstructable(_probe_job), instance=instance)
        assert result.success
        logged = [r.event_log_entry.user_message
                  for r in instance.get_records_for_run(result.run_id).records]
    seen = json.loads((tmp_path / "probe.json").read_text())
    assert seen == {"frozen": 0, "cycle_collected": True}
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    assert any("strata executor: every step in this process" in m for m in logged)
