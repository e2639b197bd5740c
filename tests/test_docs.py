"""The README and docs stay true: the generated schema block matches the code,
the two set-up commands come first, and every picture and page they point to
exists."""

from __future__ import annotations

import re

from strata import schema_doc
from tests.conftest import REPO

README = (REPO / "README.md").read_text()


def test_the_schema_block_is_generated_from_the_schema():
    block = re.search(re.escape(schema_doc.START) + r".*?" + re.escape(schema_doc.END),
                      README, flags=re.S)
    assert block, "README has the schema block"
    assert block.group(0) == schema_doc.block(), "run: python -m strata.schema_doc"


def test_the_readme_starts_with_the_two_commands():
    first = re.search(r"```bash\n(.*?)```", README, flags=re.S).group(1).strip().splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make run", "make test"]


def test_every_local_link_and_picture_exists():
    docs = [REPO / "README.md", *(REPO / "docs").glob("*.md")]
    missing = []
    for doc in docs:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"^(https?:|mailto:|#|data:)", target):
                continue
            path = (doc.parent / target.split("#")[0]).resolve()
            if not path.exists():
                missing.append(f"{doc.name}: {target}")
    assert not missing, missing


def _section(title: str) -> str:
    found = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## )", README, flags=re.S | re.M)
    assert found, f"README has a section {title!r}"
    return found.group(1)


def test_the_mcp_configurations_start_strata_mcp():
    """The client configurations in the README are JSON a client reads, the stdio
    one starts `strata mcp` with arguments the CLI accepts, the HTTP one points
    at the server's default address with a bearer key."""
    import json

    from strata.pipelines.cli import build_parser, cmd_mcp
    from strata.service.mcp_server import DEFAULT_PORT

    configs = [json.loads(b)["mcpServers"]["strata"]
               for b in re.findall(r"```json\n(.*?)```", _section("Use it from an agent"), re.S)]
    assert len(configs) == 2
    stdio, http = configs
    assert stdio["command"].endswith("/.venv/bin/strata")
    args = build_parser().parse_args(stdio["args"])
    assert args.func is cmd_mcp and not args.http
    assert args.index == ["/path/to/strata/data/indexes/sample"]
    assert http["type"] == "http" and http["url"] == f"http://127.0.0.1:{DEFAULT_PORT}/mcp"
    assert http["headers"]["Authorization"].startswith("Bearer strata_")
    for line in re.findall(r"```bash\n(.*?)```", _section("Use it from an agent"), re.S)[0] \
            .splitlines():
        command = line.split("#")[0].split()
        assert command[:2] == ["strata", "mcp"]
        assert build_parser().parse_args(command[1:]).func is cmd_mcp


def test_the_framework_snippets_run(sample_index, tmp_path, monkeypatch, capsys):
    """The README's LangChain and LlamaIndex snippets, as written, on a fresh
    build of the sample (found where they look for it: data/indexes/sample)."""
    import importlib.util

    import pytest

    snippets = re.findall(r"```python\n(.*?)```", _section("Use it from LangChain or LlamaIndex"),
                          re.S)
    assert len(snippets) == 2 and "langchain" in snippets[0] and "llama_index" in snippets[1]
    (tmp_path / "data" / "indexes").mkdir(parents=True)
    (tmp_path / "data" / "indexes" / "sample").symlink_to(sample_index)
    monkeypatch.chdir(tmp_path)
    ran = 0
    for code, module in zip(snippets, ["langchain_core", "llama_index.core"]):
        try:
            if importlib.util.find_spec(module) is None:
                continue
        except (ModuleNotFoundError, ValueError):
            continue
        exec(compile(code, f"README.md ({module} snippet)", "exec"), {})
        ran += 1
        out = capsys.readouterr().out
        # the hits with their locations and breadcrumbs, the drift passage among them
        assert re.search(r"docs/calibration\.md:\d+-\d+", out), out
        assert "docs/calibration.md > Calibration > Barometric drift" in out, out
    if not ran:
        pytest.skip("neither strata[langchain] nor strata[llamaindex] is installed")
