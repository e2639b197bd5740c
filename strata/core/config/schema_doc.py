"""The artifact schema as Markdown, generated from :mod:`strata.core.config.schema`.

The artifact schema page (docs/reference/artifacts.md) is this output between ``<!-- schema:start -->``
and ``<!-- schema:end -->``; a test fails when the two drift, so the document
can never describe columns the code does not write.

Usage: ``python -m strata.core.config.schema_doc [--readme docs/reference/artifacts.md]`` (rewrites the block).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pyarrow as pa

from strata.core.config import schema as s

START, END = "<!-- schema:start -->", "<!-- schema:end -->"

# file → (schema, what one row is)
TABLES = {
    "nodes": (s.NODES, "one node of the hierarchy: file, section, chunk, code, table, image"),
    "entities": (s.NODES, "one OpenIE entity (kind `entity`), same columns as nodes"),
    "edges": (s.EDGES, "one directed edge; `type` is one of " + ", ".join(
        f"`{t}`" for t in s.EDGE_TYPES)),
    "documents": (s.DOCUMENTS, "one file of the corpus: the per-document cache key"),
    "references": (s.REFERENCES, "a link or import as the parser saw it, before resolution"),
    "skipped": (s.SKIPPED, "a file that could not be indexed, with the reason"),
    "failures": (s.FAILURES, "an item an enrichment stage could not process this run"),
    "facts": (s.FACTS, "an OpenIE triple and a chunk it was extracted from"),
    "summaries": (s.SUMMARIES, "the summary of a section, code block, table or file"),
    "captions": (s.CAPTIONS, "the caption of an image node"),
    "images": (s.IMAGES, "an image node, the picture behind it, its near-duplicate group"),
}


def _type(t: pa.DataType) -> str:
    if pa.types.is_fixed_size_list(t):
        return f"{_type(t.value_type)}[{t.list_size}]"
    return {"string": "str", "bool": "bool"}.get(str(t), str(t))


def _columns(schema: pa.Schema) -> str:
    return ", ".join(f"`{f.name}` {_type(f.type)}" for f in schema)


def markdown() -> str:
    assert set(TABLES) == set(s.TABLE_FILES), "every table of the index is documented"
    rows = [f"Format version {s.FORMAT_VERSION}. Every table is Parquet in the version folder; "
            "vectors are LanceDB tables under `lance/`.", "",
            "| file | one row is | columns |", "|---|---|---|"]
    for name, (schema, what) in TABLES.items():
        rows.append(f"| `{s.TABLE_FILES[name]}` | {what} | {_columns(schema)} |")
    kinds = ", ".join(f"`{k}`" for k in s.VECTOR_KINDS)
    rows.append(f"| `{s.LANCE_DIR}/<kind>_vectors` | the vector of one node or fact; one table "
                f"per kind ({kinds}) | {_columns(s.VECTOR_COLUMNS)}, `vector` float[dim] |")
    rows.append(f"| `{s.LEXICAL_DIR}/{s.LEXICAL_UNITS}/`, `{s.LEXICAL_DIR}/{s.LEXICAL_GRAPH}/` | "
                "one BM25 index (bm25s, memory-mapped) over every text unit, and one over "
                "entities and facts (`strata.core.lexical.bm25`) | `docs.parquet`: `node_id` str, "
                "`kind` str |")
    rows.append(f"| `{s.BLOB_DIR}/` | images extracted from PDFs and DOCX, named by content "
                "hash | — |")
    rows.append(f"| `{s.QUERY_DIR}/` | what a query memory-maps, written at publish "
                "(`strata.core.query_arrays`): the graph as CSR arrays (`graph/*.npy`), the node "
                "fields (`nodes.arrow`), one unit vector per node (`vectors.npy`, "
                "`has_vector.npy`), the fact vectors, a probe of embedded texts, and for large "
                "indexes an approximate index (`ann.faiss`) | Arrow IPC and `.npy` |")
    rows.append(f"| `{s.MANIFEST}` | the version: format, corpus, root, url_template, "
                "embedding model and dim, counts, source fingerprint, per-stage figures | — |")
    return "\n".join(rows)


def block() -> str:
    return f"{START}\n{markdown()}\n{END}"


def splice(text: str, start: str, end: str, new_block: str) -> str:
    """``text`` with its ``start … end`` block replaced by ``new_block`` (which
    carries the markers); the README's generated blocks (this one, the
    benchmark tables) are written this way."""
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"no {start} … {end} block to fill")
    return pattern.sub(lambda _: new_block, text)


def update(readme: Path) -> bool:
    text = readme.read_text()
    new = splice(text, START, END, block())
    if new != text:
        readme.write_text(new)
    return new != text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", type=Path, help="the page with the schema block",
                    default=Path(__file__).resolve().parents[3] / "docs" / "reference" / "artifacts.md")
    args = ap.parse_args()
    print("updated" if update(args.readme) else "up to date", args.readme)


if __name__ == "__main__":
    main()
