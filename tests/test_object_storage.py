"""Published versions mirrored to object storage and read back by URI,
against a real S3 HTTP endpoint on loopback (moto's server)."""

from __future__ import annotations

import pytest

from strata.retrieval import Index
from strata.core.storage.mirror import push_version, remote_current, remote_versions

from tests.s3 import s3_endpoint, uri


@pytest.fixture
def s3_uri(monkeypatch, tmp_path):
    with s3_endpoint(monkeypatch, tmp_path / "cache", "indexes") as endpoint:
        yield uri(endpoint, "indexes/sample")


def test_a_mirrored_version_opens_from_its_uri(sample_index, s3_uri):
    local = Index.open(sample_index)
    target = push_version(local._vdir, s3_uri)
    assert target.endswith(f"/versions/v{local.version:06d}")
    assert remote_current(s3_uri) == local.version and remote_versions(s3_uri) == [local.version]

    remote = Index.open(s3_uri)
    assert remote.version == local.version and remote.source == s3_uri
    query = "barometric drift correction"
    assert [r.node_id for r in remote.search(query, k=5)] == \
        [r.node_id for r in local.search(query, k=5)]
    # a second open of the pinned version reads the local copy without copying again
    again = Index.open(s3_uri, version=local.version)
    assert again.path == remote.path


def test_a_missing_remote_index_is_a_clear_error(s3_uri):
    from strata.core.storage.layout import IndexNotFound

    with pytest.raises(IndexNotFound, match="no published index"):
        Index.open(s3_uri.replace("/sample?", "/nothing?"))


def test_the_pipeline_mirrors_each_published_version(builder, sample_copy, s3_uri, tmp_path):
    from tests.conftest import write_corpora

    write_corpora(builder.config_path, {"mirrored": {
        "root": str(sample_copy), "out": str(tmp_path / "index"), "mirror": s3_uri}})
    result = builder.build("mirrored")
    meta = result.asset_materializations_for_node("mirrored_index")[0].metadata
    assert meta["version"].value == 1 and remote_current(s3_uri) == 1
    (sample_copy / "docs" / "added.md").write_text("# Added\n\nA page for version two.\n")
    builder.build("mirrored")
    assert remote_current(s3_uri) == 2 and remote_versions(s3_uri) == [1, 2]
    remote = Index.open(s3_uri)
    assert remote.documents().filter(remote.documents()["path"] == "docs/added.md").height == 1
