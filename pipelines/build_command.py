"""`strata index`: build or update the index of a folder.

It runs the code location's ``index_corpus`` job for the corpus partition
(``dagster.execute_job``, against the project's Dagster instance): the same job,
executor and resources as a run from the UI, the change sensor or the nightly
schedule, so a CLI build is listed under that job in the UI and there is one
code path. Around the run it adds what a command line owes its user: the index
folder's build lock (:mod:`strata.core.storage.buildlock`), a corpus's settings remembered
for the sensor and schedule runs, a refusal to overwrite another corpus's
index, Ctrl-C that stops the build (:mod:`pipelines.interrupt`), a progress bar
(:mod:`pipelines.build_progress`), and one line instead of a stack trace when an
endpoint is down. ``--dry-run`` is :mod:`pipelines.dry_run`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from strata.core.console import (EXIT_FAILED, EXIT_LOCKED, EXIT_OK, EXIT_USAGE, print_stats,
                               say)
from strata.pipelines.interrupt import BuildInterrupt, exit_code
from strata.core.config.settings import (BuildSettings, ChunkingSettings, EmbedSettings, LLMSettings,
                             ProjectSettings, check, corpora_file, dagster_home_dir, load)
from strata.core.config.urls import KEY_HINT, STORE_HINT, refusal, shown_url

def dagster_home() -> Path:
    """The project's instance (``.dagster/`` in the project folder,
    :func:`strata.core.config.settings.dagster_home_dir`) unless DAGSTER_HOME is set; its
    dagster.yaml holds one run per corpus at a time (:mod:`pipelines.instance_config`)."""
    from strata.pipelines.instance_config import ensure_instance_config

    home = dagster_home_dir()
    ensure_instance_config(home)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def cmd_index(args: argparse.Namespace) -> int:
    if args.watch:
        from strata.pipelines.watch_command import watch

        return watch(args, _build_once, lambda: _watched(args))
    return _build_once(args)


def _build_once(args: argparse.Namespace) -> int:
    with BuildInterrupt() as stop:
        try:
            return _index(args, stop)
        except BaseException as e:
            # Ctrl-C surfaces as KeyboardInterrupt outside a run and as Dagster's
            # DagsterExecutionInterruptedError (a BaseException) where Dagster's own
            # handler is installed
            if not _is_interrupt(e):
                raise
            return stop.finish() if stop.signum is not None else exit_code(None)


def _is_interrupt(e: BaseException) -> bool:
    if isinstance(e, KeyboardInterrupt):
        return True
    dg = sys.modules.get("dagster")  # not imported yet: Dagster cannot have raised it
    return dg is not None and isinstance(e, dg.DagsterExecutionInterruptedError)


def _patterns(args: argparse.Namespace, declared) -> tuple[list[str], list[str]]:
    """The include and exclude lines of a build: the flags', else the declared
    corpus's, else every file."""
    return (args.include or (declared.include if declared else ["**/*"]),
            args.exclude or (declared.exclude if declared else []))


def _watched(args: argparse.Namespace) -> tuple[Path, list[str], list[str]]:
    """The folder and the include and exclude lines the next build of ``args``
    reads, as :func:`_index` settles them (``--watch`` lists them to see changes)."""
    from strata.stages.corpora import load_corpora

    declared = load_corpora(corpora_file()).get(args.corpus)
    return (Path(args.root).expanduser().resolve(), *_patterns(args, declared))


#: the flags whose URL is stored with the corpus, and where their secret goes instead
URL_FLAGS = (("llm_base_url", KEY_HINT), ("embed_base_url", KEY_HINT), ("mirror", STORE_HINT))


def refused_url_flag(args: argparse.Namespace) -> str | None:
    """The error line for a URL flag that carries a password or a key (it would be
    stored in the corpus registry and shown in errors and the run's logs), or None."""
    for dest, hint in URL_FLAGS:
        value = getattr(args, dest, None)
        why = refusal(value, hint)
        if why:
            return f"--{dest.replace('_', '-')} {shown_url(value)} {why}"
    return None


def _llm_flags(args: argparse.Namespace) -> dict:
    return {"backend": args.llm_backend or ("callable" if args.llm_callable else None),
            "model": args.llm_model, "base_url": args.llm_base_url,
            "callable_path": args.llm_callable}


