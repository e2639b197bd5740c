"""The README and the documentation site's pages stay true: the generated blocks
match the code, the README's two set-up commands come first, every picture and
page they point to exists, every `strata …` command they show is one the CLI
accepts, and their Python snippets run on a fresh build of the sample.

(The site itself — a strict mkdocs build, the generated CLI and settings pages —
is checked in tests/test_docs_site.py.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from strata.core.config import schema_doc
from tests.conftest import REPO
from tests.s3 import s3_endpoint

README = (REPO / "README.md").read_text()
DOCS = REPO / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


def _page(rel: str) -> str:
    return (DOCS / rel).read_text()


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(r"^```" + lang + r"\n(.*?)^```", text, flags=re.S | re.M)


def test_the_schema_block_is_generated_from_the_schema():
    page = _page("reference/artifacts.md")
    block = re.search(re.escape(schema_doc.START) + r".*?" + re.escape(schema_doc.END),
                      page, flags=re.S)
    assert block, "docs/reference/artifacts.md has the schema block"
    assert block.group(0) == schema_doc.block(), "run: python -m strata.core.config.schema_doc (or make docs)"


def test_the_readme_starts_with_the_two_commands():
    first = re.search(r"```bash\n(.*?)```", README, flags=re.S).group(1).strip().splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make run", "make test"]
    # and nothing but the title comes before them
    assert README.index("```bash") < README.index("\n\n", README.index("# Strata")) + 3


def test_the_readme_says_what_the_set_up_costs_and_runs_what_is_installed():
    """A newcomer learns the price before paying it (Python, network, disk, time), and
    every command shown runs from a fresh clone without activating anything: the
    venv's ``strata`` is not on PATH."""
    head = README[:README.index("\n## ")]
    for needed in ("Python 3.11", "network", "GB", "minutes"):
        assert needed in head, needed
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    bare = [line for b in blocks for line in b.splitlines() if re.match(r"\s*strata\b", line)]
    assert not bare, bare


def test_the_readme_is_short_and_points_into_the_docs():
    assert len(README.splitlines()) <= 250, "reference material belongs in docs/"
    for page in ("docs/guides/dagster-ui.md", "docs/guides/notebook.md",
                 "docs/guides/agents.md", "docs/guides/serve.md", "docs/guides/add-a-corpus.md"):
        assert f"]({page})" in README, page


def test_every_local_link_and_picture_exists():
    missing = []
    for doc in [REPO / "README.md", *PAGES]:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"^(https?:|mailto:|#|data:)", target):
                continue
            path = (doc.parent / target.split("#")[0]).resolve()
            if not path.exists():
                missing.append(f"{doc.relative_to(REPO)}: {target}")
    assert not missing, missing


