"""Progress inside the long steps: the line a step logs (counts, rate,
ETA), and `strata index` on a real pseudo-terminal drawing it while the
embedding step runs, although Dagster points the process's stdout and stderr
at its compute-log files during every step."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import threading
import time

import dagster as dg
import pytest

from strata.core.progress_lines import Progress, format_line, parse_line, tracker
from tests.conftest import REPO

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_a_progress_line_carries_counts_rate_and_eta_and_reads_back():
    p = Progress("embed shard 0", 1200, 3394, rate=45.2, eta_s=48.5)
    line = format_line(p)
    assert line == "embed shard 0: 1200/3394 (35%) · 45.2/s · ETA 0:48"
    back = parse_line(line)
    assert (back.label, back.done, back.total, back.rate) == ("embed shard 0", 1200, 3394, 45.2)
    assert back.eta_s == 48.0
    assert parse_line("parse: 0/42 (0%)") == Progress("parse", 0, 42)
    assert parse_line("corpus docs: scanning /x") is None


def test_the_tracker_throttles_and_measures_from_when_items_start_moving():
    lines: list[str] = []
    clock = iter([0.0, 5.0, 5.1, 5.2, 8.0, 9.0]).__next__
    import strata.core.progress_lines as sp

    real, sp.time.monotonic = sp.time.monotonic, clock
    try:
        report = tracker("openie", lines.append, interval_s=2.0)
        report(0, 100)    # t=0: first line
        report(0, 100)    # t=5: a model loaded meanwhile; the rate starts here (an edge: shown)
        report(10, 100)   # t=5.1: within the interval: not shown
        report(20, 100)   # t=5.2: not shown
        report(60, 100)   # t=8.0: shown, 60 items in 3 s since t=5
        report(100, 100)  # t=9: the last is always shown
    finally:
        sp.time.monotonic = real
    assert [parse_line(x).done for x in lines] == [0, 0, 60, 100]
    assert parse_line(lines[2]).rate == 20.0 and parse_line(lines[2]).eta_s == 2.0
    assert "ETA" not in lines[-1]


def test_the_eta_is_measured_on_the_work_when_items_grow_in_cost():
    """The embedding step encodes its shortest texts first: half of the texts done
    in 10 s is a tenth of the work, so the rest takes 90 s, not 10 (a fake clock)."""
    import strata.core.progress_lines as sp

    lines: list[str] = []
    clock = iter([0.0, 10.0, 20.0]).__next__
    real, sp.time.monotonic = sp.time.monotonic, clock
    try:
        report = tracker("embed", lines.append, interval_s=0.0)
        report(0, 100, work=0.0)
        report(50, 100, work=0.1)
        report(60, 100)  # a caller that gives no work: the items' rate
    finally:
        sp.time.monotonic = real
    assert parse_line(lines[1]).rate == 5.0 and parse_line(lines[1]).eta_s == 90.0
    assert parse_line(lines[2]).eta_s == 13.0  # 40 items at 3/s, in whole seconds


def _notes(root, files=4, sections=64):
    """Enough short sections that the encoder runs several calls (64 texts each),
    in plain lowercase prose that the offline OpenIE finds nothing in (one
    entity, the heading they share), so the build stays small."""
    import itertools

    words = list(itertools.product(
        ["early", "late", "damp", "calm", "rough", "clear", "grey", "cold"],
        ["morning", "evening", "harbour", "river", "pier", "dock", "quay", "shore"]))
    root.mkdir()
    for f in range(files):
        body = "\n\n".join(f"## Note\n\nthe {a} reading at the {n} was checked and filed by "
                           f"crew {'abcd'[f]}." for a, n in words[:sections])
        (root / f"notes-{f}.md").write_text(f"# Notes\n\n{body}\n")


def _read_all(fd: int, into: bytearray) -> None:
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return
        if not data:
            return
        into.extend(data)


def test_strata_index_on_a_terminal_shows_progress_inside_the_embedding_step(tmp_path):
    root = tmp_path / "notes"
    _notes(root)
    out = tmp_path / "index"
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dh"),
           "STRATA_CORPORA": str(tmp_path / "corpora.yaml"), "TERM": "xterm-256color",
           "STRATA_PROGRESS_EVERY_S": "0"}  # a line per encoder call, however fast it is
    env.pop("COLUMNS", None)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "strata.pipelines.cli", "index", str(root),
                             "--corpus", "notes", "--out", str(out)],
                            cwd=REPO, env=env, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    raw = bytearray()
    reader = threading.Thread(target=_read_all, args=(master, raw), daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=600)
        reader.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = ANSI.sub("", raw.decode("utf-8", "replace"))
    assert rc == 0, text[-3000:]
    frames = [f for f in re.split(r"[\r\n]", text) if f.strip()]

    # the bar moved inside the embedding step: counts between 0 and the total,
    # with a rate and an ETA, while the step row still named that step running
    inside = [f for f in frames if re.search(r"embed shard 0\s.*\b(\d+)/(\d+)\b", f)]
    counts = {tuple(map(int, re.search(r"\b(\d+)/(\d+)\b", f).groups())) for f in inside}
    total = max(n for _, n in counts)
    moving = sorted(i for i, n in counts if 0 < i < n)
    assert total > 200 and len(moving) >= 2, (counts, text[-3000:])
    assert any("/s" in f and "ETA" in f for f in inside)
    assert any(re.search(r"indexing .*embed_shard_0", f) for f in frames)
    assert "built in" in text and "Traceback" not in text

    # the same progress is in the run's log, as the UI shows it
    with dg.DagsterInstance.from_config(str(tmp_path / "dh")) as instance:
        (run,) = instance.get_runs()
        records = instance.get_records_for_run(run.run_id, limit=5000).records
    logged = [parse_line(r.event_log_entry.user_message) for r in records
              if r.event_log_entry.step_key and not r.event_log_entry.dagster_event]
    events = [r.event_log_entry.dagster_event for r in records
              if r.event_log_entry.dagster_event is not None]
    embed = [p for p in logged if p is not None and p.label == "embed shard 0"]
    assert {p.done for p in embed} >= set(moving)
    assert any(p.rate for p in embed)
    # the code location's index_corpus job, every step in the command's own process (its
    # executor's choice: neither the launch nor the corpus asked for workers)
    assert run.job_name == "index_corpus"
    assert len({e.pid for e in events if e.event_type_value == "STEP_START"}) == 1
    assert any("strata executor: every step in this process (neither the launch nor the corpus "
               "asks" in (r.event_log_entry.user_message or "") for r in records
               if r.event_log_entry.dagster_event is None)
    # and the bar went to the terminal itself, not through the step output Dagster
    # captures for the UI (where it would be garbage, and reach the terminal late)
    captured = [f for f in (tmp_path / "dh" / "storage" / run.run_id).rglob("*")
                if f.suffix in (".err", ".out")]
    assert captured
    assert not any("━" in f.read_text(errors="replace") for f in captured)


@pytest.mark.slow
def test_ctrl_c_inside_the_embedding_step_on_a_terminal_is_one_line(tmp_path):
    """Ctrl-C typed while the encoder runs: the step is reported stopped (not
    failed, not counted done), the run is canceled, the command exits 130 with
    one line and no traceback, although interrupts keep reaching the main
    thread until the run has wound down (pipelines/interrupt.py)."""
    root = tmp_path / "notes"
    _notes(root)
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dh"),
           "STRATA_CORPORA": str(tmp_path / "corpora.yaml"), "TERM": "xterm-256color"}
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "strata.pipelines.cli", "index", str(root),
                             "--corpus", "notes", "--out", str(tmp_path / "index")],
                            cwd=REPO, env=env, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    raw = bytearray()
    reader = threading.Thread(target=_read_all, args=(master, raw), daemon=True)
    reader.start()
    try:
        while b"embed shard 0" not in raw:
            assert proc.poll() is None, raw.decode("utf-8", "replace")[-3000:]
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on ^C
        rc = proc.wait(timeout=120)
        reader.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = ANSI.sub("", raw.decode("utf-8", "replace"))
    assert rc == 130, text[-3000:]
    assert "interrupted by SIGINT" in text and "Traceback" not in text, text[-3000:]
    assert "step embedding_shards.embed_shard_0 stopped" in text
    assert "failed" not in text
    assert not (tmp_path / "index" / "CURRENT").exists()
    with dg.DagsterInstance.from_config(str(tmp_path / "dh")) as instance:
        (run,) = instance.get_runs()
    assert run.status == dg.DagsterRunStatus.CANCELED


def test_a_stop_that_dagster_raises_as_the_next_step_starts_reads_as_stopped():
    """Ctrl-C between two steps: Dagster raises its interrupt as the next step
    enters, before the asset's body runs, so the failure carries no word from the
    asset; the terminal must still say "stopped", not "failed" in red (seen on a
    pty: Ctrl-C as a rebuild's embedding shard ended). An error stays an error."""
    from types import SimpleNamespace

    from dagster._core.execution.plan.objects import ErrorSource, StepFailureData, UserFailureData
    from dagster._utils.error import SerializableErrorInfo

    from strata.assets.common import STOPPED_TAG
    from strata.pipelines.build_progress import _interrupted

    def failure(cls: str, source, user=None):
        error = SerializableErrorInfo(message=f"{cls}\n", stack=[], cls_name=cls)
        return SimpleNamespace(step_failure_data=StepFailureData(error, user, source))

    assert _interrupted(failure("DagsterExecutionInterruptedError", ErrorSource.INTERRUPT))
    assert not _interrupted(failure("ValueError", ErrorSource.USER_CODE_ERROR))
    assert not _interrupted(failure("OSError", ErrorSource.FRAMEWORK_ERROR))
    stopped = dg.Failure("stopped", metadata={STOPPED_TAG: "SIGINT"})
    assert _interrupted(failure("Failure", ErrorSource.USER_CODE_ERROR,
                                user=UserFailureData("stopped", stopped.description,
                                                    stopped.metadata)))



def test_an_interrupt_raised_inside_a_finalizer_leaves_no_traceback_on_the_terminal():
    """A signal can raise Dagster's interrupt (or KeyboardInterrupt) while Python
    runs a finalizer or a weakref callback, where it cannot propagate: Python
    prints "Exception ignored in ..." and a traceback. While a build runs, such an
    interrupt is dropped (the signal reached the command's watcher anyway); any
    other error in a finalizer is reported as before, and the hook is Python's
    again once the build is over. In a process of its own: pytest replaces the hook."""
    code = textwrap.dedent("""
        import sys
        from dagster._core.errors import DagsterExecutionInterruptedError
        from strata.pipelines.interrupt import BuildInterrupt

        class Raises:
            def __init__(self, error):
                self.error = error

            def __del__(self):
                raise self.error

        with BuildInterrupt():
            Raises(DagsterExecutionInterruptedError())
            Raises(KeyboardInterrupt())
            Raises(ValueError("a finalizer's own error"))
        print("-- the build is over --", file=sys.stderr, flush=True)
        Raises(KeyboardInterrupt())
        """)
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    inside, after = run.stderr.split("-- the build is over --")
    assert "Interrupt" not in inside and "ValueError: a finalizer's own error" in inside
    assert "KeyboardInterrupt" in after
