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


def run_mode(index, query: str, mode: str = DEFAULT_MODE, k: int = 10, **params) -> SearchResults:
    if mode not in MODES:
        raise UnknownMode(f"unknown mode {mode!r}; choose one of {', '.join(sorted(MODES))}")
    if not query or not query.strip():
        raise ValueError("empty query")
    module, fn = MODES[mode]
    trace = Trace(mode=mode)
    results = getattr(importlib.import_module(module), fn)(index, query, k=k, trace=trace, **params)
    trace.counts["results"] = len(results)
    return SearchResults(results, trace=trace, query=query)
