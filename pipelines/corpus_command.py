"""`strata corpus`: add, list and remove corpora in the project's local registry
without building them.

A corpus added here is the same entry `strata index ROOT --corpus NAME` writes
(:func:`strata.stages.corpora.register_corpus`, in ``corpora.local.yaml`` beside
the corpora file), checked first by the same parser the sensors and builds read
it with, so a name, pattern or setting the registry would refuse is refused
here, on one line, before anything is written. Registering is cheap and
separate from building: the Dagster sensors pick the entry up, or
`strata index` builds it now. Removing drops the registry entry only; the
corpus's folder and its index stay on disk.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from urllib.parse import quote

from strata.core.console import EXIT_OK, EXIT_USAGE, print_json, say, visible
from strata.core.config.settings import RUNTIME_CHOICES, ProjectSettings, corpora_file, load
from strata.core.storage.kinds import KINDS as SHARED

# where `make ui` serves the Dagster UI; a link with ?partition=NAME opens its launch
# dialog with that corpus picked (dynamic partitions otherwise open on none)
UI_URL = "http://127.0.0.1:3000"


def cmd_corpus(args: argparse.Namespace) -> int:
    return {"add": _add, "list": _list, "remove": _remove}[args.corpus_command](args)


def _error(message: str) -> int:
    """One line on stderr (a path or name in it cannot break it) and exit code 2."""
    say(f"error: {visible(message)}", err=True)
    return EXIT_USAGE


def _where() -> tuple[Path, Path | None]:
    """The corpora file and the folder indexes go in when a corpus names no
    ``out``: the same as `strata index` uses ($STRATA_CORPORA, $STRATA_INDEX_DIR)."""
    index_base = load(ProjectSettings).index_dir
    return corpora_file(), index_base.expanduser().resolve() if index_base else None


def _add(args: argparse.Namespace) -> int:
    from strata.core.encoders.embedding import AUTO, DEFAULT_MODEL, EncoderSpec
    from strata.core.storage.ownership import looks_owned
    from strata.pipelines.build_command import other_corpus, refused_url_flag
    from strata.stages.corpora import (CorpusError, CorpusSpec, checked, corpus_sources,
                                       load_corpora, register_corpus, validate_name)

    given = Path(args.root).expanduser()
    if not given.exists():
        return _error(f"{args.root} does not exist")
    if not given.is_dir():
        return _error(f"{args.root} is a file, not a folder; a corpus is a folder")
    root = given.resolve()
    refused = refused_url_flag(args)
    if refused:
        return _error(refused)
    try:
        name = validate_name(args.name)
        config_path, index_base = _where()
        existing = load_corpora(config_path, index_base=index_base)
        sources = corpus_sources(config_path)
    except CorpusError as e:
        return _error(str(e))
    if name in existing:
        if sources.get(name) == config_path:
            return _error(f"corpus '{name}' is declared in {config_path} (root "
                          f"{existing[name].root}); change it there, or choose another --name")
        if not args.replace:
            return _error(f"corpus '{name}' is already registered (root {existing[name].root}, "
                          f"index {existing[name].out}); pass --replace to change it, or "
                          "choose another --name")
    if not args.include and not args.yes and root in {Path("/"), Path.home().resolve()}:
        # the sensors would walk and build it without asking again
        return _error(f"{root} is {'the whole file system' if root == Path('/') else 'your home folder'}"
                      "; name what to index with --include, or pass --yes")
    out = Path(args.out).expanduser().resolve() if args.out else (
        (index_base or config_path.parent / "indexes") / name).resolve()
    if out == root or root.is_relative_to(out):
        return _error(f"--out {out} would hold the folder it indexes; choose an --out outside "
                      f"{root}")
    if out.exists() and not out.is_dir():
        return _error(f"--out {out} is a file, not a folder")
    shared = sorted(n for n, s in existing.items() if s.out == out and n != name)
    if shared:
        return _error(f"--out {out} is the index folder of corpus '{shared[0]}'; choose another "
                      "--out")
    taken = other_corpus(out, name)
    if taken:
        return _error(f"{out} holds the index of corpus '{taken['corpus']}' (built from "
                      f"{taken.get('root', '?')}), not '{name}'; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not looks_owned(out):
        return _error(f"--out {out} is not empty and is not a Strata index; choose a new or "
                      "empty --out")
    if args.workers is not None and args.workers < 1:
        return _error(f"--workers must be 1 or more (got {args.workers})")
    backend = args.embed_backend or ("openai" if args.embed_base_url else "sentence-transformers")
    llm = {"backend": args.llm_backend or ("callable" if args.llm_callable else None),
           "model": args.llm_model, "base_url": args.llm_base_url,
           "callable_path": args.llm_callable}
    spec = CorpusSpec(
        name=name, root=root, out=out,
        include=args.include or ["**/*"], exclude=args.exclude or [],
        embedding=EncoderSpec(backend=backend, model=args.model or DEFAULT_MODEL,
                              base_url=args.embed_base_url, runtime=args.embed_runtime or AUTO),
        url_template=args.url_template, mirror=args.mirror,
        llm={k: v for k, v in llm.items() if v is not None} or None,
        workers=args.workers, shared=args.shared)
    try:
        spec = checked(spec, config_path, index_base)
    except CorpusError as e:
        return _error(str(e))
    registry = register_corpus(spec, config_path)
    entry = _row(spec, registry)
    built = (out / "CURRENT").exists()
    command = f"strata index {shlex.quote(str(root))} --corpus {name}"
    if args.json:
        print_json({**entry, "replaced": name in existing, "published": built,
                    "build_command": command})
        return EXIT_OK
    say(f"{'replaced' if name in existing else 'registered'} corpus '{name}' in "
        f"{visible(registry)}")
    say(f"  root  {visible(root)}")
    say(f"  out   {visible(out)}")
    if spec.include != ["**/*"] or spec.exclude:
        say(f"  files {visible(' '.join(spec.include))}"
            + (f" (except {visible(' '.join(spec.exclude))})" if spec.exclude else ""))
    say(f"  model {visible(spec.embedding.model)} ({spec.embedding.backend})")
    if built:
        say("its index is already published there; the Dagster UI's change sensor "
            "(`make ui`) rebuilds it when its files change")
    else:
        say("nothing is built yet: with the Dagster UI running (`make ui`, same registry), its "
            "sensors add the partition and then request a first build, within about two "
            "minutes")
    say(f"or build it now: {visible(command)}")
    say(f"or from the Dagster UI: {UI_URL}/asset-groups?partition={quote(name)} "
        "and Materialize all (the dialog opens with this corpus picked)")
    return EXIT_OK


def _row(spec, registry: Path) -> dict:
    return {"name": spec.name, "root": str(spec.root), "out": str(spec.out),
            "registry": str(registry)}


def _list(args: argparse.Namespace) -> int:
    from strata.stages.corpora import corpus_sources, load_corpora

    config_path, index_base = _where()
    corpora = load_corpora(config_path, index_base=index_base)  # CorpusError: main(), exit 2
    sources = corpus_sources(config_path)
    rows = [_row(spec, sources[name]) for name, spec in sorted(corpora.items())]
    if args.json:
        print_json(rows)
        return EXIT_OK
    if not rows:
        say(f"no corpora in {visible(config_path)} or beside it; add one with "
            "`strata corpus add PATH --name NAME`", err=True)
    for r in rows:
        say("\t".join(visible(r[k]) for k in ("name", "root", "out")))
    return EXIT_OK


def _remove(args: argparse.Namespace) -> int:
    from strata.stages.corpora import CorpusError, load_corpora, unregister_corpus

    config_path, index_base = _where()
    try:
        spec = load_corpora(config_path, index_base=index_base).get(args.name)
        registry = unregister_corpus(args.name, config_path)
    except CorpusError as e:
        return _error(str(e))
    say(f"removed corpus '{visible(args.name)}' from {visible(registry)}")
    if spec is not None:
        say(f"left as they are: its folder {visible(spec.root)} and its index "
            f"{visible(spec.out)} (delete that one yourself if you no longer want it), and "
            "its partition in the Dagster UI")
    return EXIT_OK


def add_arguments(p: argparse.ArgumentParser, add_llm_args) -> None:
    """The `corpus` subcommands; ``add_llm_args`` adds the shared LLM flags (the
    CLI's, so every command names them alike)."""
    sub = p.add_subparsers(dest="corpus_command", required=True)
    p.set_defaults(subcommands=sub.choices)  # what the CLI reference lists (cli_doc)
    ad = sub.add_parser(
        "add", help="check and register a corpus (a folder) without building it",
        description="Register PATH as corpus NAME in the local registry (corpora.local.yaml "
                    "beside the corpora file: $STRATA_CORPORA, else data/corpora.yaml in the "
                    "project folder). Nothing is built: the Dagster UI's sensors build it, or "
                    "`strata index PATH --corpus NAME` does now, with these settings.")
    ad.add_argument("root", metavar="PATH", help="folder to index")
    ad.add_argument("--name", required=True,
                    help="corpus name (the Dagster partition): letters, digits, '-', '_', '.'")
    ad.add_argument("--out", help="index folder (default: <corpus> in $STRATA_INDEX_DIR, else "
                    "in indexes/ beside the corpora file)")
    ad.add_argument("--include", action="append",
                    help="gitignore pattern of files to include (repeatable; default all)")
    ad.add_argument("--exclude", action="append",
                    help="gitignore pattern of files to leave out (repeatable)")
    ad.add_argument("--model", default=None, help="embedding model (default all-MiniLM-L6-v2)")
    ad.add_argument("--embed-backend", default=None, choices=["sentence-transformers", "openai"],
                    help="default sentence-transformers (openai with --embed-base-url)")
    ad.add_argument("--embed-base-url", default=None, help="OpenAI-compatible embeddings endpoint")
    ad.add_argument("--embed-runtime", default=None, choices=RUNTIME_CHOICES,
                    help="how a local model runs (default auto: $STRATA_EMBED_RUNTIME when "
                         "built)")
    ad.add_argument("--url-template", default=None,
                    help="link of a result, e.g. https://host/blob/main/{path}#L{start_line}")
    ad.add_argument("--mirror", default=None,
                    help="object-storage URI every published version is copied to")
    ad.add_argument("--workers", type=int, default=None,
                    help="step processes a build of this corpus runs in (default: one)")
    ad.add_argument("--shared", default="folder", choices=list(SHARED),
                    help="what the build's workers share: the index folder (default), or only "
                         "the --mirror store, which then holds the build too")
    add_llm_args(ad.add_argument_group(
        "LLM for summaries, captions and OpenIE (stored for the corpus; keys never are)"))
    ad.add_argument("--replace", action="store_true",
                    help="change a corpus registered before under this name")
    ad.add_argument("--yes", action="store_true",
                    help="register / or your home folder without --include lines")
    ad.add_argument("--json", action="store_true", help="print the registered entry as JSON")
    ls = sub.add_parser("list", help="the corpora declared and registered: name, root, index "
                                     "folder (tab-separated)")
    ls.add_argument("--json", action="store_true")
    rm = sub.add_parser("remove", help="drop a corpus from the local registry (its folder and "
                                       "index stay on disk)")
    rm.add_argument("name")
    p.set_defaults(func=cmd_corpus)
