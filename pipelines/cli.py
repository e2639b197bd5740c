"""The `strata` command line.

`strata index` (:mod:`pipelines.build_command`) runs the very same Dagster
assets as the UI, so a CLI build shows up in the UI's run history and there is
only one code path. Query commands go through :mod:`retrieval` and never start
Dagster.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import NoReturn

from strata.pipelines.build_command import cmd_index
from strata.pipelines.console import EXIT_FAILED, EXIT_LOCKED, EXIT_OK, EXIT_USAGE
from strata.pipelines.console import print_json
from strata.pipelines.console import say
from strata.core.settings import (RUNTIMES, ChunkingSettings, Flags, LLMSettings, QuerySettings,
                                  ServeSettings)

# The flags that set a settings field, derived from the field (strata.core.settings.Flags:
# its help, type, choices; absent, the field's variable or default applies). The
# renames keep the flag names the command has always had.

#: `strata serve`: one flag per ServeSettings field, so a new field gets its flag
SERVE_FLAGS = Flags(ServeSettings, rename={
    "indexes": "index", "api_keys_file": "api-keys", "anonymous_rate_per_minute": "anonymous-rate",
    "reload_interval_s": "reload-interval", "cross_encoder_path": "cross-encoder"})
#: the LLM of a command that may call one (the rest of LLMSettings: variables only)
LLM_FLAGS = Flags(LLMSettings, ("backend", "model", "base_url", "callable_path"), prefix="llm-",
                  rename={"callable_path": "llm-callable"})
#: search and ask; a floor outside 0..1 is refused by argparse, naming the flag
QUERY_FLAGS = Flags(QuerySettings, ("min_relevance",), bounded=True)
#: `strata index`: the chunk budget (its default is the model's: a run's config, no variable)
CHUNK_FLAGS = Flags(ChunkingSettings, ("chunk_tokens",))


def _open_index(path: str, version: int | None = None):
    from strata.retrieval import Index
    from strata.core.layout import IndexNotFound

    try:
        return Index.open(path, version=version)
    except IndexNotFound as e:
        say(f"error: {e}", err=True)
        return None


def _versions(root: str) -> list[dict]:
    """One row per published version still on disk (newest last)."""
    from strata.core.layout import IndexLayout, read_manifest

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
            say(f"error: no published index versions in {args.index}", err=True)
            return EXIT_USAGE
        if args.json:
            print_json(rows)
            return EXIT_OK
        say(f"{'':2}{'version':>7}  {'created (UTC)':25}  {'files':>6}  {'nodes':>7}  "
            f"{'edges':>7}  {'build s':>8}  source")
        for r in rows:
            say(f"{'*' if r['current'] else ' ':2}{r['version']:>7}  {r['created_at'] or '':25}  "
                f"{r['files'] or 0:>6}  {r['nodes'] or 0:>7}  {r['edges'] or 0:>7}  "
                f"{r['build_seconds'] or 0:>8}  {(r['source_fingerprint'] or '')[:12]}")
        say("* = current (what Index.open reads); open another with "
            "Index.open(dir, version=N) or --version N")
        return EXIT_OK
    idx = _open_index(args.index, args.version)
    if idx is None:
        return EXIT_USAGE
    stats = idx.stats()
    stats["build_seconds"] = idx.manifest.get("build_seconds")
    if args.json:
        print_json({"corpus": idx.manifest["corpus"], "version": idx.version,
                    "model": idx.manifest["model"], **stats})
    else:
        from strata.pipelines.console import print_stats

        print_stats(idx, stats)
        say(f"\nbuild time: {stats['build_seconds']}s")
    return EXIT_OK


def _query_llm(args: argparse.Namespace):
    """The LLM of a query command from its flags, else $STRATA_LLM_*; None when offline.
    Built directly (no Dagster resources: query commands never import dagster)."""
    from strata.core.llm import query_llm

    return query_llm(getattr(args, "llm_backend", None), getattr(args, "llm_model", None),
                     getattr(args, "llm_base_url", None), getattr(args, "llm_callable", None))


def _check_mode(mode: str) -> bool:
    from strata.retrieval.modes import MODES

    if mode in MODES:
        return True
    say(f"error: unknown mode {mode!r}; choose one of: {', '.join(sorted(MODES))}", err=True)
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


def _run_query(fn, what: str, llm=None):
    """(value, exit code): usage errors exit 2, a missing mode or a failure 1; the
    query's LLM, if one was made for it, is closed however it ends."""
    from strata.retrieval.modes import UnknownMode

    try:
        return fn(), EXIT_OK
    except UnknownMode as e:
        say(f"error: {e}", err=True)
        return None, EXIT_USAGE
    except ModuleNotFoundError as e:
        if (e.name or "").startswith("strata.retrieval.modes"):
            say(f"error: this mode is not available in this installation ({e.name})", err=True)
            return None, EXIT_FAILED
        raise
    except ValueError as e:
        say(f"error: {what}: {e}", err=True)
        return None, EXIT_USAGE
    finally:
        if llm is not None:
            llm.close()


