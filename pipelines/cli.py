"""The `strata` command line.

`strata index` runs the very same Dagster assets as the UI (through
``dagster.materialize`` against the project's Dagster instance), so a CLI
build shows up in the UI's run history and there is only one code path.
Query commands go through :mod:`retrieval` and never start Dagster.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def dagster_home() -> Path:
    """The project-local instance (``.dagster/``) unless DAGSTER_HOME is set."""
    home = Path(os.environ.get("DAGSTER_HOME") or PROJECT_ROOT / ".dagster").resolve()
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def _print(msg: str = "", *, err: bool = False) -> None:
    print(msg, file=sys.stderr if err else sys.stdout, flush=True)


def cmd_index(args: argparse.Namespace) -> int:
    from stages.corpora import (DEFAULT_CONFIG, CorpusError, CorpusSpec, load_corpora,
                                register_corpus, validate_name)
    from strata.embedding import DEFAULT_MODEL, EncoderSpec

    root = Path(args.root).expanduser().resolve()
    if not root.is_dir():
        _print(f"error: {args.root} is not a folder", err=True)
        return EXIT_USAGE
    try:
        name = validate_name(args.corpus)
    except CorpusError as e:
        _print(f"error: {e}", err=True)
        return EXIT_USAGE
    config_path = Path(os.environ.get("STRATA_CORPORA") or DEFAULT_CONFIG)
    declared = load_corpora(config_path).get(name)
    out = Path(args.out).expanduser().resolve() if args.out else (
        declared.out if declared else (config_path.parent / "indexes" / name).resolve())
    if args.model or args.embed_backend != "sentence-transformers":
        embedding = EncoderSpec(backend=args.embed_backend, model=args.model or DEFAULT_MODEL,
                                base_url=args.embed_base_url)
    else:
        embedding = declared.embedding if declared else EncoderSpec()
    spec = CorpusSpec(
        name=name, root=root, out=out,
        include=args.include or (declared.include if declared else ["**/*"]),
        exclude=args.exclude or (declared.exclude if declared else []),
        embedding=embedding,
        url_template=declared.url_template if declared else None,
    )
    register_corpus(spec, config_path)
    if not args.quiet:
        _print(f"indexing {root} as corpus '{name}' → {out}", err=True)
    home = dagster_home()

    import dagster as dg

    # One shard per worker process: in one process shards add steps, not speed.
    # (Read when the assets module loads; the UI's code location keeps its own.)
    os.environ.setdefault("STRATA_SHARDS", str(max(1, args.workers)))
    from assets import all_assets, corpora_partitions
    from pipelines.definitions import make_resources

    instance = dg.DagsterInstance.get()
    if not instance.has_dynamic_partition(corpora_partitions.name, name):
        instance.add_dynamic_partitions(corpora_partitions.name, [name])
    parse_config = {"config": {"chunk_tokens": args.chunk_tokens}}
    ops: dict = {"nodes": parse_config, "parsed_shards": parse_config}
    if args.openie_import:
        path = Path(args.openie_import).expanduser().resolve()
        if not path.is_file():
            _print(f"error: --openie-import {args.openie_import} is not a file", err=True)
            return EXIT_USAGE
        ops["facts"] = {"config": {"import_path": str(path)}}
    llm = {"backend": args.llm_backend or ("callable" if args.llm_callable else None),
           "model": args.llm_model, "base_url": args.llm_base_url,
           "callable_path": args.llm_callable}
    if args.dry_run:
        return _dry_run(all_assets, name, instance, llm, ops, as_json=args.json)
    run_config = {
        "ops": ops,
        "loggers": {"console": {"config": {"log_level": "INFO" if args.verbose else "ERROR"}}},
    }
    from contextlib import nullcontext
    from uuid import uuid4

    from pipelines.progress import PROGRESS_TAG, BuildProgress

    tags = {"strata/cli": "index", PROGRESS_TAG: uuid4().hex}
    # a progress bar (a line per step off a terminal) unless -q, or --verbose's Dagster logs
    watch = nullcontext() if args.quiet or args.verbose else \
        BuildProgress(instance, tags[PROGRESS_TAG])
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
    if not result.success:
        failures = [e for e in result.all_events if e.is_step_failure]
        for e in failures:
            _print(f"step {e.step_key} failed: {e.step_failure_data.error.message.strip()}", err=True)
        _print(f"index build failed (run {result.run_id}); see the run in the UI: "
               f"DAGSTER_HOME={home} dagster dev -w workspace.yaml", err=True)
        return EXIT_FAILED
    from retrieval import Index

    idx = Index.open(out)
    stats = idx.stats()
    if args.json:
        _print(json.dumps({"corpus": name, "out": str(out), "version": idx.version,
                           "run_id": result.run_id, "wall_seconds": round(wall, 2), **stats},
                          indent=2))
    elif not args.quiet:
        _print_stats(idx, stats)
        _print(f"\nbuilt in {wall:.1f}s (run {result.run_id[:8]}); "
               f"open the UI with `make ui` to see it")
    return EXIT_OK


def _run_in_processes(instance, name: str, config_path, llm: dict, run_config: dict, workers: int,
                      tags: dict):
    """The index job on Dagster's multiprocess executor: every step (each parse and
    embedding shard among them) in its own process, ``workers`` at a time. The
    workers rebuild their resources from the environment, so the flags go there."""
    import dagster as dg

    from pipelines.scaleout import multiprocess_index_job

    os.environ["STRATA_CORPORA"] = str(config_path)
    # each worker process gets its share of the cores for torch
    os.environ.setdefault("STRATA_TORCH_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
    for key, value in llm.items():
        if value is not None:
            env = {"callable_path": "STRATA_LLM_CALLABLE"}.get(key, f"STRATA_LLM_{key.upper()}")
            os.environ[env] = str(value)
    # forkserver with the code location and the encoder's libraries preloaded: each
    # step's process forks ready to run instead of importing them again (~3 s each)
    preload = ["pipelines.definitions", "sentence_transformers", "lancedb"]
    run_config = {**run_config, "execution": {"config": {
        "max_concurrent": workers,
        "start_method": {"forkserver": {"preload_modules": preload}}}}}
    with dg.execute_job(dg.reconstructable(multiprocess_index_job), instance=instance,
                        run_config=run_config, raise_on_error=False,
                        tags={**tags, "dagster/partition": name}) as result:
        result.all_events  # noqa: B018 - read the events before the result closes
        return result


def _dry_run(all_assets, name: str, instance, llm: dict, ops: dict, as_json: bool = False) -> int:
    """Parse only (cheap, no LLM), then count the LLM calls a build would make
    that the cache cannot answer."""
    import dagster as dg
    import polars as pl

    from pipelines.definitions import make_resources
    from stages.corpora import load_corpora
    from stages.enrich.openie import openie_units, openie_request
    from stages.enrich.summarize import planned_requests
    from strata.layout import IndexLayout

    nodes_asset = next(a for a in all_assets if a.key.to_user_string() == "nodes")
    resources = make_resources(llm)
    res = dg.materialize([nodes_asset], partition_key=name, instance=instance, resources=resources,
                         run_config={"ops": {"nodes": ops["nodes"]},
                                     "loggers": {"console": {"config": {"log_level": "ERROR"}}}},
                         raise_on_error=False, tags={"strata/cli": "dry-run"})
    if not res.success:
        _print("dry run: parsing failed; see the run in the UI", err=True)
        return EXIT_FAILED
    spec = load_corpora(Path(os.environ.get("STRATA_CORPORA") or PROJECT_ROOT / "data" / "corpora.yaml"))[name]
    layout = IndexLayout(spec.out)
    nodes = pl.read_parquet(layout.build_table("nodes"))
    client = resources["llm"].client(layout.cache / "llm.sqlite")
    if client.offline:
        if as_json:
            _print(json.dumps({"corpus": name, "llm": "offline", "calls_needed": 0}))
        else:
            _print("dry run: the LLM backend is 'offline' — a build makes 0 LLM calls "
                   "(extractive summaries, heuristic OpenIE, captions from alt text and context)")
        return EXIT_OK
    summary = client.estimate(planned_requests(nodes), "summarize")
    files = nodes.filter(pl.col("kind") == "file").height
    units = openie_units(nodes)
    openie = {"requests": 0, "calls_needed": 0, "est_prompt_tokens": 0} if "facts" in ops else \
        client.estimate([openie_request(u) for u in units.to_dicts()], "openie")
    images = nodes.filter(pl.col("kind") == "image").height
    if as_json:
        _print(json.dumps({"corpus": name, "llm": client.name, "summarize": summary,
                           "file_summaries_max": files, "openie": openie,
                           "openie_imported": "facts" in ops, "caption_requests_max": images},
                          indent=2))
        client.close()
        return EXIT_OK
    _print(f"dry run for corpus '{name}' with {client.name}:")
    _print(f"  summarize: {summary['calls_needed']} of {summary['requests']} section/code/table "
           f"requests not cached (~{summary['est_prompt_tokens']} prompt tokens), "
           f"plus up to {files} file summaries")
    _print(f"  openie:    {openie['calls_needed']} of {openie['requests']} chunk requests not cached "
           f"(~{openie['est_prompt_tokens']} prompt tokens)"
           + (" — imported from file, 0 calls" if "facts" in ops else ""))
    _print(f"  caption:   up to {images} image requests (one per duplicate group)")
    client.close()
    return EXIT_OK


def _print_stats(idx, stats: dict) -> None:
    from pipelines.console import kv_table

    m = idx.manifest
    _print(f"index {idx.path} — corpus '{m['corpus']}', version {idx.version}, "
           f"model {m['model']} (dim {m['dim']})")
    _print(f"files: {stats['files']}   nodes: {stats['nodes']}   edges: {stats['edges']}   "
           f"max depth: {stats['max_depth']}")
    _print(kv_table("files by format", stats["files_by_format"]))
    _print(kv_table("nodes by kind", stats["nodes_by_kind"]))
    _print(kv_table("edges by type", stats["edges_by_type"]))
    _print(kv_table("depth distribution", stats["depth_distribution"]))
    stages = m.get("stages", {})
    if stages:
        _print(kv_table("stage seconds", {k: round(v.get("seconds", 0), 2) for k, v in stages.items()}))
        emb = stages.get("embed", {})
        parse = stages.get("parse", {})
        _print(f"parse: {parse.get('parsed', 0)} files parsed, {parse.get('reused', 0)} reused; "
               f"embeddings: {emb.get('computed', 0)} computed, {emb.get('reused', 0)} reused")
    if stats["skipped"]:
        _print(f"\nskipped ({len(stats['skipped'])}):")
        for s in stats["skipped"][:30]:
            _print(f"  {s['path']}: {s['reason']}")
        if len(stats["skipped"]) > 30:
            _print(f"  … and {len(stats['skipped']) - 30} more (strata map --stats --json)")
    if stats["notes"]:
        _print(f"\nparser notes ({len(stats['notes'])}):")
        for n in stats["notes"][:10]:
            _print(f"  {n['path']}: {n['note']}")


def _open_index(path: str, version: int | None = None):
    from retrieval import Index
    from strata.layout import IndexNotFound

    try:
        return Index.open(path, version=version)
    except IndexNotFound as e:
        _print(f"error: {e}", err=True)
        return None


def _versions(root: str) -> list[dict]:
    """One row per published version still on disk (newest last)."""
    from strata.layout import IndexLayout, read_manifest

    layout = IndexLayout(root)
    current = layout.current_version()
    rows = []
    for v in layout.versions():
        try:
            m = read_manifest(layout.version_dir(v))
        except (OSError, ValueError):
            continue  # an unreadable manifest is not a published version
        counts = m.get("counts", {})
        rows.append({"version": v, "current": v == current, "created_at": m.get("created_at"),
                     "files": counts.get("files"), "nodes": counts.get("nodes"),
                     "edges": counts.get("edges"), "build_seconds": m.get("build_seconds"),
                     "source_fingerprint": m.get("source_fingerprint"),
                     "path": str(layout.version_dir(v))})
    return rows


def cmd_map(args: argparse.Namespace) -> int:
    if args.versions:
        rows = _versions(args.index)
        if not rows:
            _print(f"error: no published index versions in {args.index}", err=True)
            return EXIT_USAGE
        if args.json:
            _print(json.dumps(rows, indent=2))
            return EXIT_OK
        _print(f"{'':2}{'version':>7}  {'created (UTC)':25}  {'files':>6}  {'nodes':>7}  "
               f"{'edges':>7}  {'build s':>8}  source")
        for r in rows:
            _print(f"{'*' if r['current'] else ' ':2}{r['version']:>7}  {r['created_at'] or '':25}  "
                   f"{r['files'] or 0:>6}  {r['nodes'] or 0:>7}  {r['edges'] or 0:>7}  "
                   f"{r['build_seconds'] or 0:>8}  {(r['source_fingerprint'] or '')[:12]}")
        _print("* = current (what Index.open reads); open another with "
               "Index.open(dir, version=N) or --version N")
        return EXIT_OK
    idx = _open_index(args.index, args.version)
    if idx is None:
        return EXIT_USAGE
    stats = idx.stats()
    stats["build_seconds"] = idx.manifest.get("build_seconds")
    if args.json:
        _print(json.dumps({"corpus": idx.manifest["corpus"], "version": idx.version,
                           "model": idx.manifest["model"], **stats}, indent=2))
    else:
        _print_stats(idx, stats)
        _print(f"\nbuild time: {stats['build_seconds']}s")
    return EXIT_OK


def _query_llm(args: argparse.Namespace):
    """The LLM of a query command from its flags, else $STRATA_LLM_*; None when offline.
    Built directly (no Dagster resources: query commands never import dagster)."""
    from strata.llm import query_llm

    return query_llm(getattr(args, "llm_backend", None), getattr(args, "llm_model", None),
                     getattr(args, "llm_base_url", None), getattr(args, "llm_callable", None))


def _check_mode(mode: str) -> bool:
    from retrieval.modes import MODES

    if mode in MODES:
        return True
    _print(f"error: unknown mode {mode!r}; choose one of: {', '.join(sorted(MODES))}", err=True)
    return False


def _mode_params(args: argparse.Namespace) -> dict:
    if args.budget_tokens is not None:
        if args.mode != "auto":
            raise ValueError("--budget-tokens works with --mode auto (the default)")
        return {"budget_tokens": args.budget_tokens}
    if args.mode != "routed":
        return {}
    params = {"connections": not args.no_connections}
    for name in ("max_files", "sections_per_file", "max_connections"):
        if getattr(args, name, None) is not None:
            params[name] = getattr(args, name)
    return params


def _run_query(fn, what: str):
    """(value, exit code): usage errors exit 2, a missing mode or a failure 1."""
    from retrieval.modes import UnknownMode

    try:
        return fn(), EXIT_OK
    except UnknownMode as e:
        _print(f"error: {e}", err=True)
        return None, EXIT_USAGE
    except ModuleNotFoundError as e:
        if (e.name or "").startswith("retrieval.modes"):
            _print(f"error: this mode is not available in this installation ({e.name})", err=True)
            return None, EXIT_FAILED
        raise
    except ValueError as e:
        _print(f"error: {what}: {e}", err=True)
        return None, EXIT_USAGE


def cmd_search(args: argparse.Namespace) -> int:
    if not _check_mode(args.mode):
        return EXIT_USAGE
    idx = _open_index(args.index)
    if idx is None:
        return EXIT_USAGE
    try:
        params = _mode_params(args)
    except ValueError as e:
        _print(f"error: {e}", err=True)
        return EXIT_USAGE
    llm = None
    if args.mode == "routed":
        try:
            llm = _query_llm(args)
        except (ValueError, ImportError, AttributeError) as e:
            _print(f"error: {e}", err=True)
            return EXIT_USAGE
        if llm is not None:
            params["llm"] = llm
    try:
        results, rc = _run_query(lambda: idx.search(args.query, mode=args.mode, k=args.k,
                                                    **params), "search")
    finally:
        if llm is not None:
            llm.close()
    if rc != EXIT_OK:
        return rc
    from pipelines.console import print_results

    if args.json:
        _print(json.dumps({"query": args.query, "mode": args.mode, "index": str(idx.source),
                           "version": idx.version, "results": [r.to_dict() for r in results]},
                          indent=2))
        if args.trace:
            _print(json.dumps(results.trace.to_dict(), indent=2), err=True)
        return EXIT_OK
    print_results(results)
    if args.trace:
        from pipelines.console import print_trace

        print_trace(results.trace.to_dict())
    return EXIT_OK


def cmd_ask(args: argparse.Namespace) -> int:
    if not _check_mode(args.mode):
        return EXIT_USAGE
    idx = _open_index(args.index)
    if idx is None:
        return EXIT_USAGE
    try:
        llm = _query_llm(args)
    except (ValueError, ImportError, AttributeError) as e:
        _print(f"error: {e}", err=True)
        return EXIT_USAGE
    try:
        answer, rc = _run_query(lambda: idx.ask(args.question, mode=args.mode, llm=llm, k=args.k,
                                                **_mode_params(args)), "ask")
    finally:
        if llm is not None:
            llm.close()
    if rc != EXIT_OK:
        return rc
    if args.json:
        _print(json.dumps(answer.to_dict(), indent=2))
        return EXIT_OK
    from pipelines.console import print_answer

    print_answer(answer)
    if args.trace:
        from pipelines.console import print_trace

        print_trace(answer.trace)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve indexes over HTTP (see :mod:`service`); blocks until interrupted."""
    import logging

    from service.auth import KeyFileError, load_entries
    from service.settings import ServiceConfigError, ServiceSettings, is_loopback
    from strata.layout import IndexNotFound

    env = ServiceSettings.from_env()
    settings = ServiceSettings(
        indexes=args.index, host=args.host, port=args.port,
        api_keys_file=args.api_keys or env.api_keys_file, api_key_hashes=env.api_key_hashes,
        rate_per_minute=args.rate_per_minute, anonymous_rate_per_minute=args.anonymous_rate,
        allow_unauthenticated=args.allow_unauthenticated, max_body_bytes=args.max_body_bytes,
        max_query_chars=args.max_query_chars, reload_interval_s=args.reload_interval,
        cross_encoder_path=args.cross_encoder or env.cross_encoder_path,
        llm_backend=args.llm_backend, llm_model=args.llm_model, llm_base_url=args.llm_base_url,
        llm_callable=args.llm_callable)
    try:
        keys = load_entries(settings.api_keys_file, settings.api_key_hashes)
    except (KeyFileError, OSError) as e:
        _print(f"error: API keys: {e}", err=True)
        return EXIT_USAGE
    if not keys and not is_loopback(args.host) and not args.allow_unauthenticated:
        _print(f"error: refusing to listen on {args.host} without API keys: anyone who can "
               "reach it could query the index. Create a key with `strata keys new NAME "
               "--file keys.txt` and pass --api-keys keys.txt, or pass "
               "--allow-unauthenticated if the network in front of it is trusted.", err=True)
        return EXIT_USAGE
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.quiet:
        _print(f"loading {len(args.index)} index(es)…", err=True)
    try:
        from service.app import create_app

        app = create_app(settings)
    except IndexNotFound as e:
        _print(f"error: {e}", err=True)
        return EXIT_USAGE
    except (ServiceConfigError, ValueError) as e:
        _print(f"error: {e}", err=True)
        return EXIT_USAGE
    import uvicorn

    if not args.quiet:
        names = ", ".join(f"{n} v{s.current.index.version}"
                          for n, s in app.state.service.registry.slots.items())
        _print(f"serving {names} on http://{args.host}:{args.port}/ "
               f"({'API keys required' if keys else 'no API keys: loopback clients only'})",
               err=True)
    # uvicorn's access log prints query strings; the service logs paths only
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level,
                access_log=False, server_header=False)
    return EXIT_OK


