"""The embedding stage: one LanceDB vector table per node kind, with reuse.

(Full-text search lives in :mod:`stages.lexical`: one BM25 index over all kinds.)

Each vector row carries ``text_hash`` = hash(model, embedding-text version,
text). A node whose hash matches a row of the previous build takes that vector
instead of being encoded again, so an unchanged document costs nothing.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import polars as pl
import pyarrow as pa

from strata.stages.parse.finalize import stable_hash
from strata.core import stop_request as stopping
from strata.core.progress_lines import ProgressCallback as Progress
from strata.core.encoders.embedding import TORCH_RUNTIMES, Encoder, EncoderSpec, canonical_model
from strata.core.encoders.onnx_runtime import ENCODING_VERSION as ONNX_ENCODING
from strata.core.encoders.batch_shapes import MAX_ROWS
from strata.core.storage.lance_scan import connect, scan, table_names
from strata.stages.stored_vectors import (StagedVectors, StoredVectors, lance_batches,
                                          stage_vectors)
from strata.stages.vector_contents import (VectorContents, fingerprint, kind_fingerprints,
                                           read_contents, read_stamp, rows_by_kind, stamp,
                                           unstamp)
from strata.core.storage.layout import link_or_copy, replace_dir
from strata.core.config.schema import (CODE, ENTITY, FACT, FILE, IMAGE, TABLE, VECTOR_COLUMNS,
                           python_table, vector_schema, vector_table_name)

# Bump when embedding_text() or how a text is encoded changes: every vector is recomputed.
# 3: each text encoded at a padded length of its own (SentenceTransformerEncoder._encode_fixed_shapes)
EMBED_TEXT_VERSION = "3"
MAX_EMBED_CHARS = 2000
# Texts per encoder call, taken shortest first over everything a build or shard
# must encode. On torch a call runs as forward passes of a fixed number of rows per
# padded length (strata.core.encoders.batch_shapes.shape_batches), the last pass of each
# length filled with repeats: a
# call of fewer texts than a pass has rows then pays for the whole pass. So a call
# holds the rows of the widest pass, that of the shortest texts; sorted, its texts
# then fill whole passes, where smaller calls left most rows of the short texts'
# passes (entities, facts) to repeats. It is still a fraction of a second of work,
# so a stop request is seen at once.
ENCODE_BATCH = MAX_ROWS
# Vectors a shard holds before it writes them to its cache: memory stays bounded
# however large the shard, and an interrupted shard keeps what it wrote.
FLUSH_TEXTS = 4096
# Rows of one kind's table whose vectors are gathered at a time: what bounds the
# vectors the embeddings step holds beside the Lance writer's own buffers (a few MB;
# a multiple of WRITE_BATCH, so the batches the writer gets do not depend on it).
WRITE_BLOCK = 4096
WRITE_BATCH = 1024  # rows per record batch handed to the Lance writer


@dataclass
class EmbedResult:
    dim: int
    loaded_encoder: bool = False
    computed: int = 0
    reused: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    unchanged: bool = False  # the tables on disk already held exactly these rows: not rewritten
    tables_kept: list[str] = field(default_factory=list)  # kinds whose table was kept as it was
    contents: VectorContents | None = None  # when unchanged: the tables' trusted contents file


def embedding_text(kind: str, title: str, breadcrumb: str, text: str, attrs: str | None,
                   summary: str | None = None) -> str:
    """What the encoder sees: the node's text with its place in the hierarchy.

    The breadcrumb disambiguates short texts ("Example", "Parameters") that
    mean nothing without their section. Files are represented by their
    summary; code and tables put their summary (or signature and docstring)
    first, since the encoder's window often cuts the body; images are their
    caption plus the text around them. Entities and facts are embedded as-is.
    """
    if kind in (ENTITY, FACT):
        return text[:MAX_EMBED_CHARS]
    a = json.loads(attrs) if attrs else {}
    if kind == CODE:
        extra = [summary or "", a.get("signature") or "", a.get("docstring") or "",
                 a.get("context_before") or ""]
        body = "\n".join(dict.fromkeys(x for x in extra if x)) + "\n" + text
    elif kind in (TABLE, IMAGE):
        body = "\n".join(x for x in [title, summary or "", a.get("context_before") or "", text,
                                      a.get("context_after") or ""] if x)
    elif kind == FILE:
        body = f"{title}\n{summary}" if summary else f"{title}\n{text}"
    else:
        body = text
    return f"{breadcrumb}\n{body}"[:MAX_EMBED_CHARS]


def _previous_vectors(lance_dir: Path, vectors: bool = True,
                      skip: set[str] = frozenset()) -> StoredVectors:
    """The previous build's vectors by text hash (:class:`StoredVectors`: their hashes
    read now, the vectors when asked for), but for the tables named in ``skip``
    (kept as they are). With ``vectors=False`` only the hashes
    are read (which texts have a vector); else every vector is read once, a batch
    at a time, to find a damaged table now rather than halfway through the write.

    A table with a damaged file (published versions are hard links of these
    tables, so a published file damaged in place damages this copy too) gives
    nothing: its vectors are encoded again and the tables rewritten, since the
    fingerprint stamp beside them is removed."""
    if not lance_dir.exists():
        return StoredVectors.of({})
    from strata.core.storage.layout import damaged_lance_file, short_error

    dims: dict[str, int] = {}
    good: list[str] = []
    try:
        db = connect(lance_dir)
        names = table_names(db)
    except Exception as e:  # noqa: BLE001
        _forget_tables(lance_dir, f"unreadable ({short_error(e)})")
        return StoredVectors.of({})
    for name in names:
        if name in skip:
            continue
        bad = damaged_lance_file(lance_dir / f"{name}.lance")
        try:
            if bad is not None:
                raise OSError(f"{bad.name} has no Lance footer")
            table = db.open_table(name)
            dim = table.schema.field("vector").type.list_size
            columns = ["text_hash", "vector"] if vectors else ["text_hash"]
            found: list[str] = []
            for batch in scan(table, columns):
                found += batch.column("text_hash").to_pylist()
        except Exception as e:  # noqa: BLE001
            _forget_tables(lance_dir, f"table {name} is unreadable ({short_error(e)})")
            continue
        dims.update(dict.fromkeys(found, dim))
        good.append(name)
    return StoredVectors(dims, lance_batches(lance_dir, good))


def _forget_tables(lance_dir: Path, why: str) -> None:
    import logging

    logging.getLogger(__name__).warning("vector cache %s: %s; its vectors are encoded again",
                                        lance_dir, why)
    unstamp(lance_dir)


def _model_key(spec: EncoderSpec) -> str:
    """What a text hash names besides the text: the model, and the runtime where its
    vectors are its own."""
    model_key = f"{spec.backend}:{canonical_model(spec.model)}"
    if spec.runtime != "torch":  # another runtime's vectors are its own (torch's keys unchanged)
        model_key += f":{spec.runtime}"
    if spec.runtime not in TORCH_RUNTIMES:
        model_key += f":{ONNX_ENCODING}"
    return model_key


# Rows whose encoder texts are made at a time (:func:`_rows_table`).
TEXT_SLICE = 8192
# what an encoder text is made from: :func:`embedding_text`'s arguments, in order
EMBED_FIELDS = ("kind", "title", "breadcrumb", "text", "attrs", "summary")


def _embedded(nodes: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``nodes`` that get a vector, in table order (by node id: the
    same order whatever order the rows came in)."""
    todo = nodes.filter(pl.col("embedded")).sort("node_id")
    if "summary" not in todo.columns:
        todo = todo.with_columns(pl.lit(None, pl.Utf8).alias("summary"))
    return todo


