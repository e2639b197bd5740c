"""Executors for scale-out: where the index job's steps (and so the parse and
embedding shards of `assets.shards`) run.

``STRATA_EXECUTOR`` picks the code location's executor: ``multiprocess``
(default: each step in its own process, at most ``STRATA_MAX_CONCURRENT`` at
once), ``in_process``, or ``dask`` (dagster-dask; a local cluster unless the
run config names a scheduler address). Celery and Kubernetes are configured the
same way with their Dagster packages; see docs/living-indexes.md.

The jobs for ``dg.reconstructable`` (out-of-process executors load the job
again in each worker) are built in :mod:`pipelines.definitions`, from the one
``index_corpus`` job of :mod:`pipelines.jobs`.
"""

from __future__ import annotations

import os

import dagster as dg


def executor_from_env() -> dg.ExecutorDefinition:
    kind = os.environ.get("STRATA_EXECUTOR", "multiprocess").strip().lower()
    if kind == "in_process":
        return dg.in_process_executor
    if kind == "multiprocess":
        limit = int(os.environ.get("STRATA_MAX_CONCURRENT", "0") or 0)
        return dg.multiprocess_executor.configured({"max_concurrent": limit}) if limit > 0 \
            else dg.multiprocess_executor
    if kind == "dask":
        try:
            from pipelines.dask_engine import strata_dask_executor
        except ImportError as e:  # pragma: no cover - depends on the install
            raise RuntimeError("STRATA_EXECUTOR=dask needs dagster-dask: "
                               "pip install 'strata[scale]'") from e
        return strata_dask_executor
    raise ValueError(f"STRATA_EXECUTOR={kind!r}: use multiprocess, in_process or dask")