def cmd_keys(args: argparse.Namespace) -> int:
    from service.auth import KeyEntry, KeyFileError, append_entry, hash_key, load_entries, new_key

    try:
        if args.keys_command == "new":
            key = new_key()
            entry = KeyEntry(args.name, hash_key(key), args.rate_per_minute)
            if args.file:
                append_entry(args.file, entry)
            if args.json:
                _print(json.dumps({"name": args.name, "key": key, "entry": entry.line(),
                                   "file": args.file}))
                return EXIT_OK
            if args.file:
                _print(f"added {args.name!r} to {args.file} (only its hash is stored); "
                       "the key, shown once:", err=True)
            else:
                _print(f"entry for STRATA_API_KEY_HASHES: {entry.line()}", err=True)
                _print("the key, shown once:", err=True)
            _print(key)
        elif args.keys_command == "hash":
            key = sys.stdin.readline().strip()
            if not key:
                _print("error: give the key on standard input", err=True)
                return EXIT_USAGE
            _print(KeyEntry(args.name, hash_key(key), args.rate_per_minute).line())
        elif args.json:
            _print(json.dumps([{"name": e.name, "rate_per_minute": e.rate_per_minute,
                                "digest": e.digest} for e in load_entries(args.file)], indent=2))
        else:
            for e in load_entries(args.file):
                rate = "default" if e.rate_per_minute is None else f"{e.rate_per_minute:g}/min"
                _print(f"{e.name}\t{rate}\t{e.digest[:19]}…")
    except (KeyFileError, OSError) as e:
        _print(f"error: {e}", err=True)
        return EXIT_USAGE
    return EXIT_OK


