"""Strata as a retriever of the RAG frameworks people build on.

* :mod:`retrieval.integrations.langchain` — a LangChain ``BaseRetriever``
  returning ``Document`` objects (``pip install 'strata[langchain]'``);
* :mod:`retrieval.integrations.llamaindex` — a LlamaIndex ``BaseRetriever``
  returning ``NodeWithScore`` objects (``pip install 'strata[llamaindex]'``).

Both call :meth:`retrieval.Index.search` (any mode, the default one unless
told; at most ``k`` results, cut further by a token budget when given; a
relevance floor, ``min_relevance``, the index's default unless told) and carry
Strata's metadata on every item (:func:`metadata`), so a chain or a query
engine can cite path and lines, see where a passage sits and how likely it is
to be relevant. The frameworks are optional: importing this package imports
neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strata.retrieval.results import source_url


def open_index(index: Any):
    """An :class:`retrieval.Index` from an Index, a folder or an object-storage URI."""
    from strata.retrieval import Index

    if isinstance(index, Index):
        return index
    if isinstance(index, (str, Path)):
        return Index.open(index)
    raise TypeError(f"index must be a retrieval.Index or an index folder, not "
                    f"{type(index).__name__}")


def check(mode: str | None, k: int, budget_tokens: int | None,
          min_relevance: float | None = None) -> None:
    """Refuse settings a search would refuse, when the retriever is made rather
    than at its first query inside someone's chain."""
    from strata.retrieval.modes import DEFAULT_MODE, MODES, UnknownMode

    if mode is not None and mode not in MODES:
        raise UnknownMode(f"unknown mode {mode!r}; choose one of {', '.join(sorted(MODES))}")
    if int(k) < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    if budget_tokens is not None:
        if (mode or DEFAULT_MODE) != DEFAULT_MODE:
            raise ValueError(f"budget_tokens is a parameter of the {DEFAULT_MODE} mode, "
                             f"not of {mode!r}; leave mode unset or use k")
        if int(budget_tokens) < 1:
            raise ValueError(f"budget_tokens must be at least 1, not {budget_tokens}")
    if min_relevance is not None and not 0.0 <= float(min_relevance) <= 1.0:
        raise ValueError(f"min_relevance must be within [0, 1], not {min_relevance}")


def search(index, query: str, mode: str | None, k: int, budget_tokens: int | None,
           params: dict[str, Any] | None, min_relevance: float | None = None):
    """One search with the retriever's settings (the budget goes to the default
    mode; ``min_relevance`` None is the index's default floor)."""
    p = dict(params or {})
    if budget_tokens is not None:
        p["budget_tokens"] = int(budget_tokens)
    return index.search(query, mode=mode, k=k, min_relevance=min_relevance, **p)


def metadata(index, r) -> dict[str, Any]:
    """What a framework item carries besides its text: node_id, kind, path,
    start_line/end_line (or page), lines (``"60-119"``), location
    (``path:lines``), breadcrumb, title, language, relation (how the mode found
    it), via, score (the mode's ranking score: it orders one query's results
    only), relevance (the estimated probability that the item is relevant,
    comparable across queries: the value to threshold on), context (its parent,
    nearest siblings and first children, each ``{node_id, relation, kind,
    title, location}``), url (with a ``url_template``), and the index's corpus
    and version. Keys whose value is unknown are left out."""
    if r.start_line is not None:
        lines = str(r.start_line) if not r.end_line or r.end_line == r.start_line \
            else f"{r.start_line}-{r.end_line}"
    else:
        lines = None
    meta = {"node_id": r.node_id, "kind": r.kind, "path": r.path, "start_line": r.start_line,
            "end_line": r.end_line, "page": r.page, "lines": lines, "location": r.location(),
            "breadcrumb": r.breadcrumb, "title": r.title or None, "language": r.language,
            "relation": r.relation, "via": r.via, "score": float(r.score),
            "relevance": None if r.relevance is None else float(r.relevance),
            "context": r.context or None,
            "url": source_url(index.manifest.get("url_template"), r),
            "corpus": index.corpus, "version": index.version}
    return {k: v for k, v in meta.items() if v is not None}
