"""Lexical (BM25) tokens for prose and code, shared by the build and the query.

Why our own tokenizer: a question says "read chunked" and the code says
``_read_chunked``, ``readChunked`` or ``http.client.HTTPResponse``; a plain
word tokenizer sees one unknown token in each. Every identifier is therefore
indexed twice, whole and split, the way people type it:

* ``snake_case`` → ``snake_case``, ``snake``, ``case``
* ``camelCase`` / ``HTTPResponse`` → ``camelcase``, ``camel``, ``case`` /
  ``httpresponse``, ``http``, ``response``
* dotted paths ``json.decoder.scanstring`` → the whole path, each part, and
  each part's own splits

Split parts and prose words are lower-cased and stemmed (Snowball English,
via PyStemmer when installed: "encoding" and "encoded" meet); whole
identifiers are kept as written (lower-cased), so an exact name still
outscores its pieces. English stop words are dropped from prose and parts,
never from whole identifiers. The same function tokenizes documents and
queries, so both sides always agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

# Words, identifiers (with _ and digits) and dotted paths of them; numbers on their own.
_TOKEN = re.compile(r"[@$#]?(?:[^\W\d_][\w]*(?:\.[^\W\d_][\w]*)*|_+[\w]+)|\d+(?:\.\d+)?")
_SIGILS = "@$#"
# Operators people type when asking about code ("what does ?. do", Kotlin's !!, ArkTS's $$);
# prose punctuation and Markdown markup (**, ||, --, ##) are deliberately absent.
_OPERATORS = re.compile(r"!!|\$\$|\?\?|\?\.|::|->|=>|:=|<=>|===|!==|\.\.\.")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

# The one English stop-word list: BM25 terms, the entity walk's one-word spans and the
# offline answer's content words all leave out these.
STOPWORDS = frozenset("""
a an and are as at be but by for if in into is it no not of on or such that the their then
there these they this to was will with what which who whom how when where why do does did
can could should would i you we he she my your our its me us them than so also just about
from have has had been being were am any all some each other more most very own same too
only once here both few further between through during before after above below up down
out off over under again s t don
""".split())


# Entries each of the word and identifier memos keeps (least recently used go first).
# They fill with the corpus's vocabulary, so a large bound lets a build's memory grow
# with the corpus; a few thousand entries hold the words that recur (on real code,
# tokenizing took as long as with eight times the room).
TOKEN_MEMO = 8192


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer  # PyStemmer: Snowball in C

    return Stemmer.Stemmer("english").stemWord


@lru_cache(maxsize=TOKEN_MEMO)
def _word(w: str) -> str | None:
    """A prose word or identifier part: lower-cased, stop words dropped, stemmed."""
    w = w.lower()
    if len(w) < 2 and not w.isdigit() or w in STOPWORDS:
        return None
    return _stemmer()(w)


@lru_cache(maxsize=TOKEN_MEMO)
def _identifier(tok: str) -> tuple[str, ...]:
    """Tokens of one identifier or dotted path (see the module docstring)."""
    parts = [p.strip("_") for p in tok.split(".") if p.strip("_")]
    out: list[str] = []
    if len(parts) > 1:
        out.append(".".join(parts).lower())
    for part in parts:
        pieces = [x for s in part.split("_") if s for x in _CAMEL.findall(s)]
        if len(pieces) > 1:
            out.append(part.lower())
        for piece in pieces or [part]:
            if piece.isdigit() and len(pieces) > 1:
                continue  # "V2", "utf8": the whole name says it; a bare "2" matches everywhere
            w = _word(piece)
            if w:
                out.append(w)
    return tuple(out)


def forget_token_memos() -> None:
    """Empty the word and identifier memos of :func:`tokenize`.

    Why: they fill with the corpus's own vocabulary, more of it the larger the
    corpus (up to their bound), and the steps after a lexical build in the same
    process never look it up again; a query process keeps its memos."""
    _word.cache_clear()
    _identifier.cache_clear()


def tokenize(text: str | None) -> list[str]:
    """BM25 tokens of ``text`` (documents and queries alike)."""
    if not text:
        return []
    out: list[str] = _OPERATORS.findall(text)
    for tok in _TOKEN.findall(text):
        if tok[0] in _SIGILS:  # @decorator, $variable, #directive: whole, then as usual
            out.append(tok.lower())
            tok = tok[1:]
        if tok[0].isdigit():
            out.append(tok)
        elif "_" in tok or "." in tok or not (tok.isalpha() and (tok.islower() or tok.istitle()
                                                                  or tok.isupper())):
            out.extend(_identifier(tok))
        else:
            w = _word(tok)
            if w:
                out.append(w)
    return out


# --------------------------------------------------------------------------- the index

FORMAT = "strata-lexical/1"  # bump when tokenize() changes: the build re-indexes
DOCS_FILE = "docs.parquet"  # node_id and kind per BM25 document, in index order
META_FILE = "lexical.json"
# what bm25s's save writes for a collection with a vocabulary (read by :meth:`LexicalIndex.check`)
BM25_JSON = ("params.index.json", "vocab.index.json")
BM25_ARRAYS = ("data", "indices", "indptr")  # each in <name>.csc.index.npy
NONOCCURRENCE_FILE = "nonoccurrence_array.index.npy"  # bm25s's, for BM25L and BM25+ only


def token_ids(tokens: Iterable[list[str]]):
    """Each document's tokens as vocabulary ids, end to end in one int32 array
    (a :class:`~strata.core.lexical.bm25_matrix.FlatCorpus`; None when no document has a
    token, as when every word is a stop word): :func:`joined_token_ids` of the
    documents' tokens joined by spaces."""
    return joined_token_ids(" ".join(doc) for doc in tokens)


