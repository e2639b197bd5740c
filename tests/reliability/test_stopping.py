"""Stopping a build, endpoints that are down, one build per index.

Real processes, real signals, a real HTTP server: a `strata index` child process
waits on an LLM request that the server holds open, gets SIGTERM (sent to it
alone) or SIGINT (Ctrl-C typed on its pseudo-terminal), and must stop with exit
143 or 130, the run marked CANCELED, the previous version still serving; the
next build resumes from what the stopped ones finished. While it is blocked, a second
`strata index` and a Dagster run of the same index are refused by the lock.

One small corpus and one server serve every test here, in order (each test
builds on the index the previous one left), so the module costs a handful of
tiny builds. Stop times are printed (``-s``), never asserted: they depend on the
machine's load. ``benchmarks/hardening.py`` measures them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import dagster as dg
import pytest

from strata.pipelines.cli import main
from strata.retrieval import Index
from tests.conftest import REPO
from tests.fake_openai import FakeOpenAI, default_reply

PAGES = {
    "tides.md": "# Tides\n\nThe harbour gauge reads the tide every minute.\n",
    "drift.md": "# Drift\n\nBarometric drift is corrected hourly against the reference.\n",
    "slow.md": "# Slow page\n\nSLOWPAGE: the server holds the request about this page open.\n",
    "fail.md": "# Failing page\n\nFAILPAGE: the server refuses to summarize this page.\n",
}
CORPUS = "stopme"
PTY_LAUNCHER = ("import os, pty, sys; "
                "sys.exit(os.waitstatus_to_exitcode(pty.spawn(sys.argv[1:])))")


def _reply(body: dict):
    """Answers the shapes the stages parse: OpenIE JSON, or a one-line summary."""
    system = (body.get("messages") or [{}])[0].get("content", "")
    if "knowledge graph" in str(system):
        return {"entities": [], "triples": []}
    return "A short factual summary. " + json.loads(default_reply(body))["summary"]


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI() as s:
        s.reply = _reply
        yield s


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """The corpus, its index (version 1, built offline) and the environment every
    command here runs with."""
    base = tmp_path_factory.mktemp("stopping")
    root = base / "corpus"
    root.mkdir()
    for name, text in PAGES.items():
        (root / name).write_text(text)
    env = {**os.environ, "DAGSTER_HOME": str(base / "dagster_home"),
           "STRATA_CORPORA": str(base / "corpora.yaml"), "STRATA_SHARDS": "1",
           "OPENAI_API_KEY": "sk-test-not-a-secret", "PYTHONUNBUFFERED": "1"}
    ws = {"base": base, "root": root, "out": base / "index", "env": env, "figures": {}}
    with pytest.MonkeyPatch.context() as mp:
        for k in ("DAGSTER_HOME", "STRATA_CORPORA", "STRATA_SHARDS"):
            mp.setenv(k, env[k])
        assert main(["index", str(root), "--corpus", CORPUS, "--out", str(ws["out"]),
                     "-q"]) == 0
    yield ws
    print("\nmeasured:", json.dumps(ws["figures"], indent=1))


@pytest.fixture
def in_env(ws, monkeypatch):
    for k in ("DAGSTER_HOME", "STRATA_CORPORA", "STRATA_SHARDS", "OPENAI_API_KEY"):
        monkeypatch.setenv(k, ws["env"][k])
    return ws


def _index_cmd(ws, *extra: str) -> list[str]:
    return [sys.executable, "-m", "strata.pipelines.cli", "index", str(ws["root"]), "--corpus", CORPUS,
            "--out", str(ws["out"]), *extra]


def _llm_flags(server) -> list[str]:
    return ["--llm-backend", "openai", "--llm-base-url", server.base_url,
            "--llm-model", "fake-model"]


def _wait_for_request(server, needle: str, proc, since: int, timeout: float = 300) -> None:
    """Until a request naming ``needle`` reached the server after the first
    ``since`` requests (the build is then inside an LLM stage, that request held
    open)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(needle in r.prompt for r in server.requests[since:]):
            time.sleep(0.5)  # let the other workers' requests land too
            return
        assert proc.poll() is None, "the build ended before it reached the LLM"
        time.sleep(0.1)
    pytest.fail(f"no request naming {needle} within {timeout}s")


def _instance(ws):
    return dg.DagsterInstance.from_config(str(ws["base"] / "dagster_home"))


def _last_run(ws):
    with _instance(ws) as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"strata/cli": "index"}), limit=1)
        return runs[0]


def _documents(ws) -> set[str]:
    return set(Index.open(ws["out"]).documents()["path"])


