"""The lexical stage: one BM25 index over every text unit (see :mod:`strata.core.lexical.bm25`).

What a unit is indexed by differs from what the encoder sees
(:func:`stages.embed.embedding_text`): the encoder's window is a few hundred
tokens, so its text is cut at 2,000 characters and leads with a summary; BM25
has no window, so a unit is indexed by its whole text (up to
``MAX_LEXICAL_CHARS``), its breadcrumb and title (the words of the headings
above it: a chunk of "Rules of Use" under "@Link" matches "@Link"), its
summary or caption, and for code its signature and docstring.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from strata.core.storage.layout import link_or_copy, replace_dir
from strata.core.lexical.bm25 import (FORMAT, LexicalIndex, forget_token_memos, joined_token_ids,
                                 tokenize)
from strata.stages.lexical_tokens import cached_tokens, source_digest
from strata.core.config.schema import EMBEDDED_KINDS, LEXICAL_GRAPH, LEXICAL_UNITS

MAX_LEXICAL_CHARS = 20_000
FINGERPRINT_FILE = "fingerprint"
# what a unit's lexical text is made from: :func:`lexical_text`'s arguments, in order
TEXT_FIELDS = ("kind", "title", "breadcrumb", "text", "attrs", "summary")
# how a text is made from those fields: bumped with any change to :func:`lexical_text`
# or :data:`TEXT_FIELDS`, so that neither the index nor the tokens kept from a build
# that made its texts another way are taken as up to date
TEXTS_KEY = f"fields/1:{MAX_LEXICAL_CHARS}"


@dataclass
class LexicalResult:
    docs: int
    unchanged: bool
    by_kind: dict[str, int]


def lexical_text(kind: str, title: str | None, breadcrumb: str | None, text: str | None,
                 attrs: str | None, summary: str | None) -> str:
    """The text BM25 indexes a unit by (see the module docstring)."""
    a = json.loads(attrs) if attrs else {}
    parts = [breadcrumb or "", title or "", title or "", summary or "",
             a.get("signature") or "", a.get("docstring") or "", text or ""]
    return "\n".join(p for p in parts if p)[:MAX_LEXICAL_CHARS]


def _loads(collection: Path) -> bool:
    """Whether the collection in ``collection`` would load (:meth:`LexicalIndex.check`):
    the build folder shares its files with the published versions (hard links),
    so a damaged version is a damaged cache."""
    try:
        LexicalIndex.check(collection)
    except Exception:  # noqa: BLE001 - any unreadable part: index it again
        return False
    return True


def _readable(folder: Path) -> bool:
    """Whether both collections would load."""
    return all(_loads(folder / name) for name in (LEXICAL_UNITS, LEXICAL_GRAPH))


def build_lexical(items: pl.DataFrame, folder: Path,
                  tokens_cache: Path | None = None) -> LexicalResult:
    """Index every embedded item of ``items`` (:func:`stages.embed.embedding_items`)
    into ``folder``, replaced atomically; an unchanged input leaves it as it is.
    ``tokens_cache``: a folder where each collection's tokens are kept for the
    next build (:mod:`stages.lexical_tokens`), so that only texts that changed
    are tokenized again.

    Two collections: ``units`` (files, sections, chunks, code, tables, images:
    what the modes rank) and ``graph`` (entities and facts). Kept apart so the
    thousands of short fact triples do not flatten the IDF of the names they
    repeat (MuSiQue: 15,487 facts beside 3,780 text units).

    A unit's lexical text is its whole text, so the texts are never held all at
    once, and the text of a document whose fields did not change is never made:
    the fingerprint (is there anything to do at all?) and the token cache's key
    are digests of each row's fields (:func:`source_digest`), and a text is made
    only to be tokenized. Every collection's tokens are counted before either
    index is built, so the rows go before the score matrices come. A collection
    whose rows did not change (its own fingerprint, beside it) is linked from
    the previous folder as it is: a collection's scores depend on its documents
    alone, so an edit of the text units does not index the facts again. ``items``
    goes once its embedded rows are copied in node order (a caller that keeps it
    nowhere else, as the embeddings step, then holds one copy of the rows)."""
    todo = items.filter(pl.col("embedded")).sort("node_id")
    del items  # (see above)
    if "summary" not in todo.columns:
        todo = todo.with_columns(pl.lit(None, pl.Utf8).alias("summary"))
    ids, kinds = todo["node_id"], todo["kind"]  # columns, not a Python string per row
    rows = todo.select(*TEXT_FIELDS)
    del todo
    by_kind = dict(sorted(Counter(kinds).items()))
    digests = [source_digest(row) for row in rows.iter_rows()]
    unit = kinds.is_in(list(EMBEDDED_KINDS))
    fingerprint = hashlib.sha256(f"{FORMAT}\0{TEXTS_KEY}\0".encode())
    # each collection's own, from its rows alone: an edit that touches only the text
    # units leaves the graph collection (entities and facts, most of the documents)
    # as it was, linked into the new folder instead of tokenized and indexed again
    parts = {name: hashlib.sha256(f"{FORMAT}\0{TEXTS_KEY}\0{name}\0".encode())
             for name in (LEXICAL_UNITS, LEXICAL_GRAPH)}
    for nid, kind, digest, is_unit in zip(ids, kinds, digests, unit):
        row = f"{nid}\0{kind}\0".encode("utf-8", "surrogatepass") + digest
        fingerprint.update(row)
        parts[LEXICAL_UNITS if is_unit else LEXICAL_GRAPH].update(row)
    stamp = folder / FINGERPRINT_FILE
    if stamp.is_file() and stamp.read_text().strip() == fingerprint.hexdigest() \
            and _readable(folder):
        return LexicalResult(docs=len(ids), unchanged=True, by_kind=by_kind)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    collections = []
    for name, keep in ((LEXICAL_UNITS, unit), (LEXICAL_GRAPH, ~unit)):
        digest = parts[name].hexdigest()
        if _same_collection(folder, name, digest):
            shutil.copytree(folder / name, tmp / name, copy_function=link_or_copy)
        else:
            collections.append((name, keep))
        (tmp / f"{name}.{FINGERPRINT_FILE}").write_text(digest + "\n")
    counted = {}
    try:
        # every collection's tokens first, the texts made (where they must be) and
        # tokenized as they are counted; then the texts go, before the score matrices
        for name, keep in collections:
            docs = ((nid, digests[i], row)
                    for nid, (i, row) in zip(ids.filter(keep), _kept(rows, keep.to_list())))
            tokens = (cached_tokens(tokens_cache / f"{name}.parquet", docs, _text, TEXTS_KEY)
                      if tokens_cache is not None
                      else (" ".join(tokenize(_text(row))) for _, _, row in docs))
            counted[name] = joined_token_ids(tokens)
    finally:  # the corpus's vocabulary, of no use to the steps after this one
        forget_token_memos()
    del rows, digests
    for name, keep in collections:
        LexicalIndex.from_token_ids(ids.filter(keep).to_arrow(), kinds.filter(keep).to_arrow(),
                                    counted.pop(name)).save(tmp / name)
    (tmp / FINGERPRINT_FILE).write_text(fingerprint.hexdigest() + "\n")
    replace_dir(tmp, folder)
    return LexicalResult(docs=len(ids), unchanged=False, by_kind=by_kind)


def _same_collection(folder: Path, name: str, digest: str) -> bool:
    """Whether ``folder`` holds the collection ``name`` built from rows whose
    fingerprint is ``digest``, readable (:func:`_loads`)."""
    try:
        stamped = (folder / f"{name}.{FINGERPRINT_FILE}").read_text().strip()
    except (OSError, ValueError):  # none (a folder from before they had their own), or not text
        return False
    return stamped == digest and _loads(folder / name)


def _text(row: tuple) -> str:
    return lexical_text(*row)


def _kept(rows: pl.DataFrame, keep: list[bool]) -> Iterator[tuple[int, tuple]]:
    """(position, fields) of each row ``keep`` marks, one at a time."""
    for i, row in enumerate(rows.iter_rows()):
        if keep[i]:
            yield i, row
