"""The parse stage: corpus files → hierarchy nodes, with a per-document cache.

A document whose parse key (content hash + parser settings + module name) is
unchanged since the previous build is not parsed again: its node and reference
rows are copied from the previous build. Node ids depend only on position, so
reused rows are identical to what a fresh parse would produce.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import polars as pl
import pyarrow as pa

from stages.discover import SourceFile
from stages.parse.finalize import ParseSettings, finalize, stable_hash
from stages.parse.model import ParsedFile
from stages.parse.plain_text import parse_plain_text
from strata.schema import DOCUMENTS, NODES, REFERENCES, SKIPPED, conform

Progress = Callable[[int, int], None]


@dataclass
class PreviousBuild:
    documents: pl.DataFrame
    nodes: pl.DataFrame
    references: pl.DataFrame


@dataclass
class NodesResult:
    nodes: pa.Table
    references: pa.Table
    documents: pa.Table
    skipped: pa.Table
    parsed: list[str] = field(default_factory=list)  # paths parsed this time
    reused: list[str] = field(default_factory=list)  # paths copied from the cache
    seconds: float = 0.0


def parse_source(src: SourceFile, settings: ParseSettings,
                 modules: dict[str, tuple[str, bool]]) -> ParsedFile:
    """Dispatch by format; a parser that raises falls back to plain text."""
    assert src.text is not None
    try:
        if src.format == "markdown":
            from stages.parse.markdown import parse_markdown

            return parse_markdown(src.text, src.path, context_lines=settings.context_lines)
        if src.format == "python":
            from stages.parse.python_code import parse_python

            module, is_pkg = modules.get(src.path, (src.path.rsplit("/", 1)[-1].split(".")[0], False))
            return parse_python(src.text, src.path, module, is_pkg)
        return parse_plain_text(src.text, src.path,
                                note=None if src.format == "text" else f"no parser for {src.format}")
    except Exception as e:  # noqa: BLE001 - one bad file must not sink the run
        return parse_plain_text(src.text, src.path,
                                note=f"{src.format} parser failed ({e.__class__.__name__}: {e}); "
                                     "indexed as plain text")


def parse_key(src: SourceFile, settings: ParseSettings, modules: dict) -> str:
    module = "|".join(map(str, modules.get(src.path, ("", False))))
    return stable_hash(src.content_hash, src.format, settings.fingerprint(), module)


def build_nodes(corpus: str, sources: list[SourceFile], settings: ParseSettings = ParseSettings(),
                previous: PreviousBuild | None = None,
                progress: Progress | None = None) -> NodesResult:
    from stages.parse.python_code import module_names

    t0 = time.perf_counter()
    modules = module_names([s.path for s in sources if s.format == "python"])
    prev_keys: dict[str, str] = {}
    prev_notes: dict[str, str] = {}
    if previous is not None and previous.documents.height:
        paths = previous.documents["path"].to_list()
        prev_keys = dict(zip(paths, previous.documents["parse_key"].to_list()))
        prev_notes = dict(zip(paths, previous.documents["notes"].to_list()))
    node_rows: list[dict] = []
    ref_rows: list[dict] = []
    doc_rows: list[dict] = []
    skipped: list[dict] = []
    parsed: list[str] = []
    reused: list[str] = []
    for i, src in enumerate(sources):
        if progress:
            progress(i, len(sources))
        doc = {"path": src.path, "format": src.format, "size": src.size,
               "content_hash": src.content_hash, "parse_key": None, "status": "indexed",
               "notes": src.note or ""}
        doc_rows.append(doc)
        if src.format in ("asset", "binary"):
            doc["status"] = "asset" if src.format == "asset" else "skipped"
            if src.format == "binary":
                skipped.append({"path": src.path, "stage": "parse",
                                "reason": "binary file format; not indexed"})
            continue
        if src.text is None:
            doc["status"] = "skipped"
            skipped.append({"path": src.path, "stage": "parse", "reason": src.reason or "unreadable"})
            continue
        key = parse_key(src, settings, modules)
        doc["parse_key"] = key
        if prev_keys.get(src.path) == key:
            doc["notes"] = prev_notes.get(src.path) or ""
            reused.append(src.path)
            continue
        pf = parse_source(src, settings, modules)
        rows, refs = finalize(pf, corpus, src.path, src.text, settings)
        node_rows.extend(rows)
        ref_rows.extend(refs)
        notes = [n for n in [src.note, *pf.notes] if n]
        doc["notes"] = "\n".join(notes)
        parsed.append(src.path)
    if progress:
        progress(len(sources), len(sources))

    nodes = pa.Table.from_pylist(node_rows, schema=NODES)
    refs_t = pa.Table.from_pylist(ref_rows, schema=REFERENCES)
    if reused and previous is not None:
        keep = pl.Series(reused)
        old_nodes = previous.nodes.filter(pl.col("path").is_in(keep)).to_arrow()
        old_refs = previous.references.filter(pl.col("path").is_in(keep)).to_arrow()
        nodes = pa.concat_tables([nodes, conform(old_nodes, NODES)])
        refs_t = pa.concat_tables([refs_t, conform(old_refs, REFERENCES)])
    # A stable row order makes builds byte-comparable whatever was reused.
    nodes = nodes.sort_by([("path", "ascending"), ("start_line", "ascending"),
                           ("depth", "ascending"), ("node_path", "ascending")])
    refs_t = refs_t.sort_by([("path", "ascending"), ("src", "ascending"), ("target", "ascending")])
    return NodesResult(
        nodes=nodes, references=refs_t,
        documents=pa.Table.from_pylist(doc_rows, schema=DOCUMENTS),
        skipped=pa.Table.from_pylist(skipped, schema=SKIPPED),
        parsed=parsed, reused=reused, seconds=time.perf_counter() - t0,
    )
