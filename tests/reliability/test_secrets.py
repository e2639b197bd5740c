"""The API key never reaches an artifact, a log, the event log or an error
(issue 8): a real build against a real OpenAI-compatible HTTP server that
rejects some requests with a 401 echoing the Authorization header (as a
careless server does), then every byte the run left behind is searched."""

from __future__ import annotations

import logging

import dagster as dg

from strata.resources import LLMResource
from tests.conftest import Builder, write_corpora
from tests.fake_openai import FakeOpenAI

KEY = "sk-strata-test-9f8e7d6c5b4a-SECRET"


def test_the_key_is_in_no_artifact_or_log(sample_copy, tmp_path, monkeypatch, capfd, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("STRATA_TEST_OPENAI_KEY", KEY)
    out = tmp_path / "index"
    cfg = write_corpora(tmp_path / "corpora.yaml", {"secret": {"root": str(sample_copy),
                                                              "out": str(out)}})
    (tmp_path / "dagster_home").mkdir()
    with FakeOpenAI() as server:
        server.add_fault("401", match="barometric", times=None)
        llm = LLMResource(backend="openai", base_url=server.base_url, model="fake-model",
                          api_key_env="STRATA_TEST_OPENAI_KEY", max_retries=0)
        with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
            result = Builder(instance, cfg).build("secret", llm=llm)
            events = "\n".join(str(e) for e in instance.all_logs(result.run_id))
        sent = [r for r in server.requests if r.fault == "401"]
    assert sent and KEY in sent[0].headers["authorization"]  # the server did get it, and echoed it
    assert result.success
    failures = (out / "build" / "failures.parquet").read_bytes()
    assert b"401" in failures  # the rejected items are recorded ...
    leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert not leaks  # ... but the key is in no file: tables, caches, Lance, event log, manifests
    captured = capfd.readouterr()
    assert KEY not in captured.out + captured.err + caplog.text + events


def test_neither_backend_leaks_the_key_from_a_server_that_echoes_it(tmp_path, monkeypatch,
                                                                   capfd, caplog):
    """Both backends against a server that puts the key into its 401 error bodies:
    the LLM for some items (each recorded as failed), the embedding endpoint for
    every request (the build stops, saying so in one line). Then every byte of
    output, log, Dagster event log (SQLite), compute log, cache and artifact is
    searched (issue 17: strata/embedding.py had no redaction)."""
    from strata.pipelines.cli import main

    key = "sk-strata-echo-4b3c2d1e0f-SECRET"
    caplog.set_level(logging.DEBUG)
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "harbour.md").write_text("# Harbour\n\nThe harbour gauge reads the tide.\n")
    (root / "drift.md").write_text("# Drift\n\nBarometric drift is corrected hourly.\n")
    for k, v in {"OPENAI_API_KEY": key, "DAGSTER_HOME": str(tmp_path / "dagster_home"),
                 "STRATA_CORPORA": str(tmp_path / "corpora.yaml"), "STRATA_SHARDS": "1"}.items():
        monkeypatch.setenv(k, v)
    with FakeOpenAI() as server:
        server.add_fault("401", match="harbour", times=None, path="/chat/completions")
        server.add_fault("401", times=None, path="/embeddings")
        rc = main(["index", str(root), "--corpus", "echo", "--out", str(tmp_path / "index"),
                   "--llm-backend", "openai", "--llm-base-url", server.base_url,
                   "--llm-model", "fake-model", "--embed-backend", "openai",
                   "--embed-base-url", server.base_url, "--model", "text-embedding-3-small"])
        echoed = [r for r in server.requests if r.fault == "401"]
    captured = capfd.readouterr()
    assert {r.path.rsplit("/", 1)[-1] for r in echoed} == {"completions", "embeddings"}
    assert all(key in r.headers["authorization"] for r in echoed)  # it was sent, and echoed
    assert rc == 1
    line = [x for x in captured.err.splitlines() if x.startswith("error:")]
    assert len(line) == 1 and "refuses the API key (HTTP 401" in line[0] and "***" in line[0]
    failures = (tmp_path / "index" / "build" / "failures.parquet").read_bytes()
    assert b"401" in failures  # the LLM's rejected items are recorded ...
    leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert not leaks  # ... without the key: event log, compute logs, caches, tables
    assert (tmp_path / "dagster_home" / "storage").is_dir()  # the event log and compute logs
    assert key not in captured.out + captured.err + caplog.text
