"""Small helpers every stage asset shares: where the corpus's index lives,
reading the previous build, logging progress and building metadata."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from collections.abc import Callable, Iterator

import dagster as dg
import polars as pl

from strata.resources.corpora import CorpusRegistry
from strata.resources.llm import usd_prices
from strata.stages.corpora import CorpusSpec
from strata.core.storage.layout import IndexLayout, update_json
from strata.core.storage.space import out_of_space
from strata.core.config.schema import TABLE_FILES
from strata.core.stats import markdown_table

BUILD_REPORT = "build_report.json"
# the build storage this step pulled through (strata.core.storage.kinds), pushed when the
# step succeeds; one per step, and per thread for executors that run steps in threads
_WORKSPACE: ContextVar = ContextVar("strata_store_workspace", default=None)


def corpus_and_layout(context: dg.AssetExecutionContext, corpora: CorpusRegistry,
                      write: bool = True) -> tuple[CorpusSpec, IndexLayout]:
    """The corpus of this partition and its index folder. A step that writes the
    index (``write``) first makes sure this run holds the folder's build lock
    (:mod:`strata.core.storage.buildlock`): a second build of the same index stops here, with
    the holder named, before it writes anything."""
    from strata.core import stop_request as stopping

    reason = stopping.requested()
    if reason:  # Dagster carries on with independent steps after an interrupt: not us
        raise _stopped(f"{reason}; step not started")
    spec = corpora.get(context.partition_key)
    layout = IndexLayout(spec.out)
    if write:
        from strata.core.storage.ownership import as_private_as

        as_private_as(layout.root, spec.root)  # the index is no more readable than its corpus
        take_build_lock(context, layout, spec.mirror)
    layout.build.mkdir(parents=True, exist_ok=True)
    pull_from_store(context, spec, layout)
    return spec, layout


def pull_from_store(context, spec: CorpusSpec, layout: IndexLayout) -> None:
    """Ready this worker's folder through the corpus's build storage
    (:mod:`strata.core.storage.kinds`) before the step reads it, once per step:
    for a build kept on an object store, the folder becomes what the store holds.
    :func:`stoppable` has the storage push what the step wrote."""
    from strata.core.storage.kinds import step_storage

    if _WORKSPACE.get() is not None:
        return
    storage = step_storage(spec.shared, spec.mirror, layout.root)
    with _store_failure():
        line = storage.pull()
    if line:
        context.log.info(line)
    _WORKSPACE.set((storage, context.log))


@contextmanager
def _store_failure() -> Iterator[None]:
    """A store that cannot be reached (:class:`strata.core.storage.object_store.StoreError`,
    one line) fails the step without Dagster's retries: obstore has retried already."""
    from strata.core.storage.object_store import StoreError

    try:
        yield
    except StoreError as e:
        raise dg.Failure(description=str(e), allow_retries=False) from None


def _push_to_store() -> None:
    pulled = _WORKSPACE.get()
    if pulled is not None:
        storage, log = pulled
        with _store_failure():  # like the pull: one line, no retries on top of obstore's
            line = storage.push()
        if line:
            log.info(line)


def take_build_lock(context, layout: IndexLayout, mirror: str | None = None) -> None:
    """This run's claim on the index folder (:mod:`strata.core.storage.buildlock`) and, for a
    corpus mirrored to an object store, on the store's lease
    (:mod:`strata.core.storage.store_lease`), which holds between machines that share
    nothing else; each step renews it."""
    from strata.core.storage.buildlock import RUN_TAG, BuildLocked, claim_for_run
    from strata.core.storage.store_lease import LeaseHeld

    run = context.run
    try:
        claim_for_run(layout.root, run.run_id, run.tags.get(RUN_TAG),
                      run_is_live=lambda run_id: run_is_live(context.instance, run_id))
        if mirror:
            claim_mirror_lease(context, mirror)
    except (BuildLocked, LeaseHeld) as e:
        raise dg.Failure(
            description=f"{e}: this run stops before writing anything; run it again when that "
                        "build has finished",
            allow_retries=False, metadata={"strata/locked_by": str(e.info.get("what", ""))},
        ) from None


def claim_mirror_lease(context, mirror: str):
    """Take or renew this run's lease on the mirror's store and return it (raises
    :class:`strata.core.storage.store_lease.LeaseHeld` when another live build holds it). Its
    default term outlives any one step, and every step renews it. A holder this
    Dagster instance does not know may be a build on another machine: it counts as
    live until its lease runs out; one it knows to have finished does not."""
    from strata.core.storage.store_lease import StoreLease

    lease = StoreLease(mirror)
    with _store_failure():
        lease.claim(context.run.run_id,
                    run_is_live=lambda run_id: run_is_live(context.instance, run_id, unknown=True))
    return lease


