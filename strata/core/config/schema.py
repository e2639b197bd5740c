"""The artifact schema: every table an index holds, defined once.

The pipeline writes these tables and ``retrieval`` reads them; both import this
module so a column can never mean one thing on one side and another on the
other. Bump ``FORMAT_VERSION`` when a change would make an old reader misread a
new index (adding a nullable column does not; renaming or retyping one does).
"""

from __future__ import annotations

import pyarrow as pa

FORMAT_VERSION = 2  # 2: the lexical/ BM25 index replaces per-kind LanceDB full-text indexes

# Node kinds. ``chunk`` is a piece of a long section, kept as its child.
FILE, SECTION, CHUNK, CODE, TABLE, IMAGE, ENTITY = (
    "file", "section", "chunk", "code", "table", "image", "entity",
)
NODE_KINDS = (FILE, SECTION, CHUNK, CODE, TABLE, IMAGE, ENTITY)
# Kinds that get a vector table of their own, so long prose never drowns out
# code, table or image signals (the DualGraph design's per-kind vector stores).
EMBEDDED_KINDS = (FILE, SECTION, CHUNK, CODE, TABLE, IMAGE)
# Facts (OpenIE triples) are vectors only, never graph nodes: they seed
# diffusion through their entities (the DualGraph design).
FACT = "fact"
VECTOR_KINDS = EMBEDDED_KINDS + (ENTITY, FACT)

# Edge types, with the relation names each one uses.
STRUCTURAL, JUMP, IMPORT, PASSAGE, SEMANTIC, SYNONYMY = (
    "structural", "jump", "import", "passage", "semantic", "synonymy",
)
EDGE_TYPES = (STRUCTURAL, JUMP, IMPORT, PASSAGE, SEMANTIC, SYNONYMY)

NODES = pa.schema([
    ("node_id", pa.string()),
    ("corpus", pa.string()),
    ("kind", pa.string()),
    ("subkind", pa.string()),
    ("path", pa.string()),
    ("node_path", pa.string()),
    ("parent_id", pa.string()),
    ("depth", pa.int32()),
    ("ordinal", pa.int32()),  # position among its siblings
    ("title", pa.string()),
    ("breadcrumb", pa.string()),
    ("text", pa.string()),
    ("start_line", pa.int32()),
    ("end_line", pa.int32()),
    ("page", pa.int32()),
    ("language", pa.string()),
    ("content_hash", pa.string()),
    ("embedded", pa.bool_()),
    ("attrs", pa.string()),  # JSON object: parser-specific details
])

EDGES = pa.schema([
    ("src", pa.string()),
    ("dst", pa.string()),
    ("type", pa.string()),
    ("relation", pa.string()),
    ("weight", pa.float32()),
])

# One row per file seen in the corpus root; the per-document cache key.
DOCUMENTS = pa.schema([
    ("path", pa.string()),
    ("format", pa.string()),
    ("size", pa.int64()),
    ("content_hash", pa.string()),
    ("parse_key", pa.string()),  # content hash + parser settings: equal key, reuse the parse
    ("status", pa.string()),  # indexed | asset | skipped
    ("notes", pa.string()),  # parser notes (fallbacks, repairs), newline-separated
])

# Links and imports as the parsers saw them, before resolution against the
# corpus; kept so a rebuild can re-resolve them without re-parsing, and so
# dangling links can be inspected.
REFERENCES = pa.schema([
    ("src", pa.string()),
    ("path", pa.string()),
    ("target", pa.string()),
    ("type", pa.string()),
    ("relation", pa.string()),
    ("attrs", pa.string()),
])

SKIPPED = pa.schema([
    ("path", pa.string()),
    ("stage", pa.string()),
    ("reason", pa.string()),
])

# Items an enrichment stage could not process this run (they are retried on
# the next run: only successes are cached). ``cause``: "llm" (the endpoint or
# the model's answer failed) or "input" (the item itself could not be sent: a
# missing or unreadable image); a file from before the column reads as "llm".
FAILURES = pa.schema([
    ("stage", pa.string()),
    ("node_id", pa.string()),
    ("error", pa.string()),
    ("attempts", pa.int32()),
    ("cause", pa.string()),
])
FAILURE_CAUSES = ("llm", "input")

