"""Helpers of the HTTP service tests."""

from __future__ import annotations

import json
import shutil
import socket
from contextlib import contextmanager
from pathlib import Path

LOOPBACK = ("127.0.0.1", 50000)
# the Host the test clients name: a loopback service answers only to its own names
# (TestClient's default, "testserver", gets 421)
LOCAL = "http://localhost"


def make_client(settings, llm=None, client=LOOPBACK):
    from fastapi.testclient import TestClient

    from strata.service.app import create_app

    return TestClient(create_app(settings, llm=llm), client=client,
                      raise_server_exceptions=False, base_url=LOCAL)


def settings_for(*indexes, **kw):
    from strata.service.settings import ServiceSettings

    kw.setdefault("warm_up", False)
    return ServiceSettings(indexes=[str(i) for i in indexes], **kw)


def copy_index(src: Path, dst: Path, **manifest_changes) -> Path:
    """A copy of an index folder whose current manifest gets ``manifest_changes``."""
    from strata.core.storage.layout import IndexLayout

    shutil.copytree(src, dst, symlinks=True)
    layout = IndexLayout(dst)
    if manifest_changes:
        path = layout.version_dir(layout.current_version()) / "manifest.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **manifest_changes}))
    return dst


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def key_file(folder: Path, rate_per_minute: int) -> tuple[str, Path]:
    """A new API key and the keys file that admits it (one client, ``tester``)."""
    from strata.service.auth import KeyEntry, hash_key, new_key

    key = new_key()
    path = folder / "keys.txt"
    path.write_text(KeyEntry("tester", hash_key(key), rate_per_minute).line() + "\n")
    return key, path


@contextmanager
def serve_process(index: Path, log_path: Path, *args: str, env: dict | None = None):
    """A real `strata serve` of ``index`` on a free loopback port, its output in
    ``log_path``, until it answers /health; yields (base URL, port, process) and
    stops it with SIGINT (Ctrl-C) afterwards, if the test did not."""
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from tests.conftest import REPO
    from tests.waiting import wait_until

    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "STRATA_LLM_BACKEND": "offline", **(env or {})}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "strata.pipelines.cli", "serve", "--index", str(index),
             "--port", str(port), *args],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            assert proc.poll() is None, log_path.read_text(errors="replace")[-3000:]
            try:
                return httpx.get(base + "/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            wait_until(healthy, "strata serve did not answer /health", poll_s=0.3)
            yield base, port, proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


# what `strata mcp` runs with in the tests: offline, nothing fetched from a model hub
MCP_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "STRATA_LLM_BACKEND": "offline"}


def mcp_stdio(index: Path):
    """The parameters that start `strata mcp` on ``index`` over stdio, as an agent's
    client does (the official MCP client library)."""
    import sys

    from mcp import StdioServerParameters

    from tests.conftest import REPO

    return StdioServerParameters(
        command=sys.executable, cwd=str(REPO), env=MCP_ENV,
        args=["-m", "strata.pipelines.cli", "mcp", "--index", str(index)])


def tool_text(result) -> str:
    """What a successful tool call said, as one text."""
    assert not result.is_error, result.content
    return "\n".join(c.text for c in result.content if getattr(c, "text", None))
