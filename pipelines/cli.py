"""The `strata` command line.

`strata index` (:mod:`pipelines.build_command`) runs the very same Dagster
assets as the UI, so a CLI build shows up in the UI's run history and there is
only one code path. The query commands (``map``, ``search``, ``ask``, ``serve``,
``mcp``, ``keys``) live with the side they serve (:mod:`strata.service.commands`):
they go through :mod:`retrieval` and never start Dagster.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from strata.core.console import EXIT_FAILED, EXIT_LOCKED, EXIT_USAGE, say
from strata.core.config.flags import Flags
from strata.core.config.settings import RUNTIMES, ChunkingSettings
from strata.pipelines.build_command import cmd_index
from strata.service.commands import add_llm_args, add_query_commands

#: `strata index`: the chunk budget, a flag derived from its settings field
#: (strata.core.config.flags.Flags); its default is the model's (a run's config, no variable)
CHUNK_FLAGS = Flags(ChunkingSettings, ("chunk_tokens",))


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
    add_llm_args(ix.add_argument_group(
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

    add_query_commands(sub)

    from strata.pipelines.upgrade_command import add_arguments as add_upgrade_arguments

    add_upgrade_arguments(sub.add_parser(
        "upgrade", help="write what this Strata's queries read into an index published by an "
                        "older one (in place; nothing is encoded again)"))

    from strata.pipelines.corpus_command import add_arguments as add_corpus_arguments

    add_corpus_arguments(sub.add_parser(
        "corpus", help="add, list or remove corpora in the local registry (nothing is built "
                       "or deleted)"), add_llm_args)

    return p


EXIT_PIPE = 141  # the reader of stdout went away (`strata search ... | head`), as for SIGPIPE


def main(argv: list[str] | None = None) -> int:
    from strata.pipelines.interrupt import EXIT_SIGINT, EXIT_SIGTERM
    from strata.core.encoders.embedding import EmbeddingModelMismatch
    from strata.core.storage.layout import IndexDamaged
    from strata.core.console import visible
    from strata.core.config.files import ConfigFileError
    from strata.core.config.settings import SettingsError

    try:
        args = build_parser().parse_args(argv)
        if args.func is cmd_index:
            # a build: idle OpenMP threads sleep. Set here as well as by the embedder
            # resource: --workers' forkserver preloads torch before any resource is set up
            from strata.core.encoders.embedding import passive_waits

            passive_waits()
        rc = args.func(args)
    except KeyboardInterrupt:  # Ctrl-C outside a build (a build stops on its own terms)
        rc = EXIT_SIGINT
    except (IndexDamaged, EmbeddingModelMismatch, *_endpoint_errors()) as e:  # one line, no trace
        say(f"error: {visible(e)}", err=True)  # a path in it stays on the line
        rc = EXIT_FAILED
    except SettingsError as e:  # a STRATA_* variable (or flag) that cannot be used
        say(f"error: {visible(e)}", err=True)
        rc = EXIT_USAGE
    except ValueError as e:
        # a corpora file or corpus name that cannot be used (CorpusError), wherever it
        # is read; its module is loaded only by what reads corpora, so it is looked
        # up here rather than imported by every query command; or another
        # configuration file that is not a regular file of a sane size (ConfigFileError)
        corpora = sys.modules.get("strata.stages.corpora")
        if not isinstance(e, ConfigFileError) and (
                corpora is None or not isinstance(e, corpora.CorpusError)):
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


def _endpoint_errors() -> tuple[type[Exception], ...]:
    """The LLM client's ``EndpointError`` once its module is loaded (only a command
    that reached an endpoint can raise it; a search need not import the client)."""
    endpoints = sys.modules.get("strata.core.llm.endpoints")
    return (endpoints.EndpointError,) if endpoints is not None else ()


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
