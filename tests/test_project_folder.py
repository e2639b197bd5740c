"""Strata writes only where the user points it: the project folder is
$STRATA_HOME, else the nearest folder at or above the current one that is a Strata
project, else the current folder; relative --out/--index are the current folder's;
nothing is written in the repository or the installed package. The real command,
run as a user runs it, from folders outside the repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from strata.core.config.settings import corpora_file, dagster_home_dir, project_dir

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".venv", ".git", ".pytest_cache", "__pycache__", ".hypothesis", ".ruff_cache",
        ".import_linter_cache"}
# the benchmarks' own working folder: a benchmark run beside the tests writes there
SKIP_PATHS = {ROOT / "benchmarks" / "scratch"}


def _snapshot(folder: Path) -> dict[str, float]:
    """Every file under the repository (what a build could have written), with its mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames
                       if d not in SKIP and Path(dirpath) / d not in SKIP_PATHS]
        for f in filenames:
            p = Path(dirpath) / f
            try:
                out[str(p.relative_to(folder))] = p.stat().st_mtime
            except FileNotFoundError:
                pass
    return out


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("STRATA_") and k != "DAGSTER_HOME"}
    return {**env, "STRATA_SHARDS": "1", **extra}


def _strata(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    # the console script of this environment (the repository's editable install)
    exe = Path(sys.executable).with_name("strata")
    return subprocess.run([str(exe), *args], cwd=cwd, env=_env(**env), capture_output=True,
                          text=True, timeout=600)


def _docs(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "tides.md").write_text("# Tides\n\n## Gauge\n\nThe harbour gauge reads the tide "
                                     "every minute and files it with the port office.\n")
    return folder


def test_the_project_folder_is_found_from_the_current_one(tmp_path, monkeypatch):
    monkeypatch.delenv("STRATA_HOME", raising=False)
    monkeypatch.delenv("STRATA_CORPORA", raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    plain = tmp_path / "plain" / "deep"
    plain.mkdir(parents=True)
    assert project_dir(plain) == plain  # no project above: the current folder
    project = tmp_path / "proj"
    (project / "data").mkdir(parents=True)
    (project / "data" / "corpora.yaml").write_text("corpora: {}\n")
    below = project / "src" / "pkg"
    below.mkdir(parents=True)
    assert project_dir(below) == project  # the nearest project above
    assert corpora_file(below) == project / "data" / "corpora.yaml"
    assert dagster_home_dir(below) == project / ".dagster"
    marked = below / "inner"
    marked.mkdir()
    (marked / "strata.toml").write_text("")
    assert project_dir(marked / ".") == marked  # strata.toml marks one too; the nearest wins
    monkeypatch.setenv("STRATA_HOME", str(tmp_path / "home"))
    assert project_dir(below) == tmp_path / "home"
    assert corpora_file(below) == tmp_path / "home" / "data" / "corpora.yaml"
    monkeypatch.setenv("DAGSTER_HOME", "instance")  # relative: the current folder's
    assert dagster_home_dir(below) == below / "instance"
    # the repository is a project (make run writes data/indexes/sample there)
    monkeypatch.delenv("STRATA_HOME")
    assert project_dir(ROOT / "stages" / "parse") == ROOT


def test_a_build_writes_only_in_the_project_folder(tmp_path):
    before = _snapshot(ROOT)
    work = tmp_path / "work"
    docs = _docs(work / "docs")

    # a folder that is no project: it becomes one, all under it
    built = _strata(work, "index", "docs", "--corpus", "notes", "-q")
    assert built.returncode == 0, built.stderr[-3000:]
    index = work / "data" / "indexes" / "notes"
    assert (index / "CURRENT").is_file()
    registry = work / "data" / "corpora.local.yaml"
    assert "notes:" in registry.read_text()
    assert (work / ".dagster" / "dagster.yaml").is_file()
    # --index is the current folder's, as the build's own default was
    found = _strata(work, "search", "--index", "data/indexes/notes", "--json", "harbour gauge")
    assert found.returncode == 0, found.stderr[-3000:]
    assert json.loads(found.stdout)["results"]

    # from a folder below it, with STRATA_HOME elsewhere: the registry and the instance
    # go to STRATA_HOME, a relative --out is the current folder's
    home = tmp_path / "home"
    again = _strata(docs, "index", ".", "--corpus", "more", "--out", "../custom", "-q",
                    STRATA_HOME=str(home))
    assert again.returncode == 0, again.stderr[-3000:]
    assert (work / "custom" / "CURRENT").is_file()
    assert "more:" in (home / "data" / "corpora.local.yaml").read_text()
    assert (home / ".dagster" / "dagster.yaml").is_file()
    assert "more:" not in registry.read_text()
    assert not (docs / "data").exists() and not (docs / ".dagster").exists()

    # nothing was written in the repository (the editable install's package folder)
    after = _snapshot(ROOT)
    assert {p: t for p, t in after.items() if before.get(p) != t} == {}
