"""One build of a corpus at a time, where the builds share nothing but an object store.

The build lock (:mod:`strata.core.storage.buildlock`) is an ``flock`` on the index folder:
it holds between processes of one machine and not between machines, which share at
most the store a corpus's versions are mirrored to. So a corpus with a ``mirror``
also takes a *lease object* there, ``<mirror>/LEASE``: JSON naming the run that
holds it and when the lease runs out. Every change to it is a conditional write —
created only if absent (``If-None-Match: *``), replaced only if unchanged since it
was read (``If-Match: <etag>``) — so when two builds reach for it at once the store
lets exactly one through, on S3, MinIO, GCS or Azure alike (obstore speaks to each).

A lease lasts ``ttl_s`` from its last renewal; every step of the holding run renews
it as it starts, and publishing gives it back. A run that died leaves a lease that
runs out; the next build takes it over (conditionally, so two takers cannot both
win). Nothing here waits: a build that finds the lease held fails before it writes,
naming the holder, as a locked index folder does.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable

LEASE_OBJECT = "LEASE"
DEFAULT_TTL_S = 2 * 3600.0  # longer than any one step of a large build

__all__ = ["LEASE_OBJECT", "DEFAULT_TTL_S", "LeaseHeld", "StoreLease", "store_for"]


class LeaseHeld(RuntimeError):
    """Another live build holds the corpus's lease on the store."""

    def __init__(self, uri: str, info: dict):
        self.uri = uri
        self.info = info
        who = info.get("what") or f"run {str(info.get('run_id', '?'))[:8]}"
        where = f" on {info['host']}" if info.get("host") else ""
        super().__init__(f"another build of this corpus holds its lease on the object store "
                         f"({who}{where}, until {time.strftime('%H:%M:%S', time.gmtime(info.get('expires', 0)))} UTC)")


def store_for(uri: str):
    """An obstore store for a mirror URI (:func:`strata.core.storage.object_store.open_store`)
    and the lease's path inside it."""
    from strata.core.storage.object_store import key, open_store

    store, prefix = open_store(uri)
    return store, key(prefix, LEASE_OBJECT)


class StoreLease:
    """The lease of one mirror URI; ``clock`` is injectable so tests need no waiting."""

    def __init__(self, uri: str, ttl_s: float = DEFAULT_TTL_S,
                 clock: Callable[[], float] = time.time):
        self.uri = uri
        self.ttl_s = ttl_s
        self.clock = clock
        self.store, self.path = store_for(uri)

    def read(self) -> tuple[dict | None, str | None]:
        """(the lease's content, its etag), or (None, None) when there is none."""
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            got = obstore.get(self.store, self.path)
        except (NotFoundError, FileNotFoundError):
            return None, None
        try:
            info = json.loads(bytes(got.bytes()))
        except ValueError:
            info = {}  # unreadable: treated as a lease that has run out
        return (info if isinstance(info, dict) else {}), got.meta.get("e_tag")

    def claim(self, run_id: str, what: str | None = None,
              run_is_live: Callable[[str], bool] = lambda _run_id: True) -> dict:
        """Take or renew the lease for ``run_id``; raise :class:`LeaseHeld` when a
        lease of another run has not run out and that run may still be going
        (``run_is_live``: a run this Dagster instance knows to have finished left its
        lease behind, and it is taken over at once). Returns what was written; a store
        that cannot be reached raises :class:`strata.core.storage.object_store.StoreError`."""
        from strata.core.storage.object_store import store_errors

        with store_errors(self.uri, "taking the build's lease on"):
            return self._claim(run_id, what, run_is_live)

    def _claim(self, run_id: str, what: str | None,
               run_is_live: Callable[[str], bool]) -> dict:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        for _ in range(5):  # lost races: read again and decide again
            info, etag = self.read()
            now = self.clock()
            other = info.get("run_id") if info else None
            if other not in (None, run_id) and float(info.get("expires", 0)) > now \
                    and run_is_live(other):
                raise LeaseHeld(self.uri, info)
            mine = {"run_id": run_id, "what": what or f"Dagster run {run_id[:8]}",
                    "host": socket.gethostname(), "expires": now + self.ttl_s}
            body = json.dumps(mine).encode()
            try:
                if etag is None:
                    obstore.put(self.store, self.path, body, mode="create")
                else:
                    obstore.put(self.store, self.path, body, mode={"e_tag": etag})
                return mine
            except (AlreadyExistsError, PreconditionError):
                continue  # another build wrote it between our read and our write
        info, _ = self.read()
        raise LeaseHeld(self.uri, info or {})

    def release(self, run_id: str) -> bool:
        """Give the lease back if ``run_id`` holds it (a conditional write of an
        expired lease, so a taker that got there first is left alone)."""
        import obstore
        from obstore.exceptions import PreconditionError

        info, etag = self.read()
        if not info or info.get("run_id") != run_id or etag is None:
            return False
        released = {"run_id": None, "released_by": run_id, "expires": 0}
        try:
            obstore.put(self.store, self.path, json.dumps(released).encode(), mode={"e_tag": etag})
        except PreconditionError:
            return False
        return True
