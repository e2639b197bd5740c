"""Content-addressed, SQLite-backed cache of LLM responses (used by :class:`strata.core.llm.LLM`).

One row per successful response: the key is a sha256 over everything that
determines the answer (see :func:`cache_key`); the value is the raw text and its
token counts. Rows are committed one by one, so a stage interrupted halfway keeps
everything it finished and a rerun only calls the backend for the rest.
Nothing secret is stored: no API key, no headers, not even the prompt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["ResponseCache", "CachedResponse", "cache_key"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    backend TEXT,
    template TEXT,
    stage TEXT,
    created REAL
)
"""


def cache_key(*, backend: str, model: str, messages: Any, image: bytes | None,
              temperature: float, max_tokens: int, json_mode: bool, template: str) -> str:
    doc = {
        "backend": backend,
        "model": model,
        "messages": messages,
        "image": hashlib.sha256(image).hexdigest() if image is not None else None,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "json_mode": bool(json_mode),
        "template": template,
    }
    blob = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedResponse(tuple):
    """``(text, prompt_tokens, completion_tokens)``."""

    __slots__ = ()

    def __new__(cls, text: str, prompt_tokens: int, completion_tokens: int):
        return super().__new__(cls, (text, prompt_tokens, completion_tokens))

    text = property(lambda self: self[0])
    prompt_tokens = property(lambda self: self[1])
    completion_tokens = property(lambda self: self[2])


class ResponseCache:
    """Thread-safe (one connection behind a lock). ``path=None`` keeps it in memory."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            target = str(self.path)
        else:
            target = ":memory:"
        self._lock = threading.Lock()
        try:
            self._conn: sqlite3.Connection | None = self._open(target)
        except sqlite3.DatabaseError as e:
            if self.path is None:
                raise
            # a damaged cache costs only the calls it would have saved: set it aside
            # (never deleted: it may be worth a look) and start an empty one
            aside = self.path.with_name(f"{self.path.name}.damaged-{int(time.time())}")
            log.warning("LLM cache %s is unreadable (%s); moved to %s, starting empty",
                        self.path, e, aside.name)
            self.path.rename(aside)
            for suffix in ("-wal", "-shm"):
                self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
            self._conn = self._open(target)

    def _open(self, target: str) -> sqlite3.Connection:
        conn = sqlite3.connect(target, check_same_thread=False, timeout=30.0,
                               isolation_level=None)
        try:
            if self.path is not None:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
            conn.execute("SELECT count(*) FROM responses").fetchone()
        except BaseException:
            conn.close()
            raise
        return conn

    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("LLM response cache is closed")
        return self._conn

    def get(self, key: str) -> CachedResponse | None:
        with self._lock:
            row = self._c().execute(
                "SELECT text, prompt_tokens, completion_tokens FROM responses WHERE key = ?",
                (key,)).fetchone()
        return CachedResponse(*row) if row else None

    def contains(self, keys: list[str]) -> set[str]:
        found: set[str] = set()
        with self._lock:
            conn = self._c()
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                q = f"SELECT key FROM responses WHERE key IN ({','.join('?' * len(chunk))})"
                found.update(r[0] for r in conn.execute(q, chunk))
        return found

    def completion_history(self, template: str) -> tuple[int, float]:
        """(answers, mean completion tokens) of the cached answers to a template:
        what a dry run expects a new request of that template to cost."""
        with self._lock:
            n, mean = self._c().execute(
                "SELECT COUNT(*), AVG(completion_tokens) FROM responses "
                "WHERE template = ? AND completion_tokens > 0", (template,)).fetchone()
        return int(n or 0), float(mean or 0.0)

    def put(self, key: str, text: str, prompt_tokens: int, completion_tokens: int, *,
            backend: str = "", template: str = "", stage: str = "") -> None:
        # autocommit (isolation_level=None): each success is durable on return
        with self._lock:
            self._c().execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, text, int(prompt_tokens), int(completion_tokens), backend, template,
                 stage, time.time()))

    def delete(self, key: str) -> None:
        with self._lock:
            self._c().execute("DELETE FROM responses WHERE key = ?", (key,))

    def __len__(self) -> int:
        with self._lock:
            return int(self._c().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                try:
                    if self.path is not None:
                        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    self._conn.close()
                    self._conn = None