def other_corpus(out: Path, name: str) -> dict | None:
    """The manifest of the index in ``out`` when it belongs to another corpus (read
    from the current version, else the copy beside CURRENT)."""
    from strata.core.storage.layout import IndexLayout, read_manifest

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
    from strata.stages.corpora import (CorpusError, CorpusSpec, load_corpora, register_corpus,
                                validate_name)
    from strata.core.storage.buildlock import (BuildLock, BuildLocked, register_cli_lock,
                                  unregister_cli_lock)
    from strata.core.encoders.embedding import AUTO, DEFAULT_MODEL, EncoderSpec
    from strata.stages.discover import check_patterns

    root = Path(args.root).expanduser().resolve()
    if not root.is_dir():
        say(f"error: {args.root} is not a folder", err=True)
        return EXIT_USAGE
    refused = refused_url_flag(args)
    if refused:
        say(f"error: {refused}", err=True)
        return EXIT_USAGE
    try:
        name = validate_name(args.corpus)
        check(ChunkingSettings, {"chunk_tokens": args.chunk_tokens})  # a SettingsError: exit 2
        for group in (LLMSettings, EmbedSettings, BuildSettings):
            load(group)  # every STRATA_* variable of a build, checked before anything is written
        dagster_home_dir()  # and $DAGSTER_HOME: a folder, or none yet
        # the project folder's registry ($STRATA_HOME, else the nearest project at or
        # above the current folder, else here); --out is the current folder's
        config_path = corpora_file()
        index_base = load(ProjectSettings).index_dir
        index_base = index_base.expanduser().resolve() if index_base else None
        declared = load_corpora(config_path, index_base=index_base).get(name)
    except CorpusError as e:
        say(f"error: {e}", err=True)
        return EXIT_USAGE
    include, exclude = _patterns(args, declared)
    try:
        check_patterns(include, exclude)  # a flag's: the corpora file's were checked on load
    except ValueError as e:
        say(f"error: {e}; --include and --exclude take gitignore lines", err=True)
        return EXIT_USAGE
    if not (args.include or (declared and declared.include)) and not args.yes \
            and root in {Path("/"), Path.home().resolve()}:
        say(f"error: {root} is {'the whole file system' if root == Path('/') else 'your home folder'}"
            f" ({_count_files(root)} to walk); name what to index with --include, declare the "
            "corpus in data/corpora.yaml, or pass --yes", err=True)
        return EXIT_USAGE
    out = Path(args.out).expanduser().resolve() if args.out else (
        declared.out if declared else ((index_base or config_path.parent / "indexes")
                                       / name).resolve())
    if out == root or root.is_relative_to(out):
        say(f"error: --out {out} would hold the folder it indexes; choose an --out outside "
            f"{root}", err=True)
        return EXIT_USAGE
    taken = other_corpus(out, name)
    if taken and not args.force:
        say(f"error: {out} holds the index of corpus '{taken['corpus']}' (built from "
            f"{taken.get('root', '?')}), not '{name}'; choose another --out, or pass --force "
            f"to replace it", err=True)
        return EXIT_USAGE
    # Flags are remembered for the corpus (its sensor and scheduled runs use them);
    # what a flag does not say, the corpus keeps from before
    base = declared.embedding if declared else EncoderSpec(runtime=AUTO)
    backend = args.embed_backend or ("openai" if args.embed_base_url else base.backend)
    same = backend == base.backend
    embedding = EncoderSpec(
        backend=backend, model=args.model or (base.model if same else DEFAULT_MODEL),
        base_url=args.embed_base_url or (base.base_url if same else None),
        api_key_env=base.api_key_env,
        runtime=getattr(args, "embed_runtime", None) or (base.runtime if same else AUTO))
    llm = _llm_flags(args)
    given = {k: v for k, v in llm.items() if v is not None}
    remembered = {**((declared.llm or {}) if declared else {}), **given} or None
    spec = CorpusSpec(
        name=name, root=root, out=out,
        include=include, exclude=exclude,
        embedding=embedding,
        url_template=declared.url_template if declared else None,
        mirror=declared.mirror if declared else None,
        llm=remembered,
        workers=declared.workers if declared else None,
        shared=declared.shared if declared else "folder",
    )
    if args.openie_import and not Path(args.openie_import).expanduser().is_file():
        say(f"error: --openie-import {args.openie_import} is not a file", err=True)
        return EXIT_USAGE
    if not args.dry_run:
        from strata.core.storage.ownership import NotOurs, as_private_as, claim_index

        try:
            claim_index(out, allow_foreign=args.yes)
        except NotOurs as e:
            say(f"error: {e}", err=True)
            return EXIT_USAGE
        as_private_as(out, root)  # the index is no more readable than its corpus
    if args.dry_run:
        # before the lock and the registration: a dry run writes nothing anywhere
        from strata.pipelines.dry_run import dry_run

        return dry_run(spec, chunk_tokens=args.chunk_tokens,
                       openie_imported=bool(args.openie_import), as_json=args.json)
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
            # --force: the other corpus's caches would only mislead this one's build; only
            # what Strata's record says it wrote is removed
            from strata.core.storage.ownership import owned_names

            for folder in {"build", "cache"} & owned_names(out):
                shutil.rmtree(out / folder, ignore_errors=True)
        register_corpus(spec, config_path)
        if not args.quiet:
            say(f"indexing {root} as corpus '{name}' → {out}", err=True)
        from strata.core.storage.layout import IndexLayout

        before = IndexLayout(out).current_version()
        stop.describe_after = (f"{out} still serves version {before}" if before is not None
                               else f"nothing was published in {out}")
        stop.describe_after += "; run the same command again to resume from what finished"
        try:
            return _run_index_job(args, stop, spec, config_path, token, before)
        except Exception as e:  # Dagster's own storage failing: one line
            line = _storage_failure(e)
            if line is None:
                raise
            serving = (f"version {before} keeps serving" if before is not None
                       else "nothing was published")
            say(f"error: {line}; {serving}", err=True)
            return EXIT_FAILED
    finally:
        unregister_cli_lock(lock)
        lock.release()


