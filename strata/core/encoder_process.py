"""A local encoder loaded ahead of need in a process of its own.

Why: a rebuild after a small edit encodes a few texts, and the run's process
spent most of its embedding step importing torch and loading the model before
it encoded them, with the machine's other core idle. When every step of a run
executes in one process (the strata executor without workers), the first
parse shard that finds changed files starts this process (:func:`start`), or
the ``strata index`` command already did, before its run, from the files'
modification times (:func:`start_before_run`); it imports torch and loads the
encoder on another core while the run parses, extracts facts and summarizes,
and the embedding shard then sends it its texts (:func:`take`). The parse
shard hands it the new texts of the files it parsed as soon as it has made
their nodes (:func:`prefetch`), so that the encoding runs beside the steps
before the embedding where the encoder is loaded by then (``--watch``, or a
command that started it before its run); the shard's request then finds their
vectors made. The encoder is the one the run's own process would have
loaded (same spec, batch size and threads), and traced and ONNX models compute
a text's vector from the text alone, so the vectors are the same bytes.

What it is not: a server. It serves the process that started it, over a pipe,
and exits when that pipe closes (the command ended, crashed or was killed), so
it cannot outlive the command that started it. Anything that goes wrong here
(it cannot start, the model fails to load, it died) makes :func:`take` return
None and the shard loads the encoder itself, which reports the real error where
it always did.
Runs with step processes, other executors and ``STRATA_WARM_ENCODER=0`` never
start one. A command that builds again and again in one process (``strata index
--watch``) keeps it from one run to the next (:func:`kept_between_runs`).

The protocol is frames on the child's stdin and a private copy of its stdout:
a length, a JSON header, and for vectors their float32 bytes (nothing is
unpickled: a frame can only ever be data). The child's own stdout and stderr
go to the null device, so a library's chatter can neither reach the terminal
nor corrupt the pipe.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import asdict
from typing import IO, Any
from collections.abc import Callable

import numpy as np

from strata.core.embedding import EncoderSpec

log = logging.getLogger(__name__)

_allowed = False  # set while an executor runs every step of a run in this process
_kept = False  # set while a command runs build after build in this process
_warm: EncoderProcess | None = None


class EncoderProcessError(RuntimeError):
    """The encoder process failed or exited while it was in use."""


_FRAME = struct.Struct("<II")  # header bytes, payload bytes


def _write_frame(stream: IO[bytes], header: dict, payload: bytes = b"") -> None:
    head = json.dumps(header).encode()
    stream.write(_FRAME.pack(len(head), len(payload)) + head + payload)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> tuple[dict, bytes]:
    """One frame; EOFError when the other side closed the pipe (or cut a frame short)."""
    sizes = stream.read(_FRAME.size)
    if len(sizes) < _FRAME.size:
        raise EOFError
    n_head, n_payload = _FRAME.unpack(sizes)
    head, payload = stream.read(n_head), stream.read(n_payload)
    if len(head) < n_head or len(payload) < n_payload:
        raise EOFError
    return json.loads(head), payload


class EncoderProcess:
    """The parent's handle: start the child, wait for its encoder, encode through it.
    It has the attributes and methods of an encoder that the embedding stage uses
    (``spec``, ``dim``, ``encode``, ``token_counts``, ``set_threads``)."""

    def __init__(self, spec: EncoderSpec, batch_size: int):
        self.requested = (spec, batch_size)
        self.spec: EncoderSpec = spec
        self.dim = 0
        self._ready: bool | None = None  # None: not heard from yet
        self.prefetched = 0  # texts whose vectors were encoded ahead, by a prefetch
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True)  # a terminal's Ctrl-C is the parent's
        self._send({"op": "load", "spec": asdict(spec), "batch_size": batch_size})

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _send(self, message: dict) -> None:
        assert self._proc.stdin is not None
        _write_frame(self._proc.stdin, message)

    def _receive(self) -> tuple[dict, bytes]:
        assert self._proc.stdout is not None
        try:
            reply, payload = _read_frame(self._proc.stdout)
        except (EOFError, ValueError, OSError) as e:
            raise EncoderProcessError(
                f"the encoder process exited (code {self._proc.poll()})") from e
        if reply.get("op") == "error":
            raise EncoderProcessError(str(reply.get("message")))
        return reply, payload

    def _call(self, message: dict) -> tuple[dict, bytes]:
        try:
            self._send(message)
        except (BrokenPipeError, OSError) as e:
            raise EncoderProcessError(
                f"the encoder process exited (code {self._proc.poll()})") from e
        return self._receive()

    def ready(self) -> bool:
        """Wait until the child has loaded its encoder: True, or False when it could
        not (why is logged at debug level: the caller loads the encoder itself)."""
        if self._ready is None:
            try:
                reply, _ = self._receive()
                self.spec, self.dim = EncoderSpec(**reply["spec"]), int(reply["dim"])
                self._ready = True
            except EncoderProcessError as e:
                log.debug("the warm encoder process is not used: %s", e)
                self._ready = False
        return self._ready

    def alive(self) -> bool:
        return self._proc.poll() is None

    def set_threads(self, n: int) -> None:
        self._call({"op": "threads", "n": int(n)})

    def token_counts(self, texts: list[str]) -> list[int] | None:
        """The child's encoder's token counts of ``texts`` (None where it has none),
        which the caller orders its texts by, as it would its own encoder's: sorted
        by characters, calls straddle padded lengths and run part-empty passes."""
        reply, _ = self._call({"op": "count", "texts": list(texts)})
        return reply.get("counts")

    def encode(self, texts: list[str]) -> np.ndarray:
        reply, payload = self._call({"op": "encode", "texts": list(texts)})
        self.prefetched += int(reply.get("prefetched", 0))
        return np.frombuffer(payload, dtype=np.float32).reshape(reply["shape"]).copy()

    def prefetch(self, texts: list[str]) -> None:
        """Have the child encode ``texts`` as soon as it can, ahead of the
        :meth:`encode` that will ask for them; nothing is awaited (the child
        answers no prefetch)."""
        try:
            self._send({"op": "prefetch", "texts": list(texts)})
        except (BrokenPipeError, OSError) as e:  # gone: the shard's encode reports it
            log.debug("could not hand texts to the encoder process: %s", e)

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
    was started and not taken ends with the run, unless it is kept for the next
    (:func:`done_encoding`)."""
    global _allowed
    _allowed = True
    try:
        yield
    finally:
        _allowed = False
        done_encoding()


