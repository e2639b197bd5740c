"""Progress lines: the one format a long step logs its progress in, and the
parser `strata index` reads them back with.

A step (parse, the LLM stages, embedding) logs ``label: done/total (pct%)``,
then ``· 12.5/s · ETA 1:23`` once a rate is known, every few seconds. The line
is the structured record: it is what the Dagster UI's run log shows, what
`strata index` prints off a terminal, and what its progress bar is drawn from
on one (the bar cannot be fed directly: with ``--workers`` the step runs in
another process, and the event log is what both share).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from collections.abc import Callable
from typing import Protocol

from strata.core.config.settings import BuildSettings, value_or_default


_LINE = re.compile(r"^(?P<label>[^:\n]+): (?P<done>\d+)/(?P<total>\d+) \((?P<pct>\d+)%\)"
                   r"(?: · (?P<rate>[\d.]+)/s)?(?: · ETA (?P<eta>[\d:]+))?")


@dataclass(frozen=True)
class Progress:
    label: str
    done: int
    total: int
    rate: float | None = None  # items per second since the step's first line
    eta_s: float | None = None

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0


def clock(seconds: float) -> str:
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def format_line(p: Progress) -> str:
    pct = int(100 * p.done / p.total) if p.total else 100
    text = f"{p.label}: {p.done}/{p.total} ({pct}%)"
    if p.rate is not None:
        text += f" · {p.rate:.1f}/s" if p.rate < 100 else f" · {p.rate:.0f}/s"
        if p.eta_s is not None and p.done < p.total:
            text += f" · ETA {clock(p.eta_s)}"
    return text


def parse_line(text: str) -> Progress | None:
    m = _LINE.match(text or "")
    if not m:
        return None
    eta = None
    if m.group("eta"):
        parts = [int(x) for x in m.group("eta").split(":")]
        eta = float(sum(v * 60 ** i for i, v in enumerate(reversed(parts))))
    return Progress(m.group("label").strip(), int(m.group("done")), int(m.group("total")),
                    float(m.group("rate")) if m.group("rate") else None, eta)


def every_s() -> float:
    """``$STRATA_PROGRESS_EVERY_S`` (:class:`strata.core.config.settings.BuildSettings`); its
    default when the variable cannot be used (progress lines never fail a step)."""
    return value_or_default(BuildSettings, "progress_every_s")


class ProgressCallback(Protocol):
    """What a stage function reports its progress through: ``done`` of ``total``
    items, and where items differ in cost (the embedding step's texts, encoded
    shortest first) ``work``, the share of the whole cost done so far, which the
    ETA is then measured on."""

    def __call__(self, done: int, total: int, work: float | None = None) -> None: ...


def tracker(label: str, emit: Callable[[str], None],
            interval_s: float | None = None) -> ProgressCallback:
    """A ``progress(done, total)`` callback for stage functions: emits a line at
    most every ``interval_s`` seconds (``$STRATA_PROGRESS_EVERY_S``, default 2),
    and always the first and the last. The rate counts from the last call before
    the count moved (an LLM stage's first call already counts its cache hits; an
    encoder may load between two calls at 0), and starts again when the stage
    begins a new pass (``done`` goes back or ``total`` changes). The ETA is the
    rest of the work at the rate measured since then: of the items, or of
    ``work`` where the caller gives it (items that grow in cost as the stage
    goes would otherwise promise an early end)."""
    gap = every_s() if interval_s is None else interval_s
    state = {"t0": None, "d0": 0, "w0": None, "total": None, "last_t": None, "last_done": -1}

    def report(done: int, total: int, work: float | None = None) -> None:
        now = time.monotonic()
        if state["t0"] is None or total != state["total"] or done < state["last_done"]:
            state.update(t0=now, d0=done, w0=work, total=total, last_t=None)
        elif done == state["d0"]:
            # nothing moved yet (a model loading): the rate starts here
            state.update(t0=now, w0=work)
        state["last_done"] = done
        edge = done in (0, total) or state["last_t"] is None
        if not edge and now - state["last_t"] < gap:
            return
        state["last_t"] = now
        elapsed = now - state["t0"]
        rate = eta = None
        if elapsed > 0 and done > state["d0"]:
            rate = (done - state["d0"]) / elapsed
            eta = (total - done) / rate
            w0 = state["w0"]
            if work is not None and w0 is not None and work > w0:
                eta = elapsed * max(1.0 - work, 0.0) / (work - w0)
        emit(format_line(Progress(label, done, total, rate, eta)))
    return report