def _storage_failure(exc: BaseException) -> str | None:
    """One line for a build that Dagster's own storage (the instance's SQLite
    files) could not record, or any write that found no space
    (:func:`strata.core.storage.space.out_of_space`); None for other errors.
    SQLite reports the file size limit as a plain "disk I/O error", so any
    SQL error of the instance's is said with where the storage lives."""
    from strata.core.config.settings import dagster_home_dir
    from strata.core.storage.layout import short_error
    from strata.core.storage.space import out_of_space

    home = dagster_home_dir()
    full = out_of_space(exc, home)
    if full:
        return f"{full} (Dagster's run storage or the index)"
    seen, e = set(), exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if type(e).__module__.split(".")[0] in ("sqlalchemy", "sqlite3"):
            return (f"Dagster's run storage in {home} could not be written ({short_error(e)}): "
                    "is the disk full, or a quota or the file size limit (`ulimit -f`) reached?")
        e = e.__cause__ or e.__context__
    return None


def _workers(args: argparse.Namespace, spec) -> int:
    """Step processes the run asks for: the flag, else the corpus's setting, else 1."""
    return args.workers or spec.workers or 1


def _count_files(root: Path, cap: int = 100_000) -> str:
    """How many files a walk of ``root`` would visit ("more than N" past ``cap``),
    with Strata's usual exclusions, so a refusal says what was at stake."""
    from strata.stages.discover import iter_paths

    n = 0
    for _ in iter_paths(root):
        n += 1
        if n > cap:
            return f"more than {cap:,} files"
    return f"{n:,} files"


def _run_is_live(run_id: str) -> bool:
    """Whether the run named by a lease on the index (a build started from the UI
    or a sensor) is still running in this Dagster instance."""
    dagster_home()
    import dagster as dg

    from strata.assets.common import run_is_live

    with dg.DagsterInstance.get() as instance:
        return run_is_live(instance, run_id)


def _holder(info: dict | None) -> str:
    from strata.core.storage.buildlock import describe

    return describe(info or {})


