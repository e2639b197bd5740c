"""A result's ``relevance``: an estimate of the probability that it is relevant.

The ranking ``score`` of each mode orders one query's candidates; it says
nothing across queries (``auto`` standardises its signals within the
candidates, so its best hit scores near 1 whatever was asked). ``relevance``
answers the other question — is this hit any good at all? — so that a person,
an agent or a ``similarity_cutoff`` can cut the list off, and so that a query
the corpus cannot answer can say "nothing relevant".

It is a logistic model over signals any mode's result has, computed here
after the mode ran (one place for every mode and entry point):

* ``cosine`` — the query's cosine to the result's own vector;
* ``margin`` — that cosine above the query's background, in standard
  deviations of the query's cosine over a fixed sample of the index's units
  (how far the hit stands out of everything else the index holds);
* ``coverage`` — the share of the query's terms, weighted by their IDF in the
  index, that occur in the result's text, title or breadcrumb (a term the
  corpus never uses, "kubernetes" in a firmware manual, weighs most and is
  covered by nothing);
* ``gap`` — how far below the best result of the same list it lies, in the
  same standard deviations (with ``margin`` it carries how well the query's
  best match stands out: a query the corpus covers lifts its whole list).

Relevant means on the question's topic: the unit that answers, what holds
it, or the rest of its page (the dev sets label the best section, not the
only useful one). The weights are fitted on the labelled dev sets, whose
questions also serve as each other's out-of-corpus questions, by ``python -m
benchmarks.calibration``, which writes ``calibration.json`` next to this file
and reports the fit (reliability curve, Brier score, AUROC of the top
result's relevance between in-corpus and out-of-corpus questions). An index
whose embedding model has no fitted entry is scored by the ``generic`` entry,
which leaves the raw cosine out (its scale belongs to one model).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from strata.core.lexical.bm25 import tokenize
from strata.core.query_arrays import background_sample

FEATURES = ("cosine", "margin", "coverage", "gap")
CALIBRATION_FILE = Path(__file__).with_name("calibration.json")


@dataclass(frozen=True)
class Calibration:
    """A fitted logistic model: ``sigmoid(bias + Σ weight · feature)``."""

    name: str
    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float

    def probability(self, x: np.ndarray) -> np.ndarray:
        """Relevance of each row of ``x`` (columns in :data:`FEATURES` order)."""
        cols = [FEATURES.index(f) for f in self.features]
        z = self.bias + np.asarray(x, dtype=np.float64)[:, cols] @ np.asarray(self.weights)
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))


@lru_cache(maxsize=8)
def _entries(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def calibration_for(model: str, path: Path = CALIBRATION_FILE) -> Calibration:
    """The fitted entry for embedding ``model``, else the ``generic`` one, else
    an unfitted stand-in over margin and coverage (a checkout before the first
    ``benchmarks.calibration`` run)."""
    data = _entries(str(path))
    name = model if model in data.get("models", {}) else "generic"
    entry = data.get("models", {}).get(model) or data.get("generic")
    if not entry:
        return Calibration("unfitted", ("margin", "coverage"), (1.0, 4.0), -6.0)
    return Calibration(name, tuple(entry["features"]), tuple(float(w) for w in entry["weights"]),
                       float(entry["bias"]))


class Background:
    """The query's cosine to an even sample of the index's embedded units:
    its mean and spread are the yardstick of ``margin`` and ``gap``.

    The sample is the version's ``background.npy``, written at publish; a
    version published before it (or arrays computed from the tables) samples
    the same rows from the vectors (:func:`strata.core.query_arrays.background_sample`)."""

    def __init__(self, index):
        unit, own, kind = index._unit_vectors
        stored = index._arrays.background
        self.sample = stored if stored is not None else background_sample(unit, own, kind)

    def stats(self, q: np.ndarray) -> tuple[float, float]:
        if not len(self.sample):
            return 0.0, 1.0
        c = self.sample @ q
        return float(c.mean()), max(float(c.std()), 1e-3)


def _idf(index, terms: list[str]) -> dict[str, float]:
    """IDF of each query term in the index's unit collection: a term the corpus
    never uses weighs most (nothing can cover it). An index published without
    a lexical collection weighs every term alike."""
    from strata.core.config.schema import LEXICAL_DIR, LEXICAL_UNITS

    if not (index._vdir / LEXICAL_DIR / LEXICAL_UNITS).is_dir():
        return dict.fromkeys(terms, 1.0)
    lex = index._lexical[LEXICAL_UNITS]
    n = max(len(lex), 1)
    out = {}
    for t in terms:
        present = lex.term_documents(t)
        df = int(present.sum()) if present is not None else 0
        out[t] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    return out


def coverage(weights: dict[str, float], have: set[str]) -> float:
    """Share of the query terms' ``weights`` whose term is in ``have`` (a
    text's tokens, as BM25 tokenizes documents)."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(w for t, w in weights.items() if t in have) / total


