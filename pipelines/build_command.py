"""`strata index`: build or update the index of a folder.

It runs the very same Dagster assets as the UI (``dagster.materialize`` against
the project's Dagster instance), so a CLI build shows up in the UI's run history
and there is only one code path. Around the run it adds what a command line
owes its user: the index folder's build lock (:mod:`strata.buildlock`), a
corpus's settings remembered for the sensor and schedule runs, a refusal to
overwrite another corpus's index, Ctrl-C that stops the build
(:mod:`pipelines.interrupt`), and one line instead of a stack trace when an
endpoint is down.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from pipelines.console import (EXIT_FAILED, EXIT_LOCKED, EXIT_OK, EXIT_USAGE, print_stats,
                               say)
from pipelines.interrupt import BuildInterrupt, exit_code

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def dagster_home() -> Path:
    """The project-local instance (``.dagster/``) unless DAGSTER_HOME is set."""
    home = Path(os.environ.get("DAGSTER_HOME") or PROJECT_ROOT / ".dagster").resolve()
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def cmd_index(args: argparse.Namespace) -> int:
    with BuildInterrupt() as stop:
        try:
            return _index(args, stop)
        except KeyboardInterrupt:
            return stop.finish() if stop.signum is not None else exit_code(None)


def _llm_flags(args: argparse.Namespace) -> dict:
    return {"backend": args.llm_backend or ("callable" if args.llm_callable else None),
            "model": args.llm_model, "base_url": args.llm_base_url,
            "callable_path": args.llm_callable}


def other_corpus(out: Path, name: str) -> dict | None:
    """The manifest of the index in ``out`` when it belongs to another corpus (read
    from the current version, else the copy beside CURRENT)."""
    from strata.layout import IndexLayout, read_manifest

    layout = IndexLayout(out)
    version = layout.current_version()
    folders = ([layout.version_dir(version)] if version is not None else []) + [out]
    for folder in folders:
        try:
            manifest = read_manifest(folder)
        except (OSError, ValueError):
            continue
        return manifest if manifest.get("corpus") not in (None, name) else None
    return None


def _index(args: argparse.Namespace, stop: BuildInterrupt) -> int:
    from stages.corpora import (DEFAULT_CONFIG, CorpusError, CorpusSpec, load_corpora,
                                register_corpus, validate_name)
    from strata.buildlock import (BuildLock, BuildLocked, register_cli_lock,
                                  unregister_cli_lock)
    from strata.embedding import DEFAULT_MODEL, EncoderSpec

    root = Path(args.root).expanduser().resolve()
    if not root.is_dir():
        say(f"error: {args.root} is not a folder", err=True)
        return EXIT_USAGE
    try:
        name = validate_name(args.corpus)
        config_path = Path(os.environ.get("STRATA_CORPORA") or DEFAULT_CONFIG)
        declared = load_corpora(config_path).get(name)
    except CorpusError as e:
        say(f"error: {e}", err=True)
        return EXIT_USAGE
    out = Path(args.out).expanduser().resolve() if args.out else (
        declared.out if declared else (config_path.parent / "indexes" / name).resolve())
    taken = other_corpus(out, name)
    if taken and not args.force:
        say(f"error: {out} holds the index of corpus '{taken['corpus']}' (built from "
            f"{taken.get('root', '?')}), not '{name}'; choose another --out, or pass --force "
            f"to replace it", err=True)
        return EXIT_USAGE
    # Flags are remembered for the corpus (its sensor and scheduled runs use them);
    # what a flag does not say, the corpus keeps from before
    base = declared.embedding if declared else EncoderSpec()
    backend = args.embed_backend or ("openai" if args.embed_base_url else base.backend)
    same = backend == base.backend
    embedding = EncoderSpec(
        backend=backend, model=args.model or (base.model if same else DEFAULT_MODEL),
        base_url=args.embed_base_url or (base.base_url if same else None),
        api_key_env=base.api_key_env)
    llm = _llm_flags(args)
    given = {k: v for k, v in llm.items() if v is not None}
    remembered = {**((declared.llm or {}) if declared else {}), **given} or None
    spec = CorpusSpec(
        name=name, root=root, out=out,
        include=args.include or (declared.include if declared else ["**/*"]),
        exclude=args.exclude or (declared.exclude if declared else []),
        embedding=embedding,
        url_template=declared.url_template if declared else None,
        mirror=declared.mirror if declared else None,
        llm=remembered,
    )
    from uuid import uuid4

    token = uuid4().hex
    lock = BuildLock(out)
    try:
        lock.acquire(what=f"strata index {root} --corpus {name}", token=token, wait=args.wait,
                     on_wait=lambda info: say(f"waiting for the other build of {out} to finish "
                                              f"({_holder(info)})…", err=True),
                     run_is_live=_run_is_live)
    except BuildLocked as e:
        say(f"error: {e}; wait for it to finish, pass --wait to wait for it, or stop it "
            f"(Ctrl-C in its terminal, or `kill {e.info.get('pid', 'PID')}`)", err=True)
        return EXIT_LOCKED
    register_cli_lock(lock)
    try:
        if taken:
            # --force: the other corpus's caches would only mislead this one's build
            for folder in ("build", "cache"):
                shutil.rmtree(out / folder, ignore_errors=True)
        register_corpus(spec, config_path)
        if not args.quiet:
            say(f"indexing {root} as corpus '{name}' → {out}", err=True)
        from strata.layout import IndexLayout

        before = IndexLayout(out).current_version()
        stop.describe_after = (f"{out} still serves version {before}" if before is not None
                               else f"nothing was published in {out}")
        stop.describe_after += "; run the same command again to resume from what finished"
        return _materialize(args, stop, name, out, config_path, llm, token, before)
    finally:
        unregister_cli_lock(lock)
        lock.release()


def _run_is_live(run_id: str) -> bool:
    """Whether the run named by a lease on the index (a build started from the UI
    or a sensor) is still running in this Dagster instance."""
    dagster_home()
    import dagster as dg

    from assets.common import run_is_live

    with dg.DagsterInstance.get() as instance:
        return run_is_live(instance, run_id)


def _holder(info: dict | None) -> str:
    from strata.buildlock import describe

    return describe(info or {})


def _materialize(args, stop: BuildInterrupt, name: str, out: Path, config_path: Path,
                 llm: dict, token: str, before: int | None) -> int:
    home = dagster_home()

    import dagster as dg

    # One shard per worker process: in one process shards add steps, not speed. Set
    # in the environment (unless the user set it) because the step processes of
    # --workers build the job again from it; the UI's code location keeps its own.
    os.environ.setdefault("STRATA_SHARDS", str(max(1, args.workers)))
    from assets import build_assets, corpora_partitions
    from pipelines.definitions import make_resources
    from strata.buildlock import RUN_TAG

    all_assets = build_assets()
    instance = dg.DagsterInstance.get()
    if not instance.has_dynamic_partition(corpora_partitions.name, name):
        instance.add_dynamic_partitions(corpora_partitions.name, [name])
    parse_config = {"config": {"chunk_tokens": args.chunk_tokens}}
    ops: dict = {"nodes": parse_config, "parsed_shards": parse_config}
    if args.openie_import:
        path = Path(args.openie_import).expanduser().resolve()
        if not path.is_file():
            say(f"error: --openie-import {args.openie_import} is not a file", err=True)
            return EXIT_USAGE
        ops["facts"] = {"config": {"import_path": str(path)}}
    from pipelines.progress import PROGRESS_TAG, BuildProgress

    tags = {"strata/cli": "index", PROGRESS_TAG: token, RUN_TAG: token, OUT_TAG: str(out)}
    _close_abandoned_runs(instance, out)
    stop.attach(instance, {PROGRESS_TAG: token})
    if args.dry_run:
        return _dry_run(all_assets, name, instance, llm, ops, tags, as_json=args.json)
    run_config = {
        "ops": ops,
        "loggers": {"console": {"config": {"log_level": "INFO" if args.verbose else "CRITICAL"}}},
    }
    from contextlib import nullcontext

    # a progress bar (a line per step off a terminal) unless -q, or --verbose's Dagster logs
    watch = nullcontext() if args.quiet or args.verbose else BuildProgress(instance, token)
    t0 = time.perf_counter()
    with watch:
        if args.workers > 1:
            result = _run_in_processes(instance, name, config_path, llm, run_config,
                                       args.workers, tags)
        else:
            result = dg.materialize(all_assets, partition_key=name, instance=instance,
                                    resources=make_resources(llm), run_config=run_config,
                                    raise_on_error=False, tags=tags)
    wall = time.perf_counter() - t0
    if stop.signum is not None:
        return stop.finish()
    if not result.success:
        serving = (f"version {before} keeps serving" if before is not None
                   else "nothing was published")
        return _report_failure(result, home, serving)
    from retrieval import Index

    idx = Index.open(out)
    stats = idx.stats()
    llm_failures = _llm_failures(stats)
    if args.json:
        say(json.dumps({"corpus": name, "out": str(out), "version": idx.version,
                        "run_id": result.run_id, "wall_seconds": round(wall, 2),
                        "llm_failures": llm_failures, **stats}, indent=2))
    elif not args.quiet:
        print_stats(idx, stats)
    failed = ""
    if llm_failures["total"]:
        by_stage = ", ".join(f"{k} {v}" for k, v in sorted(llm_failures["by_stage"].items()))
        failed = (f"{llm_failures['total']} LLM failure(s) ({by_stage}): those items kept their "
                  "offline stand-ins and are retried by the next build")
    if not args.json and not args.quiet:
        say(f"\nbuilt in {wall:.1f}s (run {result.run_id[:8]}), version {idx.version}"
            + (f"; {failed}" if failed else "") + "; open the UI with `make ui` to see it")
    elif failed:
        say(f"warning: {failed}", err=True)
    return EXIT_OK


OUT_TAG = "strata/out"  # the index folder a CLI run builds


def _close_abandoned_runs(instance, out: Path) -> None:
    """Earlier `strata index` runs of this folder still shown as running: their
    process was killed (SIGKILL, a power cut) before it could say so. We hold the
    folder's lock, so none of them is alive: mark them canceled, not left
    "Started" in the UI forever."""
    import dagster as dg

    live = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING,
            dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.CANCELING]
    try:
        runs = instance.get_runs(filters=dg.RunsFilter(
            tags={"strata/cli": "index", OUT_TAG: str(out)}, statuses=live), limit=50)
    except Exception:  # noqa: BLE001 - housekeeping: never in the way of the build
        return
    for run in runs:
        try:
            instance.report_run_canceled(
                run, message="strata index ended without finishing (its process was killed); "
                             "closed by the next build of the same index")
        except Exception:  # noqa: BLE001
            pass


def _llm_failures(stats: dict) -> dict:
    by_stage: dict[str, int] = {}
    for f in stats.get("failures") or []:
        by_stage[f["stage"]] = by_stage.get(f["stage"], 0) + 1
    return {"total": sum(by_stage.values()), "by_stage": by_stage}


def _report_failure(result, home: Path, serving: str) -> int:
    """A dead endpoint or a held lock is one line, said once (several stages may
    have hit it); any other failure names its step, then where the run is."""
    from assets.common import ENDPOINT_TAG

    failures = [e for e in result.all_events if e.is_step_failure]
    known: list[str] = []
    other: list[str] = []
    for e in failures:
        data = e.step_failure_data
        user = data.user_failure_data
        meta = dict(user.metadata) if user is not None and user.metadata else {}
        if user is not None and (ENDPOINT_TAG in meta or "strata/locked_by" in meta):
            if user.description not in known:
                known.append(user.description)
        else:
            line = f"step {e.step_key} failed: {data.error.message.strip() if data.error else '?'}"
            if line not in other:
                other.append(line)
    run = f"run {result.run_id[:8]}"
    if known and not other:
        for line in known[:-1]:
            say(f"error: {line}", err=True)
        say(f"error: {known[-1]} ({run}; {serving})", err=True)
        return EXIT_FAILED
    for line in [f"error: {k}" for k in known] + other:
        say(line, err=True)
    say(f"index build failed ({run}); {serving}; see the run in the UI: "
        f"DAGSTER_HOME={home} dagster dev -w workspace.yaml", err=True)
    return EXIT_FAILED


def _run_in_processes(instance, name: str, config_path, llm: dict, run_config: dict, workers: int,
                      tags: dict):
    """The index job on Dagster's multiprocess executor: every step (each parse and
    embedding shard among them) in its own process, ``workers`` at a time. The
    workers rebuild their resources from the environment, so the flags go there."""
    import dagster as dg

    from pipelines.definitions import multiprocess_index_job

    os.environ["STRATA_CORPORA"] = str(config_path)
    # each worker process gets its share of the cores for torch
    os.environ.setdefault("STRATA_TORCH_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
    for key, value in llm.items():
        if value is not None:
            env = {"callable_path": "STRATA_LLM_CALLABLE"}.get(key, f"STRATA_LLM_{key.upper()}")
            os.environ[env] = str(value)
    # forkserver with the code location and the encoder's libraries preloaded: each
    # step's process forks ready to run instead of importing them again (~3 s each)
    preload = ["pipelines.definitions", "pipelines.worker_setup", "sentence_transformers",
               "lancedb"]
    run_config = {**run_config, "execution": {"config": {
        "max_concurrent": workers,
        "start_method": {"forkserver": {"preload_modules": preload}}}}}
    with dg.execute_job(dg.reconstructable(multiprocess_index_job), instance=instance,
                        run_config=run_config, raise_on_error=False,
                        tags={**tags, "dagster/partition": name}) as result:
        result.all_events  # noqa: B018 - read the events before the result closes
        return result


def _dry_run(all_assets, name: str, instance, llm: dict, ops: dict, tags: dict,
             as_json: bool = False) -> int:
    """Parse only (cheap, no LLM), then count the LLM calls a build would make
    that the cache cannot answer."""
    import dagster as dg
    import polars as pl

    from pipelines.definitions import make_resources
    from stages.corpora import load_corpora
    from stages.enrich.openie import openie_request, openie_units
    from stages.enrich.summarize import planned_requests
    from strata.layout import IndexLayout

    nodes_asset = next(a for a in all_assets if a.key.to_user_string() == "nodes")
    resources = make_resources(llm)
    res = dg.materialize([nodes_asset], partition_key=name, instance=instance, resources=resources,
                         run_config={"ops": {"nodes": ops["nodes"]},
                                     "loggers": {"console": {"config": {"log_level": "ERROR"}}}},
                         raise_on_error=False, tags={**tags, "strata/cli": "dry-run"})
    if not res.success:
        say("dry run: parsing failed; see the run in the UI", err=True)
        return EXIT_FAILED
    spec = load_corpora(Path(os.environ.get("STRATA_CORPORA")
                             or PROJECT_ROOT / "data" / "corpora.yaml"))[name]
    layout = IndexLayout(spec.out)
    nodes = pl.read_parquet(layout.build_table("nodes"))
    client = resources["llm"].client(layout.cache / "llm.sqlite", overrides=spec.llm)
    if client.offline:
        if as_json:
            say(json.dumps({"corpus": name, "llm": "offline", "calls_needed": 0}))
        else:
            say("dry run: the LLM backend is 'offline' — a build makes 0 LLM calls "
                "(extractive summaries, heuristic OpenIE, captions from alt text and context)")
        return EXIT_OK
    summary = client.estimate(planned_requests(nodes), "summarize")
    files = nodes.filter(pl.col("kind") == "file").height
    units = openie_units(nodes)
    openie = {"requests": 0, "calls_needed": 0, "est_prompt_tokens": 0} if "facts" in ops else \
        client.estimate([openie_request(u) for u in units.to_dicts()], "openie")
    images = nodes.filter(pl.col("kind") == "image").height
    if as_json:
        say(json.dumps({"corpus": name, "llm": client.name, "summarize": summary,
                        "file_summaries_max": files, "openie": openie,
                        "openie_imported": "facts" in ops, "caption_requests_max": images},
                       indent=2))
        client.close()
        return EXIT_OK
    say(f"dry run for corpus '{name}' with {client.name}:")
    say(f"  summarize: {summary['calls_needed']} of {summary['requests']} section/code/table "
        f"requests not cached (~{summary['est_prompt_tokens']} prompt tokens), "
        f"plus up to {files} file summaries")
    say(f"  openie:    {openie['calls_needed']} of {openie['requests']} chunk requests not cached "
        f"(~{openie['est_prompt_tokens']} prompt tokens)"
        + (" — imported from file, 0 calls" if "facts" in ops else ""))
    say(f"  caption:   up to {images} image requests (one per duplicate group)")
    client.close()
    return EXIT_OK
