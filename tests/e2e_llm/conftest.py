"""One real model for the whole session: llama.cpp's server with SmolLM2-135M on
loopback, behind a counting proxy, and one build of a slice of the sample corpus
through it (then a second, unchanged one), run with the CLI as a user would.

The slice (:data:`SLICE`): the calibration page with its two figures (sections,
code blocks, images to caption) and the calibration module (code): every LLM
stage, about 45 requests. The whole sample corpus
is 382 requests, about 20 minutes of a 2-core machine for a 135M model even when
nothing else runs; ``STRATA_E2E_LLM_CORPUS=data/sample make e2e-llm`` builds it.

Skipped, with the reason, when the ``llm-server`` extra is not installed
(``make e2e-llm`` installs it and runs these tests)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchmarks.llama_server import MODEL_NAME, CountingProxy, Exchange, LlamaServer, missing

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
SLICE = ("docs/calibration.md", "docs/images/drift-residuals.png",
         "docs/images/tide-chart-large.png", "tidewater/calibration.py")


def copy_corpus(dst: Path) -> None:
    chosen = os.environ.get("STRATA_E2E_LLM_CORPUS")
    if chosen:
        shutil.copytree(REPO / chosen, dst)
        return
    for rel in SLICE:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SAMPLE / rel, dst / rel)


@dataclass
class Build:
    rc: int
    seconds: float
    stdout: str
    stderr: str
    exchanges: list[Exchange]
    stage_report: dict  # build/build_report.json as this build left it

    @property
    def report(self) -> dict:
        return json.loads(self.stdout) if self.stdout.strip().startswith("{") else {}

    def chat(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.path.rstrip("/").endswith("/chat/completions")]


@dataclass
class LLMRun:
    server: LlamaServer
    proxy: CountingProxy
    work: Path
    index: Path
    env: dict
    builds: list[Build] = field(default_factory=list)

    def llm_args(self) -> list[str]:
        return ["--llm-backend", "openai", "--llm-base-url", self.proxy.base_url,
                "--llm-model", MODEL_NAME]

    def cli(self, *args: str, timeout: float = 1800) -> tuple[subprocess.CompletedProcess, list[Exchange], float]:
        mark = self.proxy.mark()
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", *args], cwd=REPO,
                              env=self.env, capture_output=True, text=True, timeout=timeout)
        return proc, self.proxy.since(mark), round(time.monotonic() - t0, 1)

    def build(self) -> Build:
        proc, ex, secs = self.cli("index", str(self.work / "sample"), "--corpus", "e2e_llm",
                                  "--out", str(self.index), "--json", *self.llm_args())
        path = self.index / "build" / "build_report.json"
        report = json.loads(path.read_text()) if path.exists() else {}
        b = Build(proc.returncode, secs, proc.stdout, proc.stderr, ex, report)
        self.builds.append(b)
        print(f"\n[e2e-llm] build {len(self.builds)}: exit {b.rc} in {secs}s, "
              f"{len(b.chat())} chat requests", flush=True)
        return b


@pytest.fixture(scope="session")
def llm_run(tmp_path_factory):
    why = missing()
    if why:
        pytest.skip(why)
    work = tmp_path_factory.mktemp("e2e_llm")
    copy_corpus(work / "sample")
    (work / "dagster_home").mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(work / "dagster_home"),
           "STRATA_CORPORA": str(work / "corpora.yaml"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1",
           # what the README says a one-request-at-a-time server on a CPU needs: one request
           # at a time, and a timeout that covers a 512-token OpenIE answer on a busy machine
           "STRATA_LLM_CONCURRENCY": "1", "STRATA_LLM_TIMEOUT_S": "300"}
    for var in ("STRATA_LLM_BACKEND", "STRATA_LLM_MODEL", "STRATA_LLM_BASE_URL",
                "STRATA_LLM_CALLABLE"):
        env.pop(var, None)
    log = work / "llama_server.log"
    with LlamaServer(log_path=log) as server, CountingProxy(server.base_url) as proxy:
        print(f"\n[e2e-llm] llama.cpp server up in {server.started_s}s on {server.base_url} "
              f"(log {log})", flush=True)
        run = LLMRun(server, proxy, work, work / "index", env)
        run.build()
        run.build()
        yield run


@pytest.fixture(scope="session")
def first_build(llm_run) -> Build:
    return llm_run.builds[0]


@pytest.fixture(scope="session")
def second_build(llm_run) -> Build:
    return llm_run.builds[1]
