"""Executors for scale-out: where the index job's steps (and so the parse and
embedding shards of `assets.shards`) run.

``STRATA_EXECUTOR`` picks the code location's executor: ``multiprocess``
(default: each step in its own process, at most ``STRATA_MAX_CONCURRENT`` at
once), ``in_process``, or ``dask`` (dagster-dask; a local cluster unless the
run config names a scheduler address). Celery and Kubernetes are configured the
same way with their Dagster packages; see docs/living-indexes.md.

The ``*_index_job`` functions build the job for ``dg.reconstructable``, which
out-of-process executors need to load the job again in each worker.
"""

from __future__ import annotations

import os

import dagster as dg

JOB_NAME = "index_corpus"


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


def _index_job(executor: dg.ExecutorDefinition) -> dg.JobDefinition:
    from assets import all_assets, corpora_partitions
    from pipelines.definitions import make_resources

    job = dg.define_asset_job(JOB_NAME, selection=dg.AssetSelection.assets(*all_assets),
                              partitions_def=corpora_partitions, executor_def=executor)
    defs = dg.Definitions(assets=all_assets, jobs=[job], resources=make_resources())
    return defs.resolve_job_def(JOB_NAME)


def multiprocess_index_job() -> dg.JobDefinition:
    return _index_job(dg.multiprocess_executor)


def dask_index_job() -> dg.JobDefinition:
    from pipelines.dask_engine import strata_dask_executor

    return _index_job(strata_dask_executor)
