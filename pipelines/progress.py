"""Progress of a `strata index` run, read from the Dagster event log.

Why from the event log: the run executes in this process (``materialize``) or
in worker processes (``--workers``), and either way every step start, step end
and stage message ("embed shard 0: 120/289 (41%)") lands in the instance's
event log. A thread that follows the log shows the same progress for both, with
nothing added to the assets. On a terminal it is a live bar (rich); elsewhere
(CI, a pipe) one line per finished step.
"""

from __future__ import annotations

import re
import sys
import threading
import time

PROGRESS_TAG = "strata/progress"
_FRACTION = re.compile(r"(\d+)/(\d+) \((\d+)%\)")


class BuildProgress:
    def __init__(self, instance, token: str, stream=None, interactive: bool | None = None,
                 poll_s: float = 0.25):
        self.instance = instance
        self.token = token
        self.stream = stream or sys.stderr
        if interactive is None:
            try:
                interactive = self.stream.isatty()
            except (AttributeError, ValueError):
                interactive = False
        self.interactive = interactive
        self.poll_s = poll_s
        self.done_steps: list[str] = []
        self.failed_steps: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True, name="strata-progress")

    def __enter__(self) -> BuildProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    # -- following the log -------------------------------------------------------
    def _find_run(self):
        import dagster as dg

        runs = self.instance.get_runs(filters=dg.RunsFilter(tags={PROGRESS_TAG: self.token}),
                                      limit=1)
        return runs[0] if runs else None

    def _total_steps(self, run) -> int | None:
        try:
            snap = self.instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
            return len(snap.steps)
        except Exception:  # noqa: BLE001 - progress without a total is still progress
            return None

    def _follow(self) -> None:
        run = None
        while run is None and not self._stop.wait(self.poll_s):
            run = self._find_run()
        if run is None:
            return
        total = self._total_steps(run)
        view = _LiveView(self.stream, total) if self.interactive else _LineView(self.stream, total)
        cursor = None
        try:
            while True:
                finishing = self._stop.is_set()
                conn = self.instance.get_records_for_run(run.run_id, cursor=cursor, limit=500)
                cursor = conn.cursor
                for record in conn.records:
                    self._event(record.event_log_entry, view)
                if finishing and not conn.has_more:
                    break
                if not conn.has_more:
                    self._stop.wait(self.poll_s)
        finally:
            view.close()

    def _event(self, entry, view) -> None:
        event = entry.dagster_event
        step = entry.step_key
        if event is None:
            if step and entry.user_message:
                view.message(step, entry.user_message)
            return
        kind = event.event_type_value
        if kind == "STEP_START":
            view.start(step)
        elif kind == "STEP_SUCCESS":
            self.done_steps.append(step)
            view.finish(step, ok=True)
        elif kind == "STEP_FAILURE":
            self.failed_steps.append(step)
            view.finish(step, ok=False)


class _LineView:
    """One line per finished step: readable in CI logs and pipes."""

    def __init__(self, stream, total: int | None):
        self.stream, self.total = stream, total
        self.started: dict[str, float] = {}
        self.n = 0

    def start(self, step: str) -> None:
        self.started[step] = time.monotonic()

    def message(self, step: str, text: str) -> None:
        pass  # per-item progress only on a terminal

    def finish(self, step: str, ok: bool) -> None:
        self.n += 1
        secs = time.monotonic() - self.started.get(step, time.monotonic())
        of = f"/{self.total}" if self.total else ""
        print(f"  [{self.n}{of}] {'done  ' if ok else 'FAILED'} {step} ({secs:.1f}s)",
              file=self.stream, flush=True)

    def close(self) -> None:
        pass


class _LiveView:
    """A rich progress bar: steps done of all steps, the running step and its
    latest 'i/n' message."""

    def __init__(self, stream, total: int | None):
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)

        self.progress = Progress(TextColumn("[bold]indexing"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.description}"),
                                 console=Console(file=stream), transient=False)
        self.task = self.progress.add_task("starting…", total=total)
        self.progress.start()

    def start(self, step: str) -> None:
        self.progress.update(self.task, description=step)

    def message(self, step: str, text: str) -> None:
        m = _FRACTION.search(text)
        if m:
            self.progress.update(self.task, description=f"{step}: {m.group(0)}")

    def finish(self, step: str, ok: bool) -> None:
        self.progress.advance(self.task)
        if not ok:
            self.progress.console.print(f"[red]step {step} failed[/red]")

    def close(self) -> None:
        self.progress.update(self.task, description="")
        self.progress.stop()
