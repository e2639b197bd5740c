"""Dagster's Dask executor (dagster-dask) made safe for this project's runs.

dagster-dask hands each step to ``Client.submit`` with the run record among
the arguments. Dask walks tuple arguments looking for futures, and with Dagster
1.13 a run of a dynamically partitioned job (every Strata build: one partition
per corpus) carries a partitions subset that refuses iteration, so
submitting fails before any step runs (and the events a step returns fail the
same way as the next step's inputs). Here a step's arguments and its events
travel in opaque boxes that Dask does not walk; the dependencies stay visible,
so Dask still orders the steps. Everything else is dagster-dask's own executor.
"""

from __future__ import annotations

import dagster as dg
from dagster_dask.executor import DaskExecutor, dask_executor


class _Box:
    """Not a tuple, list or dict: Dask passes it through untouched."""

    def __init__(self, args: tuple):
        self.args = args


class _Events:
    """A step's events on their way back: opaque to Dask as well (they reach the
    next step as its dependencies), iterable for the executor that yields them."""

    def __init__(self, events: list):
        self.events = events

    def __iter__(self):
        return iter(self.events)


def _call_unboxed(fn, dependencies, box: _Box) -> _Events:
    return _Events(list(fn(dependencies, *box.args)))


class PartitionSafeDaskExecutor(DaskExecutor):
    def execute(self, plan_context, execution_plan):
        from unittest import mock

        import dask.distributed

        submit = dask.distributed.Client.submit

        def boxed_submit(client, fn, dependencies, *args, **kwargs):
            return submit(client, _call_unboxed, fn, dependencies, _Box(args), **kwargs)

        with mock.patch.object(dask.distributed.Client, "submit", boxed_submit):
            yield from super().execute(plan_context, execution_plan)


@dg.executor(name="dask", config_schema=dask_executor.config_schema,
             requirements=dg.multiple_process_executor_requirements())
def strata_dask_executor(init_context):
    """dagster-dask's executor and configuration (``cluster: {local|existing|...}``)."""
    ((cluster_type, cluster_configuration),) = init_context.executor_config["cluster"].items()
    return PartitionSafeDaskExecutor(cluster_type, cluster_configuration)
