"""Progress of a `strata index` run, read from the Dagster event log.

Why from the event log: the run executes in this process or, with
``--workers``, in step processes, and either way every step start, step end and
progress line a long step logs (:mod:`strata.core.progress_lines`: ``embed shard 0:
1200/3394 (35%) · 45.2/s · ETA 0:48``) lands in the instance's event log. A
thread that follows the log shows the same progress for both.

Why a terminal of its own: while a step runs in this process, Dagster points
file descriptors 1 and 2 at the step's compute-log files, so anything written to
``sys.stderr`` then goes to a file (the bar sat at ``0/13 starting…``
and jumped to ``12/13`` 80 s later). The view writes to a duplicate of the
stderr descriptor taken before the run, which still reaches the terminal.

On a terminal it is a live bar (rich): steps done of all steps, and the
running step's items with their rate and ETA, redrawn at each event. Elsewhere
(CI, a pipe) one line per finished step and, inside a long step, its progress
line every few seconds.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from strata.core.progress_lines import Progress, clock, every_s, format_line, parse_line



def line_every_s() -> float:
    """Off a terminal, at most one progress line per step this often: 2.5 times
    the steps' own interval ($STRATA_PROGRESS_EVERY_S), 5 s by default."""
    return 2.5 * every_s()


def _duplicate(stream):
    """(a text stream on a duplicate of ``stream``'s descriptor, whether that is a
    terminal, whether we own it); ``stream`` itself when it has no descriptor."""
    try:
        fd = os.dup(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return stream, False, False
    try:
        stream.flush()
    except (OSError, ValueError):
        pass
    return (os.fdopen(fd, "w", buffering=1, encoding="utf-8", errors="replace"), os.isatty(fd),
            True)


class BuildProgress:
    def __init__(self, instance, token: str, stream=None, interactive: bool | None = None,
                 poll_s: float = 0.25, line_every: float | None = None):
        self.instance = instance
        self.token = token
        self._given = stream or sys.stderr
        self._interactive = interactive
        self.stream = None
        self.interactive = False
        self._owned = False
        self.poll_s = poll_s
        self.line_every_s = line_every_s() if line_every is None else line_every
        self.done_steps: list[str] = []
        self.failed_steps: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True, name="strata-progress")

    def __enter__(self) -> BuildProgress:
        self.stream, tty, self._owned = _duplicate(self._given)
        self.interactive = tty if self._interactive is None else self._interactive
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if self._owned:
            try:
                self.stream.close()
            except OSError:
                pass

    # -- following the log -------------------------------------------------------
    def _find_run(self):
        import dagster as dg

        from strata.core.storage.buildlock import RUN_TAG  # the run carries its build's token

        runs = self.instance.get_runs(filters=dg.RunsFilter(tags={RUN_TAG: self.token}),
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
        view = _LiveView(self.stream, total) if self.interactive else \
            _LineView(self.stream, total, self.line_every_s)
        cursor = None
        try:
            while True:
                finishing = self._stop.is_set()
                conn = self.instance.get_records_for_run(run.run_id, cursor=cursor, limit=500)
                cursor = conn.cursor
                for record in conn.records:
                    try:
                        self._event(record.event_log_entry, view)
                    except Exception:  # noqa: BLE001 - a display glitch never stops a build
                        pass
                if finishing and not conn.has_more:
                    break
                if not conn.has_more:
                    view.tick()
                    self._stop.wait(self.poll_s)
        finally:
            view.close()

    def _event(self, entry, view) -> None:
        event = entry.dagster_event
        step = entry.step_key
        if event is None:
            if step and entry.user_message:
                p = parse_line(entry.user_message)
                if p is not None:
                    view.progress(step, p)
            return
        kind = event.event_type_value
        if kind == "STEP_START":
            view.start(step)
        elif kind == "STEP_SUCCESS":
            self.done_steps.append(step)
            view.finish(step, ok=True)
        elif kind == "STEP_FAILURE":
            self.failed_steps.append(step)
            view.finish(step, ok=False, stopped=_interrupted(event))


def _interrupted(event) -> bool:
    """A step failure that is Ctrl-C or SIGTERM stopping the run, not an error: the
    asset's own Failure when the signal came while its body ran, or Dagster's
    interrupt when it came between steps and the next one raised it on entering
    (before the body could say so), which Dagster records as an interrupt."""
    from strata.assets.common import STOPPED_TAG  # what the asset's Failure carries then

    data = event.step_failure_data
    if data is None:
        return False
    if getattr(data.error_source, "name", None) == "INTERRUPT":
        return True
    user = data.user_failure_data
    return bool(user is not None and user.metadata and STOPPED_TAG in user.metadata)


class _LineView:
    """One line per finished step, and a long step's progress line every
    ``every_s`` seconds: readable in CI logs and pipes."""

    def __init__(self, stream, total: int | None, every_s: float):
        self.stream, self.total, self.every_s = stream, total, every_s
        self.started: dict[str, float] = {}
        self.last_line: dict[str, float] = {}
        self.n = 0

    def _print(self, text: str) -> None:
        try:
            print(text, file=self.stream, flush=True)
        except (OSError, ValueError):
            pass

    def start(self, step: str) -> None:
        self.started[step] = time.monotonic()

    def progress(self, step: str, p: Progress) -> None:
        now = time.monotonic()
        if p.done >= p.total or now - self.last_line.get(step, self.started.get(step, now)) \
                < self.every_s:
            return
        self.last_line[step] = now
        self._print(f"         {format_line(p)}")

    def finish(self, step: str, ok: bool, stopped: bool = False) -> None:
        secs = time.monotonic() - self.started.get(step, time.monotonic())
        if stopped:
            self._print(f"  stopped {step} ({secs:.1f}s)")
            return
        self.n += 1
        of = f"/{self.total}" if self.total else ""
        self._print(f"  [{self.n}{of}] {'done  ' if ok else 'FAILED'} {step} ({secs:.1f}s)")

    def tick(self) -> None:
        pass

    def close(self) -> None:
        pass


class _LiveView:
    """A rich progress display redrawn at every event: the steps done of all
    steps and the running ones; below it the items of the step that reported
    last, with their rate and ETA."""

    def __init__(self, stream, total: int | None):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.console = Console(file=stream, force_terminal=True, highlight=False)
        self.bar = Progress(
            TextColumn("{task.description}", style="bold"), BarColumn(bar_width=28),
            MofNCompleteColumn(), TextColumn("{task.fields[extra]}"),
            console=self.console, auto_refresh=False, transient=False,
            # sys.stdout/stderr stay Dagster's to capture into the step's compute log
            redirect_stdout=False, redirect_stderr=False)
        self.t0 = time.monotonic()
        self.steps = self.bar.add_task("indexing", total=total, extra="starting…")
        self.items = self.bar.add_task("", total=1, visible=False, extra="")
        self.running: list[str] = []
        self.item_step: str | None = None
        self.bar.start()
        self._draw()

    def _draw(self) -> None:
        names = ", ".join(s.split(".")[-1] for s in self.running) or "…"
        self.bar.update(self.steps, extra=f"{clock(time.monotonic() - self.t0)}  {names}")
        try:
            self.bar.refresh()
        except (OSError, ValueError):
            pass

    def start(self, step: str) -> None:
        self.running.append(step)
        self._draw()

    def progress(self, step: str, p: Progress) -> None:
        extra = "" if p.rate is None else f"{p.rate:.1f}/s" + (
            f"  ETA {clock(p.eta_s)}" if p.eta_s is not None and p.done < p.total else "")
        self.item_step = step
        self.bar.update(self.items, description=f"  {p.label}", total=max(p.total, 1),
                             completed=p.done, extra=extra, visible=True)
        self._draw()

    def finish(self, step: str, ok: bool, stopped: bool = False) -> None:
        if step in self.running:
            self.running.remove(step)
        if not stopped:  # a stopped step is not done: the count stays where it was
            self.bar.advance(self.steps)
        if step == self.item_step:
            self.bar.update(self.items, visible=False)
            self.item_step = None
        if stopped:
            self.bar.console.print(f"step {step} stopped")
        elif not ok:
            self.bar.console.print(f"[red]step {step} failed[/red]")
        self._draw()

    def tick(self) -> None:
        self._draw()  # the elapsed time moves between events too

    def close(self) -> None:
        self.running = []
        self.bar.update(self.items, visible=False)
        self._draw()
        self.bar.stop()
