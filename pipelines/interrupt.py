"""Stopping `strata index`: Ctrl-C or SIGTERM ends the build within seconds, with
exit code 130 (143 for SIGTERM), the run marked CANCELED in the Dagster UI, and
the previously published version still serving.

Why this needs more than Python's default KeyboardInterrupt (Ctrl-C
did nothing for 75 s, then the build published and exited 0):

- Dagster replaces the SIGINT handler during a run (and maps SIGTERM onto it):
  between steps a signal only sets a flag, inside a step it raises
  ``DagsterExecutionInterruptedError``.
- A signal is delivered to whichever thread the kernel picks. When that is an
  LLM worker thread blocked in an HTTP read, Python's handler runs only once the
  main thread executes Python code again, which a wait without a timeout can
  put off until every in-flight request has timed out (60 s each).
- Non-daemon worker threads still waiting on a dead server keep the interpreter
  from exiting after the main thread is done.

So the signal is also written to a wakeup file descriptor (``signal.set_wakeup_fd``,
whichever thread the kernel picked), and a watcher thread reading it:
marks the run CANCELING at once (Dagster then records it as canceled rather than
failed when the interrupt surfaces in the main thread); and, if the main thread
has not wound the run down within ``grace_s``, or at a second Ctrl-C, marks the
run CANCELED itself, ends the worker processes of ``--workers`` and leaves with
``os._exit``. Everything a build writes is atomic (Parquet and JSON through a
rename, Lance commits, one SQLite commit per LLM answer), so stopping at any
point leaves ``build/`` as a cache the next run resumes from, and the published
version untouched.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

EXIT_SIGINT, EXIT_SIGTERM = 130, 143
SIGNALS = (signal.SIGINT, signal.SIGTERM)
NAMES = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM"}


def exit_code(signum: int | None) -> int:
    return EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT


class BuildInterrupt:
    """Installed for the length of ``strata index`` (main thread only).

    ``attach(instance, tags)`` names the run once it is about to start; after the
    run, ``finish(...)`` is the main thread's orderly way out (message, run
    marked canceled, exit code)."""

    def __init__(self, grace_s: float = 4.0, stream=None):
        self.grace_s = grace_s
        self.stream = stream or sys.stderr
        self.signum: int | None = None
        self.at: float | None = None  # monotonic time of the first signal
        self.instance = None
        self.tags: dict | None = None
        self.describe_after = ""  # what to tell the user about the index (set by the caller)
        self._done = threading.Event()
        self._finish_lock = threading.Lock()
        self._finished = False
        self._old: dict = {}
        self._pipe: tuple[int, int] | None = None
        self._old_wakeup = -1
        self._watcher: threading.Thread | None = None
        self._seen = 0  # signals the watcher has read
        self._nudges = 0  # interrupts we simulated that the watcher has not read yet
        self._nudge_lock = threading.Lock()
        self._err_fd: int | None = None  # stderr as it was before Dagster captured it
        self._unpatch = lambda: None
        self._patched = False  # the log mirrors' patch (attach)
        self._old_unraisable = sys.unraisablehook

    # -- installation -----------------------------------------------------------
    def __enter__(self) -> BuildInterrupt:
        if threading.current_thread() is not threading.main_thread():
            return self  # signals are the main thread's business; nothing to install
        for s in SIGNALS:
            self._old[s] = signal.getsignal(s)
            signal.signal(s, self._handler)
        try:
            # Dagster points fd 2 at its compute logs while a step runs; what we say
            # about stopping goes to the user's stderr whatever it points at then
            self._err_fd = os.dup(self.stream.fileno())
        except (AttributeError, OSError, ValueError):
            self._err_fd = None
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._pipe = (r, w)
        self._old_wakeup = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        self._watcher = threading.Thread(target=self._watch, daemon=True, name="strata-signals")
        self._watcher.start()
        self._old_unraisable, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc) -> None:
        from strata.core import stop_request as stopping

        self._done.set()
        stopping.clear()
        if self._pipe is None:
            return
        self._unpatch()
        sys.unraisablehook = self._old_unraisable
        signal.set_wakeup_fd(self._old_wakeup)
        for s, h in self._old.items():
            signal.signal(s, h)
        r, w = self._pipe
        os.close(w)  # the watcher's read returns b"": it ends
        if self._watcher is not None:
            self._watcher.join(timeout=1)
        os.close(r)
        self._pipe = None
        if self._err_fd is not None:
            os.close(self._err_fd)
            self._err_fd = None

    def attach(self, instance, tags: dict) -> None:
        """The run to mark canceled: the one carrying ``tags`` in ``instance``. Its
        compute-log mirrors start in their own process group
        (:func:`own_group_for_log_mirrors`), patched here, just before the run, not
        on entry: the command gets as far as it can before it imports Dagster."""
        self.instance, self.tags = instance, dict(tags)
        if self._pipe is not None and not self._patched:
            self._patched = True
            self._unpatch = own_group_for_log_mirrors()

    # -- the signal -------------------------------------------------------------
    def _handler(self, signum, frame) -> None:
        """Outside a Dagster run (imports, waiting for the lock, the final stats):
        the ordinary KeyboardInterrupt."""
        self._note(signum)
        raise KeyboardInterrupt

    def _unraisable(self, unraisable) -> None:
        """An interrupt that a signal raised while Python ran a finalizer or a weakref
        callback (a garbage collection inside a step) cannot propagate, and Python
        would print it as "Exception ignored in ..." with its traceback on the
        user's terminal. The signal itself reached the watcher through the wakeup
        descriptor whatever Python did with the exception, so it is dropped here;
        anything else goes to the hook as before."""
        dagster = sys.modules.get("dagster")  # loaded by the run, if it has started
        interrupted = getattr(dagster, "DagsterExecutionInterruptedError", KeyboardInterrupt)
        if not isinstance(unraisable.exc_value, (KeyboardInterrupt, interrupted)):
            self._old_unraisable(unraisable)

    def _note(self, signum: int) -> bool:
        """Record a signal; True for the first one."""
        if self.signum is None:
            self.signum, self.at = signum, time.monotonic()
            return True
        return False

    def _watch(self) -> None:
        r = self._pipe[0] if self._pipe else None
        while r is not None:
            try:
                data = os.read(r, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum not in SIGNALS:
                    continue
                with self._nudge_lock:
                    ours = signum == signal.SIGINT and self._nudges > 0
                    if ours:
                        self._nudges -= 1
                if ours:
                    continue
                self._note(signum)  # the handler may have noted it already
                self._seen += 1
                if self._seen == 1:
                    from strata.core import stop_request as stopping

                    stopping.request(NAMES.get(signum, str(signum)))
                    self._say(f"\nstopping ({NAMES.get(signum, signum)}) — press Ctrl-C again "
                              "to stop at once")
                    self._mark_canceling()
                    threading.Thread(target=self._deadline, daemon=True,
                                     name="strata-stop-deadline").start()
                    threading.Thread(target=self._nudge, daemon=True,
                                     name="strata-stop-nudge").start()
                else:
                    self._force("a second signal")

    def _nudge(self, every_s: float = 0.5) -> None:
        """Interrupt the main thread again until it has wound the run down. The
        first interrupt can be lost (a library that swallows it, a step that
        ends just as it arrives and the next one starting); between steps Dagster
        only notes it, inside a step it raises, so repeating is harmless."""
        import _thread

        while not self._done.wait(every_s):
            with self._nudge_lock:
                self._nudges += 1  # it reaches the wakeup fd too: not a second Ctrl-C
            _thread.interrupt_main(signal.SIGINT)

    def _deadline(self) -> None:
        if not self._done.wait(self.grace_s):
            self._force(f"the run did not stop within {self.grace_s:g}s")

    # -- the run ----------------------------------------------------------------
    def _run(self):
        if self.instance is None or not self.tags:
            return None
        import dagster as dg

        try:
            runs = self.instance.get_runs(filters=dg.RunsFilter(tags=self.tags), limit=1)
        except Exception:  # noqa: BLE001 - the storage may be mid-write; best effort
            return None
        return runs[0] if runs else None

    def _mark_canceling(self) -> None:
        run = self._run()
        if run is not None and not run.is_finished:
            try:
                self.instance.report_run_canceling(run, message=f"{NAMES.get(self.signum)} "
                                                   "received by strata index")
            except Exception:  # noqa: BLE001
                pass

    def mark_canceled(self) -> str | None:
        """Make sure the run ends CANCELED (not left Started, not Failure); its id."""
        import dagster as dg

        run = self._run()
        if run is None:
            return None
        if run.status != dg.DagsterRunStatus.SUCCESS and run.status != dg.DagsterRunStatus.CANCELED:
            try:
                self.instance.report_run_canceled(
                    run, message=f"stopped by {NAMES.get(self.signum, 'a signal')}")
            except Exception:  # noqa: BLE001
                pass
        return run.run_id

    def _say(self, msg: str) -> None:
        try:
            if self._err_fd is not None:
                try:
                    self.stream.flush()
                except (OSError, ValueError):
                    pass
                os.write(self._err_fd, (msg + "\n").encode("utf-8", "replace"))
            else:
                print(msg, file=self.stream, flush=True)
        except (OSError, ValueError):
            pass

    def finish(self, extra: str = "") -> int:
        """The main thread's way out after an interrupted run: one message, the
        run marked canceled, the exit code (130, or 143 for SIGTERM)."""
        with self._finish_lock:
            if self._finished:
                return exit_code(self.signum)
            self._finished = True
            self._done.set()
            if threading.current_thread() is threading.main_thread():
                # an interrupt still on its way must not cut this message short
                signal.signal(signal.SIGINT, lambda *_: None)
            run_id = self.mark_canceled()
            took = time.monotonic() - self.at if self.at is not None else 0.0
            run = f"run {run_id[:8]} canceled; " if run_id else ""
            self._say(f"interrupted by {NAMES.get(self.signum, 'a signal')}: stopped after "
                      f"{took:.1f}s; {run}{self.describe_after or 'nothing was published'}"
                      f"{extra}")
            return exit_code(self.signum)

    def _force(self, why: str) -> None:
        with self._finish_lock:
            if self._finished:
                return
            self._finished = True
            took = time.monotonic() - self.at if self.at is not None else 0.0
            run_id = self.mark_canceled()
            run = f"run {run_id[:8]} canceled; " if run_id else ""
            self._say(f"interrupted by {NAMES.get(self.signum, 'a signal')}: stopped after "
                      f"{took:.1f}s ({why}); {run}"
                      f"{self.describe_after or 'nothing was published'}")
            _end_children()
            os._exit(exit_code(self.signum))


def own_group_for_log_mirrors():
    """Start Dagster's compute-log mirror (``tail -F`` and a watcher script that
    kills it if we die) in a process group of its own; returns the undo.

    Why: they run in our process group, so a Ctrl-C typed on the terminal reaches
    them as well, and the watcher script dies with a KeyboardInterrupt traceback
    printed on the user's terminal. In their own group they get only the signals
    meant for them (Dagster ends them when the run ends; the watcher ends the
    tail if we are killed). Dagster's own module is left alone when it no longer
    looks as expected."""
    import subprocess
    import types

    try:
        from dagster._core.execution import compute_logs
    except ImportError:  # pragma: no cover - another Dagster layout
        return lambda: None
    original = getattr(compute_logs, "subprocess", None)
    if original is not subprocess:
        return lambda: None

    def popen(*args, **kwargs):
        kwargs.setdefault("process_group", 0)
        return subprocess.Popen(*args, **kwargs)

    shim = types.SimpleNamespace(**{k: getattr(subprocess, k) for k in dir(subprocess)
                                    if not k.startswith("__")})
    shim.Popen = popen
    compute_logs.subprocess = shim

    def undo() -> None:
        compute_logs.subprocess = original
    return undo


def _end_children(timeout_s: float = 1.0) -> None:
    """End this process's children (the step processes of ``--workers``): SIGTERM,
    then SIGKILL for any still there after ``timeout_s``."""
    import psutil

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for c in children:
        try:
            c.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(children, timeout=timeout_s)
    for c in alive:
        try:
            c.kill()
        except psutil.Error:
            pass