def _text_hash(model_key: str, text: str) -> str:
    """What names an encoder text's vector: the text, how texts are made, the model."""
    return stable_hash(model_key, EMBED_TEXT_VERSION, text)


def _rows_table(todo: pl.DataFrame, spec: EncoderSpec) -> pa.Table:
    """The rows of ``todo`` (:func:`_embedded`) as the vector tables' rows without
    their vectors (the columns of :data:`VECTOR_COLUMNS`, what the fingerprint
    covers), each with its encoder text (:func:`embedding_text`) and its hash.

    The texts are made ``TEXT_SLICE`` rows at a time, each slice turned into
    Arrow before the next is made: the corpus's texts are never a Python list,
    which takes more than the Arrow column it ends in. The slices are joined
    into one column, so the table's layout (and its fingerprint) does not depend
    on the slice size."""
    model_key = _model_key(spec)
    made = pa.schema([VECTOR_COLUMNS.field("text_hash"), VECTOR_COLUMNS.field("text")])
    base = todo.select([c for c in VECTOR_COLUMNS.names if c not in made.names]).to_arrow()
    fields = todo.select(*EMBED_FIELDS)
    parts = []
    for start in range(0, max(fields.height, 1), TEXT_SLICE):
        texts = [embedding_text(*r) for r in fields.slice(start, TEXT_SLICE).iter_rows()]
        parts.append(python_table({"text_hash": [_text_hash(model_key, t) for t in texts],
                                   "text": texts}, made))
    del fields
    for made_field in made:
        chunks = [c for p in parts for c in p.column(made_field.name).chunks]
        base = base.append_column(made_field, pa.chunked_array(
            [pa.concat_arrays(chunks)] if len(chunks) > 1 else chunks, made_field.type))
    return base


