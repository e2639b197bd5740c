"""The code location: `dagster dev -w workspace.yaml` loads these Definitions
(the location is named ``strata`` in workspace.yaml).

Heavy libraries (torch, lancedb, sentence-transformers) are imported inside
asset bodies, so loading this module stays fast.
"""

from __future__ import annotations

import os

import dagster as dg

from strata.assets import build_assets
from strata.pipelines.jobs import JOB_NAME, index_corpus_job
from strata.pipelines.scaleout import executor_from_env
from strata.pipelines.schedules import nightly_rebuild_schedule
from strata.pipelines.sensors import corpora_partitions_sensor, corpus_change_sensor
from strata.resources import CorpusRegistry, EmbedderResource, LLMResource
from strata.core.config.settings import EmbedSettings, LLMSettings, ProjectSettings, env_var, load

# Each resource and the settings group (strata.core.config.settings) its fields are declared in:
# a resource field named like a group field takes that field's variable.
RESOURCE_SETTINGS = {"llm": (LLMResource, LLMSettings), "corpora": (CorpusRegistry, ProjectSettings),
                     "embedder": (EmbedderResource, EmbedSettings)}


def environment() -> dict[str, dict[str, str]]:
    """resource → field → the variable it is read from (from the settings model)."""
    return {name: {f: env_var(group, f) for f in resource.model_fields if f in group.model_fields}
            for name, (resource, group) in RESOURCE_SETTINGS.items()}


def _from_env(resource: type[dg.ConfigurableResource], group, field: str, var: str):
    """How a set variable reaches a resource field. Dagster resolves dg.EnvVar when
    a run starts, but only into str and int fields; a float field (temperature,
    timeout) takes the value read now, checked by the settings model. An int
    field's value is checked by the settings model now too: Dagster's own check
    of an EnvVar.int fails the run with a page of traceback."""
    kind = resource.model_fields[field].annotation
    if kind in (int, "int"):
        getattr(load(group), field)  # a bad value ("1.5", "abc"): one line naming the variable
        return dg.EnvVar.int(var)
    if kind in (float, "float"):
        return getattr(load(group), field)
    return dg.EnvVar(var)


def make_resources() -> dict:
    """The resources, each setting whose variable is set given as ``dg.EnvVar``.

    Why EnvVar and only for the variables that are set: Dagster resolves an
    EnvVar when a run starts (in the run's process), and the UI's resource page
    names the variable a value comes from; a variable that is not set keeps the
    field's default (an EnvVar of an unset variable would fail every run). A
    corpus's remembered settings (``llm:`` and ``embedding:`` in its entry) still
    win over these, in every run. The values are checked by the settings model
    when a run starts (a bad one fails it in one line naming the variable)."""
    resources = {}
    for name, fields in environment().items():
        resource, group = RESOURCE_SETTINGS[name]
        config = {field: _from_env(resource, group, field, var)
                  for field, var in fields.items() if os.environ.get(var)}
        resources[name] = resource(**config)
    return resources


def resolved_resources(instance: dg.DagsterInstance | None = None) -> dict:
    """The resources as a run started now would get them (the environment read
    now): for what `strata index` says before its run, the run's tags and the dry
    run's estimate.

    All of them are initialised in one ``build_resources`` on the given instance:
    each resource's own ``process_config_and_initialize`` would make an ephemeral
    instance of its own, a fixed cost every build paid before doing anything."""
    resources = make_resources()
    with dg.build_resources(resources, instance=instance) as built:
        return {name: getattr(built, name) for name in resources}


defs = dg.Definitions(
    assets=build_assets(),
    jobs=[index_corpus_job],
    sensors=[corpora_partitions_sensor, corpus_change_sensor],
    schedules=[nightly_rebuild_schedule],
    resources=make_resources(),
    executor=executor_from_env(),
)


def index_job() -> dg.JobDefinition:
    """The ``index_corpus`` job as the code location serves it, for
    ``dg.reconstructable`` (`strata index` runs it, so a CLI build is a run of
    the same job as the sensor's and the schedule's)."""
    return defs.resolve_job_def(JOB_NAME)


def _index_job(executor: dg.ExecutorDefinition) -> dg.JobDefinition:
    return dg.Definitions(assets=build_assets(), jobs=[index_corpus_job],
                          resources=make_resources(),
                          executor=executor).resolve_job_def(JOB_NAME)


def dask_index_job() -> dg.JobDefinition:
    """The index job on a Dask cluster (dagster-dask), for ``dg.reconstructable``."""
    from strata.pipelines.dask_engine import strata_dask_executor

    return _index_job(strata_dask_executor)
