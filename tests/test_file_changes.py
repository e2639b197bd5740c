"""Every build says what it did to the corpus's files — added, changed, removed —
in the parse step's materialization and in the build report `strata index`
prints, and the ``nodes`` asset says what its row count holds (document nodes;
the index's node count adds the graph's entities). A real parse step on real
files, built twice."""

from __future__ import annotations

from strata.assets.common import BUILD_REPORT
from strata.core.storage.layout import IndexLayout, read_json_or_empty
from tests.conftest import write_corpora


def _nodes_metadata(result) -> dict:
    (mat,) = result.asset_materializations_for_node("nodes")
    return {k: v.value for k, v in mat.metadata.items()}


def test_a_rebuild_names_the_files_added_changed_and_removed(builder, tmp_path):
    root = tmp_path / "notes"
    root.mkdir()
    for name in ("a", "b", "c"):
        (root / f"{name}.md").write_text(f"# {name}\n\nThe {name} page of the harbour notes.\n")
    write_corpora(builder.config_path, {"notes": {"root": str(root), "out": str(tmp_path / "out")}})
    first = _nodes_metadata(builder.build("notes", selection=["nodes"]))
    assert (first["files_added"], first["files_changed"], first["files_removed"]) == (3, 0, 0)
    assert "document nodes" in first["rows_are"] and "entities" in first["rows_are"]

    (root / "a.md").write_text("# a\n\nThe a page, rewritten.\n")
    (root / "c.md").unlink()
    (root / "d.md").write_text("# d\n\nA new page.\n")
    second = _nodes_metadata(builder.build("notes", selection=["nodes"]))
    assert (second["files_added"], second["files_changed"], second["files_removed"]) == (1, 1, 1)
    report = read_json_or_empty(IndexLayout(tmp_path / "out").build / BUILD_REPORT)
    assert {k: report["parse"][k] for k in ("added", "changed", "removed")} == \
        {"added": 1, "changed": 1, "removed": 1}

    third = _nodes_metadata(builder.build("notes", selection=["nodes"]))  # nothing changed
    assert (third["files_added"], third["files_changed"], third["files_removed"]) == (0, 0, 0)