# OpenIE facts: one row per (triple, chunk it was extracted from). ``fact_id``
# derives from the normalized triple, so it repeats when several chunks state
# the same fact; head_id/tail_id are entity node ids.
FACTS = pa.schema([
    ("fact_id", pa.string()),
    ("head", pa.string()),
    ("relation", pa.string()),
    ("tail", pa.string()),
    ("head_id", pa.string()),
    ("tail_id", pa.string()),
    ("chunk_id", pa.string()),
    ("text", pa.string()),  # "(head, relation, tail)": what gets embedded
])

# A summary per section, code block, table and file (the embedded text of
# files, code and tables).
SUMMARIES = pa.schema([
    ("node_id", pa.string()),
    ("kind", pa.string()),
    ("summary", pa.string()),
    ("source", pa.string()),  # llm | cache | offline | offline-fallback
])

# A caption per image node (duplicates copy their representative's).
CAPTIONS = pa.schema([
    ("node_id", pa.string()),
    ("caption", pa.string()),
    ("source", pa.string()),  # llm | cache | offline | none
    # ok | failed (LLM call failed, offline caption used) | the image's own
    # status when it could not be used: missing | external | outside_root | broken | too_large
    ("status", pa.string()),
    ("error", pa.string()),
    ("copied_from", pa.string()),  # representative whose caption a duplicate copies
])

# Every image node, the picture behind it and its near-duplicate group.
IMAGES = pa.schema([
    ("node_id", pa.string()),
    ("path", pa.string()),  # corpus path, blob file name, or the src of an external image
    ("source", pa.string()),  # file | blob | external | missing | outside_root
    ("status", pa.string()),  # ok | missing | external | outside_root | broken | too_large
    ("error", pa.string()),
    ("hash", pa.string()),  # 16 hex digits (64-bit dHash/pHash); null unless ok
    ("byte_hash", pa.string()),  # sha256 of the file bytes; null when unread
    ("width", pa.int32()),
    ("height", pa.int32()),
    ("group_id", pa.string()),
    ("representative_id", pa.string()),
    ("is_representative", pa.bool_()),
])

# Columns of every LanceDB vector table besides ``vector``.
VECTOR_COLUMNS = pa.schema([
    ("node_id", pa.string()),
    ("kind", pa.string()),
    ("subkind", pa.string()),
    ("path", pa.string()),
    ("language", pa.string()),
    ("depth", pa.int32()),
    ("text_hash", pa.string()),  # hash of the embedded text: the reuse key
    ("text", pa.string()),  # the embedded text
])


def vector_schema(dim: int) -> pa.Schema:
    return VECTOR_COLUMNS.append(pa.field("vector", pa.list_(pa.float32(), dim)))


def vector_table_name(kind: str) -> str:
    return f"{kind}_vectors"


TABLE_FILES = {
    "nodes": "nodes.parquet",
    "edges": "edges.parquet",
    "documents": "documents.parquet",
    "skipped": "skipped.parquet",
    "references": "references.parquet",
    "entities": "entities.parquet",
    "facts": "facts.parquet",
    "summaries": "summaries.parquet",
    "captions": "captions.parquet",
    "images": "images.parquet",
    "failures": "failures.parquet",
}
LANCE_DIR = "lance"
# BM25 (strata.core.lexical.bm25): two collections, text units and graph items (entities, facts)
LEXICAL_DIR, LEXICAL_UNITS, LEXICAL_GRAPH = "lexical", "units", "graph"
BLOB_DIR = "blobs"  # images extracted from PDFs/DOCX, named <hash>.<ext>
# what a query memory-maps: the graph, node fields and vectors as arrays (strata.core.query_arrays)
QUERY_DIR = "query"
MANIFEST = "manifest.json"


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of ``schema`` with no rows. ``Schema.empty_table`` would convert
    Python values and so import pandas (see :func:`python_table`)."""
    return pa.Table.from_batches([], schema=schema)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Select and cast to ``schema`` so writers cannot drift from it."""
    return table.select(schema.names).cast(schema)


def python_table(data: list[dict] | dict[str, list], schema: pa.Schema) -> pa.Table:
    """Python values as an Arrow table of ``schema``: rows (dicts; a key the schema
    lacks is ignored, a missing one is null) or columns (a list per name).

    Built by polars, not ``pa.Table.from_pylist`` or ``pa.array``: pyarrow's first
    conversion of Python objects imports pandas (a quarter of a second on two
    cores), a fixed cost that a rebuild with nothing to convert would pay for an
    empty table."""
    import polars as pl

    empty = empty_table(schema)
    if not data:
        return empty
    return conform(pl.DataFrame(data, schema=pl.from_arrow(empty).schema).to_arrow(), schema)