def _run_index_job(args, stop: BuildInterrupt, spec, config_path: Path, token: str,
                   before: int | None) -> int:
    """Run the code location's ``index_corpus`` job for the corpus partition: the
    same job, executor and resources as a run launched from the UI, the change
    sensor or the schedule, so a CLI build is listed under that job with its
    partition, and differs only in where it runs (this process, or its step
    processes with ``--workers``)."""
    home = dagster_home()
    name, out = spec.name, spec.out
    workers = _workers(args, spec)
    # Read when the code location loads, so set before it is imported: one shard per
    # worker process (in one process shards add steps, not speed), and the corpora
    # file the run's resources and any step process read (through dg.EnvVar).
    os.environ.setdefault("STRATA_SHARDS", str(max(1, workers)))
    os.environ["STRATA_CORPORA"] = str(config_path)

    import dagster as dg

    from strata.assets import corpora_partitions
    from strata.assets.run_tags import OUT_TAG
    from strata.pipelines.definitions import index_job, resolved_resources
    from strata.pipelines.build_progress import BuildProgress
    from strata.pipelines.scaleout import PRELOAD
    from strata.core.storage.buildlock import RUN_TAG

    instance = dg.DagsterInstance.get()
    try:
        resources = resolved_resources(instance)  # what the run will get, for its tags
    except ValueError as e:  # a setting from the environment that cannot be used
        say(f"error: {e}", err=True)
        return EXIT_USAGE

    if not instance.has_dynamic_partition(corpora_partitions.name, name):
        instance.add_dynamic_partitions(corpora_partitions.name, [name])
    parse_config = {"config": {"chunk_tokens": args.chunk_tokens}}
    ops: dict = {"nodes": parse_config, "parsed_shards": parse_config}
    if args.openie_import:
        ops["facts"] = {"config": {"import_path": str(Path(args.openie_import).expanduser()
                                                      .resolve())}}
    tags = {**_run_tags(spec, resources), RUN_TAG: token,
            OUT_TAG: str(out), "dagster/partition": name}
    _close_abandoned_runs(instance, out)
    stop.attach(instance, {RUN_TAG: token})
    run_config: dict = {
        "ops": ops,
        "loggers": {"console": {"config": {"log_level": "INFO" if args.verbose else "CRITICAL"}}},
    }
    job = index_job()
    if job.executor_def.name == "strata":
        execution: dict = {"workers": args.workers or 0}  # 0: the executor asks the corpus
        if workers > 1:
            # forkserver with the code location and the encoder's libraries preloaded: each
            # step's process forks ready to run instead of importing them again (~3 s each)
            execution["start_method"] = {"forkserver": {"preload_modules": [
                *PRELOAD, "sentence_transformers", "lancedb"]}}
        run_config["execution"] = {"config": execution}
    elif args.workers:
        say(f"note: STRATA_EXECUTOR pins the executor ({job.executor_def.name}); --workers is "
            "not used", err=True)
    from contextlib import nullcontext

    # a progress bar (lines off a terminal) unless -q, or --verbose's Dagster logs
    watch = nullcontext() if args.quiet or args.verbose else BuildProgress(instance, token)
    t0 = time.perf_counter()
    with watch:
        # not entered as a context manager: that initializes the resources again (for
        # output values we never read), after the run, where an interrupt still on its
        # way would surface as a traceback; the events and status are there without it
        result = dg.execute_job(dg.reconstructable(index_job), instance=instance,
                                run_config=run_config, raise_on_error=False, tags=tags)
    wall = time.perf_counter() - t0
    if stop.signum is not None:
        return stop.finish()
    if not result.success:
        serving = (f"version {before} keeps serving" if before is not None
                   else "nothing was published")
        return _report_failure(result, home, serving)
    from strata.retrieval import Index

    idx = Index.open(out)
    stats = idx.stats()
    llm_failures = _llm_failures(stats)
    if args.json:
        say(json.dumps({"corpus": name, "out": str(out), "version": idx.version,
                        "run_id": result.run_id, "wall_seconds": round(wall, 2),
                        "llm_failures": llm_failures, **stats},
                       indent=None if args.watch else 2))  # watching: one line a build
    elif not args.quiet:
        from strata.assets.common import BUILD_REPORT
        from strata.core.storage.layout import IndexLayout, read_json_or_empty

        # this run's figures (files parsed, vectors computed), not those of the build
        # that made the version: an unchanged build keeps that version
        print_stats(idx, stats, read_json_or_empty(IndexLayout(out).build / BUILD_REPORT) or None)
    failed = ""
    if llm_failures["total"]:
        by_stage = ", ".join(f"{k} {v}" for k, v in sorted(llm_failures["by_stage"].items()))
        failed = (f"{llm_failures['total']} LLM failure(s) ({by_stage}): those items kept their "
                  "offline stand-ins and are retried by the next build")
    if not args.json and not args.quiet:
        # the same version as before the run: publish found nothing new and kept it
        kept = f"unchanged, still version {idx.version}" if idx.version == before else None
        say(f"\nbuilt in {wall:.1f}s (run {result.run_id[:8]} of job index_corpus), "
            + (kept or f"version {idx.version}") + (f"; {failed}" if failed else "")
            + "; open the UI with `make ui` to see it")
    elif failed:
        say(f"warning: {failed}", err=True)
    if not stats.get("files"):  # said even with -q: an empty index is rarely what was meant
        skipped = len(stats.get("skipped") or [])
        say(f"warning: none of the {skipped} file(s) under {spec.root} could be indexed "
            "(`strata map --stats` lists why); the index is empty" if skipped else
            f"warning: no file under {spec.root} matches the include and exclude lines "
            f"({', '.join(spec.include)}; {', '.join(spec.exclude) or 'no exclude'}); the "
            "index is empty", err=True)
    return EXIT_OK


