"""The tokens of each lexical document, kept from one build to the next.

Tokenizing every text is most of what the lexical index costs, and a rebuild
after an edit indexes the same texts as the last build but a few. So each
collection's tokens are kept in the index's cache folder: one row per document,
its node id, a digest of what its lexical text is made from (the caller's: the
fields of its row, not the text, so that an unchanged document's text is never
even made) and its tokens joined by spaces (a token never holds whitespace), in
document order, which is node-id order.

A rebuild walks its documents and that file side by side, a merge on node id, a
batch at a time: a document whose source has the digest stored for its node id
takes the stored tokens, any other has its text made and tokenized; the rows of this build go to a
new file that replaces the old one once every document went by. Neither file is
held whole, so what this keeps does not grow the lexical build's memory with
the corpus. The file names the tokenizer's format: tokens from another tokenizer
are never reused, and so does the caller's key for how its digests and texts
are made. An unreadable file only costs the tokenizing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from strata.core.lexical.bm25 import FORMAT, tokenize

BATCH = 8192
COLUMNS = [("node_id", pa.string()), ("digest", pa.binary(16)), ("tokens", pa.string())]
Source = TypeVar("Source")


def source_digest(fields: Iterable[str | None]) -> bytes:
    """A digest of the fields a document's text is made from (None and "" differ)."""
    h = hashlib.blake2b(digest_size=16)
    for f in fields:
        h.update(b"\x01" if f is None else b"\x02" + f.encode("utf-8", "surrogatepass") + b"\x00")
    return h.digest()


def _schema(key: str) -> pa.Schema:
    return pa.schema(COLUMNS, metadata={"format": FORMAT, "key": key})


def _stored(path: Path, key: str) -> Iterator[tuple[str, bytes, str]]:
    """(node id, digest, joined tokens) of each row of ``path``, a batch at a
    time; nothing when the file is missing, of another format or key, or
    unreadable (from the row where it stops reading)."""
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path)
        meta = file.schema_arrow.metadata or {}
        if meta.get(b"format") != FORMAT.encode() or meta.get(b"key") != key.encode():
            return
        for batch in file.iter_batches(batch_size=BATCH):
            yield from zip(batch.column("node_id").to_pylist(), batch.column("digest").to_pylist(),
                           batch.column("tokens").to_pylist())
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return


def cached_tokens(path: Path, docs: Iterable[tuple[str, bytes, Source]],
                  text: Callable[[Source], str], key: str) -> Iterator[str]:
    """The tokens of each document of ``docs``, joined by spaces as they are kept
    (:func:`strata.core.lexical.bm25.joined_token_ids` numbers them so, never splitting
    them into Python strings): (node id, ascending; the digest
    of its source; its source), reused from ``path`` where the digest did not
    change, else those of ``text(source)``; ``path`` then holds this build's
    tokens (see the module docstring). ``key`` names how the caller makes its
    digests and texts: a file written under another key is not reused. A caller
    that stops early leaves the old file as it was."""
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        schema = _schema(key)
        writer = pq.ParquetWriter(tmp, schema, compression="zstd")
    except OSError as e:  # a cache that cannot be written only costs the tokenizing
        import logging

        logging.getLogger(__name__).warning("lexical tokens are not kept in %s: %s", path, e)
        yield from (" ".join(tokenize(text(source))) for _, _, source in docs)
        return
    old = _stored(path, key)
    current = next(old, None)
    rows: tuple[list, list, list] = ([], [], [])
    try:
        for node_id, digest, source in docs:
            while current is not None and current[0] < node_id:
                current = next(old, None)
            if current is not None and current[0] == node_id and current[1] == digest:
                joined = current[2]
            else:
                joined = " ".join(tokenize(text(source)))
            for column, value in zip(rows, (node_id, digest, joined)):
                column.append(value)
            if len(rows[0]) >= BATCH:
                writer.write_table(pa.table(list(rows), schema=schema))
                rows = ([], [], [])
            yield joined
        if rows[0]:
            writer.write_table(pa.table(list(rows), schema=schema))
        writer.close()
        old.close()
        os.replace(tmp, path)
    except BaseException:  # stopped (GeneratorExit included) or failed: the old file stays
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