@contextmanager
def kept_between_runs():
    """Around a command that runs one build after another in this process
    (``strata index --watch``): the encoder process a run starts outlives that
    run, and every run starts one (not only those that find few files changed),
    so the next run's few texts go to an encoder that is already loaded. Its
    memory is another process's, not the build's. It ends with the block."""
    global _kept
    _kept = True
    try:
        yield
    finally:
        _kept = False
        release()


def keeping() -> bool:
    """Whether the encoder process is kept from one run to the next (above)."""
    return _kept


def done_encoding() -> None:
    """Every text of the run is encoded: the encoder process ends, unless it is
    kept for the next run (:func:`kept_between_runs`)."""
    if not _kept:
        release()


# A build that finds at most this share of its files changed starts loading the
# encoder in a process of its own. Why not always: the loading is a second or two,
# which matters in a rebuild of a few seconds, not in a build that parses most of a
# corpus for minutes, where the encoder would only sit in memory beside the steps
# before the embedding.
WARM_SHARE = 0.5


def worth_warming(changed: int, files: int) -> bool:
    """Whether a build that finds ``changed`` of its ``files`` changed should
    start the encoder process: a few changed files (texts to encode soon, in a run
    too short to hide the encoder's loading), or any build of a command that keeps
    the process from one run to the next (:func:`kept_between_runs`)."""
    return _kept or 0 < changed <= files * WARM_SHARE


def start(spec: EncoderSpec, batch_size: int) -> None:
    """Start loading the local encoder ``spec`` in its own process, when this
    process runs every step of its run and ``STRATA_WARM_ENCODER`` allows it. A
    process already warming the same encoder is kept."""
    if _allowed:
        _launch(spec, batch_size)


def start_before_run(spec: EncoderSpec, batch_size: int) -> None:
    """:func:`start`, by a command about to run a build whose steps will all run in
    this process, before the run itself (the command's imports, Dagster's set-up
    and the first steps take a second or more, which the loading then overlaps).
    The run's parse shard asks for the same encoder and keeps this process; the
    command ends it with :func:`done_encoding` should the run not take it."""
    _launch(spec, batch_size)


def may_start(spec: EncoderSpec) -> bool:
    """Whether a process may be started for ``spec`` at all: a local model (an
    endpoint has nothing to load), and ``STRATA_WARM_ENCODER`` not switched off."""
    from strata.core.settings import EmbedSettings, load

    return spec.backend == "sentence-transformers" and load(EmbedSettings).warm_encoder


def _launch(spec: EncoderSpec, batch_size: int) -> None:
    global _warm
    if not may_start(spec):
        return
    if _warm is not None:
        if _warm.requested == (spec, batch_size):
            return
        release()
    try:
        _warm = EncoderProcess(spec, batch_size)
    except OSError as e:  # no process to spare: the shard loads the encoder itself
        log.debug("could not start an encoder process: %s", e)


# Texts a prefetch may hand over, and vectors the child keeps for them: a small
# edit's, not a build's (a build that parses most of a corpus starts no process).
PREFETCH_MAX = 4096


def warming(spec: EncoderSpec) -> bool:
    """Whether an encoder process for ``spec`` was started (loading or loaded)."""
    return _warm is not None and _warm.requested[0] == spec


