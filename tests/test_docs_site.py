"""The documentation site builds, strictly and offline, and its generated
reference pages are the code's: the CLI page is rendered from the `strata`
parser (every subcommand, nested ones included), the settings page lists every
STRATA_* variable. `make docs` regenerates both and builds the site into site/."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from strata.core.config import settings as model
from strata.pipelines import cli_doc
from tests.conftest import REPO
from tests.source_tree import source_files

DOCS = REPO / "docs"

pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
pytest.importorskip("material", reason="the docs extra: pip install -e '.[docs]'")


def _build(config, site_dir):
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--clean",
                           "-f", str(config), "-d", str(site_dir)],
                          capture_output=True, text=True, timeout=300,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})


def test_the_site_builds_strictly(tmp_path):
    done = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    site = tmp_path / "site"
    for page in ["index.html", "reference/cli/index.html", "reference/settings/index.html",
                 "reference/artifacts/index.html", "reference/http-api/index.html",
                 "concepts/modes/index.html", "benchmarks/index.html", "search/search_index.json"]:
        assert (site / page).is_file(), page
    # offline: no web fonts fetched from Google
    assert "fonts.googleapis.com" not in (site / "index.html").read_text()


def test_a_broken_link_fails_the_build(tmp_path):
    """The same configuration on a copy of docs/ with one link to a page that is
    not there: --strict refuses it."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text() + "\n[gone](concepts/no-such-page.md)\n")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr


def test_every_page_is_in_the_nav():
    nav = (REPO / "mkdocs.yml").read_text()
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert [p for p in pages if f": {p}" not in nav] == []


def test_the_cli_reference_is_the_parsers():
    from strata.pipelines.cli import build_parser

    page = (DOCS / "reference" / "cli.md").read_text()
    commands = [" ".join(path) for path, _ in cli_doc.subcommands(build_parser())]
    assert {"index", "search", "ask", "serve", "mcp", "keys new"} <= set(commands)
    missing = [c for c in commands if not re.search(rf"^#+ `strata {re.escape(c)}`$", page, re.M)]
    assert not missing, f"{missing}: run python -m strata.pipelines.cli_doc (or make docs)"
    assert page == cli_doc.render(), "run: python -m strata.pipelines.cli_doc (or make docs)"


def test_the_settings_page_lists_every_variable():
    page = (DOCS / "reference" / "settings.md").read_text()
    names = {model.env_var(group, name) for group in model.GROUPS for name in group.model_fields}
    # and any full STRATA_* name the code reads outside the model (prefixes like STRATA_LLM_ aside)
    for path in source_files():
        names |= {n for n in re.findall(r"STRATA_[A-Z0-9_]+", path.read_text())
                  if not n.endswith("_")}
    assert names and not sorted(n for n in names if f"`{n}`" not in page)
