"""Dagster's Dask executor (dagster-dask) made safe for this project's runs.

dagster-dask hands each step to ``Client.submit`` with the run record among
the arguments. Dask walks tuple arguments looking for futures, and with Dagster
1.13 a run of a dynamically partitioned job (every Strata build: one partition
per corpus) carries a partitions subset that refuses iteration, so submitting
fails before any step runs (and the events a step returns fail the same way as
the next step's inputs).

So :class:`PartitionSafeDaskExecutor` runs dagster-dask's step loop with one
change: a step's arguments and its events travel in opaque boxes that Dask does
not walk; the dependencies stay visible, so Dask still orders the steps. What
runs on a worker (``query_on_dask_worker``), the per-step resource requests and
the cluster options (``build_dict``) are dagster-dask's own. The loop is
restated here because dagster-dask calls ``dask.distributed.Client`` inside its
``execute`` with no seam to box the arguments; patching ``Client.submit`` for
the run's length (what this module used to do, with ``unittest.mock``) changed
every client of the process and put a test double in production code.
"""

from __future__ import annotations

import importlib

import dagster as dg
from dagster_dask.executor import (DaskExecutor, dask_executor, get_dask_resource_requirements,
                                   query_on_dask_worker)

# cluster type → where its class lives (the cluster types dagster-dask's config accepts)
_CLUSTERS = {
    "local": ("dask.distributed", "LocalCluster"),
    "ssh": ("dask.distributed", "SSHCluster"),
    "yarn": ("dask_yarn", "YarnCluster"),
    "pbs": ("dask_jobqueue", "PBSCluster"),
    "moab": ("dask_jobqueue", "MoabCluster"),
    "sge": ("dask_jobqueue", "SGECluster"),
    "lsf": ("dask_jobqueue", "LSFCluster"),
    "slurm": ("dask_jobqueue", "SLURMCluster"),
    "oar": ("dask_jobqueue", "OARCluster"),
    "kube": ("dask_kubernetes", "KubeCluster"),
}


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


def _run_step(dependencies, box: _Box) -> _Events:
    return _Events(list(query_on_dask_worker(dependencies, *box.args)))


class PartitionSafeDaskExecutor(DaskExecutor):
    def _cluster(self, job_name: str):
        if self.cluster_type == "existing":  # the scheduler's address, for Client()
            return self.cluster_configuration["address"]
        if self.cluster_type not in _CLUSTERS:
            raise ValueError(f"dask cluster type {self.cluster_type!r}: use existing or one of "
                             f"{', '.join(_CLUSTERS)}")
        module, name = _CLUSTERS[self.cluster_type]
        return getattr(importlib.import_module(module), name)(**self.build_dict(job_name))

    def execute(self, plan_context, execution_plan):
        import dask.distributed
        from dagster._core.errors import raise_execution_interrupts
        from dagster._utils import iterate_with_context

        if not plan_context.instance.is_persistent:
            raise dg.DagsterInvariantViolationError(
                "Dask execution requires a persistent Dagster instance (set DAGSTER_HOME)")
        instance_ref = plan_context.instance.get_ref()
        futures_by_step: dict = {}
        with dask.distributed.Client(self._cluster(plan_context.job_name)) as client:
            for level in execution_plan.get_steps_to_execute_by_level():
                for step in level:
                    dependencies = [futures_by_step[key] for step_input in step.step_inputs
                                    for key in step_input.dependency_keys]
                    box = _Box((plan_context.reconstructable_job, plan_context.dagster_run,
                                plan_context.run_config, [step.key], instance_ref,
                                execution_plan.known_state))
                    futures_by_step[step.key] = client.submit(
                        _run_step, dependencies, box, key=f"{plan_context.job_name}.{step.key}",
                        resources=get_dask_resource_requirements(step.tags))
            done = dask.distributed.as_completed(list(futures_by_step.values()),
                                                 with_results=True)
            # interrupts reach us while we wait for the results, as in dagster-dask
            for _future, events in iterate_with_context(raise_execution_interrupts, done):
                yield from events


@dg.executor(name="dask", config_schema=dask_executor.config_schema,
             requirements=dg.multiple_process_executor_requirements())
def strata_dask_executor(init_context):
    """dagster-dask's executor and configuration (``cluster: {local|existing|...}``)."""
    ((cluster_type, cluster_configuration),) = init_context.executor_config["cluster"].items()
    return PartitionSafeDaskExecutor(cluster_type, cluster_configuration)