def _add_query_args(p: argparse.ArgumentParser, default_k: int) -> None:
    from retrieval.modes import DEFAULT_MODE, MODES

    p.add_argument("--index", required=True, help="index folder")
    p.add_argument("--mode", default=DEFAULT_MODE,
                   help=f"retrieval mode: {', '.join(sorted(MODES))} (default {DEFAULT_MODE})")
    p.add_argument("-k", type=int, default=default_k, help=f"results (default {default_k})")
    p.add_argument("--budget-tokens", type=int, default=None, metavar="N",
                   help="auto mode: instead of k results, the best context that fits N "
                        "estimated tokens (siblings merged into their parent where cheaper)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--trace", action="store_true", help="print the query trace (to stderr for search)")
    g = p.add_argument_group("routed mode")
    g.add_argument("--max-files", type=int, default=None, help="files the router picks (default 3)")
    g.add_argument("--sections-per-file", type=int, default=None, help="nodes read per file (default 2)")
    g.add_argument("--max-connections", type=int, default=None,
                   help="direct connections read (default 6)")
    g.add_argument("--no-connections", action="store_true", help="do not read connected files")
    _add_llm_args(p.add_argument_group(
        "LLM (routed router / answer; default: $STRATA_LLM_BACKEND or offline)"))


def _add_llm_args(group) -> None:
    """The LLM flags every command that may call a model shares (else $STRATA_LLM_*)."""
    group.add_argument("--llm-backend", default=None, choices=["offline", "openai", "callable"])
    group.add_argument("--llm-model", default=None)
    group.add_argument("--llm-base-url", default=None,
                       help="OpenAI-compatible endpoint (vLLM, Ollama...)")
    group.add_argument("--llm-callable", default=None,
                       help="'module:function' (implies --llm-backend callable)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="strata", description="Structure-keeping retrieval indexes.",
        epilog="exit codes: 0 success; 1 the build or query failed (the message says which "
               "step; the run is in the Dagster UI); 2 bad usage: a missing folder or index, "
               "an invalid name, mode or configuration; 130 interrupted. Every command that "
               "reports takes --json for scripts.")
    sub = p.add_subparsers(dest="command", required=True)

    ix = sub.add_parser("index", help="build or update the index of a folder (runs the Dagster assets)")
    ix.add_argument("root", help="folder to index")
    ix.add_argument("--corpus", required=True, help="corpus name (the Dagster partition)")
    ix.add_argument("--out", help="index folder (default: data/indexes/<corpus>)")
    ix.add_argument("--include", action="append", help="glob of files to include (repeatable)")
    ix.add_argument("--exclude", action="append", help="glob of files to exclude (repeatable)")
    ix.add_argument("--model", default=None, help="embedding model (default all-MiniLM-L6-v2)")
    ix.add_argument("--embed-backend", default="sentence-transformers",
                    choices=["sentence-transformers", "openai"])
    ix.add_argument("--embed-base-url", default=None, help="OpenAI-compatible embeddings endpoint")
    ix.add_argument("--chunk-tokens", type=int, default=200, help="chunk budget (estimated tokens)")
    ix.add_argument("--openie-import", default=None,
                    help="HippoRAG openie_results JSON to use instead of LLM OpenIE calls")
    _add_llm_args(ix.add_argument_group(
        "LLM for summaries, captions and OpenIE (default: $STRATA_LLM_BACKEND or offline)"))
    ix.add_argument("--workers", type=int, default=1,
                    help="run the build's steps (parse and embedding shards among them) in this "
                         "many processes (Dagster's multiprocess executor; shards: $STRATA_SHARDS)")
    ix.add_argument("--dry-run", action="store_true",
                    help="parse only and print how many LLM calls a build would make")
    ix.add_argument("--json", action="store_true", help="print the resulting stats as JSON")
    ix.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    ix.add_argument("-v", "--verbose", action="store_true",
                    help="Dagster's own log lines instead of the progress bar")
    ix.set_defaults(func=cmd_index)

    mp = sub.add_parser("map", help="describe an index")
    mp.add_argument("--index", required=True, help="index folder")
    mp.add_argument("--stats", action="store_true", help="print statistics (the default)")
    mp.add_argument("--version", type=int, default=None, help="a published version (default: current)")
    mp.add_argument("--versions", action="store_true",
                    help="list the published versions kept on disk (current marked *)")
    mp.add_argument("--json", action="store_true")
    mp.set_defaults(func=cmd_map)

    se = sub.add_parser("search", help="search an index")
    se.add_argument("query")
    _add_query_args(se, default_k=10)
    se.set_defaults(func=cmd_search)

    ak = sub.add_parser("ask", help="answer a question from an index (extractive without an LLM)")
    ak.add_argument("question")
    _add_query_args(ak, default_k=8)
    ak.set_defaults(func=cmd_ask)

    sv = sub.add_parser("serve", help="serve indexes over HTTP (search, ask, a web page)")
    sv.add_argument("--index", action="append", required=True,
                    help="index folder or object-storage URI, or NAME=LOCATION (repeatable)")
    sv.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1; others need API keys)")
    sv.add_argument("--port", type=int, default=8001)
    sv.add_argument("--api-keys", default=None,
                    help="file of hashed API keys (`strata keys new`; default $STRATA_API_KEYS_FILE)")
    sv.add_argument("--rate-per-minute", type=float, default=120.0,
                    help="requests per minute per key, unless its entry sets one (default 120)")
    sv.add_argument("--anonymous-rate", type=float, default=None,
                    help="requests per minute per client address when no keys are configured")
    sv.add_argument("--allow-unauthenticated", action="store_true",
                    help="listen on a non-loopback address without API keys")
    sv.add_argument("--max-body-bytes", type=int, default=64 * 1024)
    sv.add_argument("--max-query-chars", type=int, default=2000)
    sv.add_argument("--reload-interval", type=float, default=1.0,
                    help="seconds between looks for a newly published version (default 1)")
    sv.add_argument("--cross-encoder", default=None,
                    help="local CrossEncoder folder for diffusion's rerank='cross-encoder'")
    sv.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sv.add_argument("-q", "--quiet", action="store_true")
    _add_llm_args(sv.add_argument_group(
        "LLM for /ask and the routed router (default: $STRATA_LLM_BACKEND or offline)"))
    sv.set_defaults(func=cmd_serve)

    ks = sub.add_parser("keys", help="API keys of `strata serve` (stored hashed)")
    ksub = ks.add_subparsers(dest="keys_command", required=True)
    kn = ksub.add_parser("new", help="make a key: prints it once, stores only its hash")
    kn.add_argument("name")
    kn.add_argument("--file", default=None, help="key file to append to (else print the entry)")
    kn.add_argument("--rate-per-minute", type=float, default=None)
    kn.add_argument("--json", action="store_true", help="print name, key and entry as JSON")
    kh = ksub.add_parser("hash", help="the entry of a key read from standard input")
    kh.add_argument("name")
    kh.add_argument("--rate-per-minute", type=float, default=None)
    kl = ksub.add_parser("list", help="names and rates in a key file")
    kl.add_argument("--file", required=True)
    kl.add_argument("--json", action="store_true")
    ks.set_defaults(func=cmd_keys)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