def _query_setup(args: argparse.Namespace, needs_llm: bool):
    """(index, LLM or None) for a query's flags, or None once what is wrong was said
    (exit 2): the mode, the index, and the LLM when the query uses one."""
    if not _check_mode(args.mode):
        return None
    idx = _open_index(args.index)
    if idx is None:
        return None
    try:
        return idx, (_query_llm(args) if needs_llm else None)
    except (ValueError, ImportError, AttributeError) as e:
        say(f"error: {e}", err=True)
        return None


def cmd_search(args: argparse.Namespace) -> int:
    try:
        params = _mode_params(args)
    except ValueError as e:
        say(f"error: {e}", err=True)
        return EXIT_USAGE
    setup = _query_setup(args, needs_llm=args.mode == "routed")
    if setup is None:
        return EXIT_USAGE
    idx, llm = setup
    if llm is not None:
        params["llm"] = llm
    results, rc = _run_query(lambda: idx.search(args.query, mode=args.mode, k=args.k,
                                                min_relevance=args.min_relevance, **params),
                             "search", llm)
    if rc != EXIT_OK:
        return rc
    from strata.pipelines.console import budget_line, print_results, tokens_used

    if args.json:
        body = {"query": args.query, "mode": args.mode, "index": str(idx.source),
                "version": idx.version, "min_relevance": results.min_relevance,
                "nothing_relevant": results.nothing_relevant, "note": results.note,
                "results": [r.to_dict() for r in results],
                "below": [r.to_dict() for r in results.below]}
        if args.budget_tokens is not None:
            body.update(budget_tokens=args.budget_tokens, tokens_used=tokens_used(results))
        print_json(body)
        if args.trace:
            print_json(results.trace.to_dict(), err=True)
        return EXIT_OK
    print_results(results)
    if args.budget_tokens is not None:
        say(budget_line(tokens_used(results), args.budget_tokens))
    if args.trace:
        from strata.pipelines.console import print_trace

        print_trace(results.trace.to_dict())
    return EXIT_OK


