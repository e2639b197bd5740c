"""The parse stage: corpus files → hierarchy nodes, with a per-document cache.

A document whose parse key (content hash + parser settings + module name) is
unchanged since the previous build is not parsed again: its node and reference
rows are copied from the previous build. Node ids depend only on position, so
reused rows are identical to what a fresh parse would produce.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa

from strata.stages.discover import BINARY_PARSED, SourceFile
from strata.stages.parse.finalize import ParseSettings, finalize, stable_hash
from strata.stages.parse.model import ParsedFile, Reference
from strata.stages.parse.plain_text import parse_plain_text
from strata.core import stop_request as stopping
from strata.core.progress_lines import ProgressCallback as Progress
from strata.stages.parse.registry import CODE, parser_for
from strata.core.config.schema import (DOCUMENTS, JUMP, NODES, REFERENCES, SKIPPED, TABLE_FILES,
                                conform, python_table)

# the nodes table's row order (ascending, stable, nulls last)
NODE_ORDER = ("path", "start_line", "depth", "node_path")


@dataclass
class PreviousBuild:
    documents: pl.DataFrame
    nodes: pl.DataFrame
    references: pl.DataFrame


def read_previous(folder: Path) -> PreviousBuild | None:
    """The parse tables a build (or a parse shard) left in ``folder``, if all three
    are there: the per-document cache ``build_nodes`` reuses rows from."""
    from strata.core.storage.layout import read_cache_table

    files = [folder / TABLE_FILES[n] for n in ("documents", "nodes", "references")]
    if not all(f.exists() for f in files):
        return None
    tables = [read_cache_table(f, "parse cache") for f in files]
    if any(t is None for t in tables):
        return None  # unreadable (damaged in place through a published hard link): parse again
    return PreviousBuild(*tables)


def overlay(previous: PreviousBuild | None, parts: list[PreviousBuild]) -> PreviousBuild | None:
    """The previous build with each document's rows replaced by a newer part's
    (the parse shards' output): what build_nodes may reuse by parse key."""
    parts = [p for p in parts if p.documents.height]
    if not parts:
        return previous
    docs = pl.concat([p.documents for p in parts], how="vertical_relaxed")
    fresh = docs["path"].unique()
    merged = PreviousBuild(
        docs,
        pl.concat([p.nodes for p in parts], how="vertical_relaxed"),
        pl.concat([p.references for p in parts], how="vertical_relaxed"))
    if previous is None:
        return merged
    keep = lambda df: df.filter(~pl.col("path").is_in(fresh.implode()))  # noqa: E731
    return PreviousBuild(
        pl.concat([merged.documents, keep(previous.documents)], how="vertical_relaxed"),
        pl.concat([merged.nodes, keep(previous.nodes)], how="vertical_relaxed"),
        pl.concat([merged.references, keep(previous.references)], how="vertical_relaxed"))


@dataclass
class NodesResult:
    nodes: pa.Table
    references: pa.Table
    documents: pa.Table
    skipped: pa.Table
    parsed: list[str] = field(default_factory=list)  # paths parsed this time
    reused: list[str] = field(default_factory=list)  # paths copied from the cache
    seconds: float = 0.0


def _parse(src: SourceFile, settings: ParseSettings,
           modules: dict[str, tuple[str, bool]]) -> ParsedFile:
    spec = parser_for(src.format)
    assert spec.binary or src.text is not None
    return spec.parse(src, settings, modules)


def _add_path_references(pf: ParsedFile, src: SourceFile) -> None:
    """String literals in code that name files ("config/defaults.yaml") become
    references, so a script and its config end up connected."""
    from strata.stages.parse.config_files import path_literals

    if src.text is None or pf.root.subkind in ("text",):
        return
    for literal, line in path_literals(src.text, src.format):
        pf.references.append(Reference(source=pf.root, target=literal, type=JUMP,
                                       relation="references", attrs={"line": line, "kind": "path"}))


def parse_source(src: SourceFile, settings: ParseSettings,
                 modules: dict[str, tuple[str, bool]]) -> ParsedFile:
    """Dispatch by format; a parser that raises falls back to plain text."""
    try:
        pf = _parse(src, settings, modules)
        if pf.root.kind == "file" and pf.root.language and parser_for(src.format).kind == CODE:
            _add_path_references(pf, src)
        return pf
    except Exception as e:  # noqa: BLE001 - one bad file must not sink the run
        note = f"{src.format} parser failed ({e.__class__.__name__}: {e}); indexed as plain text"
        return parse_plain_text(src.text or "", src.path, note=note)


def _store_blobs(pf: ParsedFile, blob_dir: Path) -> None:
    """Extracted images go to ``build/blobs/<hash>.<ext>``, named by content,
    so an image shared by many documents is stored once."""
    blob_dir.mkdir(parents=True, exist_ok=True)
    ext_of = {d.attrs.get("blob"): d.attrs.get("ext") or "bin" for d in pf.root.walk()
              if d.attrs.get("blob")}
    for key, data in pf.blobs.items():
        target = blob_dir / f"{key}.{ext_of.get(key, 'bin')}"
        if not target.exists():
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")  # shards write in parallel
            tmp.write_bytes(data)
            tmp.replace(target)


def parse_key(src: SourceFile, settings: ParseSettings, modules: dict) -> str:
    module = "|".join(map(str, modules.get(src.path, ("", False))))
    return stable_hash(src.content_hash, src.format, settings.fingerprint(), module)


ROWS_PER_BATCH = 8192  # parsed rows kept as Python dicts before they become Arrow


class _Rows:
    """Rows of one output table as they are parsed: Arrow record batches, plus the
    last few thousand rows still as Python dicts.

    Why: a row as a dict of Python objects takes several times its Arrow size, so a
    whole corpus's rows held as dicts until the end would be the parse stage's
    largest allocation; this way the dicts held are bounded."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.pending: list[dict] = []
        self.batches: list[pa.Table] = []

    def extend(self, rows: list[dict]) -> None:
        self.pending.extend(rows)
        if len(self.pending) >= ROWS_PER_BATCH:
            self._flush()

    def _flush(self) -> None:
        self.batches.append(python_table(self.pending, self.schema))
        self.pending = []

    def table(self) -> pa.Table:
        """Every row so far, in the order added."""
        self._flush()
        return pa.concat_tables(self.batches)


def build_nodes(corpus: str, sources: list[SourceFile], settings: ParseSettings = ParseSettings(),
                previous: PreviousBuild | None = None,
                progress: Progress | None = None, blob_dir: Path | None = None,
                python_paths: list[str] | None = None) -> NodesResult:
    """``python_paths``: every Python file of the corpus, when ``sources`` is
    only a shard of it (module names depend on the whole package layout)."""
    from strata.stages.parse.python_code import module_names

    t0 = time.perf_counter()
    if python_paths is None:
        python_paths = [s.path for s in sources if s.format == "python"]
    modules = module_names(python_paths)
    prev_keys: dict[str, str] = {}
    prev_notes: dict[str, str] = {}
    if previous is not None and previous.documents.height:
        paths = previous.documents["path"].to_list()
        prev_keys = dict(zip(paths, previous.documents["parse_key"].to_list()))
        prev_notes = dict(zip(paths, previous.documents["notes"].to_list()))
    node_rows = _Rows(NODES)
    ref_rows = _Rows(REFERENCES)
    doc_rows: list[dict] = []
    skipped: list[dict] = []
    parsed: list[str] = []
    reused: list[str] = []
    for i, src in enumerate(sources):
        stopping.check()
        if progress:
            progress(i, len(sources))
        doc = {"path": src.path, "format": src.format, "size": src.size,
               "content_hash": src.content_hash, "parse_key": None, "status": "indexed",
               "notes": src.note or ""}
        doc_rows.append(doc)
        if src.format in ("asset", "binary") and src.reason:
            # not even hashed: over the size cap, not a regular file, unreadable
            doc["status"] = "skipped"
            skipped.append({"path": src.path, "stage": "parse", "reason": src.reason})
            continue
        if src.format in ("asset", "binary"):
            doc["status"] = "asset" if src.format == "asset" else "skipped"
            if src.format == "binary":
                skipped.append({"path": src.path, "stage": "parse",
                                "reason": "binary file format; not indexed"})
            continue
        if src.text is None and not (src.format in BINARY_PARSED and src.data is not None):
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
        if pf.unreadable:
            # nothing of it could be read: recorded, and tried again next run
            doc.update(status="skipped", parse_key=None,
                       notes="\n".join(n for n in [src.note, *pf.notes] if n))
            skipped.append({"path": src.path, "stage": "parse", "reason": pf.unreadable})
            continue
        if pf.blobs and blob_dir is not None:
            _store_blobs(pf, blob_dir)
        rows, refs = finalize(pf, corpus, src.path, src.text or "", settings)
        node_rows.extend(rows)
        ref_rows.extend(refs)
        notes = [n for n in [src.note, *pf.notes] if n]
        doc["notes"] = "\n".join(notes)
        parsed.append(src.path)
    if progress:
        progress(len(sources), len(sources))

    refs_t = ref_rows.table()
    # A stable row order makes builds byte-comparable whatever was reused. The nodes
    # (the corpus's texts) are merged and sorted in polars and made Arrow once: in
    # Arrow each of the filter, the concatenation and the sort made a copy of them.
    nodes = pl.from_arrow(node_rows.table())
    if reused and previous is not None:
        keep = pl.Series(reused).implode()
        nodes = pl.concat([nodes, previous.nodes.filter(pl.col("path").is_in(keep))],
                          how="vertical_relaxed")
        old_refs = previous.references.filter(pl.col("path").is_in(keep)).to_arrow()
        refs_t = pa.concat_tables([refs_t, conform(old_refs, REFERENCES)])
    nodes = conform(nodes.sort(list(NODE_ORDER), nulls_last=True, maintain_order=True)
                    .to_arrow(), NODES)
    refs_t = refs_t.sort_by([("path", "ascending"), ("src", "ascending"), ("target", "ascending")])
    return NodesResult(
        nodes=nodes, references=refs_t,
        documents=python_table(doc_rows, DOCUMENTS),
        skipped=python_table(skipped, SKIPPED),
        parsed=parsed, reused=reused, seconds=time.perf_counter() - t0,
    )