def prefetch(spec: EncoderSpec, texts: list[str]) -> bool:
    """Hand ``texts`` to the encoder process warming ``spec``, to encode while the
    run goes on with the steps before the embedding. Returns whether it did:
    only a torch runtime's vectors are the same bytes whatever they are encoded
    with (:func:`strata.core.torch_trace.shape_batches`), and at most
    ``PREFETCH_MAX`` texts are kept."""
    from strata.core.embedding import TORCH_RUNTIMES

    if not warming(spec) or not texts or len(texts) > PREFETCH_MAX \
            or spec.runtime not in TORCH_RUNTIMES or not _warm.alive():
        return False
    _warm.prefetch(texts)
    return True


def take(spec: EncoderSpec, batch_size: int,
         meanwhile: Callable[[], object] | None = None) -> EncoderProcess | None:
    """The warm encoder process for ``spec``, once it has loaded it; None when none
    was started for it or it could not load it (the caller loads its own).

    ``meanwhile`` is work this process would do later anyway (an import): it runs
    in a thread of its own, while this process waits for the child to load and
    then to encode, its main thread blocked on the pipe with the GIL released. A
    failure there is left for the later use to meet and report."""
    if _warm is None or _warm.requested != (spec, batch_size):
        return None
    if not _warm.alive():  # one kept from an earlier run that has exited since
        release()
        return None
    if meanwhile is not None:
        threading.Thread(target=_quietly, args=(meanwhile,), daemon=True,
                         name="strata-meanwhile").start()
    if _warm.ready():
        return _warm
    release()
    return None


def _quietly(work: Callable[[], object]) -> None:
    try:
        work()
    except Exception as e:  # noqa: BLE001 - whoever needs it later does it again, and reports
        log.debug("work done while waiting for the encoder failed: %s", e)


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

    encoder: Any = None
    ahead: dict[str, np.ndarray] = {}  # text → its vector, encoded by a prefetch
    while True:
        try:
            request, _ = _read_frame(requests)
        except (EOFError, OSError, ValueError):
            return  # the parent closed the pipe or is gone
        payload = b""
        if request.get("op") == "prefetch":  # no answer: the parent is not waiting
            _encode_ahead(encoder, request, ahead)
            continue
        try:
            op = request.get("op")
            if op == "load":
                encoder = load_encoder(EncoderSpec(**request["spec"]),
                                       batch_size=request["batch_size"])
                answer: dict = {"op": "ready", "spec": asdict(encoder.spec),
                                "dim": int(encoder.dim)}
            elif op == "threads":
                encoder.set_threads(request["n"])
                answer = {"op": "ok"}
            elif op == "count":
                count = getattr(encoder, "token_counts", None)
                answer = {"op": "counts",
                          "counts": count(request["texts"]) if count is not None else None}
            elif op == "encode":
                texts = request["texts"]
                unique = list(dict.fromkeys(texts))
                made = {t: ahead.pop(t) for t in unique if t in ahead}  # used once
                todo = [t for t in unique if t not in made]
                with heap_blocks():  # as the parent's encoding loop does
                    got = dict(zip(todo, encoder.encode(todo))) if todo else {}
                got.update(made)
                vectors = np.ascontiguousarray([got[t] for t in texts], dtype=np.float32) \
                    .reshape(len(texts), int(encoder.dim))
                answer = {"op": "vectors", "shape": list(vectors.shape),
                          "prefetched": sum(t in made for t in texts)}
                payload = vectors.tobytes()
            else:
                answer = {"op": "error", "message": f"unknown request {op!r}"}
        except Exception as e:  # noqa: BLE001 - reported to the parent, which decides
            answer, payload = {"op": "error", "message": f"{type(e).__name__}: {e}"[:2000]}, b""
        _write_frame(replies, answer, payload)  # an OSError when the parent is gone: this ends


def _encode_ahead(encoder, request: dict, ahead: dict) -> None:
    """Encode a prefetch's texts into ``ahead``. Anything that goes wrong only
    leaves the texts to the encode that asks for them (and reports it there)."""
    from strata.core.memory import heap_blocks

    texts = [t for t in request.get("texts", []) if t not in ahead]
    if encoder is None or not texts:
        return
    if len(ahead) + len(texts) > PREFETCH_MAX:
        ahead.clear()  # texts of earlier runs that nobody asked for
    try:
        with heap_blocks():
            ahead.update(zip(texts, np.asarray(encoder.encode(texts), dtype=np.float32)))
    except Exception as e:  # noqa: BLE001 - see above
        log.debug("prefetched texts were not encoded: %s", e)


def main() -> None:
    # the pipe is a private copy of stdout; fd 1 itself goes to the null device, so
    # nothing a library prints can land inside a reply
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # sys.stdout writes to fd 1: there too
    try:
        _serve(sys.stdin.buffer, replies)
    except OSError:  # the parent is gone
        pass
    os._exit(0)  # no interpreter teardown: the parent may be waiting for the exit


if __name__ == "__main__":
    main()
