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


def test_a_run_in_process_keeps_the_collector_off_what_existed_before_it(tmp_path, monkeypatch):
    """Every step in the run's process: the objects that existed when the run
    started are frozen out of the cycle collector's traversals for the run, a
    cycle a step makes is still collected, and the freeze ends with the run."""
    import gc
    import json

    import dagster as dg

    monkeypatch.setenv("STRATA_TEST_PROBE", str(tmp_path / "probe.json"))
    assert gc.get_freeze_count() == 0
    with dg.instance_for_test() as instance:
        result = dg.execute_job(dg.reconstructable(_probe_job), instance=instance)
        assert result.success
    seen = json.loads((tmp_path / "probe.json").read_text())
    assert seen["frozen"] > 10_000  # the modules, classes and definitions imported
    assert seen["cycle_collected"]
    assert gc.get_freeze_count() == 0


def test_a_freeze_inside_another_leaves_the_outer_one_in_force():
    """`strata index` freezes around its run and the strata executor again around
    the steps it runs in that process: the inner block's end must not unfreeze
    what the outer one froze while the run goes on."""
    import gc

    from strata.core.memory import long_lived_objects_frozen

    assert gc.get_freeze_count() == 0
    with long_lived_objects_frozen():
        outer = gc.get_freeze_count()
        with long_lived_objects_frozen():
            pass
        # still frozen (an unfreeze empties the permanent generation); not ``>= outer``:
        # reference counting still frees a frozen object that dies meanwhile, as one
        # whose last reference another test's thread held
        assert outer > 0 and gc.get_freeze_count() > outer // 2
    assert gc.get_freeze_count() == 0 and gc.isenabled()
