"""Where a run's steps execute (pipelines/scaleout.py): in the run's own
process unless the launch or the corpus asks for workers. Runs of the code
location's `index_corpus` job with its own executor: `strata index` on a
terminal (tests/test_progress.py: every step in one process), `--workers 2`
(tests/test_scale_out.py: the multiprocess branch), and the UI's launch path in
`make e2e` (tests/e2e/test_dagster_ui.py)."""

from __future__ import annotations

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
