"""The package as a user installs it: a wheel built from this checkout,
installed (not editable) into a fresh virtual environment, then `strata index` and
`strata search` run from a folder outside the repository.

What it guards: the distribution claims one import name (`strata`; the repository's
assets/, pipelines/, retrieval/, ... are mapped under it), ships its data files (the
web page, the tree-sitter queries, py.typed), and writes only where the user works —
never inside the installed package, never into this repository.

The fresh venv borrows the third-party packages of the running one through a .pth
line (installing torch and the rest again would take minutes and the network); that
directory's own .pth files, this checkout's editable hook among them, are not read,
so `strata` can only come from the wheel — which the test asserts."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.source_tree import LINKED

pytestmark = pytest.mark.e2e

NOTES = {
    "barometer.md": "# Barometer drift\n\nCorrect pressure readings for barometric drift by "
                    "subtracting the reference station's trend.\n\n## Calibration\n\n"
                    "Calibrate the sensor against the reference every week.\n",
    "wind.md": "# Wind vanes\n\nA wind vane points into the wind; read its angle in degrees.\n",
    "tools/average.py": "def rolling_mean(values, window):\n"
                        "    \"\"\"Smooth readings with a rolling mean.\"\"\"\n"
                        "    return [sum(values[i:i + window]) / window "
                        "for i in range(len(values) - window + 1)]\n",
}


def _tree(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _run(args, cwd, env, timeout=900) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


def test_the_wheel_installs_and_indexes_a_folder_outside_the_repository(tmp_path):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "--disable-pip-version-check", "-w", str(dist), str(REPO)], cwd=tmp_path, env=os.environ)
    (wheel,) = dist.glob("strata-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"strata"}, sorted(tops)
    for shipped in ("strata/retrieval/__init__.py", "strata/pipelines/cli.py", "strata/py.typed",
                    "strata/stages/parse/code/queries/bash.scm", "strata/service/static/index.html"):
        assert shipped in names, shipped

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=os.environ)
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path, env=os.environ).stdout.strip())
    (site / "_borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q",
          "--disable-pip-version-check", str(wheel)], cwd=tmp_path, env=os.environ)

    work = tmp_path / "work"
    for rel, text in NOTES.items():
        (work / "notes" / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / "notes" / rel).write_text(text)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STRATA_", "DAGSTER_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(HOME=str(tmp_path / "home"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
    (tmp_path / "home").mkdir()

    where = _run([str(py), "-c", "import strata.retrieval, strata.pipelines.cli as c; print(c.__file__)"],
                 cwd=work, env=env).stdout.strip()
    assert Path(where).is_relative_to(site), f"strata imported from {where}, not the wheel in {site}"
    for bare in LINKED:
        assert not (site / bare).exists(), f"the wheel installed a top-level '{bare}'"

    package_before = _tree(site / "strata")
    repo_data_before = _tree(REPO / "data")

    _run([str(venv / "bin" / "strata"), "index", "notes", "--corpus", "notes",
          "--llm-backend", "offline"], cwd=work, env=env)
    index = work / "data" / "indexes" / "notes"
    assert (index / "CURRENT").is_file(), sorted(str(p.relative_to(work)) for p in work.rglob("*"))[:40]

    found = _run([str(venv / "bin" / "strata"), "search", "--index", "data/indexes/notes", "-k", "3",
                  "how do I correct pressure readings for barometric drift?"], cwd=work, env=env)
    assert "barometer.md" in found.stdout, found.stdout

    assert _tree(site / "strata") == package_before, "the installed package was written to"
    assert _tree(REPO / "data") == repo_data_before, "the repository's data/ was written to"
