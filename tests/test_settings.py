"""One settings model (strata.core.config.settings): the README's table is the model's,
every default is stated there once and read by the CLI, the resources and the
service, and a variable that cannot be used stops a command in one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from strata.core.config import settings as model
from tests.source_tree import source_files

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_table_is_the_models():
    text = (ROOT / "docs" / "reference" / "settings.md").read_text()
    block = re.search(re.escape(model.START) + r"\n(.*?)\n" + re.escape(model.END), text, re.S)
    assert block, "the settings page has lost its settings block"
    assert block.group(1) == model.env_table(), \
        "run: python -m strata.core.config.settings --readme docs/reference/settings.md (or make docs)"
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
    assert where in (["strata/core/config/settings.py"], []), where


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


def _subparser(parser, name: str):
    import argparse

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_every_field_reaches_its_dagster_field_service_and_flag(monkeypatch):
    """The resources, the run config, the service and `strata serve` take their
    fields from the settings groups: each field of a group is there with its
    default and a description naming its variable, with no list to keep."""
    import dagster as dg

    from strata.assets.parse_config import ParseConfig
    from strata.pipelines.cli import CHUNK_FLAGS, build_parser
    from strata.service.commands import SERVE_FLAGS
    from strata.pipelines.definitions import environment
    from strata.resources import EmbedderResource
    from strata.resources.embedder import PROCESS_SETTINGS
    from strata.service.settings import ServiceSettings

    for config, group, left_out in ((EmbedderResource, model.EmbedSettings, PROCESS_SETTINGS),
                                    (ParseConfig, model.ChunkingSettings, ())):
        assert set(config.model_fields) == set(group.model_fields) - set(left_out)
        for name, f in config.model_fields.items():
            assert f.default == model.default(group, name)
            assert f.description == model.field_help(group, name)
    assert set(environment()["embedder"]) == set(EmbedderResource.model_fields)
    monkeypatch.setenv("STRATA_EMBED_BATCH_SIZE", "7")  # dg.EnvVar reaches a derived field
    assert EmbedderResource(batch_size=dg.EnvVar.int("STRATA_EMBED_BATCH_SIZE")) \
        .process_config_and_initialize().batch_size == 7

    service = ServiceSettings()
    for name in model.ServeSettings.model_fields:
        assert getattr(service, name) == model.default(model.ServeSettings, name)

    # `strata serve`: one flag per field, its value reaching the service's settings
    assert SERVE_FLAGS.fields() == tuple(model.ServeSettings.model_fields)
    serve = _subparser(build_parser(), "serve")
    helps = {a.dest: a.help for a in serve._actions}
    argv, expected = [], {}
    for name, f in model.ServeSettings.model_fields.items():
        assert model.env_var(model.ServeSettings, name) in helps[SERVE_FLAGS.dest(name)] \
            or name == "indexes"
        value = model.default(model.ServeSettings, name)
        if isinstance(value, bool):
            argv.append(SERVE_FLAGS.flag(name))
            expected[name] = True
            continue
        if value is None:  # a value of the field's type
            value = {int: 1, float: 1.0, str: "x"}[model._base_type(f.annotation)]
        value = ["a"] if value == [] else value
        argv += [SERVE_FLAGS.flag(name), str(value[0] if isinstance(value, list) else value)]
        expected[name] = value
    args = serve.parse_args(argv)
    assert SERVE_FLAGS.given(args) == expected
    settings = ServiceSettings.from_env(**SERVE_FLAGS.given(args))
    assert {name: getattr(settings, name) for name in expected} == expected

    index = _subparser(build_parser(), "index")
    assert index.parse_args(["f", "--corpus", "c", "--chunk-tokens", "99"]).chunk_tokens == 99
    assert CHUNK_FLAGS.fields() == ("chunk_tokens",)


def test_a_new_field_gets_its_variable_dagster_field_and_flag(monkeypatch):
    """What one new field of a group gets, declared nowhere else."""
    import argparse

    import dagster as dg

    class Widened(model.ServeSettings):
        spare_knob: int = model._env("STRATA_SPARE_KNOB", 3, "A knob", ge=1, le=9)

    monkeypatch.setenv("STRATA_SPARE_KNOB", "5")
    assert model.load(Widened).spare_knob == 5
    # its row of the settings table (env_table: one row per field of each of GROUPS)
    assert model.env_var(Widened, "spare_knob") == "STRATA_SPARE_KNOB"
    assert model._allowed(Widened.model_fields["spare_knob"]) == "≥ 1, ≤ 9"

    resource = model.settings_base(Widened, dg.ConfigurableResource)
    f = resource.model_fields["spare_knob"]
    assert f.default == 3 and "$STRATA_SPARE_KNOB" in f.description

    from strata.core.config.flags import Flags

    flags = Flags(Widened, bounded=True)
    parser = argparse.ArgumentParser()
    flags.add_to(parser)
    assert "$STRATA_SPARE_KNOB" in flags.help("spare_knob")
    assert flags.given(parser.parse_args(["--spare-knob", "4"])) == {"spare_knob": 4}
    assert flags.given(parser.parse_args([])) == {}  # absent: the variable, else the default
    with pytest.raises(SystemExit):
        parser.parse_args(["--spare-knob", "10"])  # outside the field's bounds
