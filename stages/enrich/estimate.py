"""What a build would ask the LLM, worked out before it runs (`strata index
--dry-run`): per stage the requests, how many the cache answers, and the prompt
and completion tokens and dollars of the rest.

The requests are the very ones the stages build (same functions, same cache
keys), from a parse done in memory. Where a request depends on an earlier
answer (a file's summary is asked from its parts' summaries) the cached answer
is used when there is one, else a placeholder of typical length. Completion
tokens: the mean of the cache's answers to the same prompt template, else the
stage's typical answer (``TYPICAL_COMPLETION_TOKENS`` in its module). Images
count as ``IMAGE_TOKENS`` prompt tokens each (OpenAI's figure for a 512-pixel
tile at high detail; other endpoints count differently).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import polars as pl

IMAGE_TOKENS = 765


@dataclass
class StageEstimate:
    stage: str
    requests: int = 0
    cached: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    completion_basis: str = "none needed"
    usd: float | None = None
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _from(stage: str, est: dict, note: str = "") -> StageEstimate:
    return StageEstimate(stage=stage, requests=est["requests"], cached=est["cached"],
                         calls=est["calls_needed"], prompt_tokens=est["est_prompt_tokens"],
                         completion_tokens=est["est_completion_tokens"],
                         completion_basis=est["completion_basis"], note=note)


def estimate_summaries(nodes: pl.DataFrame, llm) -> StageEstimate:
    from strata.stages.enrich import summarize

    if llm.offline:
        return StageEstimate("summarize", note="offline: extractive summaries, no calls")
    requests = summarize.planned_requests(nodes)
    files = summarize.planned_file_requests(nodes, llm.cached_text)
    return _from("summarize", llm.estimate(
        requests + files, "summarize",
        typical_completion_tokens=summarize.TYPICAL_COMPLETION_TOKENS),
        note=f"{len(requests)} sections, code blocks and tables; {len(files)} files")


def estimate_openie(nodes: pl.DataFrame, llm, imported: bool = False) -> StageEstimate:
    from strata.stages.enrich import openie

    if imported:
        return StageEstimate("openie", note="imported from a file (--openie-import): no calls")
    if llm.offline:
        return StageEstimate("openie", note="offline: heuristic extraction, no calls")
    units = openie.openie_units(nodes).to_dicts()
    return _from("openie", llm.estimate(
        [openie.openie_request(u) for u in units], "openie",
        typical_completion_tokens=openie.TYPICAL_COMPLETION_TOKENS),
        note=f"{len(units)} passages")


def estimate_captions(nodes: pl.DataFrame, vision_llm, corpus_root, blob_dir) -> StageEstimate:
    """One request per near-duplicate group's representative whose image can be
    read (the dedup stage's defaults group them)."""
    from strata.stages.enrich import captions
    from strata.stages.enrich.images import OK, dedup_images, image_records, read_image_bytes

    records = image_records(nodes, corpus_root, blob_dir)
    if not records:
        return StageEstimate("caption", note="no images")
    if vision_llm.offline:
        return StageEstimate("caption", note="no vision model: captions from alt text and "
                                             "context, no calls")
    groups = dedup_images(records).to_pylist()
    representatives = {g["node_id"] for g in groups if g["is_representative"]}
    requests = []
    for r in records:
        if r.status == OK and r.node_id in representatives:
            data = read_image_bytes(r)
            if data is not None:
                requests.append(captions.caption_request(r, data))
    return _from("caption", vision_llm.estimate(
        requests, "caption", typical_completion_tokens=captions.TYPICAL_COMPLETION_TOKENS,
        image_tokens=IMAGE_TOKENS),
        note=f"{len(records)} images, {len(requests)} to caption after near-duplicates merge")


def price(stages: list[StageEstimate], usd_prompt: float | None,
          usd_completion: float | None) -> float | None:
    """Dollars per stage (in place) and in all, from per-million-token prices;
    None when no price is configured."""
    if usd_prompt is None and usd_completion is None:
        return None
    total = 0.0
    for s in stages:
        s.usd = round((s.prompt_tokens * (usd_prompt or 0.0)
                       + s.completion_tokens * (usd_completion or 0.0)) / 1e6, 6)
        total += s.usd
    return round(total, 6)
