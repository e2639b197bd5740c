"""The outcome of each test's call phase on its item (``item.rep_call``), so a
fixture can save a screenshot and the server's log when the test failed."""

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
