"""A local encoder loaded ahead of need in a process of its own.

Why: a rebuild after a small edit encodes a few texts, and the run's process
spent most of its embedding step importing torch and loading the model before
it encoded them, with the machine's other core idle. When every step of a run
executes in one process (the strata executor without workers), the first
parse shard that finds changed files starts this process (:func:`start`); it
imports torch and loads the encoder on another core while the run parses,
extracts facts and summarizes, and the embedding shard then sends it its
texts (:func:`take`). The encoder is the one the run's own process would have
loaded (same spec, batch size and threads), and traced and ONNX models compute
a text's vector from the text alone, so the vectors are the same bytes.

What it is not: a server. It serves the process that started it, over a pipe,
and exits when that pipe closes (the run ended, crashed or was killed), so it
cannot outlive its build. Anything that goes wrong here (it cannot start, the
model fails to load, it died) makes :func:`take` return None and the shard
loads the encoder itself, which reports the real error where it always did.
Runs with step processes, other executors and ``STRATA_WARM_ENCODER=0`` never
start one.

The protocol is pickled tuples on the child's stdin and a private copy of its
stdout (pickle frames itself); the child's own stdout and stderr go to the
null device, so a library's chatter can neither reach the terminal nor
corrupt the pipe.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
from contextlib import contextmanager
from typing import Any
from collections.abc import Callable

import numpy as np

from strata.core.embedding import EncoderSpec

log = logging.getLogger(__name__)

_allowed = False  # set while an executor runs every step of a run in this process
_warm: EncoderProcess | None = None


class EncoderProcessError(RuntimeError):
    """The encoder process failed or exited while it was in use."""


class EncoderProcess:
    """The parent's handle: start the child, wait for its encoder, encode through it.
    It has the attributes and methods of an encoder that the embedding stage uses
    (``spec``, ``dim``, ``encode``, ``set_threads``)."""

    def __init__(self, spec: EncoderSpec, batch_size: int):
        self.requested = (spec, batch_size)
        self.spec: EncoderSpec = spec
        self.dim = 0
        self._ready: bool | None = None  # None: not heard from yet
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True)  # a terminal's Ctrl-C is the parent's
        self._send(("load", spec, batch_size))

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _send(self, message: tuple) -> None:
        assert self._proc.stdin is not None
        pickle.dump(message, self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        self._proc.stdin.flush()

    def _receive(self) -> tuple:
        assert self._proc.stdout is not None
        try:
            reply = pickle.load(self._proc.stdout)
        except (EOFError, pickle.UnpicklingError, OSError) as e:
            raise EncoderProcessError(
                f"the encoder process exited (code {self._proc.poll()})") from e
        if reply[0] == "error":
            raise EncoderProcessError(reply[1])
        return reply

    def _call(self, message: tuple) -> tuple:
        try:
            self._send(message)
        except (BrokenPipeError, OSError) as e:
            raise EncoderProcessError(
                f"the encoder process exited (code {self._proc.poll()})") from e
        return self._receive()

    def answered(self) -> bool:
        """Whether the child's answer to the load is already waiting in the pipe."""
        import select

        if self._ready is not None:
            return True
        assert self._proc.stdout is not None
        return bool(select.select([self._proc.stdout], [], [], 0)[0])

    def ready(self) -> bool:
        """Wait until the child has loaded its encoder: True, or False when it could
        not (why is logged at debug level: the caller loads the encoder itself)."""
        if self._ready is None:
            try:
                _, self.spec, self.dim = self._receive()
                self._ready = True
            except EncoderProcessError as e:
                log.debug("the warm encoder process is not used: %s", e)
                self._ready = False
        return self._ready

    def set_threads(self, n: int) -> None:
        self._call(("threads", int(n)))

    def encode(self, texts: list[str]) -> np.ndarray:
        return self._call(("encode", list(texts)))[1]

    def close(self) -> None:
        """End the child: its pipe closes, it exits at once; killed if it has not
        within a moment (it may still be importing)."""
        for stream in (self._proc.stdin, self._proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self._proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


@contextmanager
def warm_encoders_allowed():
    """Around the execution of a run whose steps all run in this process: only
    then may a step start an encoder process for a later step to use. Whatever
    was started and not taken ends with the run."""
    global _allowed
    _allowed = True
    try:
        yield
    finally:
        _allowed = False
        release()


def start(spec: EncoderSpec, batch_size: int) -> None:
    """Start loading the local encoder ``spec`` in its own process, when this
    process runs every step of its run and ``STRATA_WARM_ENCODER`` allows it. A
    process already warming the same encoder is kept."""
    global _warm
    from strata.core.settings import EmbedSettings, load

    if not _allowed or spec.backend != "sentence-transformers" \
            or not load(EmbedSettings).warm_encoder:
        return
    if _warm is not None:
        if _warm.requested == (spec, batch_size):
            return
        release()
    try:
        _warm = EncoderProcess(spec, batch_size)
    except OSError as e:  # no process to spare: the shard loads the encoder itself
        log.debug("could not start an encoder process: %s", e)


def take(spec: EncoderSpec, batch_size: int,
         meanwhile: Callable[[], object] | None = None) -> EncoderProcess | None:
    """The warm encoder process for ``spec``, once it has loaded it; None when none
    was started for it or it could not load it (the caller loads its own).
    ``meanwhile`` runs first when the process is still loading: work this process
    would do later anyway, done while it would otherwise wait."""
    if _warm is None or _warm.requested != (spec, batch_size):
        return None
    if meanwhile is not None and not _warm.answered():
        meanwhile()
    if _warm.ready():
        return _warm
    release()
    return None


def release() -> None:
    """End the warm encoder process, if there is one (its memory goes with it)."""
    global _warm
    if _warm is not None:
        warm, _warm = _warm, None
        warm.close()


# --------------------------------------------------------------------------- the child

def _serve(requests, replies) -> None:
    from strata.core.embedding import load_encoder
    from strata.core.memory import heap_blocks

    def reply(message: tuple) -> None:
        pickle.dump(message, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()

    encoder: Any = None
    while True:
        try:
            request = pickle.load(requests)
        except (EOFError, OSError, pickle.UnpicklingError):
            return  # the parent closed the pipe or is gone
        try:
            if request[0] == "load":
                encoder = load_encoder(request[1], batch_size=request[2])
                answer: tuple = ("ready", encoder.spec, int(encoder.dim))
            elif request[0] == "threads":
                encoder.set_threads(request[1])
                answer = ("ok",)
            elif request[0] == "encode":
                with heap_blocks():  # as the parent's encoding loop does
                    answer = ("vectors", encoder.encode(request[1]))
            else:
                answer = ("error", f"unknown request {request[0]!r}")
        except Exception as e:  # noqa: BLE001 - reported to the parent, which decides
            answer = ("error", f"{type(e).__name__}: {e}"[:2000])
        reply(answer)  # an OSError when the parent is gone: this process ends


def main() -> None:
    # the pipe is a private copy of stdout; fd 1 itself goes to the null device, so
    # nothing a library prints can land inside a pickled reply
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # sys.stdout writes to fd 1: there too
    try:
        _serve(sys.stdin.buffer, replies)
    except OSError:  # the parent is gone
        pass
    os._exit(0)  # no interpreter teardown: the parent may be waiting for the exit


if __name__ == "__main__":
    main()
