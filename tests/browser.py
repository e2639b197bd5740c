"""Debian's Chromium driven by Playwright, for the tests of the service's web page
and of the Dagster UI. Playwright never downloads a browser here: it launches
/usr/bin/chromium (``$STRATA_CHROMIUM``) with the flags this closed network needs.
Without one the test is skipped, or fails when ``STRATA_REQUIRE_BROWSER`` is set
(CI installs chromium and sets it, so a missing browser cannot pass silently)."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest

CHROMIUM = os.environ.get("STRATA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def require_chromium() -> None:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("STRATA_REQUIRE_BROWSER"):
            pytest.fail(f"{CHROMIUM} is missing (apt-get install chromium); "
                        "STRATA_REQUIRE_BROWSER is set")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")


@contextmanager
def chromium():
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