def run_is_live(instance, run_id: str, unknown: bool = False) -> bool:
    """Whether a run holding a lease still runs. A finished one has left a stale
    lease behind; so has one this instance does not know, unless the lease is shared
    with other machines (``unknown``: what to say of a run not found here)."""
    try:
        run = instance.get_run_by_id(run_id)
    except Exception:  # noqa: BLE001 - when in doubt, it is not ours to take
        return True
    return unknown if run is None else not run.is_finished


ENDPOINT_TAG = "strata/endpoint"  # metadata key of a step that stopped on a dead endpoint
STOPPED_TAG = "strata/stopped"  # metadata key of a step ended by Ctrl-C / SIGTERM
SPACE_TAG = "strata/out_of_space"  # metadata key of a step whose write found no space


def stoppable(fn):
    """Every asset and op body: an interrupt (Ctrl-C, SIGTERM, a stop requested by
    `strata index`) ends the step for good.

    Why: Dagster's retry policy turns an interrupt inside a step into a retry
    request, so an interrupted summarize step came back ten seconds later and
    the build ran on to publish. Here it becomes a ``Failure`` that
    is not retried; the next `strata index` resumes from what finished.

    A write that finds no space (a full disk, a quota, the file size limit:
    :func:`strata.core.storage.space.out_of_space`) also ends the step for good,
    in one line naming the file: a retry would redo the work and fail at the
    same write.

    It is also where a step of a corpus built on its object store (``shared: store``)
    pushes what it wrote, once its body has returned: a step that fails pushes
    nothing, so its retry starts from what the store holds."""
    import functools

    @functools.wraps(fn)
    def body(*args, **kwargs):
        from strata.core import stop_request as stopping
        from strata.core.profiling import step_profile

        pulled = _WORKSPACE.set(None)
        try:
            with step_profile(fn.__name__):  # STRATA_PROFILE: where the step's time goes
                result = fn(*args, **kwargs)
            _push_to_store()  # a failed step pushes nothing: its retry starts from the store
            return result
        except dg.Failure:
            raise
        except (KeyboardInterrupt, dg.DagsterExecutionInterruptedError) as e:
            raise _stopped(stopping.requested() or type(e).__name__) from None
        except Exception as e:
            reason = stopping.requested()
            if reason:  # a failure caused by stopping (a closed client, ...): no retry either
                raise _stopped(reason) from None
            full = out_of_space(e, _step_folder(args, kwargs))
            if full:  # a retry would fail at the same write after redoing the work
                raise dg.Failure(description=full, allow_retries=False,
                                 metadata={SPACE_TAG: full}) from None
            raise
        finally:
            _WORKSPACE.reset(pulled)
    return body


def _step_folder(args: tuple, kwargs: dict) -> str | None:
    """The index folder a step writes (its corpus's ``out``), to name where space
    ran out when the error does not name the file; None when it cannot be told."""
    context = kwargs.get("context", args[0] if args else None)
    corpora = kwargs.get("corpora")
    try:
        return str(corpora.get(context.partition_key).out)
    except Exception:  # noqa: BLE001 - not a corpus step: the error's own words suffice
        return None


def _stopped(reason: str) -> dg.Failure:
    return dg.Failure(description=f"stopped: {reason}", allow_retries=False,
                      metadata={STOPPED_TAG: reason})


@contextmanager
def stop_on_dead_endpoint() -> Iterator[None]:
    """An endpoint that cannot be used at all (:class:`strata.core.llm.endpoints.EndpointError`)
    fails the step at once and for good: Dagster's retry policy would only ask the
    same dead server again after a delay. The description is the error's one line
    (URL and what to check), which the CLI prints as it is."""
    from strata.core.llm.endpoints import EndpointError

    try:
        yield
    except EndpointError as e:
        raise dg.Failure(description=str(e), allow_retries=False,
                         metadata={ENDPOINT_TAG: e.url, "strata/backend": e.what}) from None


def llm_client(llm, spec: CorpusSpec, layout: IndexLayout, vision: bool = False):
    """The LLM of one stage for this corpus: the resource's settings, overridden by
    what the corpus remembers (``llm:`` in its entry, written by ``strata index``
    when given LLM flags), so a sensor or scheduled run uses the same model as the
    command line that built the corpus."""
    return llm.client(layout.cache / "llm.sqlite", vision=vision, overrides=spec.llm)


