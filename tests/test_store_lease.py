"""The build's lease on a mirror's object store: conditional writes against a real S3
endpoint on loopback (moto's server), a fake clock for the lease's term, and a build
that finds the lease held failing before it writes."""

from __future__ import annotations

import threading

import pytest

from strata.core.storage.store_lease import LeaseHeld, StoreLease
from tests.s3 import s3_endpoint, uri


@pytest.fixture
def mirror(monkeypatch, tmp_path):
    with s3_endpoint(monkeypatch, tmp_path / "cache", "indexes") as endpoint:
        yield uri(endpoint, "indexes/docs")


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_held_lease_stops_another_run_until_it_is_released(mirror):
    clock = Clock()
    a, b = StoreLease(mirror, ttl_s=600, clock=clock), StoreLease(mirror, ttl_s=600, clock=clock)
    a.claim("run-a", what="strata index on laptop")
    with pytest.raises(LeaseHeld, match="strata index on laptop"):
        b.claim("run-b")
    assert a.claim("run-a")["expires"] == clock.now + 600  # the holder renews
    assert not b.release("run-b")  # not b's to give back
    assert a.release("run-a")
    assert b.claim("run-b")["run_id"] == "run-b"


def test_a_lease_that_ran_out_or_whose_run_finished_is_taken_over(mirror):
    clock = Clock()
    StoreLease(mirror, ttl_s=600, clock=clock).claim("crashed")
    clock.now += 601
    assert StoreLease(mirror, clock=clock).claim("next")["run_id"] == "next"
    # a run this instance knows to have finished: no need to wait for the term
    assert StoreLease(mirror, clock=clock).claim(
        "third", run_is_live=lambda run_id: run_id != "next")["run_id"] == "third"


def test_of_builds_racing_for_a_free_lease_exactly_one_wins(mirror):
    clock = Clock()
    winners: list[str] = []

    def claim(run_id: str) -> None:
        try:
            StoreLease(mirror, clock=clock).claim(run_id)
            winners.append(run_id)
        except LeaseHeld:
            pass

    threads = [threading.Thread(target=claim, args=(f"run-{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    info, _ = StoreLease(mirror).read()
    assert info["run_id"] == winners[0]


def test_a_build_of_a_mirrored_corpus_whose_lease_is_held_writes_nothing(
        builder, sample_copy, mirror, tmp_path):
    from strata.core.storage.layout import IndexNotFound
    from strata.core.storage.mirror import remote_current
    from tests.conftest import write_corpora

    StoreLease(mirror).claim("a-run-on-another-machine", what="strata index on ci-7")
    out = tmp_path / "index"
    write_corpora(builder.config_path, {"mirrored": {
        "root": str(sample_copy), "out": str(out), "mirror": mirror}})
    result = builder.build("mirrored", raise_on_error=False)
    assert not result.success
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failures
    assert "strata index on ci-7" in str(failures[0].event_specific_data.error)
    assert not (out / "CURRENT").exists()
    with pytest.raises(IndexNotFound):
        remote_current(mirror)

    StoreLease(mirror).release("a-run-on-another-machine")
    assert builder.build("mirrored").success
    assert remote_current(mirror) == 1
    info, _ = StoreLease(mirror).read()
    assert info["run_id"] is None  # given back after the upload
