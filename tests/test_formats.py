"""Every format of the mixed sample corpus lands in the one node/edge model."""

from __future__ import annotations

import json

import polars as pl
import pytest

from strata.retrieval import Index


@pytest.fixture(scope="module")
def idx(sample_index) -> Index:
    return Index.open(sample_index)


def _edges_by_path(idx: Index) -> set[tuple[str, str, str, str]]:
    nodes, edges = idx.nodes(), idx.edges()
    path_of = dict(zip(nodes["node_id"], nodes["path"]))
    return {(t, rel, path_of[s], path_of[d])
            for s, d, t, rel in edges.select("src", "dst", "type", "relation").iter_rows()}


def test_every_format_is_parsed(idx):
    docs = idx.documents().filter(pl.col("status") == "indexed")
    formats = set(docs["format"])
    assert {"markdown", "python", "html", "json", "yaml", "toml", "pdf", "docx",
            "typescript", "go", "rust"} <= formats
    stats = idx.stats()
    assert {"file", "section", "chunk", "code", "table", "image", "entity"} == set(
        stats["nodes_by_kind"])


def test_unknown_format_is_plain_text_with_a_note(idx):
    doc = idx.documents().filter(pl.col("path") == "notes/field-log.rst").row(0, named=True)
    assert doc["status"] == "indexed" and "indexed as plain text" in doc["notes"]
    node = idx.nodes().filter(pl.col("path") == "notes/field-log.rst")
    assert node["kind"].to_list() == ["file"] and "desiccant" in node["text"][0]


def test_pdf_sections_pages_tables_images(idx, sample_index):
    pdf = idx.nodes().filter(pl.col("path") == "docs/field-manual.pdf")
    kinds = pdf.group_by("kind").len()
    assert set(kinds["kind"]) >= {"file", "section", "table", "image"}
    sections = pdf.filter(pl.col("kind") == "section")
    assert sections["page"].min() == 1 and sections["page"].max() >= 3
    assert {"Deployment", "Maintenance"} <= set(sections["title"])
    image = pdf.filter(pl.col("kind") == "image").row(0, named=True)
    attrs = json.loads(image["attrs"])
    blob = sample_index / "versions" / f"v{idx.version:06d}" / "blobs" / f"{attrs['blob']}.{attrs['ext']}"
    assert blob.is_file() and blob.stat().st_size > 100  # extracted image published with the index


def test_docx_headings_table_image(idx):
    docx = idx.nodes().filter(pl.col("path") == "docs/site-survey.docx")
    assert set(docx["kind"]) >= {"file", "section", "table", "image"}
    image = docx.filter(pl.col("kind") == "image").row(0, named=True)
    assert json.loads(image["attrs"]).get("alt")


def test_html_page_hierarchy_and_links(idx):
    html = idx.nodes().filter(pl.col("path") == "docs/changelog.html")
    assert set(html["kind"]) >= {"file", "section", "code", "table", "image"}
    assert "<script" not in "".join(html["text"]) and "function(" not in "".join(html["text"])
    edges = _edges_by_path(idx)
    assert ("jump", "links_to", "docs/changelog.html", "docs/calibration.md") in edges


def test_config_files_and_the_code_that_reads_them(idx):
    cfg = idx.nodes().filter(pl.col("path") == "tidewater/config/stations.json")
    assert cfg.filter(pl.col("kind") == "section")["subkind"].unique().to_list() == ["key"]
    edges = _edges_by_path(idx)
    # a config naming another file, and a script naming its config
    assert ("jump", "references", "tidewater/config/stations.json",
            "tidewater/config/defaults.yaml") in edges
    assert ("jump", "references", "tidewater/settings.py",
            "tidewater/config/defaults.yaml") in edges


def test_other_languages_import_each_other(idx):
    edges = {(s, d) for t, rel, s, d in _edges_by_path(idx) if t == "import"}
    assert ("web/api.ts", "web/models.ts") in edges
    assert ("gauge-agent/main.go", "gauge-agent/internal/buffer/ring.go") in edges
    assert ("firmware/src/main.rs", "firmware/src/sampler.rs") in edges
    code = idx.nodes().filter(pl.col("language").is_in(["typescript", "go", "rust"])
                              & (pl.col("kind") == "code"))
    assert {"class", "function", "method", "struct"} <= set(code["subkind"])
