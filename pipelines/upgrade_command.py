"""`strata upgrade`: bring a published index up to what this Strata's queries read,
in place, without encoding anything again.

A version published before the query arrays existed (:mod:`strata.core.query_arrays`)
still answers, but every querying process then reads its Parquet and Lance
files whole; one whose arrays are of an older format still reads them, without
what the current format adds. Upgrading writes the arrays into each such
version folder (a
temporary folder renamed into place, so a reader sees none or all of them) and
readies the query runtime (its ONNX graph exported and its agreement with the
built runtime recorded). Nothing else in the version changes: its tables,
vectors and manifest stay as they were published.
"""

from __future__ import annotations

import argparse
import json

from strata.core.console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, say


def cmd_upgrade(args: argparse.Namespace) -> int:
    from pathlib import Path

    from strata.core.encoders.embedding import EncoderSpec
    from strata.core.storage.layout import (IndexDamaged, IndexLayout, IndexNotFound, read_manifest,
                                            short_error)
    from strata.core.query_arrays import ARRAYS_FORMAT, arrays_format, write
    from strata.core.encoders.query_runtime import prepare

    layout = IndexLayout(args.index)
    try:
        if not Path(args.index).is_dir():
            raise IndexNotFound(f"{args.index} is not a folder")
        current = int(layout.resolve().name[1:])  # a CURRENT naming no version: IndexNotFound
    except IndexNotFound as e:  # not an index: one line, bad usage (a garbage CURRENT is damage)
        say(f"error: {e}", err=True)
        return EXIT_USAGE
    versions = layout.versions() if args.all_versions else [current]
    rows = []
    for v in versions:
        vdir = layout.version_dir(v)
        manifest_file = f"{vdir.relative_to(layout.root)}/manifest.json"
        try:
            manifest = read_manifest(vdir)
            missing = [k for k in ("dim", "embedding") if k not in manifest]
            if missing:
                raise ValueError(f"it has no {' or '.join(map(repr, missing))}")
            dim, spec = int(manifest["dim"]), EncoderSpec.from_manifest(manifest["embedding"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise IndexDamaged(layout.root, manifest_file, short_error(e), version=v) from None
        row = {"version": v, "path": str(vdir)}
        if arrays_format(vdir) == ARRAYS_FORMAT:
            row["arrays"] = "already there"
        else:
            try:
                write(vdir, dim)
            except OSError as e:  # the folder cannot be written (permissions, a full disk)
                say(f"error: cannot write the query arrays of version {v} into {vdir}: "
                    f"{short_error(e)}", err=True)
                return EXIT_FAILED
            except Exception as e:  # noqa: BLE001 - a table or vector file that does not read
                raise IndexDamaged(layout.root, str(vdir.relative_to(layout.root)),
                                   short_error(e), version=v) from None
            row["arrays"] = "written"
        row.update(prepare(vdir, spec))
        rows.append(row)
    if args.json:
        say(json.dumps(rows, indent=2))
        return EXIT_OK
    for r in rows:
        say(f"version {r['version']}: query arrays {r['arrays']}; queries run on "
            f"{r['query_runtime']}" + (f" ({r['query_runtime_problem']})"
                                       if r.get("query_runtime_problem") else ""))
    return EXIT_OK if rows else EXIT_USAGE


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, help="index folder")
    p.add_argument("--all-versions", action="store_true",
                   help="every published version kept on disk (default: the current one)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_upgrade)
