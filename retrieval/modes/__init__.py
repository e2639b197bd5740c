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
    search = getattr(importlib.import_module(module), fn)
    found = list(search(index, query, k=k, trace=trace, **params))[:k]
    with trace.stage("relevance"):
        cal = annotate(index, query, found)
    kept = [r for r in found if r.relevance >= floor]
    below = [r for r in found if r.relevance < floor]
    if below and len(found) == k:
        # the floor applies before the cut: when it took places in the first k, the
        # mode looks deeper and the list is the deeper run's candidates above the
        # floor, in its order, so a small k never says "nothing relevant" while a
        # larger one finds something
        first = trace
        trace = Trace(mode=mode)
        found = list(search(index, query, k=max(FILL_DEPTH * k, FILL_MIN), trace=trace,
                            **params))
        with trace.stage("relevance"):
            annotate(index, query, found)
        shown = {r.node_id for r in kept}
        kept = [r for r in found if r.relevance >= floor][:k]
        end = found.index(kept[-1]) + 1 if kept else k
        below = [r for r in found[:max(end, k)] if r.relevance < floor]
        trace.timings_ms = {f"first_pass_{name}": ms for name, ms in first.timings_ms.items()} \
            | trace.timings_ms
        trace.counts["filled"] = sum(r.node_id not in shown for r in kept)
    below.sort(key=lambda r: -r.relevance)
    trace.counts.update(results=len(kept), below_floor=len(below))
    if "budget_tokens" in trace.counts:  # what the budgeted context costs, as returned
        from strata.core.tokens import estimate_tokens

        trace.counts["tokens_used"] = sum(estimate_tokens(r.text) for r in kept)
    trace.notes.append(f"relevance: {cal.name} calibration, floor {floor:g}")
    return SearchResults(kept, trace=trace, query=query, min_relevance=floor, below=below)


#: how deep a search looks for results above the floor when some of its first
#: ``k`` fell under it: ``FILL_DEPTH`` times ``k``, and at least ``FILL_MIN``
FILL_DEPTH, FILL_MIN = 4, 20