def read_build_table(layout: IndexLayout, name: str, required: bool = True,
                     columns: list[str] | None = None,
                     where: pl.Expr | None = None) -> pl.DataFrame | None:
    """A table of the build (only ``columns`` when named, only the rows ``where``
    holds for when given: a step reads what it uses, and rows it would skip are
    never made); a missing one raises naming the upstream step, or is None when
    not ``required``."""
    path = layout.build / TABLE_FILES[name]
    if not path.exists():
        if required:
            raise FileNotFoundError(
                f"{path} is missing: materialize the upstream assets for this corpus first")
        return None
    if where is None:
        return pl.read_parquet(path, columns=columns)
    rows = pl.scan_parquet(path).filter(where)
    return (rows.select(columns) if columns else rows).collect()


def record_stage(layout: IndexLayout, stage: str, **values) -> dict:
    """Per-stage figures kept in build/build_report.json; publish copies them
    into the manifest (build time, reuse counts). Each carries the process's peak
    RSS when the stage ended (``peak_rss_mb``): in a build that runs its steps in
    one process, the first stage to show the build's peak is the one that set it."""
    import resource

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return update_json(layout.build / BUILD_REPORT,
                       **{stage: {**values, "peak_rss_mb": round(peak_mb, 1)}})


def output_version(*paths: Path) -> dg.DataVersion:
    """The data version of a stage's output: a digest of the files it wrote.

    Dagster marks a downstream asset stale when an upstream data version moves,
    so a stage rerun (new code version, new prompt template) that produces the
    same rows leaves everything after it fresh; outputs are written in a stable
    row order, so equal content means equal bytes."""
    import hashlib

    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode())
        if path.exists():
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    return dg.DataVersion(h.hexdigest()[:24])


def progress_logger(context: dg.AssetExecutionContext, label: str,
                    every_s: float | None = None) -> Callable[[int, int], None]:
    """Log 'label: i/n (p%) · rate/s · ETA m:ss' (:mod:`strata.core.progress_lines`) every few
    seconds, plus the first and the last: the UI's run log shows it, and
    `strata index` draws its progress bar from it."""
    from strata.core.progress_lines import tracker

    return tracker(label, context.log.info, every_s)


def md(rows, headers=("key", "count")) -> dg.MetadataValue:
    return dg.MetadataValue.md(markdown_table(rows, headers))


def path_metadata(path: Path) -> dg.MetadataValue:
    return dg.MetadataValue.path(str(path))


def write_failures(layout: IndexLayout, stage: str, rows: list[dict]) -> int:
    """Replace this stage's rows in build/failures.parquet; returns the count."""
    import pyarrow as pa

    from strata.core.storage.layout import read_cache_table, write_parquet_atomic
    from strata.core.config.schema import FAILURES, python_table

    path = layout.build_table("failures")
    old = read_cache_table(path, "failure list")
    old = old.filter(pl.col("stage") != stage) if old is not None else None
    new = python_table([{"cause": "llm", **r, "stage": stage} for r in rows], FAILURES)
    if old is not None and old.height:
        if "cause" not in old.columns:  # written before the column: every one was the LLM's
            old = old.with_columns(pl.lit("llm").alias("cause"))
        new = pa.concat_tables([old.select(FAILURES.names).to_arrow().cast(FAILURES), new])
    write_parquet_atomic(new, path)
    return len(rows)


def llm_metadata(stats, failures: list[dict], offline: bool, resource=None,
                 label: str | None = None) -> dict:
    """Calls, cache hits, tokens, cost and failures of one stage, for the UI.

    Cost is tokens × the resource's ``usd_per_million_*`` prices when they are set
    (a price list goes stale in code; the operator knows what their endpoint
    charges); cache hits cost nothing, which is the point of the cache."""
    asked = stats.calls + stats.cache_hits
    meta = {
        "llm_backend": "offline stand-in" if offline else
        label or f"{getattr(resource, 'backend', 'llm')}:{getattr(resource, 'model', '')}",
        "llm_calls": stats.calls,
        "llm_cache_hits": stats.cache_hits,
        "llm_cache_hit_rate": dg.MetadataValue.float(round(stats.cache_hits / asked, 4)
                                                     if asked else 0.0),
        "llm_retries": stats.retries,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "failures": len(failures),
    }
    p_in, p_out = usd_prices(resource)
    if offline:
        meta["llm_cost_usd"] = 0.0
    elif p_in is not None or p_out is not None:
        meta["llm_cost_usd"] = round((stats.prompt_tokens * (p_in or 0.0)
                                      + stats.completion_tokens * (p_out or 0.0)) / 1e6, 6)
    else:
        meta["llm_cost_usd"] = "unknown: set usd_per_million_prompt_tokens / _completion_tokens"
    if failures:
        meta["failed_items"] = md([{"node_id": f["node_id"], "error": f["error"][:160],
                                    "attempts": f["attempts"]} for f in failures])
    return meta
