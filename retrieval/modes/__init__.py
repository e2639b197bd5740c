"""Retrieval modes. Each module exposes ``search(index, query, k, trace, **params)``
returning a list of :class:`retrieval.results.Result`; ``run_mode`` adds the
trace and the common plumbing."""

from __future__ import annotations

import importlib

from strata.retrieval.results import SearchResults, Trace

DEFAULT_MODE = "auto"  # what every entry point uses when no mode is named

MODES = {
    "auto": ("strata.retrieval.modes.auto", "search"),
    "flat": ("strata.retrieval.modes.flat", "dense"),
    "dense": ("strata.retrieval.modes.flat", "dense"),
    "keyword": ("strata.retrieval.modes.flat", "keyword"),
    "hybrid": ("strata.retrieval.modes.flat", "hybrid"),
    "hierarchical": ("strata.retrieval.modes.hierarchical", "search"),
    "diffusion": ("strata.retrieval.modes.diffusion", "search"),
    "routed": ("strata.retrieval.modes.routed", "search"),
}


class UnknownMode(ValueError):
    pass


def default_min_relevance() -> float:
    """The relevance floor a search uses unless told (``STRATA_MIN_RELEVANCE``)."""
    from strata.core.config.settings import QuerySettings, value_or_default

    return value_or_default(QuerySettings, "min_relevance")


def run_mode(index, query: str, mode: str = DEFAULT_MODE, k: int = 10,
             min_relevance: float | None = None, **params) -> SearchResults:
    """Run ``mode``, then what every mode shares: ``k`` as a hard cap (a mode's
    quotas, connections or token budget never add past it), each result's
    ``relevance`` (:mod:`retrieval.relevance`), and the floor: results below
    ``min_relevance`` leave the list for ``SearchResults.below``."""
    from strata.retrieval.relevance import annotate

    if mode not in MODES:
        raise UnknownMode(f"unknown mode {mode!r}; choose one of {', '.join(sorted(MODES))}")
    if not query or not query.strip():
        raise ValueError("empty query")
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    floor = default_min_relevance() if min_relevance is None else float(min_relevance)
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"min_relevance must be within [0, 1], got {min_relevance!r}")
    module, fn = MODES[mode]
    trace = Trace(mode=mode)
    found = getattr(importlib.import_module(module), fn)(index, query, k=k, trace=trace, **params)
    found = list(found)[:k]
    with trace.stage("relevance"):
        cal = annotate(index, query, found)
    kept = [r for r in found if r.relevance >= floor]
    below = sorted((r for r in found if r.relevance < floor), key=lambda r: -r.relevance)
    trace.counts.update(results=len(kept), below_floor=len(below))
    if "budget_tokens" in trace.counts:  # what the budgeted context costs, as returned
        from strata.core.tokens import estimate_tokens

        trace.counts["tokens_used"] = sum(estimate_tokens(r.text) for r in kept)
    trace.notes.append(f"relevance: {cal.name} calibration, floor {floor:g}")
    return SearchResults(kept, trace=trace, query=query, min_relevance=floor, below=below)
