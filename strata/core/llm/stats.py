"""Per-stage counters of an LLM: what each stage asked, what the cache answered,
what it cost and what failed. Worker threads of several stages update them at
once, so every change goes through one lock, and readers get copies."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field

__all__ = ["StageStats", "StageCounters"]


@dataclass
class StageStats:
    calls: int = 0  # requests that reached the backend (not cached)
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    retries: int = 0
    seconds: float = 0.0
    failed_keys: list[str] = field(default_factory=list)


class StageCounters:
    """The :class:`StageStats` of every stage an LLM served, by stage name."""

    def __init__(self) -> None:
        self._stats: dict[str, StageStats] = {}
        self._lock = threading.Lock()

    def bump(self, stage: str, **deltas: float) -> None:
        """Add ``deltas`` to the stage's counters (the stage exists from then on)."""
        with self._lock:
            st = self._stats.setdefault(stage, StageStats())
            for k, v in deltas.items():
                setattr(st, k, getattr(st, k) + v)

    def fail(self, stage: str, key: str) -> None:
        with self._lock:
            st = self._stats.setdefault(stage, StageStats())
            st.failures += 1
            st.failed_keys.append(key)

    def get(self, stage: str) -> StageStats:
        """A snapshot of the stage's counters (zeros for a stage never seen)."""
        with self._lock:
            st = self._stats.get(stage) or StageStats()
            return dataclasses.replace(st, failed_keys=list(st.failed_keys))

    def all(self) -> dict[str, StageStats]:
        with self._lock:
            names = list(self._stats)
        return {s: self.get(s) for s in names}