def encode_sorted(texts: list[str], encoder: Encoder, batch_size: int = ENCODE_BATCH,
                  progress: Progress | None = None,
                  emit: Callable[[list[int], np.ndarray], None] | None = None) -> None:
    """Encode ``texts`` shortest first, ``batch_size`` per call, handing each
    call's positions (into ``texts``) and vectors to ``emit`` as they come.

    Sorting the whole set once is what makes many small calls as fast as one
    large one: sorted neighbours have nearly the same length, so a call pads
    little. Where the encoder counts tokens (torch, whose forward passes have a
    fixed number of rows per padded length) the order is by that count, so a
    call's texts fill whole passes, not the ends of two; else by characters.
    Between two calls a stop request is honoured."""
    counts = getattr(encoder, "token_counts", lambda texts: None)(texts)
    size = counts if counts is not None else [len(t) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: (size[i], i))
    total = len(order)
    step = max(1, batch_size)
    # a call costs about its texts' length: the ETA is measured on that share of
    # the work, since the texts grow longer as the calls go (shortest first)
    cost = np.cumsum([0] + [max(size[i], 1) for i in order], dtype=np.float64)
    for start in range(0, total, step):
        stopping.check()
        if progress:
            progress(start, total, work=float(cost[start] / cost[-1]))
        idx = order[start:start + step]
        vectors = encoder.encode([texts[i] for i in idx])
        if emit is not None:
            emit(idx, vectors)
    if progress:
        progress(total, total, work=1.0)


def shard_of(key: str, shards: int) -> int:
    """The shard a document path or text hash belongs to: stable across runs and
    machines, so an unchanged document always lands on the same worker."""
    return int(stable_hash(key), 16) % max(1, shards)


@dataclass
class ShardVectors:
    computed: int
    dim: int = 0
    seconds: float = 0.0


def encode_shard(nodes: pl.DataFrame, spec: EncoderSpec, load_encoder: Callable[[], Encoder],
                 lance_dir: Path, shard: int, shards: int,
                 sink: Callable[[list[str], np.ndarray], None], batch_size: int = ENCODE_BATCH,
                 progress: Progress | None = None, known: set[str] = frozenset(),
                 flush_texts: int = FLUSH_TEXTS) -> ShardVectors:
    """Encode this shard's share of the texts that no previous vector covers
    (``known``: hashes an interrupted earlier attempt already encoded). Texts
    are split by their hash, so shards never encode the same text. Vectors go
    to ``sink(text_hashes, vectors)`` every ``flush_texts`` texts and when the
    shard ends or is stopped, so at most that many are held in memory."""
    t0 = time.perf_counter()
    todo = _embedded(nodes)
    rows = _rows_table(todo, spec)
    del todo
    hashes = rows.column("text_hash").to_pylist()
    # which texts have a vector: from the tables' contents file, else their hash column
    known_contents = read_contents(lance_dir)
    previous = known_contents.hashes() if known_contents is not None \
        else _previous_vectors(lance_dir, vectors=False)
    mine: dict[str, int] = {}  # text hash → its first row
    for i, h in enumerate(hashes):
        if h not in previous and h not in known and shard_of(h, shards) == shard:
            mine.setdefault(h, i)
    del hashes
    if not mine:
        return ShardVectors(0, 0, time.perf_counter() - t0)
    if progress:
        progress(0, len(mine))  # the count is known before the model is loaded
    keys = list(mine)
    # gathered by polars: pyarrow, given a list of positions, imports pandas first (to
    # ask whether it is a pandas object), a few tenths of a second before the encoder
    # has its texts; the process imports it later anyway, while it waits for them
    texts = pl.Series(rows.column("text")).gather(list(mine.values())).to_list()
    del rows, mine
    encoder = load_encoder()
    pending_keys: list[str] = []
    pending: list[np.ndarray] = []
    written = [0]

    def flush() -> None:
        if pending_keys:
            sink(list(pending_keys), np.concatenate(pending))
            written[0] += len(pending_keys)
            pending_keys.clear()
            pending.clear()

    def emit(idx: list[int], vectors: np.ndarray) -> None:
        pending_keys.extend(keys[i] for i in idx)
        pending.append(vectors)
        if len(pending_keys) >= flush_texts:
            flush()

    try:
        encode_sorted(texts, encoder, batch_size, progress, emit)
    finally:  # stopped or failed: what was encoded is kept for the next attempt
        flush()
    return ShardVectors(written[0], encoder.dim, time.perf_counter() - t0)


