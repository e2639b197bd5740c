"""The BM25 score matrix of a collection, computed from flat arrays.

bm25s builds its matrix from a Python list of token ids per document, one
Python loop step per document (a ``Counter``, a few small arrays). Over a large
collection that list of lists weighs about twice the tokens themselves and the
loop is most of a rebuild's lexical time. :class:`FlatBM25` is bm25s's own
model with its documented override point, ``build_index_from_ids``, given the
tokens of every document as one int32 array and the documents' lengths: the
(document, term, frequency) triples are counted a block of documents at a time
with ``np.unique``, the scores use bm25s's own term-frequency and IDF functions,
in the same dtypes and the same order of operations, and scipy turns the
row-major matrix column-major (a counting pass, where a sort by term needed an
index of eight bytes per entry). The saved index, and so every query's scores,
are therefore bm25s's (a test compares every array with an index bm25s built
itself); only the memory and the time of making it differ.
"""

from __future__ import annotations

from dataclasses import dataclass

import bm25s
import numpy as np
from bm25s import scoring

BLOCK_DOCS = 8192  # documents whose (document, term) pairs are counted at once


@dataclass
class FlatTokens:
    """Every document's token ids end to end (``ids``, int32; None once the score
    matrix has counted them) and the documents' lengths (``lengths``, int64)."""

    ids: np.ndarray | None
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
        """The score matrix in two passes over blocks of documents: count each
        block's (document, term) pairs, keeping only their terms and frequencies
        (the document of a pair follows from how many terms each document has);
        then, with the IDF of every term known, score them into a row-major matrix
        that scipy turns column-major (rows stay ascending in each column, as the
        stable sort by term bm25s's own build does gives them). The token ids are
        released (``tokens.ids`` set to None) once counted: the scores never need
        them, and the caller passes them on, not keeps them."""
        from scipy.sparse import csr_matrix

        lengths = tokens.lengths
        n_docs = len(lengths)
        avg_doc_len = lengths.mean()  # bm25s: the mean of an int64 array of the lengths
        starts = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        terms, freqs = [], []  # each block's pairs, document-major
        per_doc = np.zeros(n_docs, dtype=np.int64)  # the distinct terms of each document
        doc_frequency = np.zeros(n_vocab, dtype=np.int64)
        for a in range(0, n_docs, BLOCK_DOCS):
            b = min(n_docs, a + BLOCK_DOCS)
            local = np.repeat(np.arange(b - a, dtype=np.int64), lengths[a:b])
            key, tf = np.unique(local * n_vocab + tokens.ids[starts[a]:starts[b]],
                                return_counts=True)
            del local
            per_doc[a:b] = np.bincount(key // n_vocab, minlength=b - a)
            term = (key % n_vocab).astype(np.int32)
            doc_frequency += np.bincount(term, minlength=n_vocab)
            terms.append(term)
            freqs.append(tf.astype(self.dtype))
        tokens.ids = None  # counted: from here on the pairs stand for the tokens
        doc_frequencies = dict(enumerate(doc_frequency.tolist()))
        idf = scoring._build_idf_array(doc_frequencies, n_docs,
                                       scoring._select_idf_scorer(self.idf_method), self.dtype)
        tfc_of = scoring._select_tfc_scorer(self.method)
        indptr = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(per_doc, out=indptr[1:])
        scores = np.empty(int(indptr[-1]), dtype=self.dtype)
        for i, a in enumerate(range(0, n_docs, BLOCK_DOCS)):  # as bm25s scores, doc by doc
            b = min(n_docs, a + BLOCK_DOCS)
            d = np.repeat(np.arange(a, b, dtype=np.int64), per_doc[a:b])
            tfc = tfc_of(tf_array=freqs[i], l_d=lengths[d], l_avg=avg_doc_len, k1=self.k1,
                         b=self.b, delta=self.delta)
            scores[indptr[a]:indptr[b]] = idf[terms[i]] * tfc
            freqs[i] = None
        del freqs
        vocab_idx = np.concatenate(terms) if terms else np.zeros(0, np.int32)
        del terms
        by_term = csr_matrix((scores, vocab_idx, indptr), shape=(n_docs, n_vocab)).tocsc()
        del scores, vocab_idx
        return {"data": by_term.data, "indices": by_term.indices.astype(np.int32, copy=False),
                "indptr": by_term.indptr.astype(np.int64, copy=False), "num_docs": n_docs}
