"""Tests for stages.corpora: loading the corpora YAML and the local registry."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from strata.stages.corpora import (
    CorpusError,
    CorpusSpec,
    load_corpora,
    local_registry_path,
    register_corpus,
    validate_name,
)
from strata.core.encoders.embedding import DEFAULT_MODEL, EncoderSpec


def _config(folder: Path, corpora: dict, name: str = "corpora.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump({"corpora": corpora}))
    return path


def test_relative_root_and_out_resolve_against_the_yaml_folder(tmp_path, monkeypatch):
    cfg = _config(tmp_path / "conf", {
        "docs": {"root": "../data/docs", "out": "built/docs",
                 "include": ["**/*.md"], "exclude": ["drafts/**"]},
    })
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the working folder must not matter
    spec = load_corpora(cfg)["docs"]
    assert spec.name == "docs"
    assert spec.root == (tmp_path / "data" / "docs").resolve()
    assert spec.out == (tmp_path / "conf" / "built" / "docs").resolve()
    assert spec.include == ["**/*.md"]
    assert spec.exclude == ["drafts/**"]
    assert spec.embedding.model == DEFAULT_MODEL
    assert spec.embedding.backend == "sentence-transformers"


def test_absolute_root_is_kept(tmp_path):
    root = tmp_path / "abs" / "root"
    cfg = _config(tmp_path / "conf", {"a": {"root": str(root)}})
    assert load_corpora(cfg)["a"].root == root.resolve()


def test_default_out_is_indexes_beside_the_yaml(tmp_path):
    cfg = _config(tmp_path / "conf", {"docs": {"root": "src"}, "code": {"root": "."}})
    got = load_corpora(cfg)
    assert set(got) == {"docs", "code"}
    assert got["docs"].out == (tmp_path / "conf" / "indexes" / "docs").resolve()
    assert got["code"].out == (tmp_path / "conf" / "indexes" / "code").resolve()
    assert got["code"].root == (tmp_path / "conf").resolve()
    assert got["docs"].include == ["**/*"]
    assert got["docs"].exclude == []


def test_index_base_overrides_the_default_out_only(tmp_path):
    cfg = _config(tmp_path / "conf", {"a": {"root": "r"}, "b": {"root": "r", "out": "o"}})
    got = load_corpora(cfg, index_base=tmp_path / "elsewhere")
    assert got["a"].out == (tmp_path / "elsewhere" / "a").resolve()
    assert got["b"].out == (tmp_path / "conf" / "o").resolve()


def test_embedding_settings(tmp_path):
    cfg = _config(tmp_path, {
        "short": {"root": "r", "embedding": "my/model"},
        "full": {"root": "r", "embedding": {"backend": "openai", "model": "text-embedding-3-small",
                                            "base_url": "http://localhost:1234/v1"}},
    })
    got = load_corpora(cfg)
    assert got["short"].embedding.model == "my/model"
    assert got["short"].embedding.backend == "sentence-transformers"
    assert got["full"].embedding.backend == "openai"
    assert got["full"].embedding.model == "text-embedding-3-small"
    assert got["full"].embedding.base_url == "http://localhost:1234/v1"


def test_missing_yaml_means_no_corpora(tmp_path):
    assert load_corpora(tmp_path / "nope.yaml") == {}


def test_register_corpus_writes_local_file_and_merged_load_sees_it(tmp_path):
    conf = tmp_path / "conf"
    cfg = _config(conf, {"declared": {"root": "docs"}})
    before = cfg.read_text()
    spec = CorpusSpec(name="cli-corpus", root=tmp_path / "project",
                      out=conf / "indexes" / "cli-corpus", include=["**/*.md"],
                      embedding=EncoderSpec(model="some/model"))
    local = register_corpus(spec, cfg)
    assert local == conf / "corpora.local.yaml" == local_registry_path(cfg)
    assert local.is_file()
    assert cfg.read_text() == before  # declared corpora are left untouched
    assert not list(conf.glob("*.tmp"))

    raw = yaml.safe_load(local.read_text())["corpora"]["cli-corpus"]
    assert raw["root"] == "../project"  # written relative to the YAML folder
    assert raw["out"] == "indexes/cli-corpus"
    assert raw["include"] == ["**/*.md"]
    assert raw["embedding"]["model"] == "some/model"

    got = load_corpora(cfg)
    assert set(got) == {"declared", "cli-corpus"}
    assert got["cli-corpus"].root == (tmp_path / "project").resolve()
    assert got["cli-corpus"].out == (conf / "indexes" / "cli-corpus").resolve()
    assert got["cli-corpus"].include == ["**/*.md"]
    assert got["cli-corpus"].embedding.model == "some/model"
    assert got["declared"].root == (conf / "docs").resolve()


def test_register_twice_keeps_both_and_updates_in_place(tmp_path):
    cfg = _config(tmp_path, {})
    register_corpus(CorpusSpec(name="one", root=tmp_path / "a", out=tmp_path / "ia"), cfg)
    register_corpus(CorpusSpec(name="two", root=tmp_path / "b", out=tmp_path / "ib"), cfg)
    register_corpus(CorpusSpec(name="one", root=tmp_path / "c", out=tmp_path / "ic"), cfg)
    got = load_corpora(cfg)
    assert set(got) == {"one", "two"}
    assert got["one"].root == (tmp_path / "c").resolve()
    assert got["two"].root == (tmp_path / "b").resolve()


def test_local_registry_overrides_a_declared_corpus(tmp_path):
    cfg = _config(tmp_path, {"docs": {"root": "declared"}})
    register_corpus(CorpusSpec(name="docs", root=tmp_path / "registered",
                               out=tmp_path / "out"), cfg)
    assert load_corpora(cfg)["docs"].root == (tmp_path / "registered").resolve()


@pytest.mark.parametrize("name", ["bad name", "../evil", "a/b", ".hidden", "", "naïve", "x:y"])
def test_invalid_corpus_name_raises(tmp_path, name):
    with pytest.raises(CorpusError, match="invalid corpus name"):
        validate_name(name)
    cfg = _config(tmp_path, {name: {"root": "r"}})
    with pytest.raises(CorpusError, match="invalid corpus name"):
        load_corpora(cfg)


@pytest.mark.parametrize("name", ["docs", "my-corpus_2", "v1.0", "OpenHarmony"])
def test_valid_corpus_names(name):
    assert validate_name(name) == name


def test_corpus_without_root_names_the_corpus(tmp_path):
    cfg = _config(tmp_path, {"good": {"root": "r"}, "rootless": {"out": "somewhere"}})
    with pytest.raises(CorpusError, match="'rootless'") as err:
        load_corpora(cfg)
    assert "root" in str(err.value)


def test_corpus_with_empty_settings_has_no_root(tmp_path):
    path = tmp_path / "corpora.yaml"
    path.write_text("corpora:\n  bare:\n")
    with pytest.raises(CorpusError, match="corpus 'bare' has no 'root' folder"):
        load_corpora(path)


@pytest.mark.parametrize("text,fragment", [
    ("- just\n- a list\n", "expected a mapping"),
    ("corpora:\n  - a\n  - b\n", "'corpora' must be a mapping"),
])
def test_malformed_yaml_is_a_corpus_error(tmp_path, text, fragment):
    path = tmp_path / "corpora.yaml"
    path.write_text(text)
    with pytest.raises(CorpusError, match=fragment):
        load_corpora(path)


def test_a_corpus_remembers_its_llm_and_embedding_for_sensor_and_scheduled_runs(
        tmp_path, monkeypatch):
    """What `strata index --llm-* --embed-*` was given is written to the corpus's
    entry (never a key) and overrides the resources a sensor's or a schedule's run
    is built with (the code location's, from the environment)."""
    from strata.assets.common import llm_client
    from strata.pipelines.definitions import resolved_resources
    from strata.core.storage.layout import IndexLayout

    monkeypatch.setenv("STRATA_LLM_BACKEND", "offline")  # what the daemon's runs default to
    monkeypatch.setenv("MY_LLM_KEY", "sk-not-stored")
    cfg = _config(tmp_path, {})
    llm = {"backend": "openai", "model": "llama3.1", "base_url": "http://localhost:11434/v1",
           "api_key_env": "MY_LLM_KEY"}
    emb = EncoderSpec(backend="openai", model="nomic-embed-text",
                      base_url="http://localhost:11434/v1", api_key_env="MY_LLM_KEY")
    register_corpus(CorpusSpec(name="docs", root=tmp_path / "d", out=tmp_path / "i",
                               embedding=emb, llm=llm), cfg)
    assert "sk-not-stored" not in (tmp_path / "corpora.local.yaml").read_text()
    spec = load_corpora(cfg)["docs"]
    assert spec.llm == llm and spec.embedding == emb
    resources = resolved_resources()  # as a run gets them (dg.EnvVar resolved)
    client = llm_client(resources["llm"], spec, IndexLayout(tmp_path / "i"))
    try:
        assert client.name == "openai:llama3.1"
        assert client.config.base_url == "http://localhost:11434/v1"
        assert client.config.api_key_env == "MY_LLM_KEY"
    finally:
        client.close()
    assert resources["embedder"].spec_for(spec.embedding) == emb
    # a corpus without an llm entry keeps the resource's settings
    register_corpus(CorpusSpec(name="plain", root=tmp_path / "p", out=tmp_path / "j"), cfg)
    plain = llm_client(resources["llm"], load_corpora(cfg)["plain"], IndexLayout(tmp_path / "j"))
    assert plain.offline
    plain.close()


def test_an_llm_entry_with_a_key_or_an_unknown_backend_is_refused(tmp_path):
    cfg = _config(tmp_path, {"a": {"root": "a", "llm": {"backend": "openai", "api_key": "sk"}}})
    with pytest.raises(CorpusError, match="unknown llm setting.*api_key.*never stored"):
        load_corpora(cfg)
    cfg = _config(tmp_path, {"a": {"root": "a", "llm": {"backend": "gpt"}}})
    with pytest.raises(CorpusError, match="llm backend 'gpt'"):
        load_corpora(cfg)


def test_include_and_exclude_are_gitignore_lines_checked_at_load(tmp_path):
    cfg = _config(tmp_path, {"one": {"root": "r", "exclude": "*.log"},
                             "two": {"root": "r", "include": ["docs/", "!docs/draft/"]}})
    got = load_corpora(cfg)
    assert got["one"].exclude == ["*.log"]  # one line given as a string is one pattern
    assert got["two"].include == ["docs/", "!docs/draft/"]
    bad = _config(tmp_path / "bad", {"bad": {"root": "r", "exclude": ["ok", "\\"]}})
    with pytest.raises(CorpusError, match="corpus 'bad': invalid exclude pattern"):
        load_corpora(bad)
    worse = _config(tmp_path / "worse", {"worse": {"root": "r", "include": [3]}})
    with pytest.raises(CorpusError, match="include must be a list of gitignore patterns"):
        load_corpora(worse)


def test_shared_store_needs_a_mirror_and_round_trips_through_the_registry(tmp_path):
    mirror = "s3://bucket/indexes/docs?region=eu-west-1"
    cfg = _config(tmp_path, {"docs": {"root": "r", "mirror": mirror, "shared": "store"},
                             "plain": {"root": "r"}})
    corpora = load_corpora(cfg)
    assert (corpora["docs"].shared, corpora["plain"].shared) == ("store", "folder")
    assert "shared" not in corpora["plain"].to_yaml(tmp_path)
    register_corpus(corpora["docs"], cfg)
    assert load_corpora(cfg)["docs"].shared == "store"
    for raw, fragment in (({"root": "r", "shared": "store"}, "give it a 'mirror'"),
                          ({"root": "r", "mirror": mirror, "shared": "nfs"}, "folder, store")):
        with pytest.raises(CorpusError, match=fragment):
            load_corpora(_config(tmp_path / "bad", {"docs": raw}))
