"""Other libraries' private names: none in product code outside the modules that
.ci/private_names.py allows (``make lint`` runs the same check), and each name those
modules use still there, so that an upgrade that moves one fails here, loudly, and
not in a user's build."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import REPO

SPEC = importlib.util.spec_from_file_location("private_names", REPO / ".ci" / "private_names.py")
private_names = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(private_names)


def test_product_code_uses_no_private_names_outside_the_allowed_modules():
    run = subprocess.run([sys.executable, str(REPO / ".ci" / "private_names.py"), str(REPO)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    assert len(private_names.ALLOWED) <= 3
    for module in private_names.ALLOWED:
        assert (REPO / module).is_file(), module
        assert module in (REPO / "docs" / "development.md").read_text()


@pytest.mark.parametrize(("source", "expected"), [
    ("from dagster._core.events import EngineEventData\n", "from dagster._core.events import ..."),
    ("import threading\nthreading._shutdown()\n", "threading._shutdown"),
    ("import torch\ntorch.cpu._is_amx_tile_supported()\n", "torch.cpu._is_amx_tile_supported"),
    ("from bm25s import scoring\nscoring._select_tfc_scorer('x')\n", "scoring._select_tfc_scorer"),
    ("from argparse import _SubParsersAction\n", "from argparse import _SubParsersAction"),
    ("import sys\nsys.modules.get('dagster._core.errors')\nimport dagster\n",
     "'dagster._core.errors'"),
])
def test_the_check_finds_a_private_name(source, expected):
    assert expected in [what for _, what in private_names.uses(source)]


def test_the_check_leaves_our_own_names_dunders_and_documented_ones_alone():
    source = ("import os\nimport numpy as np\nfrom strata.core import layout\n"
              "class A:\n    def f(self, index):\n        return self._x, index._columns\n"
              "layout._helper()\nnp.__version__\nos._exit\n")
    assert private_names.uses(source) == []


def test_bm25s_still_has_the_scoring_helpers_the_flat_build_uses():
    from bm25s import scoring

    for name in ("_build_idf_array", "_select_idf_scorer", "_select_tfc_scorer"):
        assert callable(getattr(scoring, name, None)), f"bm25s moved scoring.{name}"


def test_dagster_still_has_the_interrupt_helpers_the_dask_executor_uses():
    from dagster._core.errors import raise_execution_interrupts
    from dagster._utils import iterate_with_context

    assert callable(raise_execution_interrupts) and callable(iterate_with_context)


def test_dagsters_compute_log_mirror_still_starts_its_processes_through_subprocess():
    import subprocess as stdlib_subprocess

    from dagster._core.execution import compute_logs

    assert compute_logs.subprocess is stdlib_subprocess, \
        "Dagster's compute-log mirror moved: pipelines/interrupt.py no longer regroups it"
