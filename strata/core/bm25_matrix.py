"""The BM25 score matrix of a collection, computed from flat arrays.

bm25s builds its matrix from a Python list of token ids per document, one
Python loop step per document (a ``Counter``, a few small arrays). Over a large
collection that list of lists weighs about twice the tokens themselves and the
loop is most of a rebuild's lexical time. :class:`FlatBM25` is bm25s's own
model with its documented override point, ``build_index_from_ids``, given the
tokens of every document as one int32 array and the documents' lengths: the
(document, term, frequency) triples are counted a block of documents at a time
with ``np.unique``, and the scores use bm25s's own term-frequency and IDF
functions, in the same dtypes and the same order of operations. The saved
index, and so every query's scores, are therefore bm25s's (a test compares
every array with an index bm25s built itself); only the memory and the time
of making it differ.
"""

from __future__ import annotations

from dataclasses import dataclass

import bm25s
import numpy as np
from bm25s import scoring

BLOCK_DOCS = 8192  # documents whose (document, term) pairs are counted at once


@dataclass
class FlatTokens:
    """Every document's token ids end to end (``ids``, int32) and the documents'
    lengths (``lengths``, int64)."""

    ids: np.ndarray
    lengths: np.ndarray


@dataclass
class FlatCorpus:
    """What bm25s's ``index`` takes as an object with ``ids`` and ``vocab``:
    the tokens (:class:`FlatTokens`) and the vocabulary (token → id)."""

    ids: FlatTokens
    vocab: dict[str, int]


class FlatBM25(bm25s.BM25):
    """bm25s's BM25 whose index may be built from a :class:`FlatCorpus`."""

    def build_index_from_ids(self, unique_token_ids, corpus_token_ids, show_progress=True,
                             leave_progress=False):
        if not isinstance(corpus_token_ids, FlatTokens):
            return super().build_index_from_ids(unique_token_ids, corpus_token_ids,
                                                show_progress, leave_progress)
        if self.method in self.methods_requiring_nonoccurrence:
            raise ValueError(f"the flat build has no non-occurrence scores ({self.method})")
        self.nonoccurrence_array = None  # as bm25s sets it for a method without one
        return self._flat_scores(corpus_token_ids, len(unique_token_ids))

    def _flat_scores(self, tokens: FlatTokens, n_vocab: int) -> dict:
        lengths = tokens.lengths
        n_docs = len(lengths)
        avg_doc_len = lengths.mean()  # bm25s: the mean of an int64 array of the lengths
        starts = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        # (document, term, frequency) of each term of each document, document-major
        docs, terms, freqs = [], [], []
        for a in range(0, n_docs, BLOCK_DOCS):
            b = min(n_docs, a + BLOCK_DOCS)
            local = np.repeat(np.arange(b - a, dtype=np.int64), lengths[a:b])
            key, tf = np.unique(local * n_vocab + tokens.ids[starts[a]:starts[b]],
                                return_counts=True)
            docs.append((key // n_vocab + a).astype(np.int32))
            terms.append((key % n_vocab).astype(np.int32))
            freqs.append(tf.astype(self.dtype))
        doc_idx = np.concatenate(docs) if docs else np.zeros(0, np.int32)
        voc_idx = np.concatenate(terms) if terms else np.zeros(0, np.int32)
        del docs, terms
        # a term's document frequency is its column's length in the matrix: counted once
        doc_frequency = np.bincount(voc_idx, minlength=n_vocab)
        doc_frequencies = dict(enumerate(doc_frequency.tolist()))
        idf = scoring._build_idf_array(doc_frequencies, n_docs,
                                       scoring._select_idf_scorer(self.idf_method), self.dtype)
        tfc_of = scoring._select_tfc_scorer(self.method)
        scores = np.empty(len(doc_idx), dtype=self.dtype)
        at = 0
        for tf in freqs:  # block by block, as bm25s scores document by document
            end = at + len(tf)
            d, v = doc_idx[at:end], voc_idx[at:end]
            tfc = tfc_of(tf_array=tf, l_d=lengths[d], l_avg=avg_doc_len, k1=self.k1, b=self.b,
                         delta=self.delta)
            scores[at:end] = idf[v] * tfc
            at = end
        del freqs
        # column-major: a stable sort by term keeps each column's documents ascending
        order = np.argsort(voc_idx, kind="stable")
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(doc_frequency, out=indptr[1:])
        return {"data": scores[order], "indices": doc_idx[order], "indptr": indptr,
                "num_docs": n_docs}
