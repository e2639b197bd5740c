"""How many requests an LLM sends at once, lowered when the endpoint times out.

Why: a local server (llama.cpp's, Ollama with one slot) answers one request at a
time and queues the rest. With ``concurrency`` 4 and a model that takes 20 s an
answer on a busy CPU, the fourth request waits a minute in the queue and times
out; it is asked again, the server still computes the answer nobody waits for,
and every timeout makes the queue longer (as a small model on a busy CPU behind
llama.cpp's server does). A timeout is the server saying it has more than it can do:
:class:`Throttle` halves the requests in flight (down to one) and keeps it there
for the rest of the LLM's life, so the queue drains instead of growing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Throttle"]


class Throttle:
    """A counting gate whose limit can only go down (see the module docstring)."""

    def __init__(self, limit: int, on_change: Callable[[int, int], None] | None = None):
        self.limit = max(1, int(limit))
        self.active = 0
        self._cond = threading.Condition()
        self._on_change = on_change

    def acquire(self, why_stop: Callable[[], str | None] = lambda: None) -> str | None:
        """Take one of the ``limit`` places (waiting for one); returns None, or the
        reason ``why_stop`` gave to stop waiting (then nothing was taken)."""
        with self._cond:
            while self.active >= self.limit:
                why = why_stop()
                if why:
                    return why
                self._cond.wait(0.25)
            self.active += 1
        return None

    def release(self) -> None:
        with self._cond:
            self.active -= 1
            self._cond.notify_all()

    def timed_out(self) -> None:
        """A request got no answer in time: halve the limit (not below 1)."""
        with self._cond:
            old = self.limit
            self.limit = max(1, old // 2)
        if self.limit != old and self._on_change is not None:
            self._on_change(old, self.limit)
