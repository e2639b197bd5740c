"""The `index_corpus` job of the sample corpus run on Dagster's Dask executor
(dagster-dask) with a given cluster config, for the tests that build on Dask."""

from __future__ import annotations

from pathlib import Path


def build_on_dask(home: Path, cluster: dict) -> list[str]:
    """Run the job for partition ``sample`` in a Dagster instance kept in ``home``
    with ``execution.config.cluster = cluster``; fail with every step's error if
    the run fails, and return the run's log messages."""
    import dagster as dg

    from strata.assets import corpora_partitions
    from strata.pipelines.definitions import dask_index_job

    home.mkdir(parents=True, exist_ok=True)
    run_config = {"execution": {"config": {"cluster": cluster}}}
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        instance.add_dynamic_partitions(corpora_partitions.name, ["sample"])
        with dg.execute_job(dg.reconstructable(dask_index_job), instance=instance,
                            run_config=run_config, raise_on_error=False,
                            tags={"dagster/partition": "sample"}) as result:
            errors = [e.step_failure_data.error.to_string() for e in result.all_events
                      if e.is_step_failure]
            assert result.success, errors
            return [e.message for e in instance.all_logs(result.run_id)]
