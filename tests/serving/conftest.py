"""The HTTP service over the shared sample index: one app per test module
(TestClient over ASGI, calling from a loopback address)."""

from __future__ import annotations

import pytest

from tests.serving.helpers import make_client, settings_for


@pytest.fixture(scope="module")
def api(sample_index):
    with make_client(settings_for(sample_index)) as client:
        yield client
