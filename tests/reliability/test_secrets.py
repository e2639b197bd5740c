"""The API key never reaches an artifact, a log, the event log or an error
(issue 8): a real build against a real OpenAI-compatible HTTP server that
rejects some requests with a 401 echoing the Authorization header (as a
careless server does), then every byte the run left behind is searched."""

from __future__ import annotations

import logging

import dagster as dg

from resources import LLMResource
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