def build_vectors(nodes: pl.DataFrame, spec: EncoderSpec, load_encoder: Callable[[], Encoder],
                  lance_dir: Path, batch_size: int = ENCODE_BATCH, progress: Progress | None = None,
                  dim: int | None = None,
                  precomputed: Mapping[str, np.ndarray] | None = None) -> EmbedResult:
    """Write the vector tables; ``load_encoder`` is only called when something
    must be encoded, so an unchanged corpus never loads the model. ``dim`` is
    the previous build's dimension, needed only when nothing is encoded;
    ``precomputed`` holds vectors the embedding shards already encoded
    (:func:`read_vector_cache`), which win over the previous build's.

    What it holds: the rows to write without their vectors (ids, hashes, texts),
    the vectors it encodes itself, and one block of one kind's vectors at a time
    (:func:`_write_tables`); stored vectors are read a batch at a time, once each,
    into a scratch file (:class:`StagedVectors`). ``nodes`` is let go once its
    rows are copied in table order: a caller that passes a frame it keeps nowhere
    else (the embeddings step reads it for this call) does not hold it through
    the tables' write."""
    t0 = time.perf_counter()
    todo = _embedded(nodes)
    del nodes  # (see above)
    rows = _rows_table(todo, spec)
    del todo  # the rows hold the texts: those to encode are read back from them
    hashes = rows.column("text_hash").to_pylist()
    kinds = rows.column("kind").to_pylist()
    tables = rows_by_kind(kinds)  # each kind's table: its rows, in table order
    by_kind = {kind: int(len(at)) for kind, at in tables.items()}
    known = read_contents(lance_dir) if dim else None
    if known is not None and known.dim != dim:
        known = None
    if not precomputed and known is not None and known.fingerprint == fingerprint(rows, dim):
        # the contents file says the tables hold exactly these rows: nothing to encode,
        # read or write, and the tables are not opened at all
        return EmbedResult(dim=dim, computed=0, reused=len(hashes), by_kind=by_kind,
                           unchanged=True, contents=known, seconds=time.perf_counter() - t0)
    # The kinds whose table already holds exactly their rows (the trusted contents
    # file says so): none of their texts needs a vector and their table is kept as
    # it is, so their stored vectors are not read at all. A small edit reads the
    # vectors of the kinds it touched, not every entity's and fact's.
    per_kind = kind_fingerprints(rows, tables, dim) if known is not None else {}
    settled = {kind for kind, digest in per_kind.items() if known.kinds.get(kind) == digest}
    sources = [StoredVectors.of(precomputed)] if precomputed else []
    sources.append(_previous_vectors(lance_dir, skip={vector_table_name(k) for k in settled}))
    if precomputed and not dim:
        dim = sources[0].dim
    missing = [i for i, h in enumerate(hashes)
               if kinds[i] not in settled and not any(h in s for s in sources)]
    encoder = load_encoder() if missing or not dim else None
    if encoder is not None:
        if settled and encoder.dim != dim:  # not the tables' model after all: read them all
            settled, per_kind = set(), {}
            sources[-1] = _previous_vectors(lance_dir)
        dim = encoder.dim
        missing = [i for i, h in enumerate(hashes)
                   if kinds[i] not in settled and _stored_dim(sources, h) != dim]
    assert dim is not None
    encoded = np.zeros((len(missing), dim), dtype=np.float32)
    if missing:
        to_encode = rows.column("text").take(pa.array(missing, pa.int64())).to_pylist()
        # each call's vectors go to their texts' rows: encoded[idx] = vectors
        encode_sorted(to_encode, encoder, batch_size, progress,  # type: ignore[arg-type]
                      encoded.__setitem__)
        del to_encode

    digest = fingerprint(rows, dim)
    if not missing and lance_dir.exists() and read_stamp(lance_dir) == digest:
        # The tables on disk hold exactly these rows: rewriting them would be
        # most of an unchanged rebuild's time. (Their contents file, missing in
        # a build from before it existed, is written for the next rebuild.)
        known = read_contents(lance_dir)
        if known is None:
            stamp(lance_dir, rows, dim, digest)
            known = read_contents(lance_dir)
        return EmbedResult(dim=dim, loaded_encoder=encoder is not None, computed=0,
                           reused=len(hashes), by_kind=by_kind, unchanged=True, contents=known,
                           seconds=time.perf_counter() - t0)
    per_kind = per_kind or kind_fingerprints(rows, tables, dim)
    # (a settled kind must be kept: its vectors were not read to be written again)
    kept = settled | _unchanged_tables(known if known is not None else read_contents(lance_dir),
                                       dim, per_kind, {kinds[i] for i in missing})
    unstamp(lance_dir)  # never left claiming tables that are being replaced
    tmp = lance_dir.with_name(lance_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for kind in kept:  # the same rows in the same order: the same table, linked
        name = f"{vector_table_name(kind)}.lance"
        shutil.copytree(lance_dir / name, tmp / name, copy_function=link_or_copy)
    own = dict(zip(missing, range(len(missing))))  # table row → row of ``encoded``
    staged = StagedVectors(lance_dir.with_name(lance_dir.name + ".vectors.tmp"), tables, dim)
    computed, reused = len(missing), len(hashes) - len(missing)
    try:
        stage_vectors(staged, hashes, sources, own, encoded,
                      skip=[k in kept for k in kinds] if kept else None)
        # every vector is in the staged file now: the hashes, the stored vectors'
        # indexes and the encoded matrix go before the writer's buffers come
        del hashes, sources, own, encoded, missing
        _write_tables(tmp, rows, tables, dim, staged.read, kept)
    finally:
        staged.close()
    replace_dir(tmp, lance_dir)
    stamp(lance_dir, rows, dim, digest, per_kind)
    return EmbedResult(dim=dim, loaded_encoder=encoder is not None, computed=computed,
                       reused=reused, by_kind=by_kind, tables_kept=sorted(kept),
                       seconds=time.perf_counter() - t0)


def _unchanged_tables(known: VectorContents | None, dim: int, per_kind: dict[str, str],
                      encoded: set[str]) -> set[str]:
    """The kinds whose table on disk already holds exactly the rows it would be
    written with (its fingerprint in ``known``, the trusted contents file, is ``per_kind``'s,
    with vectors of ``dim``), none of whose rows were encoded now (``encoded``: the
    kinds of those rows). Their tables are kept as they are (hard links into the
    new folder): a small edit rewrites the tables of the kinds it touched, not
    the entities' and facts' too."""
    if known is None or known.dim != dim:
        return set()
    return {kind for kind, digest in per_kind.items()
            if kind not in encoded and known.kinds.get(kind) == digest}


def _stored_dim(sources: list[StoredVectors], h: str) -> int | None:
    """The length of the vector the first source holding ``h`` has for it (the
    shards' output before the previous build's), None when none holds it."""
    for source in sources:
        if h in source.dims:
            return source.dims[h]
    return None


def _write_tables(folder: Path, rows: pa.Table, tables: dict[str, np.ndarray], dim: int,
                  gather: Callable[[np.ndarray, np.ndarray], None],
                  kept: set[str] = frozenset()) -> None:
    """One Lance table per kind of ``tables`` (:func:`rows_by_kind`) in ``folder``,
    written from :func:`_kind_batches`, but for the ``kept`` kinds (their tables
    are there already)."""
    names = vector_schema(dim).names
    vector = pa.field("vector", pa.list_(pa.float32(), dim))
    schema = pa.schema([vector if n == "vector" else rows.schema.field(n) for n in names])
    db = connect(folder)
    for kind, at in tables.items():
        if kind in kept:
            continue
        db.create_table(vector_table_name(kind), mode="overwrite",
                        data=pa.RecordBatchReader.from_batches(
                            schema, _kind_batches(rows, at, schema, gather)))


def _kind_batches(rows: pa.Table, at: np.ndarray, schema: pa.Schema,
                  gather: Callable[[np.ndarray, np.ndarray], None]) -> Iterator[pa.RecordBatch]:
    """The rows ``at`` of ``rows`` with their vectors, as record batches of
    ``WRITE_BATCH`` rows that own their buffers.

    Vectors are read ``WRITE_BLOCK`` rows at a time (``gather``: from the staged
    file of :class:`StagedVectors`). The writer keeps a few batches in flight before it writes
    them out; a batch that were a slice of a larger block would keep that whole
    block alive, so each batch is a copy of its rows."""
    dim = schema.field("vector").type.list_size
    for a in range(0, len(at), WRITE_BLOCK):
        block = at[a:a + WRITE_BLOCK]
        vectors = np.zeros((len(block), dim), dtype=np.float32)
        gather(block, vectors)
        for b in range(0, len(block), WRITE_BATCH):
            part = rows.take(pa.array(block[b:b + WRITE_BATCH], pa.int64()))
            flat = pa.array(vectors[b:b + WRITE_BATCH].reshape(-1).copy(), pa.float32())
            columns = [pa.FixedSizeListArray.from_arrays(flat, dim) if f.name == "vector"
                       else part.column(f.name).combine_chunks() for f in schema]
            yield pa.record_batch(columns, schema=schema)


# The columns of each build table that embedding_items reads: a caller reading the
# tables from disk reads only these (the nodes table's other columns, its hashes
# and hierarchy, are about a third of its bytes at no use here).
ITEM_COLUMNS = {
    "nodes": ["node_id", "kind", "subkind", "path", "language", "depth", "title", "breadcrumb",
              "text", "attrs", "embedded"],
    "summaries": ["node_id", "summary"],
    "captions": ["node_id", "caption"],
    "facts": ["fact_id", "text"],
}
ITEM_COLUMNS["entities"] = ITEM_COLUMNS["nodes"]


def embedding_items(nodes: pl.DataFrame, summaries: pl.DataFrame | None = None,
                    captions: pl.DataFrame | None = None, entities: pl.DataFrame | None = None,
                    facts: pl.DataFrame | None = None) -> pl.DataFrame:
    """Everything that gets a vector, as one frame: hierarchy nodes with their
    summary (or image caption) attached, entity nodes, and facts."""
    cols = ITEM_COLUMNS["nodes"]
    frame = nodes.select(cols)
    extra = []
    if summaries is not None and summaries.height:
        extra.append(summaries.select("node_id", "summary"))
    if captions is not None and captions.height:
        extra.append(captions.select("node_id", pl.col("caption").alias("summary")))
    if extra:
        frame = frame.join(pl.concat(extra).unique("node_id", keep="first"), on="node_id",
                           how="left")
    else:
        frame = frame.with_columns(pl.lit(None, pl.Utf8).alias("summary"))
    parts = [frame]
    if entities is not None and entities.height:
        parts.append(entities.select(cols).with_columns(pl.lit(None, pl.Utf8).alias("summary")))
    if facts is not None and facts.height:
        parts.append(facts.select(
            pl.col("fact_id").alias("node_id"), pl.lit(FACT).alias("kind"), pl.lit("").alias("subkind"),
            pl.lit("").alias("path"), pl.lit(None, pl.Utf8).alias("language"),
            pl.lit(0, pl.Int32).alias("depth"), pl.lit("").alias("title"),
            pl.lit("").alias("breadcrumb"), pl.col("text"), pl.lit("{}").alias("attrs"),
            pl.lit(True).alias("embedded"), pl.lit(None, pl.Utf8).alias("summary"),
        ).unique("node_id", keep="first"))
    return pl.concat(parts, how="vertical_relaxed")
