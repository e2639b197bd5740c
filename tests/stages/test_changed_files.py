"""What a build counts as changed before it parses anything (the count that
decides whether the encoder starts loading in a process of its own): in a parse
shard, new files and files whose bytes changed, from their content hashes against
the last build; in the command, before the run, a guess from modification times."""

from __future__ import annotations

import os

import polars as pl

from strata.stages.discover import discover, looks_changed
from strata.stages.nodes import PreviousBuild, build_nodes, changed_files


def test_new_and_edited_files_count_unchanged_ones_and_deletions_do_not(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    for name in ("a.md", "b.md", "c.md"):
        (root / name).write_text(f"# {name}\n\nsome text about {name}\n")
    first = discover(root)
    assert changed_files(first, None) == 3  # no build yet: everything is new
    built = build_nodes("c", first)
    previous = PreviousBuild(*(pl.from_arrow(t) for t in
                               (built.documents, built.nodes, built.references)))
    assert changed_files(discover(root), previous) == 0

    (root / "a.md").write_text("# a.md\n\nedited\n")  # edited
    (root / "c.md").unlink()  # deleted: nothing of it to parse
    (root / "d.md").write_text("# d\n\nnew\n")  # new
    (root / "b.md").touch()  # touched, same bytes
    now = discover(root)
    assert changed_files(now, previous) == 2
    # the same files build_nodes parses again, before it parses them
    assert sorted(build_nodes("c", now, previous=previous).parsed) == ["a.md", "d.md"]


def _at(path, ns: int) -> None:
    os.utime(path, ns=(ns, ns))


def test_modification_times_tell_the_command_which_files_look_changed_before_it_reads_one(
        tmp_path):
    """`strata index`'s hint (stages.discover.looks_changed), from stat alone: known
    files modified since the last build, and names a listing would hold that appeared
    in a folder modified since; deletions, excluded names, Strata's own files and
    untouched folders count nothing. Times are set, not waited for."""
    root = tmp_path / "corpus"
    (root / "docs" / "deep").mkdir(parents=True)
    known = ["a.md", "docs/b.md", "docs/deep/c.md", "gone.md"]
    for rel in known:
        (root / rel).write_text(f"# {rel}\n")
    built = 1_000_000_000_000_000_000  # the last build's documents table was written then
    before, after = built - 10**9, built + 10**9
    for path in [*root.rglob("*"), root]:
        _at(path, before)
    (root / "gone.md").unlink()  # deleted after the build: nothing to encode
    _at(root, before)
    assert looks_changed(root, known, built) == 0

    _at(root / "docs" / "b.md", after)  # edited in place
    assert looks_changed(root, known, built) == 1

    # a new file, an excluded one, a new folder and the project's registry, in a
    # folder whose entries changed after the build
    (root / "docs" / "new.md").write_text("# new\n")
    (root / "docs" / "skip.log").write_text("noise\n")
    (root / "docs" / "fresh").mkdir()
    (root / "docs" / "node_modules").mkdir()  # excluded by default: never walked
    (root / "docs" / ".strata-owned.json").write_text("{}")
    _at(root / "docs", after)
    assert looks_changed(root, known, built, exclude=["*.log"]) == 3
    assert looks_changed(root, known, built, include=["**/*.md"], exclude=["*.log"]) == 3
    # names in folders not modified since are not listed again
    assert looks_changed(root, known, after + 1) == 0
