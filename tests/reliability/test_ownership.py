"""A build never indexes Strata's own output and never takes over a folder that
is not its own: run as a user would, through the `strata` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from strata.stages.discover import discover, iter_paths
from tests.conftest import REPO

PAGES = {"tides.md": "# Tides\n\nThe harbour gauge reads the tide every minute.\n",
         "gauge.py": "def read_gauge(port):\n    \"\"\"Read one tide gauge.\"\"\"\n    return port\n"}


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("STRATA_HOME", "STRATA_CORPORA", "DAGSTER_HOME")}
    return {**env, "STRATA_SHARDS": "1", **extra}


def _strata(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "strata.pipelines.cli", *args], cwd=cwd,
                          env=env or _env(), capture_output=True, text=True, timeout=600)


def _folder(path: Path, pages=PAGES) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (path / name).write_text(text)
    return path


def test_indexing_the_project_folder_leaves_out_its_own_output(tmp_path, monkeypatch):
    """`cd notes && strata index . --corpus self`: the project folder is `notes`, so
    the Dagster home, the index and the registry land inside the corpus; a second
    build sees the same files as the first."""
    notes = _folder(tmp_path / "notes")
    first = _strata(["index", ".", "--corpus", "self", "--json", "-q"], cwd=notes)
    assert first.returncode == 0, first.stderr[-2000:]
    assert (notes / ".dagster").is_dir() and (notes / "data" / "indexes" / "self").is_dir()
    assert (notes / "data" / "corpora.local.yaml").is_file()  # the registry the CLI writes
    second = _strata(["index", ".", "--corpus", "self", "--json", "-q"], cwd=notes)
    assert second.returncode == 0, second.stderr[-2000:]
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert b["files"] == a["files"] == len(PAGES)
    assert b["nodes"] == a["nodes"]
    monkeypatch.chdir(notes)  # the project whose registry is left out is the current one
    walked = sorted(rel for rel, _ in iter_paths(notes))
    assert walked == sorted(PAGES)


def test_a_renamed_index_or_dagster_home_is_still_left_out(tmp_path, monkeypatch):
    """Recognised by what they are, not by their names."""
    notes = _folder(tmp_path / "notes")
    built = _strata(["index", str(notes), "--corpus", "n", "--out", str(tmp_path / "idx"), "-q"],
                    cwd=tmp_path, env=_env(DAGSTER_HOME=str(tmp_path / "dh")))
    assert built.returncode == 0, built.stderr[-2000:]
    (tmp_path / "idx").rename(notes / "my stuff")
    (tmp_path / "dh").rename(notes / "runs")
    monkeypatch.chdir(tmp_path)
    assert sorted(rel for rel, _ in iter_paths(notes)) == sorted(PAGES)


def test_the_home_folder_is_not_walked_without_a_word(tmp_path):
    home = _folder(tmp_path / "home")
    proc = _strata(["index", str(home), "--corpus", "h", "--out", str(tmp_path / "o")],
                   cwd=tmp_path, env=_env(HOME=str(home)))
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1, err
    assert "your home folder (2 files to walk)" in err[0] and "--yes" in err[0]
    assert not (tmp_path / "o").exists()
    ok = _strata(["index", str(home), "--corpus", "h", "--out", str(tmp_path / "o"), "--yes",
                  "-q"], cwd=tmp_path, env=_env(HOME=str(home)))
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_an_out_folder_that_is_someone_elses_is_refused(tmp_path):
    src = _folder(tmp_path / "small")
    theirs = tmp_path / "u"
    theirs.mkdir()
    (theirs / "CURRENT").write_text("mine\n")
    proc = _strata(["index", str(src), "--corpus", "x", "--out", str(theirs)], cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "is not empty and is not a Strata index" in line and "--yes" in line
    # --yes does not let Strata take a name that is already there
    proc = _strata(["index", str(src), "--corpus", "x", "--out", str(theirs), "--yes"],
                   cwd=tmp_path)
    assert proc.returncode == 2
    assert "holds CURRENT, which Strata did not write" in proc.stderr
    assert (theirs / "CURRENT").read_text() == "mine\n"
    assert sorted(p.name for p in theirs.iterdir()) == ["CURRENT"]


def test_force_removes_only_what_strata_wrote(tmp_path):
    src = _folder(tmp_path / "small")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("mine\n")
    (shared / "cache-of-mine").mkdir()
    assert _strata(["index", str(src), "--corpus", "x", "--out", str(shared)],
                   cwd=tmp_path).returncode == 2  # not empty, not an index
    built = _strata(["index", str(src), "--corpus", "x", "--out", str(shared), "--yes", "-q"],
                    cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    other = _strata(["index", str(src), "--corpus", "y", "--out", str(shared), "--force", "-q"],
                    cwd=tmp_path)
    assert other.returncode == 0, other.stderr[-2000:]
    assert (shared / "notes.txt").read_text() == "mine\n"
    assert (shared / "cache-of-mine").is_dir()
    record = json.loads((shared / ".strata-owned.json").read_text())
    assert "notes.txt" not in record["names"] and "build" in record["names"]


def test_an_unreadable_folder_is_reported_not_dropped(tmp_path, monkeypatch):
    root = _folder(tmp_path / "corpus")
    _folder(root / "locked", {"secret.md": "# Secret\n\ntext\n"})
    real = os.scandir

    def scandir(path="."):
        if Path(path) == root / "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    found = {s.path: s for s in discover(root)}
    assert "locked" in found
    assert found["locked"].reason == "folder not readable: Permission denied"
    assert found["locked"].text is None
    assert {"tides.md", "gauge.py"} <= set(found)


@pytest.mark.parametrize("inside", ["root", "parent"])
def test_an_out_that_would_hold_the_corpus_is_refused(tmp_path, inside):
    src = _folder(tmp_path / "a" / "b")
    out = src if inside == "root" else tmp_path / "a"
    proc = _strata(["index", str(src), "--corpus", "x", "--out", str(out)], cwd=tmp_path)
    assert proc.returncode == 2
    assert "would hold the folder it indexes" in proc.stderr


def test_the_repository_layout_is_unchanged_by_the_exclusions():
    """The bundled sample (no Strata folders inside) lists every file as before."""
    listed = [rel for rel, _ in iter_paths(REPO / "data" / "sample")]
    assert len(listed) > 10
    assert not any(".strata-owned" in rel for rel in listed)
