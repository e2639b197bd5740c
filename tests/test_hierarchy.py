"""The hierarchy a real build produces from the sample corpus."""

from __future__ import annotations

import json

import polars as pl
import pytest

from strata.retrieval import Index


@pytest.fixture(scope="module")
def idx(sample_index) -> Index:
    return Index.open(sample_index)


def _by_path(idx: Index, node_path: str) -> dict:
    row = idx.nodes().filter(pl.col("node_path") == node_path)
    assert row.height == 1, f"{node_path}: {row.height} rows"
    return row.row(0, named=True)


def _parent(idx: Index, node: dict) -> dict:
    return idx.nodes().filter(pl.col("node_id") == node["parent_id"]).row(0, named=True)


def test_markdown_sections_nest_by_heading_level(idx):
    leaf = _by_path(idx, "docs/calibration.md#calibration/barometric-drift/"
                         "correcting-with-a-barometer/aligning-barometer-timestamps")
    assert (leaf["kind"], leaf["subkind"], leaf["depth"]) == ("section", "h4", 4)
    chain = [leaf]
    while chain[-1]["parent_id"]:
        chain.append(_parent(idx, chain[-1]))
    assert [n["subkind"] for n in chain] == ["h4", "h3", "h2", "h1", "markdown"]
    assert leaf["breadcrumb"] == ("docs/calibration.md > Calibration > Barometric drift > "
                                  "Correcting with a barometer > Aligning barometer timestamps")


def test_python_module_class_method(idx):
    fit = _by_path(idx, "tidewater.calibration.Calibrator.fit")
    cls = _parent(idx, fit)
    module = _parent(idx, cls)
    assert (fit["kind"], fit["subkind"]) == ("code", "method")
    assert (cls["node_path"], cls["subkind"]) == ("tidewater.calibration.Calibrator", "class")
    assert (module["kind"], module["node_path"], module["path"]) == (
        "file", "tidewater.calibration", "tidewater/calibration.py")
    assert fit["language"] == "python" and fit["start_line"] < fit["end_line"]
    # The class text keeps a placeholder for the method, not its body.
    assert "def fit(" in cls["text"] and fit["text"] not in cls["text"]


def test_code_table_image_children_leave_the_section_text(idx):
    nodes = idx.nodes()
    text_of = dict(zip(nodes["node_id"], nodes["text"]))
    kinds = dict(zip(nodes["node_id"], nodes["kind"]))
    blocks = nodes.filter(pl.col("kind").is_in(["code", "table"]) & pl.col("path").str.ends_with(".md"))
    assert blocks.height >= 10
    for node_id, parent, text in blocks.select("node_id", "parent_id", "text").iter_rows():
        if kinds[parent] == "section" and len(text.strip()) > 40:
            assert text.strip() not in text_of[parent], node_id


def test_tables_and_images(idx):
    nodes = idx.nodes()
    tables = nodes.filter(pl.col("kind") == "table")
    assert {"pipe", "html"} <= set(tables["subkind"])
    html = tables.filter((pl.col("subkind") == "html") & (pl.col("path") == "docs/sensors.md"))
    assert html.height == 1 and json.loads(html["attrs"][0])["header"]
    images = nodes.filter(pl.col("kind") == "image")
    resolved = {json.loads(a).get("resolved") for a in images["attrs"]}
    assert {"docs/images/tide-chart.png", "docs/images/tide-chart-large.png",
            "docs/images/missing-diagram.png"} <= resolved
    for attrs in images["attrs"]:
        assert json.loads(attrs).get("context_before") is not None


def test_long_sections_become_chunks(idx):
    nodes = idx.nodes()
    section = _by_path(idx, "docs/processing.md#cleaning-and-processing-readings/"
                            "handling-gaps-and-spikes")
    chunks = nodes.filter((pl.col("parent_id") == section["node_id"]) & (pl.col("kind") == "chunk"))
    assert chunks.height >= 3
    assert section["embedded"] is False and chunks["embedded"].all()
    assert chunks["start_line"].is_sorted()


def test_jump_and_import_edges(idx):
    nodes, edges = idx.nodes(), idx.edges()
    path_of = dict(zip(nodes["node_id"], nodes["node_path"]))
    typed = {(t, path_of[s], path_of[d]) for s, d, t in edges.select("src", "dst", "type").iter_rows()}
    assert ("jump", "docs/getting-started.md#getting-started/next-steps",
            "docs/calibration.md#calibration/barometric-drift") in typed
    assert ("import", "tidewater.io.csv_reader", "tidewater.models") in typed  # from ..models
    assert ("import", "tidewater.io.parquet", "tidewater.settings") in typed  # absolute
    assert ("import", "tidewater", "tidewater.calibration.Calibrator") in typed  # symbol
    kinds = edges.group_by("type").len()
    assert {"structural", "jump", "import"} <= set(kinds["type"])


def test_skipped_and_notes_are_recorded(idx):
    skipped = idx.skipped()
    assert skipped.filter(pl.col("path") == "notes/corrupted.md")["reason"][0].startswith("binary")
    docs = idx.documents()
    legacy = docs.filter(pl.col("path") == "scripts/legacy_import.py").row(0, named=True)
    assert legacy["status"] == "indexed" and "syntax error" in legacy["notes"]
    assert docs.filter(pl.col("format") == "asset").height == 5  # the PNGs