TOKEN_BATCH = 4096  # documents numbered per pass of joined_token_ids


def joined_token_ids(docs: Iterable[str]):
    """:func:`token_ids` of documents given as their tokens joined by single
    spaces, as the token cache keeps them (a token is never empty and never holds
    whitespace, so the joined form is the tokens).

    The whole corpus is held as four bytes a token, never a Python list per
    text. The vocabulary is numbered in order of first use: given the tokens,
    bm25s numbers a set of them, whose order (and so the saved index's bytes)
    changes with each process's string hashing. Scores do not depend on it.

    Numbered ``TOKEN_BATCH`` documents at a time in Arrow: a batch's tokens are
    split and dictionary-encoded there (its distinct tokens, in order of first
    appearance), and only the distinct ones meet the vocabulary, a Python dict.
    Tokens new to the vocabulary get the next ids in the order they first appear
    in the batch, which is the order they first appear in the corpus: the ids are
    those a dict lookup per token gives, at the cost of one per distinct token of
    a batch."""
    from array import array
    from itertools import islice

    import numpy as np

    from strata.core.lexical.bm25_matrix import FlatCorpus, FlatTokens

    vocab: dict[str, int] = {}
    ids, lengths = array("i"), array("q")
    docs = iter(docs)
    while batch := list(islice(docs, TOKEN_BATCH)):
        numbered, counts = _number_batch(batch, vocab)
        ids.frombytes(numbered.tobytes())
        lengths.frombytes(counts.tobytes())
    if not vocab:
        return None
    # ``ids`` lives on in the array alone, which the score matrix gives up once counted
    return FlatCorpus(FlatTokens(np.frombuffer(ids, dtype=np.int32),
                                 np.frombuffer(lengths, np.int64)), vocab)


