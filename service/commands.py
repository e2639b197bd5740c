"""The query side's commands of `strata`: ``map``, ``search``, ``ask``, ``serve``,
``mcp`` and ``keys``. They read indexes through :mod:`strata.retrieval` and serve
them through this package; none of them imports Dagster or the build. The
``strata`` command (:mod:`strata.pipelines.cli`) adds them beside ``index``.
"""

from __future__ import annotations

import argparse
import json
import sys

from strata.core.console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, print_json, say
from strata.core.config.flags import Flags
from strata.core.config.settings import LLMSettings, QuerySettings, ServeSettings

# The flags that set a settings field, derived from the field (strata.core.config.flags.Flags:
# its help, type, choices; absent, the field's variable or default applies). The
# renames keep the flag names the command has always had.

#: `strata serve`: one flag per ServeSettings field, so a new field gets its flag
SERVE_FLAGS = Flags(ServeSettings, rename={
    "indexes": "index", "api_keys_file": "api-keys", "anonymous_rate_per_minute": "anonymous-rate",
    "reload_interval_s": "reload-interval", "cross_encoder_path": "cross-encoder",
    "keep_alive_s": "keep-alive", "request_timeout_s": "request-timeout"})
#: the LLM of a command that may call one (the rest of LLMSettings: variables only)
LLM_FLAGS = Flags(LLMSettings, ("backend", "model", "base_url", "callable_path"), prefix="llm-",
                  rename={"callable_path": "llm-callable"})
#: search and ask; a floor outside 0..1 is refused by argparse, naming the flag
QUERY_FLAGS = Flags(QuerySettings, ("min_relevance",), bounded=True)


def _open_index(path: str, version: int | None = None):
    from strata.retrieval import Index
    from strata.core.storage.layout import IndexNotFound

    try:
        return Index.open(path, version=version)
    except IndexNotFound as e:
        say(f"error: {e}", err=True)
        return None


def _versions(root: str) -> list[dict]:
    """One row per published version still on disk (newest last)."""
    from strata.core.storage.layout import IndexLayout, read_manifest

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
        from strata.core.console import print_stats

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
    from strata.core.console import budget_line, print_results, tokens_used

    if args.json:
        body = {"query": results.query, "mode": args.mode, "index": str(idx.source),
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
        from strata.core.console import print_trace

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
    from strata.core.console import print_answer

    print_answer(answer)
    if args.trace:
        from strata.core.console import print_trace

        print_trace(answer.trace)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve indexes over HTTP (see :mod:`service`); blocks until interrupted."""
    import logging

    from strata.service.auth import KeyFileError, load_entries
    from strata.service.settings import ServiceConfigError, ServiceSettings, is_loopback
    from strata.core.storage.layout import IndexNotFound

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
    from strata.service.edge import uvicorn_limits

    # uvicorn's access log prints query strings; the service logs paths only
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level,
                access_log=False, server_header=False, **settings.uvicorn_options(),
                **uvicorn_limits(settings))
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
                             "digest": e.digest}
                             for e in load_entries(args.file, named=f"--file {args.file}")],
                            indent=2))
        else:
            for e in load_entries(args.file, named=f"--file {args.file}"):
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
    add_llm_args(p.add_argument_group(
        "LLM (routed router / answer; default: $STRATA_LLM_BACKEND or offline)"))


def add_llm_args(group) -> None:
    """The LLM flags every command that may call a model shares (else $STRATA_LLM_*)."""
    LLM_FLAGS.add_to(group, callable_path={
        "help": LLM_FLAGS.help("callable_path", "; implies --llm-backend callable")})




def add_query_commands(sub) -> None:
    """Add the query side's subcommands to ``sub`` (the ``strata`` parser's subparsers)."""
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
    # strata.core.config.settings.ServeSettings (whose defaults the help shows)
    SERVE_FLAGS.add_to(sv, indexes={
        "required": True, "help": "index folder or object-storage URI, or NAME=LOCATION (repeatable)"})
    sv.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sv.add_argument("-q", "--quiet", action="store_true")
    add_llm_args(sv.add_argument_group(
        "LLM for /ask and the routed router (default: $STRATA_LLM_BACKEND or offline)"))
    sv.set_defaults(func=cmd_serve)

    mc = sub.add_parser("mcp", help="serve indexes as MCP tools for agents (stdio; --http)")
    from strata.service.mcp_args import add_arguments as add_mcp_arguments

    add_mcp_arguments(mc)
    add_llm_args(mc.add_argument_group(
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
