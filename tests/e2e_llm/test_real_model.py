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
    report = _stage_reports(llm_run.index)
    for stage in LLM_STAGES:
        assert report[stage]["calls"] > 0, (stage, report[stage])
    # every request the build sent was answered by the server (none lost in transport)
    chat = first_build.chat()
    assert chat and all(e.status == 200 and e.delivered for e in chat), \
        [(e.status, e.error) for e in chat if e.status != 200 or not e.delivered][:5]


def test_no_silent_gaps(llm_run, first_build):
    """Every unit the model was asked about has the model's output, or an offline
    stand-in with its failure recorded (stage, node, reason, attempts)."""
    from retrieval import Index

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


def test_second_build_sends_nothing(llm_run, second_build):
    assert second_build.rc == 0, second_build.stderr[-4000:]
    assert [e.path for e in second_build.chat()] == []
    report = _stage_reports(llm_run.index)
    for stage in LLM_STAGES:
        assert report[stage]["calls"] == 0, (stage, report[stage])


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
    assert len(routed) == 2 and all(e.status == 200 for e in routed)  # the router, the answer
    assert routed[0].json_mode  # the router asks for JSON


def test_a_streamed_answer_through_the_real_server(llm_run, first_build):
    """The answer streamed as the model writes it: several pieces that make up
    what the server sent."""
    from retrieval import Index
    from strata.llm import query_llm

    idx = Index.open(llm_run.index)
    llm = query_llm("openai", MODEL_NAME, llm_run.proxy.base_url)
    mark = llm_run.proxy.mark()
    try:
        events = list(idx.ask_stream("What does Calibrator.fit return?", llm=llm))
    finally:
        llm.close()
    deltas = [e[1] for e in events if e[0] == "delta"]
    done = [e[1] for e in events if e[0] == "done"]
    (streamed,) = [e for e in llm_run.proxy.since(mark) if e.stream]
    assert events[0][0] == "sources" and len(done) == 1 and not done[0].extractive
    assert len(deltas) > 1 and streamed.delivered
    assert done[0].text == "".join(deltas).strip() == streamed.content.strip()
