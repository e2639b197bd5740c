"""`strata corpus add/list/remove`, run as a user would: a subprocess against a
temporary corpora file and Dagster home. What is checked: a good folder is
registered exactly as `strata index` registers one (and then builds from that
entry), and every refusal is one line on stderr, exit code 2, with the registry
left byte for byte as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, SAMPLE


def strata(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("STRATA_HOME", "STRATA_INDEX_DIR")}
    env.update(STRATA_CORPORA=str(tmp / "corpora.yaml"), DAGSTER_HOME=str(tmp / "dagster"))
    return subprocess.run([sys.executable, "-m", "strata.pipelines.cli", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)


def registry(tmp: Path) -> Path:
    return tmp / "corpora.local.yaml"


def entries(tmp: Path) -> dict:
    return yaml.safe_load(registry(tmp).read_text())["corpora"]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "pumps.md").write_text("# Pumps\n\nThe intake pump is flushed monthly.\n")
    return root


def test_add_registers_the_corpus_and_says_how_it_gets_built(tmp_path, docs):
    proc = strata(tmp_path, "corpus", "add", str(docs), "--name", "pumps",
                  "--exclude", "drafts/", "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    entry = entries(tmp_path)["pumps"]
    assert (tmp_path / entry["root"]).resolve() == docs
    assert (tmp_path / entry["out"]).resolve() == tmp_path / "indexes" / "pumps"
    assert entry["exclude"] == ["drafts/"] and entry["workers"] == 2
    assert "registered corpus 'pumps'" in proc.stdout
    assert f"strata index {docs} --corpus pumps" in proc.stdout
    assert "make ui" in proc.stdout
    assert "/asset-groups?partition=pumps" in proc.stdout  # the UI link that picks it
    assert not (tmp_path / "indexes").exists()  # registering builds nothing
    listed = strata(tmp_path, "corpus", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [f"pumps\t{docs}\t{tmp_path / 'indexes' / 'pumps'}"]
    rows = json.loads(strata(tmp_path, "corpus", "list", "--json").stdout)
    assert [r["name"] for r in rows] == ["pumps"]


@pytest.mark.parametrize("case", ["missing", "file", "duplicate", "slash", "bad-pattern",
                                  "control-characters"])
def test_a_refusal_is_one_line_exit_2_and_leaves_the_registry_alone(tmp_path, docs, case):
    assert strata(tmp_path, "corpus", "add", str(docs), "--name", "pumps").returncode == 0
    before = registry(tmp_path).read_bytes()
    name, path, extra = "other", str(docs), []
    if case == "missing":
        path = str(tmp_path / "nowhere")
    elif case == "file":
        path = str(docs / "pumps.md")
    elif case == "duplicate":
        name = "pumps"
    elif case == "slash":
        name = "team/pumps"
    elif case == "bad-pattern":
        extra = ["--include", "!"]
    elif case == "control-characters":
        path = str(tmp_path / "evil\x1b]0;title\x07\nforged line")
    proc = strata(tmp_path, "corpus", "add", path, "--name", name, *extra)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert proc.stdout == ""
    assert registry(tmp_path).read_bytes() == before


def test_replace_changes_a_registered_corpus(tmp_path, docs):
    assert strata(tmp_path, "corpus", "add", str(docs), "--name", "pumps").returncode == 0
    proc = strata(tmp_path, "corpus", "add", str(docs), "--name", "pumps", "--replace",
                  "--include", "*.md")
    assert proc.returncode == 0, proc.stderr
    assert entries(tmp_path)["pumps"]["include"] == ["*.md"]


def test_remove_drops_only_the_registry_entry(tmp_path, docs):
    out = tmp_path / "index"
    out.mkdir()
    (out / "kept").write_text("x")
    assert strata(tmp_path, "corpus", "add", str(docs), "--name", "pumps", "--out",
                  str(out)).returncode == 2  # a non-empty folder that is not an index
    shutil.rmtree(out)
    assert strata(tmp_path, "corpus", "add", str(docs), "--name", "pumps", "--out",
                  str(out)).returncode == 0
    out.mkdir()
    (out / "CURRENT").write_text("1")
    proc = strata(tmp_path, "corpus", "remove", "pumps")
    assert proc.returncode == 0, proc.stderr
    assert entries(tmp_path) == {}
    assert (docs / "pumps.md").is_file() and (out / "CURRENT").is_file()
    again = strata(tmp_path, "corpus", "remove", "pumps")
    assert again.returncode == 2 and len(again.stderr.splitlines()) == 1


def test_a_declared_corpus_is_neither_shadowed_nor_removed(tmp_path, docs):
    (tmp_path / "corpora.yaml").write_text(yaml.safe_dump(
        {"corpora": {"pumps": {"root": "docs"}}}))
    for args in (("add", str(docs), "--name", "pumps", "--replace"), ("remove", "pumps")):
        proc = strata(tmp_path, "corpus", *args)
        assert proc.returncode == 2 and "declared in" in proc.stderr, proc.stderr
        assert len(proc.stderr.splitlines()) == 1
    assert not registry(tmp_path).exists()


def test_strata_index_builds_the_added_corpus(tmp_path):
    """The entry is what `strata index` reads: its out and include lines are used
    without being given again (the include keeps this build to a few files)."""
    root = tmp_path / "sample"
    shutil.copytree(SAMPLE, root)
    added = strata(tmp_path, "corpus", "add", str(root), "--name", "sample",
                   "--include", "notes/")
    assert added.returncode == 0, added.stderr
    before = entries(tmp_path)
    proc = strata(tmp_path, "index", str(root), "--corpus", "sample", "-q", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "indexes" / "sample"
    assert Path(json.loads(proc.stdout)["out"]) == out
    from strata.retrieval import Index

    paths = Index.open(out).documents()["path"].to_list()
    assert paths and all(p.startswith("notes/") for p in paths), paths
    assert entries(tmp_path) == before  # the build kept the settings it was added with
    listed = strata(tmp_path, "corpus", "list")
    assert listed.stdout.startswith("sample\t")