TOKEN_SETS = 8192  # results whose tokens an index keeps (a service meets the same hits again)


def _tokens(index, r) -> frozenset[str]:
    key = (r.node_id, len(r.text or ""))
    cache = index._token_sets
    have = cache.get(key)
    if have is None:
        have = frozenset(tokenize(f"{r.text or ''} {r.title or ''} {r.breadcrumb or ''}"))
        if len(cache) >= TOKEN_SETS:
            cache.clear()
        cache[key] = have
    return have


def _coverage(index, query: str, results) -> np.ndarray:
    """IDF-weighted share of the query's terms that each result's text, title
    or breadcrumb holds. The result's own text is tokenized (a few results, not
    the collection): looking its document up in the BM25 index would make a
    flat search on a large index build the map of every node id."""
    idf = _idf(index, list(dict.fromkeys(tokenize(query))))
    return np.array([coverage(idf, _tokens(index, r)) for r in results])


def _cosines(index, q: np.ndarray, results, fallback: float) -> np.ndarray:
    """The query's cosine to each result's own vector (a node without one, or
    a fact: its fact vector; none at all: ``fallback``, the background mean).

    The results' rows are read with positioned reads (:meth:`AnnIndex.rows`),
    not through the map: a page fault on the mapped vector file maps a whole
    large folio, so the few rows of each query's results would leave more and
    more of a large file resident."""
    from strata.core.ann import AnnIndex

    unit, own, _ = index._unit_vectors
    out = np.full(len(results), fallback, dtype=np.float64)
    rows = [index._row_of.get(r.node_id) for r in results]
    mine = [i for i, row in enumerate(rows) if row is not None and own[row]]
    vecs = AnnIndex.rows(unit, np.array([rows[i] for i in mine], dtype=np.int64))
    for i, v in zip(mine, vecs):
        out[i] = float(np.asarray(v, dtype=np.float32) @ q)
    fact_row = None
    for i, (r, row) in enumerate(zip(results, rows)):
        if row is not None and own[row]:
            continue
        if row is None:
            if fact_row is None:  # the first fact among the results
                fact_ids, fact_vecs = index.fact_vectors()
                fact_row = {f: j for j, f in enumerate(fact_ids)}
            j = fact_row.get(r.node_id)
            if j is not None:
                out[i] = float(fact_vecs[j] @ q)
    return out


def features(index, query: str, results) -> np.ndarray:
    """One row of :data:`FEATURES` per result (``results`` in rank order)."""
    if not len(results):
        return np.zeros((0, len(FEATURES)))
    q = np.asarray(index.embed_query(query), dtype=np.float32)
    q = q / (float(np.linalg.norm(q)) or 1.0)
    mean, std = index.relevance_background.stats(q)
    cos = _cosines(index, q, results, mean)
    cover = _coverage(index, query, results)
    margin = (cos - mean) / std
    gap = (cos.max() - cos) / std
    return np.column_stack([cos, margin, cover, gap])


def annotate(index, query: str, results) -> Calibration:
    """Set ``relevance`` on every result; returns the calibration used."""
    cal = calibration_for(str(index.manifest.get("embedding", {}).get("model", "")))
    if len(results):
        p = cal.probability(features(index, query, results))
        for r, v in zip(results, p.tolist()):
            r.relevance = round(float(v), 4)
    return cal
