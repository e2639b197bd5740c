"""The structural graph: containment, document links and code imports.

References are resolved against the whole corpus on every build (cheap next to
parsing), so a link to a file that appears later resolves without re-parsing
the file that holds the link.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from urllib.parse import unquote

import polars as pl
import pyarrow as pa

from strata.core.config.schema import EDGES, FILE, IMPORT, JUMP, STRUCTURAL

DOC_INDEX_NAMES = ("README.md", "index.md", "readme.md", "_index.md")


@dataclass
class GraphResult:
    edges: pa.Table
    unresolved: list[dict] = field(default_factory=list)  # references that point nowhere
    external_imports: int = 0  # imports of modules outside the corpus (normal, not an error)


def structural_edges(nodes: pl.DataFrame) -> pl.DataFrame:
    """parent → child ``contains`` and child → parent ``part_of``: diffusion
    and subtree expansion walk containment both ways."""
    pc = nodes.filter(pl.col("parent_id").is_not_null()).select(
        pl.col("parent_id").alias("src"), pl.col("node_id").alias("dst"))
    down = pc.with_columns(pl.lit(STRUCTURAL).alias("type"), pl.lit("contains").alias("relation"))
    up = pc.select(pl.col("dst").alias("src"), pl.col("src").alias("dst")).with_columns(
        pl.lit(STRUCTURAL).alias("type"), pl.lit("part_of").alias("relation"))
    return pl.concat([down, up]).with_columns(pl.lit(1.0, dtype=pl.Float32).alias("weight"))


class _Resolver:
    def __init__(self, nodes: pl.DataFrame):
        files = nodes.filter(pl.col("kind") == FILE)
        self.file_ids: dict[str, str] = dict(zip(files["path"].to_list(), files["node_id"].to_list()))
        self.file_set = frozenset(self.file_ids)
        py = files.filter(pl.col("subkind").is_in(["python"]) | pl.col("path").str.ends_with(".py"))
        self.modules: dict[str, str] = {}
        for node_path, nid in zip(py["node_path"].to_list(), py["node_id"].to_list()):
            self.modules.setdefault(node_path, nid)
        code = nodes.filter(pl.col("kind") == "code")
        self.symbols: dict[str, str] = dict(zip(code["node_path"].to_list(), code["node_id"].to_list()))
        self.anchors: dict[tuple[str, str], str] = {}
        with_attrs = nodes.filter(pl.col("attrs").str.contains('"anchor'))
        for path, nid, attrs in zip(with_attrs["path"].to_list(), with_attrs["node_id"].to_list(),
                                    with_attrs["attrs"].to_list()):
            a = json.loads(attrs)
            for anchor in [a.get("anchor"), *(a.get("anchors") or [])]:
                if anchor:
                    self.anchors.setdefault((path, str(anchor).lower()), nid)

    def link(self, src_path: str, target: str) -> tuple[str | None, str]:
        """Node id a document link points to, or (None, why not)."""
        part, _, anchor = target.partition("#")
        part = unquote(part.split("?", 1)[0]).strip()
        if part:
            if part.startswith("/"):
                resolved = posixpath.normpath(part.lstrip("/"))
            else:
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(src_path), part))
            if resolved.startswith("../") or resolved == "..":
                return None, "points outside the corpus root"
        else:
            resolved = src_path
        candidates = [resolved]
        if not posixpath.splitext(resolved)[1]:
            candidates += [resolved + ".md"] + [posixpath.join(resolved, n) for n in DOC_INDEX_NAMES]
        path = next((c for c in candidates if c in self.file_ids), None)
        if path is None:
            return None, "target file not in corpus"
        if anchor:
            nid = self.anchors.get((path, unquote(anchor).lower()))
            if nid:
                return nid, ""
        return self.file_ids[path], ""

    def module(self, dotted: str) -> str | None:
        parts = dotted.split(".")
        while parts:
            nid = self.modules.get(".".join(parts))
            if nid:
                return nid
            parts.pop()
        return None


def build_edges(nodes: pl.DataFrame, references: pl.DataFrame) -> GraphResult:
    """Structural, jump and import edges of ``nodes`` (the graph step's columns)
    and their ``references``. ``nodes`` is let go once the containment edges and
    the resolver are made from it, and the resolver once every reference is
    resolved, before the edges are sorted: a caller that passes a frame it keeps
    nowhere else (the graph step reads it for this call) holds neither through
    the sort."""
    parts = [structural_edges(nodes)]
    r = _Resolver(nodes)
    del nodes
    rows: list[dict] = []
    unresolved: list[dict] = []
    external = 0
    for src, path, target, typ, relation, attrs in references.select(
            "src", "path", "target", "type", "relation", "attrs").iter_rows():
        a = json.loads(attrs) if attrs else {}
        if typ == JUMP and a.get("kind") == "path":
            # A string that looks like a file path: relative to the file, else
            # to the corpus root; a guess that matches nothing is not an error.
            dst, _ = r.link(path, target)
            if dst is None:
                dst, _ = r.link("", target[2:] if target.startswith("./") else target)
            if dst is not None and dst != src:
                rows.append({"src": src, "dst": dst, "type": JUMP, "relation": relation,
                             "weight": 1.0})
        elif typ == JUMP:
            dst, why = r.link(path, target)
            if dst is None:
                unresolved.append({"src": src, "path": path, "target": target, "reason": why})
            elif dst != src:
                rows.append({"src": src, "dst": dst, "type": JUMP, "relation": relation, "weight": 1.0})
        elif typ == IMPORT and a.get("language") not in (None, "python"):
            from strata.stages.parse.code import resolve_import

            target_path = resolve_import(target, path, a["language"], r.file_set)
            if target_path and target_path in r.file_ids and r.file_ids[target_path] != src:
                rows.append({"src": src, "dst": r.file_ids[target_path], "type": IMPORT,
                             "relation": relation, "weight": 1.0})
            elif not target_path:
                external += 1
        elif typ == IMPORT:
            found = False
            for name in a.get("names") or []:
                full = f"{target}.{name}" if target else name
                sub = r.modules.get(full)
                if sub:
                    rows.append({"src": src, "dst": sub, "type": IMPORT, "relation": relation,
                                 "weight": 1.0})
                    found = True
                elif full in r.symbols:
                    rows.append({"src": src, "dst": r.symbols[full], "type": IMPORT,
                                 "relation": "imports_symbol", "weight": 1.0})
            # ``from pkg import sub`` also runs ``pkg/__init__``: keep both edges.
            dst = r.module(target) if target else None
            if dst:
                rows.append({"src": src, "dst": dst, "type": IMPORT, "relation": relation,
                             "weight": 1.0})
            if not dst and not found:
                external += 1
    del r
    if rows:
        parts.append(pl.DataFrame(rows, schema={"src": pl.Utf8, "dst": pl.Utf8, "type": pl.Utf8,
                                                "relation": pl.Utf8, "weight": pl.Float32}))
    edges = (pl.concat(parts).filter(pl.col("src") != pl.col("dst"))
             .unique(subset=["src", "dst", "type", "relation"], keep="first")
             .sort(["type", "src", "dst", "relation"]))
    return GraphResult(edges=edges.to_arrow().cast(EDGES), unresolved=unresolved,
                       external_imports=external)
