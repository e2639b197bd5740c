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
        # the floor applies before the cut: what fell under it makes room for the
        # next candidates above it, so a small k never says "nothing relevant"
        # while a larger one finds something
        with trace.stage("fill"):
            filled = _fill_under_floor(index, query, search, k, floor, kept, below, params,
                                       trace.counts.get("budget_tokens"))
        trace.counts["filled"] = len(filled) - len(kept)
        kept = filled
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


def _fill_under_floor(index, query, search, k, floor, kept, below, params,
                      budget: int | None) -> list:
    """``kept`` topped up to ``k`` from a deeper run of the same mode, in that
    run's order, with the candidates above ``floor`` not already kept.

    The first ``k`` are kept as the mode ranked them (a deeper run of a mode
    that walks or diffuses need not start with the same ``k``); only the places
    freed by the floor go to the deeper candidates. Their relevance is computed
    over the deeper list, the context they were found in. Under a token
    ``budget`` a candidate joins only where it fits what the kept ones left."""
    from strata.retrieval.relevance import annotate

    deeper = list(search(index, query, k=max(FILL_DEPTH * k, FILL_MIN), trace=Trace(mode="fill"),
                         **params))
    annotate(index, query, deeper)
    have = {r.node_id for r in kept} | {r.node_id for r in below}
    extra = [r for r in deeper if r.node_id not in have and r.relevance >= floor]
    if budget is None:
        return kept + extra[:k - len(kept)]
    from strata.core.tokens import estimate_tokens

    left = budget - sum(estimate_tokens(r.text) for r in kept)
    out = list(kept)
    for r in extra:
        if len(out) >= k:
            break
        cost = estimate_tokens(r.text)
        if cost <= left:
            out.append(r)
            left -= cost
    return out
