"""`strata index --watch`: build, then build again whenever the corpus's files change.

Why a mode of its own: a rebuild after a small edit is mostly what a new process
costs before and around the work on the edit — Python, Dagster and LanceDB
imported, the Dagster instance opened, the encoder loaded (the figures are in
docs/living-indexes.md) — not the work itself. A command that stays up pays
those once: each later build runs in the same process, against the same
instance, with the encoder its first build loaded kept
(:func:`strata.core.encoders.embedding.kept_between_runs`). Each build is still an
ordinary run of the ``index_corpus`` job, listed in the UI, with the same
progress, output and Ctrl-C as a one-off ``strata index``, under the index
folder's build lock, which is taken for a build and not while waiting, so that
the UI, the sensor and other commands can build in between (a build that finds
the lock taken waits for it, as ``--wait`` does).

What wakes it: file system events below the corpus's root (watchfiles: inotify,
FSEvents, ReadDirectoryChangesW; polling where those cannot be used), a save of
many files settled into one batch. What decides: the corpus's fingerprint, the
change sensor's (:mod:`strata.stages.fingerprint`: the files the corpus lists,
with its include and exclude lines and Strata's own folders left out, and their
contents, read again only where a file's stat moved), against what it was when
the last build started. So events in what the corpus leaves out (``.git``, the
Dagster home, an index folder) and a file touched but not changed never start a
build, and a change made while a build ran starts the next one.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from strata.core.console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, say, visible
from strata.pipelines.interrupt import EXIT_SIGINT, EXIT_SIGTERM, exit_code

log = logging.getLogger(__name__)

# The watcher's batches: a batch ends once no event came for STEP_MS, or at
# DEBOUNCE_MS after its first event (watchfiles' own defaults are 50 and 1600).
STEP_MS, DEBOUNCE_MS = 50, 1600
POLL_MS = 1000  # between the watcher's looks, where it polls (no events to be had)


class WatchStopped(Exception):
    """A signal asked the watching command to end while it waited for changes."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Events:
    """A thread that sets ``dirty`` at each batch of file system events below
    ``root``: the main thread waits on the flag, so a signal reaches it at once."""

    def __init__(self, root: Path):
        self.root = root
        self.dirty = threading.Event()
        self.stop = threading.Event()
        self.polling = False
        self._thread = threading.Thread(target=self._run, name="strata-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import watchfiles

        while not self.stop.is_set():
            try:
                for _ in watchfiles.watch(self.root, stop_event=self.stop, step=STEP_MS,
                                          debounce=DEBOUNCE_MS, raise_interrupt=False,
                                          force_polling=self.polling or None,
                                          poll_delay_ms=POLL_MS, ignore_permission_denied=True):
                    self.dirty.set()
                return
            except Exception as e:  # noqa: BLE001 - no events to be had here: poll instead
                if self.polling:  # polling failed too: wait() looks at the folder each second
                    log.debug("the watcher of %s ended: %s", self.root, e)
                    return
                self.polling = True
                say(f"note: no file system events for {visible(self.root)} "
                    f"({visible(type(e).__name__)}: {visible(e)}); polling every "
                    f"{POLL_MS / 1000:g}s instead", err=True)

    def wait(self) -> None:
        """Until the next batch of events (the flag is cleared for the one after),
        or a second when the watcher has ended (the caller then looks anyway)."""
        while not self.dirty.wait(0.5):  # a timeout, so that a signal's handler runs
            if not self._thread.is_alive():
                self.dirty.wait(POLL_MS / 1000)
                break
        self.dirty.clear()

    def close(self) -> None:
        self.stop.set()
        self._thread.join(timeout=2)


def _stop_on(signum: int, frame) -> None:
    raise WatchStopped(signum)


def watch(args: argparse.Namespace, build: Callable[[argparse.Namespace], int],
          watched: Callable[[], tuple[Path, list[str], list[str]]]) -> int:
    """Run ``build(args)`` (``strata index`` once), then again at each change to
    the files of ``watched()`` (the corpus's root, include and exclude lines, as
    the next build will read them), until Ctrl-C or SIGTERM. Returns the exit
    code: 0 when stopped while waiting, a build's own when it was interrupted or
    could not start (a usage error)."""
    from strata.core.encoders.embedding import kept_between_runs

    if args.dry_run:
        say("error: --watch builds again and again; --dry-run writes nothing: choose one",
            err=True)
        return EXIT_USAGE
    args.wait = True  # another build of the index (the UI, the sensor): waited for
    root = watched()[0]
    if not root.is_dir():
        say(f"error: {args.root} is not a folder", err=True)
        return EXIT_USAGE
    events = _Events(root)
    try:
        with kept_between_runs():
            return _loop(args, build, watched, events)
    finally:
        events.close()


def _loop(args, build, watched, events: _Events) -> int:
    from strata.core.encoders.embedding import EmbeddingModelMismatch
    from strata.core.llm.endpoints import EndpointError
    from strata.core.storage.layout import IndexDamaged
    from strata.stages.fingerprint import fingerprint

    first = True
    events.dirty.clear()  # what happens from here on is seen by the fingerprint below
    root, include, exclude = watched()
    before = fingerprint(root, include, exclude)
    while True:
        try:
            rc = build(args)
        except (IndexDamaged, EndpointError, EmbeddingModelMismatch) as e:
            say(f"error: {visible(e)}", err=True)  # as a one-off build says it, and go on
            rc = EXIT_FAILED
        if rc in (EXIT_SIGINT, EXIT_SIGTERM) or (rc == EXIT_USAGE and first):
            return rc
        first = False
        gc.collect()  # what the run left in cycles: the command collects only during runs
        if not root.is_dir():  # no events will come from a folder that is gone
            say(f"stopped watching: {visible(root)} is no longer a folder", err=True)
            return EXIT_USAGE
        again = " (the next change builds again)" if rc != EXIT_OK else ""
        waiting = (None if args.quiet
                   else f"watching {visible(root)} for changes{again}; Ctrl-C to stop")
        try:  # the folder as the next build starts: what the one after is compared with
            before = _next_change(before, (root, include, exclude), watched, events, waiting)
        except WatchStopped as e:
            if not args.quiet:
                say("stopped watching", err=True)
            return EXIT_OK if e.signum == signal.SIGINT else exit_code(e.signum)
        if not args.quiet:
            say(f"files changed ({before.files:,} in the corpus): building again", err=True)


def _next_change(before, last: tuple, watched, events: _Events, waiting: str | None):
    """Say ``waiting``, then wait until the corpus's content differs from the
    fingerprint ``before``, and return the one that differs. While the patterns
    cannot be read (a corpora file being edited), the folder is looked at with
    ``last``, the last that could. Ctrl-C and SIGTERM end the wait
    (:class:`WatchStopped`), from before the line is said: whoever reads it may
    signal at once. Both handlers are this wait's own: Python's KeyboardInterrupt
    is not there when the command started with SIGINT ignored (a background job
    of a shell), which a build's handling does not honour either."""
    from strata.stages.fingerprint import fingerprint

    old = {s: signal.signal(s, _stop_on) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if waiting:
            say(waiting, err=True)
        while True:
            try:
                last = watched()
            except ValueError as e:  # a CorpusError: the next build reports it
                log.debug("the corpora file cannot be read now: %s", e)
            now = fingerprint(*last, previous=before.to_dict())
            if now.content != before.content:
                return now
            before = now  # touched, not changed: the next look reads only what moves
            events.wait()
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
