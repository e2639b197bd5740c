"""The API key never reaches an artifact, a log, the event log or an error:
a real build against a real OpenAI-compatible HTTP server that
rejects some requests with a 401 echoing the Authorization header (as a
careless server does), then every byte the run left behind is searched."""

from __future__ import annotations

import base64
import logging
import urllib.parse

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
    searched (strata/core/encoders/embedding.py had no redaction)."""
    key = "sk-strata-echo-4b3c2d1e0f-SECRET"
    caplog.set_level(logging.DEBUG)
    rc, echoed = _build_against_a_rejecting_server(tmp_path, monkeypatch, key, "echo")
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


def _build_against_a_rejecting_server(tmp_path, monkeypatch, key: str, corpus: str,
                                      *echo) -> tuple[int, list]:
    """`strata index` of a two-page folder, both backends on a fake server that
    answers 401 for the LLM's "harbour" items and for every embedding request,
    its error bodies echoing the key (through ``echo``, an encoding, if given).
    Returns the exit code and the rejected requests."""
    from strata.pipelines.cli import main

    root = tmp_path / "corpus"
    root.mkdir()
    (root / "harbour.md").write_text("# Harbour\n\nThe harbour gauge reads the tide.\n")
    (root / "drift.md").write_text("# Drift\n\nBarometric drift is corrected hourly.\n")
    for k, v in {"OPENAI_API_KEY": key, "DAGSTER_HOME": str(tmp_path / "dagster_home"),
                 "STRATA_CORPORA": str(tmp_path / "corpora.yaml"), "STRATA_SHARDS": "1"}.items():
        monkeypatch.setenv(k, v)
    with FakeOpenAI() as server:
        server.add_fault("401", *echo, match="harbour", times=None, path="/chat/completions")
        server.add_fault("401", *echo, times=None, path="/embeddings")
        rc = main(["index", str(root), "--corpus", corpus, "--out", str(tmp_path / "index"),
                   "--llm-backend", "openai", "--llm-base-url", server.base_url,
                   "--llm-model", "fake-model", "--embed-backend", "openai",
                   "--embed-base-url", server.base_url, "--model", "text-embedding-3-small"])
        return rc, [r for r in server.requests if r.fault == "401"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


# how servers echo a key they were sent, encoded: each one a str -> str
ENCODINGS = {
    "base64": lambda k: _b64(k.encode()),
    "base64, unpadded": lambda k: _b64(k.encode()).rstrip("="),
    "base64url": lambda k: _b64url(k.encode()),
    "base64url, unpadded": lambda k: _b64url(k.encode()).rstrip("="),
    # inside a longer base64 string, at each of the three byte alignments
    "base64 of user:key": lambda k: _b64(b"user:" + k.encode()),
    "base64 of x+key+y": lambda k: _b64(b"x" + k.encode() + b"y"),
    "base64url of abc+key+!": lambda k: _b64url(b"abc" + k.encode() + b"!"),
    "hex": lambda k: k.encode().hex(),
    "HEX": lambda k: k.encode().hex().upper(),
    "url-encoded": lambda k: urllib.parse.quote(k, safe=""),
    "percent-encoded bytes": lambda k: "".join(f"%{b:02X}" for b in k.encode()),
}


def test_a_key_echoed_encoded_is_in_no_artifact_or_log(tmp_path, monkeypatch, capfd, caplog):
    """A server that echoes the key base64-, hex- or URL-encoded in its 401 error
    bodies (the LLM for some items, the embedding endpoint for all): no encoding
    of the key survives into failures.parquet, the event log, the compute logs,
    the caches, the log records or what the command printed."""
    # characters that URL-encoding changes and that base64 and base64url write apart
    key = "sk-strata+enc/7a6b5c4d=3e2f~?>SECRET!"
    forms = {name: encode(key) for name, encode in ENCODINGS.items()}
    assert len(set(forms.values())) == len(forms) and key not in forms.values()

    def echo(sent: str) -> str:
        return " | ".join(f"{name}: {encode(sent)}" for name, encode in ENCODINGS.items())

    caplog.set_level(logging.DEBUG)
    rc, echoed = _build_against_a_rejecting_server(tmp_path, monkeypatch, key, "enc", echo)
    captured = capfd.readouterr()
    assert {r.path.rsplit("/", 1)[-1] for r in echoed} == {"completions", "embeddings"}
    assert rc == 1
    failures = (tmp_path / "index" / "build" / "failures.parquet").read_bytes()
    assert b"401" in failures  # the LLM's rejected items are recorded ...
    assert (tmp_path / "dagster_home" / "storage").is_dir()  # the event log and compute logs
    said = captured.out + captured.err + caplog.text
    assert "refuses the API key (HTTP 401" in said
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    leaks = {name: [str(p) for p, data in files.items() if form.encode() in data]
             for name, form in forms.items()}
    leaks.update({f"{name} (output or log)": ["output"] for name, form in forms.items()
                  if form in said})
    assert not {name: where for name, where in leaks.items() if where}
