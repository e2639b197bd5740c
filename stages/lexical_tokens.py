"""The tokens of each lexical document, kept from one build to the next.

Tokenizing every text is most of what the lexical index costs, and a rebuild
after an edit indexes the same texts as the last build but a few. So each
collection's tokens are kept in the index's cache folder: one row per document,
its node id, a digest of its lexical text and its tokens joined by spaces (a
token never holds whitespace), in document order, which is node-id order.

A rebuild walks its documents and that file side by side, a merge on node id, a
batch at a time: a document whose text has the digest stored for its node id
takes the stored tokens, any other is tokenized; the rows of this build go to a
new file that replaces the old one once every document went by. Neither file is
held whole, so what this keeps does not grow the lexical build's memory with
the corpus. The file names the tokenizer's format: tokens from another tokenizer
are never reused. An unreadable file only costs the tokenizing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa

from strata.core.lexical import FORMAT, tokenize

BATCH = 8192
SCHEMA = pa.schema([("node_id", pa.string()), ("digest", pa.binary(16)), ("tokens", pa.string())],
                   metadata={"format": FORMAT})


def text_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _stored(path: Path) -> Iterator[tuple[str, bytes, str]]:
    """(node id, digest, joined tokens) of each row of ``path``, a batch at a
    time; nothing when the file is missing, of another format or unreadable (from
    the row where it stops reading)."""
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path)
        if (file.schema_arrow.metadata or {}).get(b"format") != FORMAT.encode():
            return
        for batch in file.iter_batches(batch_size=BATCH):
            yield from zip(batch.column("node_id").to_pylist(), batch.column("digest").to_pylist(),
                           batch.column("tokens").to_pylist())
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return


def cached_tokens(path: Path, node_ids: Iterable[str],
                  texts: Iterable[str]) -> Iterator[list[str]]:
    """The tokens of each text (``node_ids`` ascending, aligned with ``texts``),
    reused from ``path`` where the text did not change; ``path`` then holds this
    build's tokens (see the module docstring). A caller that stops early leaves
    the old file as it was."""
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = pq.ParquetWriter(tmp, SCHEMA, compression="zstd")
    except OSError as e:  # a cache that cannot be written only costs the tokenizing
        import logging

        logging.getLogger(__name__).warning("lexical tokens are not kept in %s: %s", path, e)
        yield from map(tokenize, texts)
        return
    old = _stored(path)
    current = next(old, None)
    rows: tuple[list, list, list] = ([], [], [])
    try:
        for node_id, text in zip(node_ids, texts):
            digest = text_digest(text)
            while current is not None and current[0] < node_id:
                current = next(old, None)
            if current is not None and current[0] == node_id and current[1] == digest:
                joined = current[2]
                tokens = joined.split(" ") if joined else []
            else:
                tokens = tokenize(text)
                joined = " ".join(tokens)
            for column, value in zip(rows, (node_id, digest, joined)):
                column.append(value)
            if len(rows[0]) >= BATCH:
                writer.write_table(pa.table(list(rows), schema=SCHEMA))
                rows = ([], [], [])
            yield tokens
        if rows[0]:
            writer.write_table(pa.table(list(rows), schema=SCHEMA))
        writer.close()
        old.close()
        os.replace(tmp, path)
    except BaseException:  # stopped (GeneratorExit included) or failed: the old file stays
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