def _strata_commands(text: str) -> list[list[str]]:
    """The `strata …` invocations in a page's bash blocks, as argument lists; lines
    with placeholders of optional parts (`[-k 5]`, `…`) are left out."""
    found = []
    for block in _blocks(text, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if not line or line.startswith("#") or re.search(r"\[|…|\.\.\.", line):
                continue
            for part in re.split(r"&&|\|\||;|\|", line):
                try:
                    words = shlex.split(part)
                except ValueError:
                    continue
                while words and re.match(r"^[A-Z_]+=", words[0]):
                    words = words[1:]  # VAR=value before the command
                if words and Path(words[0]).name == "strata":
                    found.append(words[1:])
    return found


@pytest.mark.parametrize("doc", [REPO / "README.md", *PAGES], ids=lambda p: p.name)
def test_the_strata_commands_shown_are_ones_the_cli_accepts(doc):
    from strata.pipelines.cli import build_parser

    for args in _strata_commands(doc.read_text()):
        try:
            build_parser().parse_args(args)
        except SystemExit as e:  # argparse's way of refusing
            pytest.fail(f"{doc.relative_to(REPO)}: `strata {shlex.join(args)}` is refused ({e})")


def test_the_mcp_configurations_start_strata_mcp():
    """The client configurations on the agents page are JSON a client reads, the
    stdio one starts `strata mcp` with arguments the CLI accepts, the HTTP one
    points at the server's default address with a bearer key."""
    import json

    from strata.pipelines.cli import build_parser
    from strata.service.commands import cmd_mcp
    from strata.service.mcp_args import DEFAULT_PORT

    page = _page("guides/agents.md")
    configs = [json.loads(b)["mcpServers"]["strata"] for b in _blocks(page, "json")]
    assert len(configs) == 2
    stdio, http = configs
    assert stdio["command"].endswith("/.venv/bin/strata")
    args = build_parser().parse_args(stdio["args"])
    assert args.func is cmd_mcp and not args.http
    assert args.index == ["/path/to/strata/data/indexes/sample"]
    assert http["type"] == "http" and http["url"] == f"http://127.0.0.1:{DEFAULT_PORT}/mcp"
    assert http["headers"]["Authorization"].startswith("Bearer strata_")
    for line in _blocks(page, "bash")[0].splitlines():
        command = line.split("#")[0].split()
        assert command[:2] == ["strata", "mcp"]
        assert build_parser().parse_args(command[1:]).func is cmd_mcp


@pytest.fixture
def in_a_project_with_the_sample(sample_index, tmp_path, monkeypatch):
    """A folder where the snippets find the sample where they look for it:
    data/indexes/sample (a fresh build of it)."""
    (tmp_path / "data" / "indexes").mkdir(parents=True)
    (tmp_path / "data" / "indexes" / "sample").symlink_to(sample_index)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_framework_snippets_run(in_a_project_with_the_sample, capsys):
    """The LangChain and LlamaIndex snippets, as written, on the sample."""
    import importlib.util

    snippets = _blocks(_page("guides/frameworks.md"), "python")
    assert len(snippets) == 2 and "langchain" in snippets[0] and "llama_index" in snippets[1]
    ran = 0
    for code, module in zip(snippets, ["langchain_core", "llama_index.core"]):
        try:
            if importlib.util.find_spec(module) is None:
                continue
        except (ModuleNotFoundError, ValueError):
            continue
        exec(compile(code, f"docs/guides/frameworks.md ({module} snippet)", "exec"), {})
        ran += 1
        out = capsys.readouterr().out
        # the hits with their locations and breadcrumbs, the drift passage among them
        assert re.search(r"docs/calibration\.md:\d+-\d+", out), out
        assert "docs/calibration.md > Calibration > Barometric drift" in out, out
    if not ran:
        pytest.skip("neither strata[langchain] nor strata[llamaindex] is installed")


@pytest.mark.parametrize("where", ["README.md", "docs/guides/notebook.md", "docs/concepts/modes.md"])
def test_the_python_snippets_run(where, in_a_project_with_the_sample, capsys):
    """The Python snippets of the README and the query pages, as written, on the sample."""
    snippets = _blocks((REPO / where).read_text(), "python")
    assert snippets, f"{where} shows Python"
    for i, code in enumerate(snippets):
        exec(compile(code, f"{where} (snippet {i + 1})", "exec"), {})
    if where == "README.md":
        assert "docs/calibration.md > Calibration > Barometric drift" in capsys.readouterr().out


def test_the_living_indexes_page_shows_what_runs(in_a_project_with_the_sample, monkeypatch, tmp_path):
    """docs/living-indexes.md as written: its dagster.yaml is the one Strata writes, its
    corpora.yaml with a mirror is one the registry accepts, its launchpad config is one
    the index job takes, and its Python snippets — versions on disk, then a mirrored
    index opened from its s3:// URI — run, against a real S3 endpoint on loopback (moto's
    server; the only change to the page's code is that endpoint added to each URI)."""
    import yaml

    from strata.core.storage.mirror import push_version
    from strata.pipelines.instance_config import SETTINGS
    from strata.retrieval import Index
    from strata.stages.corpora import load_corpora

    page = _page("living-indexes.md")
    configs = [yaml.safe_load(b) for b in _blocks(page, "yaml")]
    instance = next(c for c in configs if "run_queue" in c)
    assert {k: instance[k] for k in ("concurrency", "run_queue")} == \
        {k: SETTINGS[k] for k in ("concurrency", "run_queue")}
    launch = {"execution": {"config": {"workers": 4}}}
    assert launch in configs
    import dagster as dg

    from strata.pipelines.definitions import defs

    assert dg.validate_run_config(defs.resolve_job_def("index_corpus"), launch)
    mirrored = next(c for c in configs if "corpora" in c)
    (tmp_path / "srv").mkdir()
    mirrored["corpora"]["docs"]["root"] = str(tmp_path / "srv")
    (tmp_path / "corpora.yaml").write_text(yaml.safe_dump(mirrored))
    spec = load_corpora(tmp_path / "corpora.yaml")["docs"]
    assert spec.mirror == "s3://my-bucket/indexes/docs?region=eu-west-1"

    with s3_endpoint(monkeypatch, tmp_path / "cache", "my-bucket", region="eu-west-1") as endpoint:
        loopback = f"?endpoint_override={endpoint}&scheme=http&region="
        uri = spec.mirror.replace("?region=", loopback)
        push_version(Index.open("data/indexes/sample")._vdir, uri)
        scope: dict = {}
        for i, code in enumerate(_blocks(page, "python")):
            code = code.replace("?region=", loopback)
            exec(compile(code, f"docs/living-indexes.md (snippet {i + 1})", "exec"), scope)
        assert scope["idx"].source == uri
        assert scope["idx"].version == 1
        assert scope["old"].version == 1
        assert scope["idx"].search("barometric drift", k=1)[0].path == "docs/calibration.md"


def test_the_pipeline_diagram_is_drawn_from_the_readmes_source():
    """One Mermaid source: the README shows it (GitHub draws it), the site shows
    docs/images/pipeline.svg drawn from docs/images/pipeline.mmd (`make diagram`), so
    the page reads offline. Every label of the source is in the drawing."""
    source = (DOCS / "images" / "pipeline.mmd").read_text()
    assert _blocks(README, "mermaid") == [source]
    assert "images/pipeline.svg" in _page("index.md") and not _blocks(_page("index.md"), "mermaid")
    svg = (DOCS / "images" / "pipeline.svg").read_text()
    labels = re.findall(r'\["([^"<]+)', source)
    assert len(labels) >= 8
    drawn = set(re.sub(r"<[^>]+>", " ", svg).split())  # a title may be drawn word by word
    missing = [label for label in labels if not set(label.replace("&", "&amp;").split()) <= drawn]
    assert not missing, f"{missing}: run make diagram"
