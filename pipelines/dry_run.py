"""`strata index --dry-run`: what a build would cost, without building.

The folder is parsed in memory (files unchanged since the last build are taken
from its parse cache, read only), and the LLM stages' requests are built and
looked up in the corpus's LLM cache (:mod:`stages.enrich.estimate`). Nothing is
written: no Dagster run (so nothing in the UI's run list and nothing for the
change sensor to count), no lock, no registration of the corpus, no file in the
index folder. The figures are estimates (about four characters a token); the
cost uses the prices the ``llm`` resource is configured with
(``STRATA_LLM_USD_PER_M_PROMPT`` / ``_COMPLETION``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from strata.core.console import EXIT_OK, EXIT_USAGE, say


def dry_run(spec, chunk_tokens: int | None = None, openie_imported: bool = False,
            as_json: bool = False) -> int:
    from strata.pipelines.definitions import resolved_resources
    from strata.resources.llm import usd_prices
    from strata.stages.discover import discover
    from strata.stages.enrich.estimate import (estimate_captions, estimate_openie,
                                        estimate_summaries, price)
    from strata.stages.nodes import build_nodes, read_previous
    from strata.stages.parse.finalize import ParseSettings
    from strata.core.storage.layout import IndexLayout

    layout = IndexLayout(spec.out)
    try:
        resources = resolved_resources()  # the environment read now, as a run would
    except ValueError as e:  # a setting that cannot be used (a price that is not a number)
        say(f"error: {e}", err=True)
        return EXIT_USAGE
    llm_resource = resources["llm"]
    sources = discover(spec.root, spec.include, spec.exclude)
    previous = read_previous(layout.build) if layout.build.is_dir() else None
    parsed = build_nodes(spec.name, sources, ParseSettings() if chunk_tokens is None
                         else ParseSettings(chunk_tokens=chunk_tokens), previous)
    import polars as pl

    nodes = pl.from_arrow(parsed.nodes)
    cache = layout.cache / "llm.sqlite"
    with tempfile.TemporaryDirectory(prefix="strata-dry-run-") as scratch:
        # an index never built has no LLM cache: an empty one in a scratch folder,
        # so that even the cache's file is not created in the index folder
        cache_path = cache if cache.exists() else Path(scratch) / "llm.sqlite"
        llm = llm_resource.client(cache_path, overrides=spec.llm)
        vision = llm_resource.client(cache_path, vision=True, overrides=spec.llm)
        try:
            stages = [estimate_summaries(nodes, llm),
                      estimate_openie(nodes, llm, imported=openie_imported),
                      estimate_captions(nodes, vision, spec.root, layout.build_blobs)]
            name = llm.name
        finally:
            llm.close()
            vision.close()
    p_in, p_out = usd_prices(llm_resource)
    total_usd = price(stages, p_in, p_out)
    totals = {k: sum(getattr(s, k) for s in stages)
              for k in ("requests", "cached", "calls", "prompt_tokens", "completion_tokens")}
    report = {"corpus": spec.name, "llm": name, "dry_run": True,
              "files": len(sources), "files_parsed": len(parsed.parsed),
              "files_reused": len(parsed.reused), "nodes": nodes.height,
              "usd_per_million_prompt_tokens": p_in,
              "usd_per_million_completion_tokens": p_out,
              "stages": [s.to_dict() for s in stages], "total": {**totals, "usd": total_usd}}
    if as_json:
        say(json.dumps(report, indent=2))
        return EXIT_OK
    say(f"dry run for corpus '{spec.name}' with {name} (nothing built, nothing written):")
    say(f"  {len(sources)} files: {len(parsed.parsed)} to parse, {len(parsed.reused)} unchanged; "
        f"{nodes.height} nodes")
    header = f"  {'stage':10} {'requests':>8} {'cached':>7} {'calls':>6} {'prompt tok':>11} " \
             f"{'compl. tok':>11} {'USD':>10}"
    say(header)
    for s in stages + [_total_row(totals, total_usd)]:
        usd = "—" if s.usd is None else f"{s.usd:.4f}"
        say(f"  {s.stage:10} {s.requests:>8} {s.cached:>7} {s.calls:>6} {s.prompt_tokens:>11} "
            f"{s.completion_tokens:>11} {usd:>10}" + (f"  {s.note}" if s.note else ""))
    if total_usd is None:
        say("  (no prices configured: set STRATA_LLM_USD_PER_M_PROMPT and "
            "STRATA_LLM_USD_PER_M_COMPLETION, US dollars per million tokens)")
    bases = [s.completion_basis for s in stages if s.calls]
    if bases:
        say(f"  completion tokens per call: {'; '.join(bases)} (the stage's typical answer is "
            "assumed until the cache holds answers to its prompt template)")
    return EXIT_OK


def _total_row(totals: dict, usd: float | None):
    from strata.stages.enrich.estimate import StageEstimate

    return StageEstimate("total", usd=usd, **totals)
