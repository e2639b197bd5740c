"""What a parse shard counts as changed before it parses anything (the count that
decides whether the encoder starts loading in a process of its own): new files
and files whose bytes changed, from their content hashes against the last build."""

from __future__ import annotations

import polars as pl

from strata.stages.discover import discover
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
