"""Helpers of the HTTP service tests."""

from __future__ import annotations

import json
import shutil
import socket
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