def _run_tags(spec, resources: dict) -> dict[str, str]:
    """The run's labels in the UI: corpus, LLM, embedding model, who launched it."""
    import getpass

    from strata.assets.run_tags import CLI_TAG, LAUNCHED_BY_TAG, USER_TAG, build_tags

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = str(os.getuid())
    return {**build_tags(spec, resources["llm"], resources["embedder"]), CLI_TAG: "index",
            LAUNCHED_BY_TAG: "strata index", USER_TAG: user}


def _close_abandoned_runs(instance, out: Path) -> None:
    """Earlier `strata index` runs of this folder still shown as running: their
    process was killed (SIGKILL, a power cut) before it could say so. We hold the
    folder's lock, so none of them is alive."""
    from strata.pipelines.abandoned import close_abandoned_cli_runs

    close_abandoned_cli_runs(instance, is_alive=lambda run: False, out=out,
                             by="the next build of the same index")


def _llm_failures(stats: dict) -> dict:
    """The items the LLM failed on, by stage (not the ones never sent to it: a
    missing or unreadable image is its file's problem, listed apart)."""
    by_stage: dict[str, int] = {}
    for f in stats.get("failures") or []:
        if f.get("cause") != "input":
            by_stage[f["stage"]] = by_stage.get(f["stage"], 0) + 1
    return {"total": sum(by_stage.values()), "by_stage": by_stage}


def _report_failure(result, home: Path, serving: str) -> int:
    """A dead endpoint, a held lock or a write that found no space is one line,
    said once (several stages may have hit it); any other failure names its
    step, then where the run is."""
    from strata.assets.common import ENDPOINT_TAG, SPACE_TAG

    failures = [e for e in result.all_events if e.is_step_failure]
    known: list[str] = []
    other: list[str] = []
    for e in failures:
        data = e.step_failure_data
        user = data.user_failure_data
        meta = dict(user.metadata) if user is not None and user.metadata else {}
        if user is not None and ({ENDPOINT_TAG, SPACE_TAG, "strata/locked_by"} & meta.keys()):
            if user.description not in known:
                known.append(user.description)
        else:
            line = f"step {e.step_key} failed: {data.error.message.strip() if data.error else '?'}"
            if line not in other:
                other.append(line)
    run = f"run {result.run_id[:8]}"
    if not known and not other:  # the run failed outside any step (its executor, resources)
        for e in result.all_events:
            if e.event_type_value == "PIPELINE_FAILURE" and e.message:
                error = getattr(e.event_specific_data, "error", None)
                other.append(f"the run failed: {e.message}"
                             + (f" ({error.message.strip()})" if error is not None else ""))
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
