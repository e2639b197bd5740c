"""Executors: where the steps of an index run execute.

The code location's default is :data:`strata_executor`, which decides per run:
every step in the run's own process (Dagster's in-process executor) unless the
launch or the corpus asks for workers, then Dagster's multiprocess executor
with that many step processes at a time.

Why in process by default: an unchanged rebuild launched from the
UI, the change sensor or the nightly schedule took 79 s on the multiprocess
executor, where `strata index` took 11 s, because each of the 13 steps started
its own process and loaded the code location again (4-5 s each). Most runs of
a living index change little; the step processes pay off only for a large
first build on a machine with cores to spare (the benchmark tables say how
much). Who asks for workers, first match wins:

- the launch: run config ``execution: {config: {workers: N}}`` (the UI's
  launchpad, `strata index --workers N`), or the run tag ``strata/workers``
  (sensors, ``dagster job launch --tags``);
- the corpus: ``workers: N`` in its entry of ``data/corpora.yaml``;
- otherwise 1: in process.

``STRATA_EXECUTOR`` still pins the code location's executor for deployments
that want one kind for every run: ``in_process``, ``multiprocess`` (at most
``STRATA_MAX_CONCURRENT`` step processes), or ``dask`` (dagster-dask; a local
cluster unless the run config names a scheduler address). Celery and
Kubernetes are configured the same way with their Dagster packages; see
docs/living-indexes.md.
The jobs for ``dg.reconstructable`` (out-of-process executors load the job
again in each worker) are built in :mod:`pipelines.definitions`, from the one
``index_corpus`` job of :mod:`pipelines.jobs`.
"""

from __future__ import annotations


import dagster as dg

from strata.core.config.settings import BuildSettings, corpora_file, load

WORKERS_TAG = "strata/workers"  # a launch's request for step processes
PARTITION_TAG = "dagster/partition"
# preloaded by the forkserver that step processes fork from: the code location, and
# the set-up that keeps a terminal's Ctrl-C away from their log mirrors
PRELOAD = ["strata.pipelines.definitions", "strata.pipelines.worker_setup"]


def executor_from_env() -> dg.ExecutorDefinition:
    build = load(BuildSettings)  # $STRATA_EXECUTOR, $STRATA_MAX_CONCURRENT
    kind = build.executor
    if kind == "auto":
        return strata_executor
    if kind == "in_process":
        return dg.in_process_executor
    if kind == "multiprocess":
        limit = build.max_concurrent
        return dg.multiprocess_executor.configured({"max_concurrent": limit}) if limit > 0 \
            else dg.multiprocess_executor
    if kind == "dask":
        try:
            from strata.pipelines.dask_engine import strata_dask_executor
        except ImportError as e:  # pragma: no cover - depends on the install
            raise RuntimeError("STRATA_EXECUTOR=dask needs dagster-dask: "
                               "pip install 'strata[scale]'") from e
        return strata_dask_executor
    raise ValueError(f"STRATA_EXECUTOR={kind!r}: use auto, in_process, multiprocess or dask")


def corpus_workers(corpus: str | None) -> int | None:
    """The ``workers`` a corpus's entry asks for (None: it does not say, or the
    corpora file cannot be read, which the run's first step reports)."""
    if not corpus:
        return None
    from strata.stages.corpora import CorpusError, load_corpora

    try:
        spec = load_corpora(corpora_file()).get(corpus)
    except (CorpusError, OSError, ValueError):
        return None
    return spec.workers if spec is not None else None


def workers_for_run(config_workers: int, tags: dict) -> tuple[int, str]:
    """How many step processes a run gets, and why (shown in the run's log)."""
    if config_workers > 0:
        return config_workers, f"the launch asks for {config_workers} (run config " \
                               "execution.config.workers)"
    raw = (tags.get(WORKERS_TAG) or "").strip()
    if raw:
        try:
            n = max(1, int(raw))
            return n, f"the launch asks for {n} (tag {WORKERS_TAG})"
        except ValueError:
            pass  # a bad tag counts as none
    corpus = tags.get(PARTITION_TAG)
    n = corpus_workers(corpus)
    if n:
        return n, f"corpus '{corpus}' asks for {n} (workers in its corpora.yaml entry)"
    return 1, "neither the launch nor the corpus asks for step processes"


class _CorpusExecutor(dg.Executor):
    """Decides between Dagster's in-process and multiprocess executors when the
    run starts (the choice needs the run's tags and its corpus, which an
    executor's init function does not see), then hands the plan to it."""

    def __init__(self, init_context: dg.InitExecutorContext):
        self._init = init_context
        config = init_context.executor_config
        self._workers = int(config.get("workers") or 0)
        self._start_method = config.get("start_method")
        self._retries_config = config.get("retries") or {"enabled": {}}
        self._in_process = dg.in_process_executor.executor_creation_fn(self._context(
            dg.in_process_executor, {"retries": self._retries_config}))

    def _context(self, definition, config) -> dg.InitExecutorContext:
        return dg.InitExecutorContext(job=self._init.job, executor_def=definition,
                                      executor_config=config, instance=self._init.instance)

    @property
    def retries(self):
        return self._in_process.retries

    @property
    def step_dependency_config(self):
        return self._in_process.step_dependency_config

    def execute(self, plan_context, execution_plan):
        workers, why = workers_for_run(self._workers, dict(plan_context.dagster_run.tags))
        if workers > 1 and plan_context.instance.is_ephemeral:
            workers, why = 1, why + ", but the instance is ephemeral (no step processes)"
        if workers <= 1:
            plan_context.log.info(f"strata executor: every step in this process ({why})")
            yield from self._in_process.execute(plan_context, execution_plan)
            return
        from strata.assets.shards import STEP_PROCESSES_TAG

        # read by the embedding shards, which share the cores among themselves
        plan_context.instance.add_run_tags(plan_context.run_id, {STEP_PROCESSES_TAG: str(workers)})
        start = self._start_method or {"forkserver": {"preload_modules": PRELOAD}}
        delegate = dg.multiprocess_executor.executor_creation_fn(self._context(
            dg.multiprocess_executor, {"max_concurrent": workers, "start_method": start,
                                       "retries": self._retries_config}))
        plan_context.log.info(f"strata executor: {workers} step processes at a time ({why})")
        yield from delegate.execute(plan_context, execution_plan)


def _requirements(config: dict):
    # step processes need a job they can load again and a shared instance; a run
    # that may get them from its corpus is checked when it starts (in-process then)
    return dg.multiple_process_executor_requirements() if (config.get("workers") or 0) > 1 \
        else []


@dg.executor(
    name="strata",
    config_schema={
        "workers": dg.Field(
            int, default_value=0,
            description="Step processes at a time. 0: the run tag strata/workers, else the "
                        "corpus's `workers` setting, else 1; 1: every step in the run's process "
                        "(the fastest for small and unchanged corpora); N > 1: Dagster's "
                        "multiprocess executor, N step processes at a time."),
        "start_method": dg.Field(
            dg.Selector({"spawn": {},
                         "forkserver": {"preload_modules": dg.Field([str], is_required=False)}}),
            is_required=False,
            description="How step processes start when workers > 1 (default: forkserver with "
                        "the code location preloaded)."),
        "retries": dg.Field(dg.Selector({"enabled": {}, "disabled": {}}),
                            default_value={"enabled": {}}),
    },
    requirements=_requirements,
)
def strata_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
    """In process unless the launch or the corpus asks for workers (module docstring)."""
    return _CorpusExecutor(init_context)
