"""The indexes a service answers from, and their hot reload.

Each request pins the :class:`retrieval.Index` it started with (one object,
one version) for its whole duration. A new published version is opened and
warmed up on a background thread while requests go on against the old one,
then swapped in with one assignment, so no request fails or mixes versions
across a publish. Old version folders stay on disk for the publisher's grace
period (``prune_grace_s``), longer than any request holds one.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path

from strata.retrieval import EmbeddingModelMismatch, Index
from strata.core.encoders.embedding import BatchingEncoder
from strata.core.storage.layout import IndexDamaged, IndexLayout, IndexNotFound

log = logging.getLogger("strata.service")
REMOTE_MIN_INTERVAL_S = 30.0
WARM_UP_MODES = ("auto", "flat", "hierarchical", "diffusion", "routed")


class UnknownIndex(LookupError):
    pass


class IndexNotNamed(UnknownIndex):
    """A request that names no index to a service that serves several: the
    request is incomplete (422, the names listed), not aimed at a missing index."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Loaded:
    index: Index
    loaded_at: str


class IndexSlot:
    """One served index: the version in use, and the watch for newer ones."""

    def __init__(self, name: str, location: str, reload_interval_s: float, warm_up: bool,
                 background: bool = True):
        from strata.core.storage.mirror import is_remote

        self.name = name
        self.location = location
        self.remote = is_remote(location)
        self.interval = (max(reload_interval_s, REMOTE_MIN_INTERVAL_S) if self.remote
                         else reload_interval_s)
        self.warm_up = warm_up
        self.latest_seen: int | None = None
        self.reload_error: str | None = None
        self._failed: int | None = None  # a version that failed to load: not retried
        self._lock = threading.Lock()
        self._loading = False
        self._last_check = time.monotonic()
        # opening reads the manifest and maps and checks the query arrays (a damaged
        # version is refused here as a reload refuses it); with ``background`` the
        # encoder and the warm-up queries follow on a thread, so the service answers
        # (health, the first request) while they run; without it the first request
        # loads what it needs
        self._current = Loaded(self._open(None, None, ready=False), _now())
        self.latest_seen = self._current.index.version
        self.ready = threading.Event()
        self._ready_lock = threading.Lock()
        if background:
            threading.Thread(target=self._get_ready, args=(self._current.index,), daemon=True,
                             name=f"strata-ready-{name or location}").start()

    def _get_ready(self, idx: Index) -> None:
        with self._ready_lock:  # the background thread, or the first request, not both
            if self.ready.is_set():
                return
            try:
                self._ready(idx)
            except Exception as e:  # noqa: BLE001 - a request meets the same error, in one line
                log.warning("index %s: warming up failed: %s", self.name, e)
            finally:
                self.ready.set()

    # -- reading the published state --------------------------------------------
    def _published(self) -> int | None:
        if self.remote:
            from strata.core.storage.mirror import remote_current

            return remote_current(self.location)
        return IndexLayout(self.location).read_current()  # a garbage CURRENT is reported

    def versions(self) -> list[int]:
        if self.remote:
            return [self._current.index.version]
        return IndexLayout(self.location).versions()

    def _open(self, version: int | None, previous: Index | None, ready: bool = True) -> Index:
        """Open a version, check what its queries read (:meth:`Index.verify`: the
        same refusal at start as on a reload) and with ``ready`` get it ready
        (:meth:`_ready`), embedding its queries with the previous version's
        encoder when the model is the same (no second model load), else with a
        new one."""
        encoder = previous.encoder if previous is not None else None
        try:
            idx = Index.open(self.location, version=version, encoder=encoder)
        except EmbeddingModelMismatch:
            idx = Index.open(self.location, version=version)  # the new version changed model
        idx.verify()
        if ready:
            self._ready(idx)
        return idx

    def _ready(self, idx: Index) -> None:
        """Queries embedded through one :class:`BatchingEncoder`, so concurrent
        requests' queries are embedded together; then one query per mode when
        warming up is on (the arrays mapped, each mode's state built)."""
        if not isinstance(idx.encoder, BatchingEncoder):
            idx.use_encoder(BatchingEncoder(idx.encoder))
        if self.warm_up:
            for mode in WARM_UP_MODES:
                idx.search("warm up", mode=mode, k=1)

    # -- serving ----------------------------------------------------------------
    @property
    def current(self) -> Loaded:
        return self._current

    def get(self, embed: bool = True) -> Index:
        """The index a request should use (and, at most once per interval, a look
        at whether a newer version was published). A request that embeds no query
        (``embed`` False: an outline, a node, its neighbourhood) does not wait for
        the encoder to load."""
        if embed and not self.ready.is_set():
            self._get_ready(self._current.index)
        now = time.monotonic()
        if now - self._last_check >= self.interval:
            self._last_check = now
            self.check()
        return self._current.index

    def check(self, wait: bool = False) -> None:
        """Start loading the published version when it is not the one in use."""
        try:
            published = self._published()
        except (IndexNotFound, IndexDamaged, OSError, ValueError) as e:
            self.reload_error = f"cannot read the published version: {e}"
            return
        if published is None:
            return
        self.latest_seen = published
        with self._lock:
            if published in (self._current.index.version, self._failed) or self._loading:
                return
            self._loading = True
        t = threading.Thread(target=self._load, args=(published,), daemon=True,
                             name=f"strata-reload-{self.name}")
        t.start()
        if wait:
            t.join()

    def _load(self, version: int) -> None:
        t0 = time.perf_counter()
        try:
            idx = self._open(version, self._current.index)
        except Exception as e:  # noqa: BLE001 - keep serving the version in use
            self.reload_error = f"version {version}: {type(e).__name__}: {e}"
            self._failed = version
            log.warning("index %s: could not load version %s (%s); still serving version %s",
                        self.name, version, self.reload_error, self._current.index.version)
        else:
            old = self._current.index.version
            # the error is cleared before the switch: /health read between the two must
            # not pair the new version with the old version's error
            self.reload_error = None
            self._failed = None
            self._current = Loaded(idx, _now())  # one assignment: requests see old or new
            log.info("index %s: switched from version %s to %s (loaded in %.1f s)",
                     self.name, old, version, time.perf_counter() - t0)
        finally:
            with self._lock:
                self._loading = False


