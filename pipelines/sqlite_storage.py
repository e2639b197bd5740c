"""Dagster's SQLite storage, with each database file's engine kept for the process.

Dagster's SQLite run and event-log storages make a new SQLAlchemy engine and
connection for every transaction and throw both away after it (``NullPool``). A
run of Strata's dozen steps stores about a hundred events, each a new engine, a
connection opened and closed, a transaction, and again for the asset index; the
steps' data versions are read the same way. On a small edit that bookkeeping was
a tenth of `strata index`'s time.

:class:`PooledSqliteStorage` is Dagster's SQLite storage (the same files, tables
and migrations: an instance switches to it, and back, with nothing to convert)
whose run and event-log storages keep one engine per database file
(SQLAlchemy's ``QueuePool``, its default for SQLite files). A connection between
transactions holds no lock, so the webserver, the daemon and other commands read
and write the files as before. The engines belong to the process that made them:
a forked child makes its own and leaves its parent's alone. Only the few files
used last keep an engine (the asset index and the current run's events, in
practice), so a webserver that reads many runs does not hold a file open per run.

The project's instance (:mod:`strata.pipelines.instance_config`) names
:class:`StrataInstance` in a ``dagster.yaml`` that Strata wrote: Dagster's own
instance, whose default storage is this one, in the folder the instance is
opened from (as Dagster's default is), whether by ``$DAGSTER_HOME`` or by path. A
storage the file names (an operator's Postgres, say) is used as it says.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import yaml
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sqlite_storage import (
    DagsterSqliteStorage,
    _event_logs_directory,
    _runs_directory,
    _schedule_directory,
)
from dagster._serdes import ConfigurableClassData

# database files whose engine a process keeps at a time (the least recently used
# is let go): the asset index, the run storage and the run being written, with room
KEPT_FILES = 4


class Engines:
    """SQLAlchemy engines by database URL, for the process that made them, the
    ``keep`` used last. An engine let go is disposed: its idle connections close,
    and one still in use closes when its transaction ends."""

    def __init__(self, keep: int = KEPT_FILES):
        self.keep = keep
        self._pid = os.getpid()
        self._by_url: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, url: str):
        import sqlalchemy as sa

        with self._lock:
            if os.getpid() != self._pid:  # a forked child: its parent's connections are not its own
                self._by_url, self._pid = OrderedDict(), os.getpid()
            engine = self._by_url.pop(url, None)
            if engine is None:
                engine = sa.create_engine(url, poolclass=sa.pool.QueuePool, pool_size=1,
                                          max_overflow=-1,
                                          connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
            self._by_url[url] = engine
            while len(self._by_url) > self.keep:
                self._by_url.popitem(last=False)[1].dispose()
            return engine

    def urls(self) -> list[str]:
        with self._lock:
            return list(self._by_url) if os.getpid() == self._pid else []

    def dispose(self) -> None:
        """Let every engine go (before the files are removed, or at the end)."""
        with self._lock:
            engines = list(self._by_url.values()) if os.getpid() == self._pid else []
            self._by_url = OrderedDict()
        for engine in engines:
            engine.dispose()


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's per-run SQLite event log, each file's engine kept (:class:`Engines`)."""

    def __init__(self, base_dir: str, inst_data=None):
        self._engines = Engines()
        super().__init__(base_dir, inst_data=inst_data)

    @contextmanager
    def _connect(self, shard: str) -> Iterator:
        # Dagster's own, but for where the engine comes from
        with self._db_lock:
            engine = self._engines.get(self.conn_string_for_shard(shard))
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn:
                with conn.begin():
                    yield conn

    def wipe(self) -> None:
        self._engines.dispose()  # the run files are removed: no connection may outlive them
        super().wipe()

    def dispose(self) -> None:
        self._engines.dispose()
        super().dispose()


class PooledSqliteRunStorage(SqliteRunStorage):
    """Dagster's SQLite run storage, its file's engine kept (:class:`Engines`)."""

    def __init__(self, conn_string: str, inst_data=None):
        self._engines = Engines(keep=1)
        super().__init__(conn_string, inst_data=inst_data)

    @contextmanager
    def connect(self) -> Iterator:
        with self._engines.get(self._conn_string).connect() as conn:
            with conn.begin():
                yield conn

    def dispose(self) -> None:
        self._engines.dispose()
        super().dispose()


class PooledSqliteStorage(DagsterSqliteStorage):
    """Dagster's SQLite storage in ``base_dir`` (the instance's home: the same
    ``history/`` and ``schedules/`` folders as Dagster's default), its run and
    event-log storages keeping their engines."""

    def __init__(self, base_dir: str, inst_data=None):
        # DagsterSqliteStorage's own, with the pooled run and event-log storages
        self.base_dir = base_dir
        self._run_storage = PooledSqliteRunStorage.from_local(_runs_directory(base_dir))
        self._event_log_storage = PooledSqliteEventLogStorage(_event_logs_directory(base_dir))
        self._schedule_storage = SqliteScheduleStorage.from_local(_schedule_directory(base_dir))
        self._inst_data = inst_data
        super(DagsterSqliteStorage, self).__init__()

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        # Dagster's names its own class here; from_local makes the folder and ``cls``
        return cls.from_local(inst_data=inst_data, **config_value)


class StrataInstance(dg.DagsterInstance):
    """Dagster's instance, whose storage, unless its ``dagster.yaml`` names one, is
    :class:`PooledSqliteStorage` in the instance's folder (Dagster's default
    storage, in the same place, with its engines kept)."""

    @classmethod
    def config_schema(cls):
        return {}

    @classmethod
    def config_defaults(cls, base_dir: str):
        return {**InstanceRef.config_defaults(base_dir),
                "storage": ConfigurableClassData(__name__, PooledSqliteStorage.__name__,
                                                 yaml.dump({"base_dir": base_dir},
                                                           default_flow_style=False))}
