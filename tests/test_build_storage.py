"""Where a build's files live while its steps run (:mod:`strata.core.storage.kinds`):
one registry, one module per kind, chosen by a corpus's ``shared:``. The store kind
runs against moto's S3 server on loopback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from strata.core.storage.kinds import KINDS, step_storage
from strata.core.storage.layout import IndexLayout
from strata.stages.corpora import CorpusError, load_corpora
from tests.conftest import REPO
from tests.s3 import s3_endpoint, uri


def _corpora(tmp_path, extra: str):
    (tmp_path / "docs").mkdir(exist_ok=True)
    path = tmp_path / "corpora.yaml"
    path.write_text(f"corpora:\n  docs:\n    root: docs\n{extra}")
    return load_corpora(path)


def test_a_corpus_names_its_kind_from_the_registry(tmp_path):
    assert _corpora(tmp_path, "").get("docs").shared == "folder"
    with pytest.raises(CorpusError, match="'shared' must be one of folder, store"):
        _corpora(tmp_path, "    shared: bucket\n")
    with pytest.raises(CorpusError, match="'shared' must be one of"):  # a list, not a name
        _corpora(tmp_path, "    shared: [store]\n")
    with pytest.raises(CorpusError, match="give it a 'mirror' URI"):
        _corpora(tmp_path, "    shared: store\n")
    with pytest.raises(ValueError, match="unknown build storage 'bucket'"):
        step_storage("bucket", None, tmp_path)


def test_the_cli_offers_the_registrys_kinds():
    helped = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "corpus", "add",
                             "--help"], capture_output=True, text=True, cwd=REPO, check=True)
    assert "{" + ",".join(KINDS) + "}" in helped.stdout


def test_the_folder_kind_is_the_build_itself(tmp_path):
    layout = IndexLayout(tmp_path / "out")
    layout.build.mkdir(parents=True)
    (layout.build / "nodes.parquet").write_bytes(b"nodes")
    storage = step_storage("folder", None, layout.root)
    assert (storage.pull(), storage.push(), storage.publish(layout.root / "versions")) == \
        (None, None, None)
    assert [p.name for p in layout.root.rglob("*")] == ["build", "nodes.parquet"]


def test_the_store_kind_moves_a_steps_files_and_publishes_there(monkeypatch, tmp_path):
    with s3_endpoint(monkeypatch, tmp_path / "cache", "builds") as endpoint:
        location = uri(endpoint, "builds/docs")
        a = step_storage("store", location, tmp_path / "a")
        assert "pulled 0 files" in a.pull()
        (tmp_path / "a" / "build" / "nodes.parquet").write_bytes(b"nodes")
        assert "pushed 1 files" in a.push()
        b = step_storage("store", location, tmp_path / "b")
        assert "pulled 1 files" in b.pull()
        assert (tmp_path / "b" / "build" / "nodes.parquet").read_bytes() == b"nodes"
        version = tmp_path / "b" / "versions" / "v000001"
        version.mkdir(parents=True)
        (version / "manifest.json").write_text("{}")
        (version / "nodes.parquet").write_bytes(b"nodes")
        assert b.publish(version).endswith("/versions/v000001")
        # a third worker with an empty folder meets the published version
        c = step_storage("store", location, tmp_path / "c")
        c.pull()
        assert (tmp_path / "c" / "versions" / "v000001" / "nodes.parquet").read_bytes() == b"nodes"
