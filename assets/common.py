"""Small helpers every stage asset shares: where the corpus's index lives,
reading the previous build, logging progress and building metadata."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import dagster as dg
import polars as pl

from resources.corpora import CorpusRegistry
from stages.corpora import CorpusSpec
from strata.layout import IndexLayout, update_json
from strata.schema import TABLE_FILES
from strata.stats import markdown_table

BUILD_REPORT = "build_report.json"


def corpus_and_layout(context: dg.AssetExecutionContext,
                      corpora: CorpusRegistry) -> tuple[CorpusSpec, IndexLayout]:
    spec = corpora.get(context.partition_key)
    layout = IndexLayout(spec.out)
    layout.build.mkdir(parents=True, exist_ok=True)
    return spec, layout


def read_build_table(layout: IndexLayout, name: str, required: bool = True) -> pl.DataFrame | None:
    path = layout.build / TABLE_FILES[name]
    if not path.exists():
        if required:
            raise FileNotFoundError(
                f"{path} is missing: materialize the upstream assets for this corpus first")
        return None
    return pl.read_parquet(path)


def record_stage(layout: IndexLayout, stage: str, **values) -> dict:
    """Per-stage figures kept in build/build_report.json; publish copies them
    into the manifest (build time, reuse counts)."""
    return update_json(layout.build / BUILD_REPORT, **{stage: values})


def output_version(*paths: Path) -> dg.DataVersion:
    """The data version of a stage's output: a digest of the files it wrote.

    Dagster marks a downstream asset stale when an upstream data version moves,
    so a stage rerun (new code version, new prompt template) that produces the
    same rows leaves everything after it fresh; outputs are written in a stable
    row order, so equal content means equal bytes."""
    import hashlib

    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode())
        if path.exists():
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    return dg.DataVersion(h.hexdigest()[:24])


def progress_logger(context: dg.AssetExecutionContext, label: str,
                    every_s: float = 5.0) -> Callable[[int, int], None]:
    """Log 'label: i/n' at most every few seconds, plus the first and last step."""
    last = [0.0]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if done in (0, total) or now - last[0] >= every_s:
            last[0] = now
            pct = 100.0 * done / total if total else 100.0
            context.log.info(f"{label}: {done}/{total} ({pct:.0f}%)")
    return report


def md(rows, headers=("key", "count")) -> dg.MetadataValue:
    return dg.MetadataValue.md(markdown_table(rows, headers))


def path_metadata(path: Path) -> dg.MetadataValue:
    return dg.MetadataValue.path(str(path))


def write_failures(layout: IndexLayout, stage: str, rows: list[dict]) -> int:
    """Replace this stage's rows in build/failures.parquet; returns the count."""
    import pyarrow as pa

    from strata.layout import write_parquet_atomic
    from strata.schema import FAILURES

    path = layout.build_table("failures")
    old = pl.read_parquet(path).filter(pl.col("stage") != stage) if path.exists() else None
    new = pa.Table.from_pylist([{**r, "stage": stage} for r in rows], schema=FAILURES)
    if old is not None and old.height:
        new = pa.concat_tables([old.to_arrow().cast(FAILURES), new])
    write_parquet_atomic(new, path)
    return len(rows)


def llm_metadata(stats, failures: list[dict], offline: bool, resource=None) -> dict:
    """Calls, cache hits, tokens, cost and failures of one stage, for the UI.

    Cost is tokens × the resource's ``usd_per_million_*`` prices when they are set
    (a price list goes stale in code; the operator knows what their endpoint
    charges); cache hits cost nothing, which is the point of the cache."""
    asked = stats.calls + stats.cache_hits
    meta = {
        "llm_backend": "offline stand-in" if offline else
        f"{getattr(resource, 'backend', 'llm')}:{getattr(resource, 'model', '')}",
        "llm_calls": stats.calls,
        "llm_cache_hits": stats.cache_hits,
        "llm_cache_hit_rate": dg.MetadataValue.float(round(stats.cache_hits / asked, 4)
                                                     if asked else 0.0),
        "llm_retries": stats.retries,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "failures": len(failures),
    }
    p_in = getattr(resource, "usd_per_million_prompt_tokens", None)
    p_out = getattr(resource, "usd_per_million_completion_tokens", None)
    if offline:
        meta["llm_cost_usd"] = 0.0
    elif p_in is not None or p_out is not None:
        meta["llm_cost_usd"] = round((stats.prompt_tokens * (p_in or 0.0)
                                      + stats.completion_tokens * (p_out or 0.0)) / 1e6, 6)
    else:
        meta["llm_cost_usd"] = "unknown: set usd_per_million_prompt_tokens / _completion_tokens"
    if failures:
        meta["failed_items"] = md([{"node_id": f["node_id"], "error": f["error"][:160],
                                    "attempts": f["attempts"]} for f in failures])
    return meta
