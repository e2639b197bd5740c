"""The code location: `dagster dev -w workspace.yaml` loads these Definitions
(the location is named ``strata`` in workspace.yaml).

Heavy libraries (torch, lancedb, sentence-transformers) are imported inside
asset bodies, so loading this module stays fast.
"""

from __future__ import annotations

import os

import dagster as dg

from assets import build_assets
from pipelines.jobs import JOB_NAME, index_corpus_job
from pipelines.scaleout import executor_from_env
from pipelines.schedules import nightly_rebuild_schedule
from pipelines.sensors import corpora_partitions_sensor, corpus_change_sensor
from resources import CorpusRegistry, EmbedderResource, LLMResource

# The settings each resource takes from the environment: resource → field → variable.
ENVIRONMENT = {
    "llm": {
        "backend": "STRATA_LLM_BACKEND",
        "model": "STRATA_LLM_MODEL",
        "base_url": "STRATA_LLM_BASE_URL",
        "callable_path": "STRATA_LLM_CALLABLE",
        "usd_per_million_prompt_tokens": "STRATA_LLM_USD_PER_M_PROMPT",
        "usd_per_million_completion_tokens": "STRATA_LLM_USD_PER_M_COMPLETION",
    },
    "corpora": {"config_path": "STRATA_CORPORA", "index_dir": "STRATA_INDEX_DIR"},
    "embedder": {
        "backend": "STRATA_EMBED_BACKEND",
        "model": "STRATA_EMBED_MODEL",
        "base_url": "STRATA_EMBED_BASE_URL",
        "runtime": "STRATA_EMBED_RUNTIME",
    },
}
RESOURCE_CLASSES = {"llm": LLMResource, "corpora": CorpusRegistry, "embedder": EmbedderResource}


def make_resources() -> dict:
    """The resources, each setting whose variable is set given as ``dg.EnvVar``.

    Why EnvVar and only for the variables that are set: Dagster resolves an
    EnvVar when a run starts (in the run's process), and the UI's resource page
    names the variable a value comes from; a variable that is not set keeps the
    field's default (an EnvVar of an unset variable would fail every run). A
    corpus's remembered settings (``llm:`` and ``embedding:`` in its entry) still
    win over these, in every run."""
    resources = {}
    for name, fields in ENVIRONMENT.items():
        config = {field: dg.EnvVar(var) for field, var in fields.items() if os.environ.get(var)}
        resources[name] = RESOURCE_CLASSES[name](**config)
    return resources


def resolved_resources() -> dict:
    """The resources as a run started now would get them (the environment read
    now): for what `strata index` says before its run, the run's tags and the dry
    run's estimate."""
    return {name: r.process_config_and_initialize() for name, r in make_resources().items()}


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
    from pipelines.dask_engine import strata_dask_executor

    return _index_job(strata_dask_executor)
