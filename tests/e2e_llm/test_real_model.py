"""The sample corpus through a real model (SmolLM2-135M behind llama.cpp's
OpenAI-compatible server): what it gets wrong is repaired, rejected with a
reason or recorded, never a crashed step or a silent gap; the cache makes the
second build free; token counts are the server's; `ask` and the routed mode
answer through it. ``make e2e-llm`` runs this (see conftest.py)."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from benchmarks.llama_server import MODEL_NAME

pytestmark = pytest.mark.llm_e2e

QUESTION = "How do I correct pressure readings for barometric drift?"
ANSWER_FILE = "docs/calibration.md"
LLM_STAGES = ("summarize", "openie")
ALL_STAGES = ("summarize", "openie", "caption")


def _stage_reports(index) -> dict:
    return json.loads((index / "build" / "build_report.json").read_text())


def test_every_stage_completes(llm_run, first_build):
    assert first_build.rc == 0, first_build.stderr[-4000:]
    report = first_build.stage_report
    print(f"\n[e2e-llm] first build: {first_build.seconds}s; " + "; ".join(
        f"{s}: {report.get(s, {}).get('calls')} calls, {report.get(s, {}).get('failures')} "
        f"failed, {report.get(s, {}).get('retries')} retries" for s in ALL_STAGES))
    for stage in LLM_STAGES:  # (a step retried by Dagster answers from the cache)
        assert report[stage]["calls"] + report[stage]["cache_hits"] > 0, (stage, report[stage])
    assert len(first_build.chat()) > 0
    # every request got an answer; the errors are the captions: a text-only model's server
    # answers an image with a 500 (llama.cpp: "can only concatenate str (not list)"),
    # retried by the SDK, then recorded as the item's failure (offline caption used)
    chat = first_build.chat()
    assert chat and all(e.delivered for e in chat), [e.error for e in chat if not e.delivered]
    errors = [e for e in chat if e.status != 200]
    assert not errors or report["caption"]["failures"] > 0, [e.status for e in errors]
    assert all(e.status >= 500 for e in errors)


def test_no_silent_gaps(llm_run, first_build):
    """Every unit the model was asked about has the model's output, or an offline
    stand-in with its failure recorded (stage, node, reason, attempts)."""
    from strata.retrieval import Index

    idx = Index.open(llm_run.index)
    nodes = idx.nodes()
    summaries = pl.read_parquet(llm_run.index / "build" / "summaries.parquet") \
        if (llm_run.index / "build" / "summaries.parquet").exists() else None
    failures_path = llm_run.index / "build" / "failures.parquet"
    failures = pl.read_parquet(failures_path) if failures_path.exists() else pl.DataFrame(
        schema={"stage": pl.String, "node_id": pl.String, "error": pl.String})
    assert all(e.strip() for e in failures["error"].to_list()), "a failure without a reason"
    failed = set(zip(failures["stage"].to_list(), failures["node_id"].to_list()))
    if summaries is not None:
        want = nodes.filter(pl.col("kind").is_in(["file", "section", "code", "table"]))
        have = dict(zip(summaries["node_id"].to_list(), summaries["source"].to_list()))
        for nid in want["node_id"].to_list():
            assert nid in have, f"summary of {nid} missing"
            if have[nid] == "offline-fallback":
                assert ("summarize", nid) in failed, f"{nid}: fallback without a failure row"
    print(f"\n[e2e-llm] failures recorded: {failures.group_by('stage').len().to_dicts()}")


def test_second_build_asks_only_for_what_failed(llm_run, first_build, second_build):
    """Everything the model answered usably is cached: the second build sends
    nothing, except a new try for each item that failed in the first (recorded
    in failures.parquet, which promises that retry)."""
    assert second_build.rc == 0, second_build.stderr[-4000:]
    failed = {s: first_build.stage_report.get(s, {}).get("failures", 0) for s in ALL_STAGES}
    report = _stage_reports(llm_run.index)
    for stage in ALL_STAGES:
        calls = report.get(stage, {}).get("calls", 0)
        assert calls <= failed[stage], (stage, calls, failed[stage])
    # per failed item: a call and 5 SDK retries of a 5xx (or 2 parse retries)
    assert len(second_build.chat()) <= 6 * sum(failed.values())
    if not any(failed.values()):
        assert second_build.chat() == []


def test_token_accounting_matches_the_servers_usage(llm_run, first_build):
    """What the build counted is what the server said it used, call for call
    (the answers the client received; parse retries included)."""
    chat = [e for e in first_build.chat() if e.delivered and e.usage]
    served = (sum(e.usage["prompt_tokens"] for e in chat),
              sum(e.usage["completion_tokens"] for e in chat))
    report = _stage_reports(llm_run.index)
    # the second build's figures replaced the first's: its stages made no call, and
    # the first build's are in the first build's report, kept by the test run
    first = first_build.stage_report
    counted = (sum(first.get(s, {}).get("prompt_tokens", 0) for s in ALL_STAGES),
               sum(first.get(s, {}).get("completion_tokens", 0) for s in ALL_STAGES))
    print(f"\n[e2e-llm] tokens: server {served}, Strata {counted}; "
          f"{len(chat)} answers, second build {[report[s]['calls'] for s in ALL_STAGES]} calls")
    assert counted == served


def _ask(llm_run, *args: str) -> tuple[dict, list]:
    proc, exchanges, secs = llm_run.cli("ask", QUESTION, "--index", str(llm_run.index), "--json",
                                        *args, *llm_run.llm_args(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer = json.loads(proc.stdout)
    print(f"\n[e2e-llm] ask {' '.join(args)} ({secs}s, {len(exchanges)} requests): "
          f"{answer['text'][:400]!r}")
    return answer, exchanges


def _cited_paths(answer: dict) -> set[str]:
    numbers = {int(n) for n in re.findall(r"\[(\d+)\]", answer["text"])}
    return {s["path"] for s in answer["sources"] if s["n"] in numbers}


NOT_FOUND = re.compile(r"(?i)\b(not (found|in the context|contain|mention)|no (information|answer)|"
                       r"does not (say|contain|mention)|cannot (find|answer))")


def test_ask_cites_the_file_that_holds_the_answer(llm_run, first_build):
    """The answer is in docs/calibration.md: the model's answer cites it, or says
    plainly that it was not found (a 135M model may not know)."""
    answer, exchanges = _ask(llm_run)
    assert not answer["extractive"], answer["trace"].get("notes")
    assert ANSWER_FILE in {s["path"] for s in answer["sources"]}  # retrieval found it
    assert [e.status for e in exchanges if e.path.endswith("/chat/completions")] == [200]
    assert ANSWER_FILE in _cited_paths(answer) or NOT_FOUND.search(answer["text"]), answer["text"]


def test_routed_mode_through_the_model(llm_run, first_build):
    """The router is the model: its JSON is validated against the file map; files
    it names that are not in the map are ignored, and when it names none the
    offline router takes over, saying why. Either way the answer comes."""
    answer, exchanges = _ask(llm_run, "--mode", "routed")
    trace = answer["trace"]
    notes = " ".join(trace.get("notes", []))
    print(f"[e2e-llm] router: {trace.get('router')}; {notes[:300]}")
    assert trace.get("router") in ("llm", "offline")
    if trace["router"] == "offline":
        assert "router LLM" in notes  # why the model's route was not used
    assert trace.get("route"), trace
    routed = [e for e in exchanges if e.path.endswith("/chat/completions")]
    assert len(routed) >= 2 and all(e.status == 200 for e in routed)  # the router, the answer
    assert routed[0].json_mode and not routed[-1].json_mode  # the router asks for JSON


def test_a_streamed_answer_through_the_real_server(llm_run, first_build):
    """The answer streamed as the model writes it: several pieces that make up
    what the server sent."""
    from strata.retrieval import Index
    from strata.retrieval.answer import ask_stream
    from strata.core.llm import query_llm

    idx = Index.open(llm_run.index)
    llm = query_llm("openai", MODEL_NAME, llm_run.proxy.base_url)
    mark = llm_run.proxy.mark()
    try:
        events = list(ask_stream(idx, "What does Calibrator.fit return?", llm=llm))
    finally:
        llm.close()
    deltas = [e[1] for e in events if e[0] == "delta"]
    done = [e[1] for e in events if e[0] == "done"]
    (streamed,) = [e for e in llm_run.proxy.since(mark) if e.stream]
    assert events[0][0] == "sources" and len(done) == 1 and not done[0].extractive
    assert len(deltas) > 1 and streamed.delivered
    # the answer is what the server sent, plus Strata's note when it cites nothing
    assert "".join(deltas).strip() == done[0].text
    assert done[0].text.startswith(streamed.content.strip())