class Registry:
    def __init__(self, locations: list[str], reload_interval_s: float = 1.0,
                 warm_up: bool = True, background: bool = True):
        import weakref

        self.slots: dict[str, IndexSlot] = {}
        # each index's table of usable images, read once (an index version never changes)
        self._images: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        for entry in locations:
            name, location = self._split(entry)
            slot = IndexSlot(name or "", location, reload_interval_s, warm_up, background)
            slot.name = name or slot.current.index.corpus
            if slot.name in self.slots:
                raise ValueError(f"two indexes are named {slot.name!r}; name them apart with "
                                 "--index NAME=DIR")
            self.slots[slot.name] = slot
            log.info("serving index %s version %s from %s", slot.name,
                     slot.current.index.version, location)

    @staticmethod
    def _split(entry: str) -> tuple[str | None, str]:
        name, sep, location = entry.partition("=")
        if sep and name and "/" not in name and ":" not in name:
            return name, location
        return None, entry

    def get(self, name: str | None, embed: bool = True) -> tuple[str, Index]:
        if name is None:
            if len(self.slots) == 1:
                name = next(iter(self.slots))
            else:
                raise IndexNotNamed("this service serves several indexes; name one with "
                                   f"\"index\": one of {', '.join(sorted(self.slots))}")
        slot = self.slots.get(name)
        if slot is None:
            raise UnknownIndex(f"no index named {name!r}; this service serves "
                               f"{', '.join(sorted(self.slots))}")
        return name, slot.get(embed)

    def image_file(self, idx: Index, node_id: str) -> Path | None:
        """The image file of an image node: a blob in the version folder, or the
        file in the corpus root that the index recorded (never another path)."""
        images = self._images.get(idx)
        if images is None:
            import polars as pl

            table = idx.table("images")
            images = {} if table is None else {
                r["node_id"]: r for r in table.filter(pl.col("status") == "ok")
                .select("node_id", "source", "path").iter_rows(named=True)}
            self._images[idx] = images
        row = images.get(node_id)
        if row is None:
            return None
        if row["source"] == "blob":
            base = IndexLayout(idx.path).version_dir(idx.version) / "blobs"
        elif row["source"] == "file":
            base = Path(idx.manifest.get("root") or "")
        else:
            return None
        try:
            base = base.resolve()
            path = (base / row["path"]).resolve()
        except OSError:
            return None
        if not path.is_relative_to(base) or not path.is_file():
            return None
        return path