def _number_batch(batch: list[str], vocab: dict[str, int]):
    """(the vocabulary ids of the tokens of ``batch``, end to end, as int32; each
    document's token count, as int64), adding its new tokens to ``vocab``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = pa.array(batch, pa.large_string())
    empty = pc.equal(texts, "").to_numpy(zero_copy_only=False)
    lists = pc.split_pattern(texts, " ")
    # "" splits into one empty token: a document without tokens
    counts = pc.list_value_length(lists).to_numpy().astype(np.int64) - empty
    flat = pc.list_flatten(lists)
    if empty.any():
        flat = flat.filter(pc.not_equal(flat, ""))
    if not len(flat):
        return np.zeros(0, np.int32), counts
    encoded = pc.dictionary_encode(flat)
    distinct = encoded.dictionary.to_pylist()
    numbers = np.fromiter((vocab.setdefault(t, len(vocab)) for t in distinct), np.int32,
                          len(distinct))
    return numbers[encoded.indices.to_numpy()], counts


class LexicalIndex:
    """One BM25 index over every text unit of an index version, whatever its kind.

    One index, not one per kind: BM25's IDF and length normalisation are then
    computed over one collection, so a code block's score and a section's score
    are comparable and can be ranked together (merging per-kind indexes by raw
    score is not: a term rare among tables but common among chunks scores
    differently in each). A kind filter is a mask over the one score array.

    Storage: the sparse matrix of `bm25s <https://github.com/xhluca/bm25s>`_
    (its own save format, memory-mapped on load) plus ``docs.parquet``. Scoring
    a query is one sparse column gather, an order of magnitude cheaper than a
    LanceDB full-text query over the same rows (``make bench`` has the figures),
    which matters for the default mode's latency and for the HTTP service under load.
    """

    def __init__(self, model, node_ids, kinds):
        """``node_ids`` and ``kinds``: lists, or Arrow columns turned into lists
        when first needed (a query that only asks for term statistics, the
        relevance of a flat search, does not build a million strings)."""
        self._bm25 = model
        self._node_ids, self._kinds = node_ids, kinds
        self._vocab = model.vocab_dict if model is not None else {}

    @property
    def node_ids(self) -> list[str]:
        if not isinstance(self._node_ids, list):
            self._node_ids = self._node_ids.to_pylist()
        return self._node_ids

    @property
    def kinds(self):
        import numpy as np

        if not isinstance(self._kinds, np.ndarray):
            kinds = self._kinds if isinstance(self._kinds, list) else self._kinds.to_pylist()
            self._kinds = np.asarray(kinds, dtype=object)
        return self._kinds

    def __len__(self) -> int:
        return len(self._node_ids)

    @classmethod
    def build(cls, node_ids: list[str], kinds: list[str], texts: Iterable[str]) -> LexicalIndex:
        """The index of ``texts``, tokenized as they are iterated."""
        return cls.from_tokens(node_ids, kinds, (tokenize(text) for text in texts))

    @classmethod
    def from_tokens(cls, node_ids: list[str], kinds: list[str],
                    tokens: Iterable[list[str]]) -> LexicalIndex:
        """The index of documents given as their :func:`tokenize` tokens (a build
        that kept the tokens of unchanged texts need not make them again)."""
        return cls.from_token_ids(list(node_ids), list(kinds), token_ids(tokens))

    @classmethod
    def from_token_ids(cls, node_ids, kinds, corpus) -> LexicalIndex:
        """The index of documents whose tokens :func:`token_ids` numbered:
        a build counts every collection's tokens, lets the texts go, then
        indexes (``node_ids`` and ``kinds`` as :meth:`__init__` takes them)."""
        model = None
        if corpus is not None:
            from strata.core.lexical.bm25_matrix import FlatBM25

            model = FlatBM25()
            model.index(corpus, show_progress=False)
        return cls(model, node_ids, kinds)

    def save(self, folder) -> None:
        """Write into ``folder`` (created; the caller makes the swap atomic)."""
        import json
        from pathlib import Path

        import polars as pl

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self._bm25 is not None:
            self._bm25.save(str(folder), show_progress=False)
        pl.DataFrame({"node_id": self.node_ids, "kind": list(self.kinds)},
                     schema={"node_id": pl.Utf8, "kind": pl.Utf8}).write_parquet(folder / DOCS_FILE)
        (folder / META_FILE).write_text(json.dumps({"format": FORMAT, "docs": len(self.node_ids),
                                                    "vocabulary": self._bm25 is not None}))

    @classmethod
    def check(cls, folder) -> None:
        """Raise where :meth:`load` could not read the collection at ``folder``:
        the files it reads, read as data (JSON parsed, the Parquet footer, the
        arrays' headers and lengths against each other), without importing
        bm25s and scipy, which a rebuild with nothing to re-index would import
        for this check alone. A false alarm only costs a re-index."""
        import json
        from pathlib import Path

        import numpy as np
        import pyarrow.parquet as pq

        folder = Path(folder)
        meta = json.loads((folder / META_FILE).read_text())
        if meta.get("format") != FORMAT:
            raise ValueError(f"{folder} holds lexical index format {meta.get('format')!r}")
        rows = pq.read_metadata(folder / DOCS_FILE).num_rows
        if rows != meta.get("docs"):
            raise ValueError(f"{folder}: {rows} documents where {meta.get('docs')} were written")
        if not rows or not meta.get("vocabulary", True):
            return
        for name in BM25_JSON:
            json.loads((folder / name).read_text())
        data, indices, indptr = (np.load(folder / f"{name}.csc.index.npy", mmap_mode="r",
                                         allow_pickle=False) for name in BM25_ARRAYS)
        if len(data) != len(indices) or not len(indptr) or int(indptr[-1]) != len(data):
            raise ValueError(f"{folder}: the score matrix's arrays do not fit together")

    @classmethod
    def load(cls, folder) -> LexicalIndex:
        """The collection saved in ``folder``, its score matrix memory-mapped
        (:class:`SavedScores`: a query imports neither bm25s nor scipy)."""
        import json
        from pathlib import Path

        import pyarrow.parquet as pq

        folder = Path(folder)
        meta = json.loads((folder / META_FILE).read_text())
        if meta.get("format") != FORMAT:
            raise ValueError(f"{folder} holds lexical index format {meta.get('format')!r}; this "
                             f"Strata reads {FORMAT!r}. Rebuild the index with `strata index`.")
        docs = pq.ParquetFile(folder / DOCS_FILE).read(columns=["node_id", "kind"])  # no dataset API: it imports pandas
        model = SavedScores(folder) if docs.num_rows and meta.get("vocabulary", True) else None
        return cls(model, docs.column("node_id"), docs.column("kind"))

    def query_tokens(self, query: str) -> list[str]:
        """The query's tokens that occur in the collection (others score 0); a
        repeated term counts again, as in BM25 over the query's own term frequencies."""
        return [t for t in tokenize(query) if t in self._vocab]

    def term_documents(self, term: str):
        """Which documents hold ``term`` (a token as :func:`tokenize` makes it):
        a boolean array aligned with ``node_ids``, or None when no document
        does."""
        if term not in self._vocab:
            return None
        return self._bm25.get_scores([term]) > 0

    def scores(self, query: str):
        """BM25 score of every document (aligned with ``node_ids``; 0: no term matched)."""
        import numpy as np

        toks = self.query_tokens(query)
        if not toks:
            return np.zeros(len(self), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(toks), dtype=np.float32)

    def search(self, query: str, k: int, kinds=None) -> list[tuple[str, float]]:
        """(node_id, BM25 score) of the ``k`` best documents of ``kinds`` (all
        kinds when None) that match at least one query term."""
        import numpy as np

        if k <= 0 or not self.node_ids:
            return []
        s = self.scores(query)
        mask = s > 0
        if kinds is not None:
            mask &= np.isin(self.kinds, list(kinds))
        rows = np.nonzero(mask)[0]
        if not rows.size:
            return []
        top = rows[np.argsort(-s[rows], kind="stable")[:k]]
        return [(self.node_ids[i], float(s[i])) for i in top]


class SavedScores:
    """The score matrix bm25s saved (``save``: its parameters, vocabulary and the
    CSC arrays of every term's precomputed document scores), read with numpy.

    A query's scores are the sum of its terms' columns, which bm25s computes with
    numpy alone; importing bm25s to do it imports scipy too (bm25s imports
    ``scipy.sparse``, which loads most of numpy's submodules), a third of a cold
    query's time. The sum is bm25s's own (``get_scores``: ``np.add.at`` per term,
    in the saved dtype, then the non-occurrence scores of the methods that keep
    them), so the scores are the same to the bit."""

    def __init__(self, folder):
        import json
        from pathlib import Path

        import numpy as np

        folder = Path(folder)
        params = json.loads((folder / BM25_JSON[0]).read_text())
        self.vocab_dict: dict[str, int] = json.loads((folder / BM25_JSON[1])
                                                     .read_text(encoding="utf-8"))
        self.dtype = np.dtype(params.get("dtype", "float32"))
        self.num_docs = int(params["num_docs"])
        self.data, self.indices, self.indptr = (
            np.load(folder / f"{name}.csc.index.npy", mmap_mode="r", allow_pickle=False)
            for name in BM25_ARRAYS)
        extra = folder / NONOCCURRENCE_FILE
        self.nonoccurrence = np.load(extra, allow_pickle=False) if extra.exists() else None

    def get_scores(self, tokens: list[str]):
        """Every document's score for ``tokens`` (terms outside the vocabulary score 0)."""
        import numpy as np

        ids = [self.vocab_dict[t] for t in tokens if t in self.vocab_dict]
        scores = np.zeros(self.num_docs, dtype=self.dtype)
        for t in ids:
            a, b = int(self.indptr[t]), int(self.indptr[t + 1])
            np.add.at(scores, self.indices[a:b], self.data[a:b])
        if self.nonoccurrence is not None and ids:
            scores += self.nonoccurrence[ids].sum()
        return scores