def cmd_ask(args: argparse.Namespace) -> int:
    setup = _query_setup(args, needs_llm=True)
    if setup is None:
        return EXIT_USAGE
    idx, llm = setup
    answer, rc = _run_query(lambda: idx.ask(args.question, mode=args.mode, llm=llm, k=args.k,
                                            min_relevance=args.min_relevance,
                                            **_mode_params(args)), "ask", llm)
    if rc != EXIT_OK:
        return rc
    if args.json:
        print_json(answer.to_dict())
        return EXIT_OK
    from strata.pipelines.console import print_answer

    print_answer(answer)
    if args.trace:
        from strata.pipelines.console import print_trace

        print_trace(answer.trace)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve indexes over HTTP (see :mod:`service`); blocks until interrupted."""
    import logging

    from strata.service.auth import KeyFileError, load_entries
    from strata.service.settings import ServiceConfigError, ServiceSettings, is_loopback
    from strata.core.layout import IndexNotFound

    try:  # the flags given win over the STRATA_* variables, which win over the defaults
        settings = ServiceSettings.from_env(**SERVE_FLAGS.given(args))
    except ServiceConfigError as e:
        say(f"error: {e}", err=True)
        return EXIT_USAGE
    settings.llm_backend, settings.llm_model = args.llm_backend, args.llm_model
    settings.llm_base_url, settings.llm_callable = args.llm_base_url, args.llm_callable
    try:
        keys = load_entries(settings.api_keys_file, settings.api_key_hashes)
    except (KeyFileError, OSError) as e:
        say(f"error: API keys: {e}", err=True)
        return EXIT_USAGE
    if not keys and not is_loopback(settings.host) and not settings.allow_unauthenticated:
        say(f"error: refusing to listen on {settings.host} without API keys: anyone who can "
            "reach it could query the index. Create a key with `strata keys new NAME "
            "--file keys.txt` and pass --api-keys keys.txt, or pass "
            "--allow-unauthenticated if the network in front of it is trusted.", err=True)
        return EXIT_USAGE
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.quiet:
        say(f"loading {len(settings.indexes)} index(es)…", err=True)
    try:
        from strata.service.app import create_app

        app = create_app(settings)
    except IndexNotFound as e:
        say(f"error: {e}", err=True)
        return EXIT_USAGE
    except (ServiceConfigError, ValueError) as e:
        say(f"error: {e}", err=True)
        return EXIT_USAGE
    import uvicorn

    if not args.quiet:
        names = ", ".join(f"{n} v{s.current.index.version}"
                          for n, s in app.state.service.registry.slots.items())
        say(f"serving {names} on http://{settings.host}:{settings.port}/ "
            f"({'API keys required' if keys else 'no API keys: loopback clients only'})",
            err=True)
    # uvicorn's access log prints query strings; the service logs paths only
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level,
                access_log=False, server_header=False, **settings.uvicorn_options())
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    """The MCP server (see :mod:`service.mcp_server`); stdio unless --http."""
    from strata.service.mcp_server import main as mcp_main

    try:
        llm = _query_llm(args)
    except (ValueError, ImportError, AttributeError) as e:
        say(f"error: {e}", err=True)
        return EXIT_USAGE
    return mcp_main(args, llm)


def cmd_keys(args: argparse.Namespace) -> int:
    from strata.service.auth import KeyEntry, KeyFileError, append_entry, hash_key, load_entries, new_key

    try:
        if args.keys_command == "new":
            key = new_key()
            entry = KeyEntry(args.name, hash_key(key), args.rate_per_minute)
            if args.file:
                append_entry(args.file, entry)
            if args.json:
                say(json.dumps({"name": args.name, "key": key, "entry": entry.line(),
                                "file": args.file}))
                return EXIT_OK
            if args.file:
                say(f"added {args.name!r} to {args.file} (only its hash is stored); "
                    "the key, shown once:", err=True)
            else:
                say(f"entry for STRATA_API_KEY_HASHES: {entry.line()}", err=True)
                say("the key, shown once:", err=True)
            say(key)
        elif args.keys_command == "hash":
            key = sys.stdin.readline().strip()
            if not key:
                say("error: give the key on standard input", err=True)
                return EXIT_USAGE
            say(KeyEntry(args.name, hash_key(key), args.rate_per_minute).line())
        elif args.json:
            say(json.dumps([{"name": e.name, "rate_per_minute": e.rate_per_minute,
                             "digest": e.digest} for e in load_entries(args.file)], indent=2))
        else:
            for e in load_entries(args.file):
                rate = "default" if e.rate_per_minute is None else f"{e.rate_per_minute:g}/min"
                say(f"{e.name}\t{rate}\t{e.digest[:19]}…")
    except (KeyFileError, OSError) as e:
        say(f"error: {e}", err=True)
        return EXIT_USAGE
    return EXIT_OK


def _add_query_args(p: argparse.ArgumentParser, default_k: int) -> None:
    from strata.retrieval.modes import DEFAULT_MODE, MODES

    p.add_argument("--index", required=True, help="index folder")
    p.add_argument("--mode", default=DEFAULT_MODE,
                   help=f"retrieval mode: {', '.join(sorted(MODES))} (default {DEFAULT_MODE})")
    p.add_argument("-k", type=int, default=default_k, help=f"results (default {default_k})")
    p.add_argument("--budget-tokens", type=int, default=None, metavar="N",
                   help="auto mode: the best context that fits N estimated tokens (siblings "
                        "merged into their parent where cheaper), still at most k results")
    QUERY_FLAGS.add_to(p, min_relevance={"metavar": "X"})
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
    LLM_FLAGS.add_to(group, callable_path={
        "help": LLM_FLAGS.help("callable_path", "; implies --llm-backend callable")})


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="strata", description="Structure-keeping retrieval indexes.",
        epilog="exit codes: 0 success; 1 the build or query failed: a step failed, an "
               "endpoint is down or the index is damaged (one line says which; the run is in "
               "the Dagster UI); 2 bad usage: a missing folder or index, an invalid name, mode "
               "or configuration, an --out that holds another corpus; 75 another build of the "
               "same index is running (--wait waits for it); 130 interrupted (143 for SIGTERM); "
               "141 the output pipe was closed. Every command that reports takes --json.")
    sub = p.add_subparsers(dest="command", required=True)
    p.set_defaults(subcommands=sub.choices)  # what the CLI reference lists (cli_doc)

    ix = sub.add_parser("index", help="build or update the index of a folder (runs the Dagster assets)")
    ix.add_argument("root", help="folder to index")
    ix.add_argument("--corpus", required=True, help="corpus name (the Dagster partition)")
    ix.add_argument("--out", help="index folder (default: the corpus's `out`, else "
                    "data/indexes/<corpus> in the project folder: $STRATA_HOME, else the "
                    "nearest folder up holding strata.toml or data/corpora.yaml, else here)")
    ix.add_argument("--include", action="append", help="glob of files to include (repeatable)")
    ix.add_argument("--exclude", action="append", help="glob of files to exclude (repeatable)")
    ix.add_argument("--model", default=None, help="embedding model (default all-MiniLM-L6-v2)")
    ix.add_argument("--embed-backend", default=None,
                    choices=["sentence-transformers", "openai"],
                    help="default: what the corpus was built with, else sentence-transformers")
    ix.add_argument("--embed-base-url", default=None, help="OpenAI-compatible embeddings endpoint")
    ix.add_argument("--embed-runtime", default=None, choices=RUNTIMES,
                    help="how a local model runs: torch (float32), torch-bf16 (bfloat16), or "
                         "ONNX Runtime on a graph exported here from the same weights (onnx, "
                         "onnx-int8; needs the onnx extra); default: what the corpus was built "
                         "with, else $STRATA_EMBED_RUNTIME (auto: torch-bf16 on a CPU with "
                         "native bfloat16, else onnx where the model exports, else torch)")
    CHUNK_FLAGS.add_to(ix)
    ix.add_argument("--openie-import", default=None,
                    help="HippoRAG openie_results JSON to use instead of LLM OpenIE calls")
    _add_llm_args(ix.add_argument_group(
        "LLM for summaries, captions and OpenIE (remembered for the corpus, so its sensor and "
        "scheduled runs use them; default: what the corpus remembers, else "
        "$STRATA_LLM_BACKEND or offline)"))
    ix.add_argument("--workers", type=int, default=None,
                    help="run the build's steps (parse and embedding shards among them) in this "
                         "many processes (Dagster's multiprocess executor; shards: "
                         "$STRATA_SHARDS); default: the corpus's `workers` setting, else every "
                         "step in this process")
    ix.add_argument("--wait", action="store_true",
                    help="if another build of this index is running, wait for it instead of "
                         f"exiting with code {EXIT_LOCKED}")
    ix.add_argument("--watch", action="store_true",
                    help="stay up after the build and build again whenever the corpus's files "
                         "change (the process, Dagster and the encoder stay loaded, so a small "
                         "edit is indexed in a few seconds); Ctrl-C while it waits ends it with "
                         "code 0")
    ix.add_argument("--force", action="store_true",
                    help="replace the index in --out even when it belongs to another corpus "
                         "(only what Strata wrote there is removed)")
    ix.add_argument("--yes", action="store_true",
                    help="go ahead where Strata would otherwise refuse: indexing / or your home "
                         "folder without include lines, or an --out that is not empty and is not "
                         "a Strata index (Strata then writes only its own names there)")
    ix.add_argument("--dry-run", action="store_true",
                    help="parse in memory and print, per LLM stage, the calls the cache cannot "
                         "answer, estimated prompt and completion tokens and (with prices "
                         "configured) dollars; writes nothing and leaves no Dagster run")
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
    # a flag not given is None: the STRATA_* variable, else the default, both in
    # strata.core.settings.ServeSettings (whose defaults the help shows)
    SERVE_FLAGS.add_to(sv, indexes={
        "required": True, "help": "index folder or object-storage URI, or NAME=LOCATION (repeatable)"})
    sv.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sv.add_argument("-q", "--quiet", action="store_true")
    _add_llm_args(sv.add_argument_group(
        "LLM for /ask and the routed router (default: $STRATA_LLM_BACKEND or offline)"))
    sv.set_defaults(func=cmd_serve)

    from strata.pipelines.upgrade_command import add_arguments as add_upgrade_arguments

    add_upgrade_arguments(sub.add_parser(
        "upgrade", help="write what this Strata's queries read into an index published by an "
                        "older one (in place; nothing is encoded again)"))

    from strata.pipelines.corpus_command import add_arguments as add_corpus_arguments

    add_corpus_arguments(sub.add_parser(
        "corpus", help="add, list or remove corpora in the local registry (nothing is built "
                       "or deleted)"), _add_llm_args)

    mc = sub.add_parser("mcp", help="serve indexes as MCP tools for agents (stdio; --http)")
    from strata.service.mcp_args import add_arguments as add_mcp_arguments

    add_mcp_arguments(mc)
    _add_llm_args(mc.add_argument_group(
        "LLM for the ask tool (default: $STRATA_LLM_BACKEND or offline)"))
    mc.set_defaults(func=cmd_mcp)

    ks = sub.add_parser("keys", help="API keys of `strata serve` and `strata mcp` (stored hashed)")
    ksub = ks.add_subparsers(dest="keys_command", required=True)
    ks.set_defaults(subcommands=ksub.choices)
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


EXIT_PIPE = 141  # the reader of stdout went away (`strata search ... | head`), as for SIGPIPE


def main(argv: list[str] | None = None) -> int:
    from strata.pipelines.interrupt import EXIT_SIGINT, EXIT_SIGTERM
    from strata.core.embedding import EmbeddingModelMismatch
    from strata.core.endpoints import EndpointError
    from strata.core.layout import IndexDamaged
    from strata.pipelines.console import visible
    from strata.core.settings import SettingsError

    try:
        args = build_parser().parse_args(argv)
        if args.func is cmd_index:  # a build: idle OpenMP threads sleep (set before torch loads)
            from strata.core.embedding import passive_waits

            passive_waits()
        rc = args.func(args)
    except KeyboardInterrupt:  # Ctrl-C outside a build (a build stops on its own terms)
        rc = EXIT_SIGINT
    except (IndexDamaged, EndpointError, EmbeddingModelMismatch) as e:  # one line, no trace
        say(f"error: {visible(e)}", err=True)  # a path in it stays on the line
        rc = EXIT_FAILED
    except SettingsError as e:  # a STRATA_* variable (or flag) that cannot be used
        say(f"error: {visible(e)}", err=True)
        rc = EXIT_USAGE
    except ValueError as e:
        # a corpora file or corpus name that cannot be used (CorpusError), wherever it
        # is read; its module is loaded only by what reads corpora, so it is looked
        # up here rather than imported by every query command
        corpora = sys.modules.get("strata.stages.corpora")
        if corpora is None or not isinstance(e, corpora.CorpusError):
            raise
        say(f"error: {visible(e)}", err=True)
        rc = EXIT_USAGE
    except BrokenPipeError:
        # nobody reads stdout any more: leave quietly (no second error at exit)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        rc = EXIT_PIPE
    if rc in (EXIT_SIGINT, EXIT_SIGTERM) and argv is None:
        # a stopped build may leave worker threads blocked on a dead server: they
        # must not hold the exit (everything they could write is committed already)
        _exit_now(rc)
    return rc


def _exit_now(rc: int) -> NoReturn:
    """End the process now, with what was printed flushed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc)


def run() -> NoReturn:
    """The ``strata`` command: :func:`main`, its return value the exit status."""
    sys.exit(main())


if __name__ == "__main__":
    run()
