"""The code location: `dagster dev -w workspace.yaml` loads these Definitions.

Heavy libraries (torch, lancedb, sentence-transformers) are imported inside
asset bodies, so loading this module stays fast.
"""

from __future__ import annotations

import dagster as dg

from assets import build_assets
from pipelines.jobs import JOB_NAME, index_corpus_job
from pipelines.scaleout import executor_from_env
from pipelines.schedules import nightly_rebuild_schedule
from pipelines.sensors import corpora_partitions_sensor, corpus_change_sensor
from resources import CorpusRegistry, EmbedderResource, LLMResource


def _price(var: str) -> float | None:
    raw = dg.EnvVar(var).get_value(None)
    try:
        return float(raw) if raw else None
    except ValueError:
        raise ValueError(f"${var} must be a number (US dollars per million tokens), "
                         f"not {raw!r}") from None


def make_resources(llm: dict | None = None) -> dict:
    """Resources from the environment; ``llm`` overrides LLM settings (the CLI's flags)."""
    llm_settings = {
        "backend": dg.EnvVar("STRATA_LLM_BACKEND").get_value("offline"),
        "model": dg.EnvVar("STRATA_LLM_MODEL").get_value("gpt-4o-mini"),
        "base_url": dg.EnvVar("STRATA_LLM_BASE_URL").get_value(None),
        "callable_path": dg.EnvVar("STRATA_LLM_CALLABLE").get_value(None),
        "usd_per_million_prompt_tokens": _price("STRATA_LLM_USD_PER_M_PROMPT"),
        "usd_per_million_completion_tokens": _price("STRATA_LLM_USD_PER_M_COMPLETION"),
        **{k: v for k, v in (llm or {}).items() if v is not None},
    }
    return {
        "llm": LLMResource(**llm_settings),
        "corpora": CorpusRegistry(
            config_path=dg.EnvVar("STRATA_CORPORA").get_value(""),
            index_dir=dg.EnvVar("STRATA_INDEX_DIR").get_value(""),
        ),
        "embedder": EmbedderResource(
            backend=dg.EnvVar("STRATA_EMBED_BACKEND").get_value("sentence-transformers"),
            model=dg.EnvVar("STRATA_EMBED_MODEL").get_value(
                "sentence-transformers/all-MiniLM-L6-v2"),
            base_url=dg.EnvVar("STRATA_EMBED_BASE_URL").get_value(None),
        ),
    }


defs = dg.Definitions(
    assets=build_assets(),
    jobs=[index_corpus_job],
    sensors=[corpora_partitions_sensor, corpus_change_sensor],
    schedules=[nightly_rebuild_schedule],
    resources=make_resources(),
    executor=executor_from_env(),
)


def _index_job(executor: dg.ExecutorDefinition) -> dg.JobDefinition:
    return dg.Definitions(assets=build_assets(), jobs=[index_corpus_job],
                          resources=make_resources(),
                          executor=executor).resolve_job_def(JOB_NAME)


def multiprocess_index_job() -> dg.JobDefinition:
    """The index job on Dagster's multiprocess executor, for ``dg.reconstructable``
    (`strata index --workers N`: each step process loads it again)."""
    return _index_job(dg.multiprocess_executor)


def dask_index_job() -> dg.JobDefinition:
    """The index job on a Dask cluster (dagster-dask), for ``dg.reconstructable``."""
    from pipelines.dask_engine import strata_dask_executor

    return _index_job(strata_dask_executor)
