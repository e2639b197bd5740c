"""One settings model (strata.core.settings): the README's table is the model's,
every default is stated there once and read by the CLI, the resources and the
service, and a variable that cannot be used stops a command in one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from strata.core import settings as model
from tests.source_tree import source_files

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_table_is_the_models():
    text = (ROOT / "docs" / "reference" / "settings.md").read_text()
    block = re.search(re.escape(model.START) + r"\n(.*?)\n" + re.escape(model.END), text, re.S)
    assert block, "the settings page has lost its settings block"
    assert block.group(1) == model.env_table(), \
        "run: python -m strata.core.settings --readme docs/reference/settings.md (or make docs)"
    # and every variable the model reads has its row
    for group in model.GROUPS:
        for name in group.model_fields:
            assert f"| `{model.env_var(group, name)}` |" in block.group(1)


@pytest.mark.parametrize("literal", ['"gpt-4o-mini"', '"sentence-transformers/all-MiniLM-L6-v2"',
                                     "max_body_bytes: int = 64", "chunk_tokens: int = 200",
                                     "default=120.0", "max_length=2000", '"STRATA_LLM_MODEL"'])
def test_a_default_is_stated_once(literal):
    where = [str(p.relative_to(ROOT)) for p in source_files()
             if literal in p.read_text()]
    assert where in (["strata/core/settings.py"], []), where


def test_the_cli_resources_and_service_take_the_models_defaults():
    from strata.pipelines.cli import build_parser
    from strata.resources import EmbedderResource, LLMResource
    from strata.service.settings import ServiceSettings
    from strata.stages.parse.finalize import ParseSettings
    from strata.core.llm import LLMConfig

    llm, resource = LLMConfig(), LLMResource()
    for name in ("backend", "model", "api_key_env", "temperature", "max_tokens", "concurrency",
                 "timeout_s", "max_retries"):
        assert getattr(llm, name) == getattr(resource, name) == model.default(model.LLMSettings, name)
    for name in ("backend", "model", "batch_size"):
        assert getattr(EmbedderResource(), name) == model.default(model.EmbedSettings, name)
    service = ServiceSettings()
    for name in ("host", "port", "rate_per_minute", "max_body_bytes", "max_query_chars",
                 "reload_interval_s"):
        assert getattr(service, name) == model.default(model.ServeSettings, name)
    args = build_parser().parse_args(["index", "folder", "--corpus", "c"])
    assert args.chunk_tokens == ParseSettings().chunk_tokens == model.default(model.ChunkingSettings,
                                                                            "chunk_tokens")


def test_the_resources_name_the_variables_they_always_read():
    from strata.pipelines.definitions import environment

    env = environment()
    assert env["llm"]["backend"] == "STRATA_LLM_BACKEND"
    assert env["llm"]["callable_path"] == "STRATA_LLM_CALLABLE"
    assert env["llm"]["usd_per_million_prompt_tokens"] == "STRATA_LLM_USD_PER_M_PROMPT"
    assert env["corpora"] == {"config_path": "STRATA_CORPORA", "index_dir": "STRATA_INDEX_DIR"}
    assert env["embedder"]["model"] == "STRATA_EMBED_MODEL"


def test_flags_win_over_variables_which_win_over_defaults(monkeypatch):
    from strata.service.settings import ServiceConfigError, ServiceSettings

    assert ServiceSettings.from_env().port == model.default(model.ServeSettings, "port")
    monkeypatch.setenv("STRATA_SERVE_PORT", "8123")
    monkeypatch.setenv("STRATA_SERVE_INDEXES", "a:b")
    assert ServiceSettings.from_env().port == 8123
    assert ServiceSettings.from_env().indexes == ["a", "b"]
    assert ServiceSettings.from_env(port=9000).port == 9000
    monkeypatch.setenv("STRATA_MAX_BODY_BYTES", "12")
    with pytest.raises(ServiceConfigError, match=r"^\$STRATA_MAX_BODY_BYTES='12': .*1024"):
        ServiceSettings.from_env()
    monkeypatch.delenv("STRATA_MAX_BODY_BYTES")
    with pytest.raises(ServiceConfigError, match=r"^max_body_bytes=12: "):  # a flag: its name
        ServiceSettings.from_env(max_body_bytes=12)


def test_an_empty_variable_is_unset_and_home_is_not_read_from_dollar_home(monkeypatch, tmp_path):
    monkeypatch.setenv("STRATA_LLM_MODEL", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("STRATA_HOME", raising=False)
    assert model.load(model.LLMSettings).model == "gpt-4o-mini"
    assert model.load(model.ProjectSettings).home is None


@pytest.mark.parametrize("env, flags, expected", [
    ({"STRATA_LLM_TIMEOUT_S": "abc"}, ["mcp"], "$STRATA_LLM_TIMEOUT_S='abc': Input should be a valid number"),
    ({"STRATA_LLM_BACKEND": "gpt"}, ["mcp"], "$STRATA_LLM_BACKEND='gpt': Input should be 'offline'"),
    ({"STRATA_SHARDS": "0"}, ["index"], "$STRATA_SHARDS='0': Input should be greater than or equal to 1"),
    ({"STRATA_LLM_USD_PER_M_PROMPT": "cheap"}, ["index"], "$STRATA_LLM_USD_PER_M_PROMPT='cheap'"),
    ({}, ["index", "--chunk-tokens", "3"], "chunk_tokens=3: Input should be greater than or equal to 16"),
])
def test_a_setting_that_cannot_be_used_is_one_line_and_exit_2(tmp_path, env, flags, expected):
    """The real command, as a user runs it: one line on stderr, no traceback, exit 2."""
    import os

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nText.\n")
    if flags[0] == "mcp":  # builds its LLM from the settings before it opens an index
        args = ["mcp", "--index", str(tmp_path / "missing")]
    else:
        args = ["index", str(folder), "--corpus", "docs", "--dry-run", *flags[1:]]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", *args], cwd=tmp_path,
                          env={**clean, "STRATA_HOME": str(tmp_path), **env},
                          capture_output=True, text=True, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert "Traceback" not in proc.stderr
