"""Bounded fuzzing of the Markdown, HTML and code parsers with hypothesis:
any text must parse without raising, into rows whose parents
exist and whose line ranges lie inside the file. Examples are built from
fragments that stress the parsers (unclosed fences, ragged tables, deep
lists, stray HTML, links, odd unicode), mixed with arbitrary text.

Crashes found become the explicit ``@example`` cases below. The example
count is small in `make test` and larger with STRATA_HYPOTHESIS_PROFILE=bench.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from strata.stages.discover import SourceFile
from strata.stages.nodes import parse_source
from strata.stages.parse.finalize import ParseSettings, finalize

PROFILES = {"ci": 300, "bench": 5000}
EXAMPLES = PROFILES.get(os.environ.get("STRATA_HYPOTHESIS_PROFILE", "ci"), 300)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))

FRAGMENTS = [
    "# ", "## ", "###### ", "####### ", "\n", "\n\n", "```", "```python\n", "~~~", "    ",
    "| a | b |\n", "|---|---|\n", "| 1 |\n", "- ", "  - ", "* ", "1. ", "> ", ">>> ",
    "[link](", "](#anchor)", "![img](", ".png)", "<div>", "</div>", "<table><tr><td>",
    "<!--", "-->", "<script>", "`", "**", "__", "\\", "\t", "\r\n", "\x00", "\u200b",
    "\ufeff", "é", "漢字", "🙂", "def f(:", "class A:\n", "import os\n", "'''", '"""',
    "{", "}", "(", ")", "[[", "]]", "#anchor", "http://example.com/x", "../../etc/passwd",
]
texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=40)),
                 max_size=60).map("".join)


def _check(path: str, fmt: str, text: str) -> None:
    src = SourceFile(path, fmt, len(text), "h", text=text)
    pf = parse_source(src, ParseSettings(), {})
    rows, _ = finalize(pf, "fuzz", path, text, ParseSettings())
    ids = {r["node_id"] for r in rows}
    n_lines = max(1, len(text.splitlines()))
    for r in rows:
        assert r["parent_id"] is None or r["parent_id"] in ids, r
        if r["start_line"] is not None:
            assert 1 <= r["start_line"] <= (r["end_line"] or r["start_line"]) <= n_lines + 1, r


@FUZZ
@given(texts)
@example("```python\n" + "x\n" * 3)          # unterminated fence
@example("- a\n" + "  " * 500 + "- deep\n")   # deep list
@example("| a |\n|---|\n" + "| b | c | d |\n" * 3)  # ragged table
def test_markdown_never_raises(text):
    from strata.stages.parse.markdown import parse_markdown

    parse_markdown(text, "fuzz.md")  # the parser itself, not only its plain-text fallback
    _check("fuzz.md", "markdown", text)


@FUZZ
@given(texts)
def test_html_never_raises(text):
    from strata.stages.parse.html import parse_html

    parse_html(text, "fuzz.html")
    _check("fuzz.html", "html", text)


@FUZZ
@given(texts)
@example("def f(:\n    pass\n")
@example("x = " + "(" * 3000 + ")" * 3000)
def test_python_falls_back_without_raising(text):
    _check("pkg/fuzz.py", "python", text)


@FUZZ
@given(texts, st.sampled_from(["go", "rust", "typescript", "yaml", "json", "toml"]))
def test_other_parsers_fall_back_without_raising(text, fmt):
    ext = {"go": "go", "rust": "rs", "typescript": "ts", "yaml": "yaml", "json": "json",
           "toml": "toml"}[fmt]
    _check(f"fuzz.{ext}", fmt, text)