def test_sigterm_stops_a_build_waiting_on_the_llm_and_the_lock_refuses_a_second_build(
        ws, server):
    """SIGTERM to the process alone (as systemd, docker or `kill` send it); the
    next test types Ctrl-C (SIGINT) on a terminal."""
    (ws["root"] / "late1.md").write_text("# Late one\n\nAdded before the first stopped build.\n")
    server.add_fault("slow", 600, match="SLOWPAGE", times=None)  # held open until stopped
    log = ws["base"] / "sigterm.log"
    since = len(server.requests)
    with open(log, "w") as err:
        proc = subprocess.Popen(_index_cmd(ws, *_llm_flags(server)), cwd=REPO, env=ws["env"],
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        _wait_for_request(server, "SLOWPAGE", proc, since)

        # one build per index: a second `strata index` is refused, naming the holder ...
        second = subprocess.run(_index_cmd(ws, "-q"), cwd=REPO, env=ws["env"],
                                capture_output=True, text=True, timeout=300)
        assert second.returncode == 75, second.stderr
        assert f"another build of {ws['out']} is running" in second.stderr
        assert f"pid {proc.pid}" in second.stderr and "--wait" in second.stderr
        # ... and so is a Dagster run of it (as the sensor or the UI would launch)
        from strata.assets import all_assets
        from tests.conftest import Builder

        nodes = [a for a in all_assets if a.key.to_user_string() == "nodes"]
        with dg.instance_for_test() as instance:
            run = Builder(instance, ws["base"] / "corpora.yaml").build(
                CORPUS, assets=nodes, raise_on_error=False)
        assert not run.success
        errors = [e.step_failure_data.user_failure_data.description for e in run.all_events
                  if e.is_step_failure and e.step_failure_data.user_failure_data]
        assert any("another build of" in m and "strata index" in m for m in errors), errors

        t0 = ws["signalled"] = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        ws["figures"]["sigterm_stop_s"] = round(time.monotonic() - t0, 2)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.faults.clear()
    out = log.read_text()
    assert rc == 143, out[-3000:]
    assert "interrupted by SIGTERM" in out and "still serves version 1" in out
    assert "Traceback" not in out
    assert _last_run(ws).status == dg.DagsterRunStatus.CANCELED
    idx = Index.open(ws["out"])
    assert idx.version == 1 and "late1.md" not in _documents(ws)
    assert idx.search("barometric drift", k=3)  # still serving, whole


def test_ctrl_c_on_a_terminal_stops_the_build(ws, server):
    """As a user types it: ^C on the build's terminal (a pseudo-terminal here), the
    kernel sending SIGINT to the foreground process group."""
    (ws["root"] / "late2.md").write_text("# Late two\n\nAdded before the second stopped build.\n")
    server.add_fault("slow", 600, match="SLOWPAGE", times=None)
    log = ws["base"] / "pty.log"
    since = len(server.requests)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", PTY_LAUNCHER, *_index_cmd(ws)],
                                cwd=REPO, env=ws["env"], stdin=subprocess.PIPE, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        _wait_for_request(server, "SLOWPAGE", proc, since)
        t0 = ws["signalled"] = time.monotonic()
        proc.stdin.write(b"\x03")  # Ctrl-C
        proc.stdin.flush()
        rc = proc.wait(timeout=60)
        ws["figures"]["ctrl_c_pty_stop_s"] = round(time.monotonic() - t0, 2)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.faults.clear()
    text = log.read_bytes().decode("utf-8", "replace")
    assert rc == 130, text[-3000:]
    assert "interrupted by SIGINT" in text and "Traceback" not in text
    assert _last_run(ws).status == dg.DagsterRunStatus.CANCELED
    assert Index.open(ws["out"]).version == 1


def test_the_next_build_resumes_and_uses_the_remembered_llm(in_env, server, capsys):
    """No LLM flag this time: the corpus remembers the endpoint the stopped builds
    were given (as a sensor run would use it). Nothing the stopped builds finished
    is done again: the pages they parsed, the answers they got."""
    # answered well before the last stop (an answer arriving as a build stops may
    # not be cached; one that arrived long before is)
    answered = {r.prompt for r in server.chat_requests()
                if r.fault is None and r.time < in_env["signalled"] - 0.5}
    assert answered  # the stopped builds got some answers before they were stopped
    before = len(server.requests)
    server.add_fault("400", match="FAILPAGE", times=None)  # one item fails for good
    try:
        rc = main(["index", str(in_env["root"]), "--corpus", CORPUS, "--out",
                   str(in_env["out"])])
    finally:
        server.faults.clear()
    out = capsys.readouterr()
    assert rc == 0, out.err[-3000:]
    asked = [r.prompt for r in server.requests[before:] if r.path.endswith("/chat/completions")]
    assert asked  # the remembered openai endpoint, not the offline default
    assert not answered & set(asked)  # resumed: nothing answered before is asked again
    report = json.loads((in_env["out"] / "build" / "build_report.json").read_text())
    assert report["parse"]["parsed"] == 0  # the stopped builds had parsed the new pages
    assert Index.open(in_env["out"]).version == 2
    assert {"late1.md", "late2.md"} <= _documents(in_env)
    # the summary says that LLM items failed (the failing page's summary)
    summary = [line for line in out.out.splitlines() if line.startswith("built in")]
    assert summary and "LLM failure" in summary[0] and "summarize" in summary[0]


def test_a_dry_run_after_the_builds_counts_only_what_the_cache_cannot_answer(in_env, server,
                                                                          capsys, monkeypatch):
    """The LLM cache the stopped and the resumed builds filled, the remembered
    endpoint, prices from the environment: a dry run sends nothing, records no
    run, and counts as calls only the items the cache cannot answer (the failing
    page's, and the file summary built from its missing part); completion tokens
    come from the cached answers."""
    monkeypatch.setenv("STRATA_LLM_USD_PER_M_PROMPT", "2.5")
    monkeypatch.setenv("STRATA_LLM_USD_PER_M_COMPLETION", "10")
    with _instance(in_env) as instance:
        runs_before = len(instance.get_runs())
    sent_before = len(server.requests)
    rc = main(["index", str(in_env["root"]), "--corpus", CORPUS, "--out", str(in_env["out"]),
               "--dry-run", "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert len(server.requests) == sent_before
    assert report["llm"] == "openai:fake-model"  # what the corpus remembers
    stages = {s["stage"]: s for s in report["stages"]}
    summarize, openie = stages["summarize"], stages["openie"]
    assert summarize["cached"] > 0 and 2 <= summarize["calls"] < summarize["requests"]
    # OpenIE runs before the summaries in one process: whether the stopped builds got
    # the failing page's extraction answered before the 400 fault was set is timing,
    # so the count follows what the server answered (an answer that arrived as a build
    # stopped may not have been cached: at most that one more call)
    failing = [r for r in server.chat_requests()
               if "FAILPAGE" in r.prompt and "knowledge graph" in json.dumps(r.body)]
    assert failing  # it was asked for
    assert openie["cached"] >= 1 and openie["cached"] + openie["calls"] == openie["requests"]
    answered = any(r.fault is None for r in failing)
    assert openie["calls"] in ((0, 1) if answered else (1,)), (openie, answered)
    assert "mean of" in summarize["completion_basis"]  # from the answers the cache holds
    assert summarize["usd"] == round((summarize["prompt_tokens"] * 2.5
                                      + summarize["completion_tokens"] * 10) / 1e6, 6)
    with _instance(in_env) as instance:
        assert len(instance.get_runs()) == runs_before
    assert Index.open(in_env["out"]).version == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error")]


def test_a_dead_llm_endpoint_fails_the_build_at_once_in_one_line(in_env, capsys):
    (in_env["root"] / "late3.md").write_text("# Late three\n\nNobody answers for this one.\n")
    url = f"http://127.0.0.1:{_free_port()}/v1"
    t0 = time.monotonic()
    rc = main(["index", str(in_env["root"]), "--corpus", CORPUS, "--out", str(in_env["out"]),
               "--llm-backend", "openai", "--llm-base-url", url, "--llm-model", "m"])
    in_env["figures"]["dead_llm_fail_s_in_process"] = round(time.monotonic() - t0, 2)
    err = capsys.readouterr().err
    assert rc == 1
    assert "Traceback" not in err and "retry" not in err.lower()
    (line,) = _error_lines(err)  # said once, though two stages found it dead
    assert url in line and "refuses connections" in line and "--llm-base-url" in line
    assert err.strip().splitlines()[-1] == line  # the last word, in one line
    assert Index.open(in_env["out"]).version == 2  # still serving the last good build


def test_a_dead_embedding_endpoint_fails_the_build_at_once_in_one_line(in_env, capsys):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    t0 = time.monotonic()
    rc = main(["index", str(in_env["root"]), "--corpus", CORPUS, "--out", str(in_env["out"]),
               "--llm-backend", "offline", "--embed-backend", "openai", "--embed-base-url", url,
               "--model", "text-embedding-3-small"])
    in_env["figures"]["dead_embedding_fail_s_in_process"] = round(time.monotonic() - t0, 2)
    err = capsys.readouterr().err
    assert rc == 1
    (line,) = _error_lines(err)
    assert f"the embedding endpoint {url} refuses connections" in line
    assert "--embed-base-url" in line and "Traceback" not in err
    assert Index.open(in_env["out"]).version == 2


def test_an_out_folder_holding_another_corpus_is_refused(in_env, capsys):
    rc = main(["index", str(in_env["root"]), "--corpus", "someone-else", "--out",
               str(in_env["out"])])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"holds the index of corpus '{CORPUS}'" in err and "--force" in err
    assert Index.open(in_env["out"]).corpus == CORPUS  # untouched
