"""Tests for stages.parse.markdown on the real OpenHarmony pages and on
synthetic inputs that pin down each rule (and each hostile case)."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.stages.parse.markdown import parse_markdown, resolve_src
from strata.stages.parse.sections import github_slug
from strata.stages.parse.model import ParsedFile
from tests.parse.drafts import drafts_of_kind, parent_of, section_titled

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "openharmony_quickstart"


# ---------------------------------------------------------------- helpers




def _real(name: str) -> ParsedFile:
    if not CORPUS.is_dir():
        pytest.skip("openharmony_quickstart corpus not present")
    return parse_markdown((CORPUS / name).read_text(encoding="utf-8"), f"quickstart/{name}")


# ---------------------------------------------------------------- real pages


@pytest.fixture(scope="module")
def corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        pytest.skip("openharmony_quickstart corpus not present")
    files = sorted(CORPUS.glob("*.md"))
    assert len(files) == 51
    return files


def test_every_real_page_parses_cleanly(corpus_files):
    for f in corpus_files:
        text = f.read_text(encoding="utf-8")
        pf = parse_markdown(text, f"quickstart/{f.name}")
        n = len(text.splitlines())
        assert pf.root.kind == "file" and pf.root.subkind == "markdown"
        assert pf.root.end_line == n
        assert not any(note.startswith("markdown parse failed") for note in pf.notes), f.name
        for d in pf.root.walk():
            assert d.title.strip(), (f.name, d)
            assert d.text.strip(), (f.name, d.kind, d.start_line)
            assert 1 <= d.start_line <= d.end_line <= n, (f.name, d.kind, d.start_line, d.end_line)
        # sibling slugs are unique everywhere
        for d in pf.root.walk():
            slugs = [c.slug for c in d.children]
            assert len(slugs) == len(set(slugs)), (f.name, d.title, slugs)


def test_arkts_prop_heading_tree():
    pf = _real("arkts-prop.md")
    (h1,) = pf.root.children
    assert h1.subkind == "h1"
    assert h1.title == "@Prop Decorator: One-Way Synchronization from the Parent Component to Child Components"
    assert pf.root.title == h1.title
    h2 = [c.title for c in h1.children if c.kind == "section"]
    assert h2 == [
        "Overview",
        "Restrictions",
        "Rules of Use",
        "Variable Transfer/Access Rules",
        "Observed Changes and Behavior",
        "Application Scenarios",
        "FAQs",
    ]
    behaviour = section_titled(pf, "Observed Changes and Behavior")
    assert [c.title for c in behaviour.children] == ["Observed Changes", "Framework Behavior"]
    assert all(c.subkind == "h3" for c in behaviour.children)
    assert (behaviour.start_line, behaviour.end_line) == (55, 192)
    nesting = section_titled(pf, "@Prop Nesting Scenario")
    assert parent_of(pf, nesting).title == "Application Scenarios"
    assert nesting.slug == "prop-nesting-scenario"
    assert nesting.attrs["anchor"] == "prop-nesting-scenario"
    # "#" lines inside code blocks are not headings
    assert all(not d.title.startswith("//") for d in drafts_of_kind(pf, "section"))


def test_arkts_prop_code_tables_links():
    pf = _real("arkts-prop.md")
    codes = drafts_of_kind(pf, "code")
    assert len(codes) >= 15
    assert {c.language for c in codes} >= {"ts"}
    ts_blocks = [c for c in codes if c.language == "ts"]
    assert any("@Prop" in c.text for c in ts_blocks)
    # a code block in a list item is a child of its section, body de-indented
    observed = section_titled(pf, "Observed Changes")
    first = observed.children[0]
    assert first.kind == "code" and first.slug == "code-1" and first.language == "ts"
    assert first.text.startswith("// Simple type")
    assert "Simple type" not in observed.text
    assert first.attrs["context_before"].splitlines()[-1].startswith("- When the decorated variable is of the Object")

    tables = drafts_of_kind(pf, "table")
    assert [t.attrs["header"] for t in tables] == [
        ["@Prop Decorator", "Description"],
        ["Transfer/Access", "Description"],
    ]
    assert tables[0].attrs["rows"] == 5
    assert parent_of(pf, tables[0]).title == "Rules of Use"

    targets = {r.target: r for r in pf.references}
    assert "arkts-observed-and-objectlink.md" in targets
    assert targets["arkts-observed-and-objectlink.md"].source.title == "Rules of Use"
    assert "#prop-nesting-scenario" in targets
    assert "../reference/apis/js-apis-image.md#pixelmap7" in targets
    assert all(r.type == "jump" and r.relation == "links_to" for r in pf.references)
    assert not any(r.target.startswith("http") for r in pf.references)

    images = drafts_of_kind(pf, "image")
    assert images[0].attrs["resolved"] == "quickstart/figures/en-us_image_0000001552972029.png"


def test_app_configuration_table_title_and_json():
    pf = _real("app-configuration-file.md")
    example = section_titled(pf, "Configuration File Example")
    (code,) = [c for c in example.children if c.kind == "code"]
    assert code.language == "json"
    assert '"bundleName"' in code.text
    tags = section_titled(pf, "Tags in the Configuration File")
    table = next(c for c in tags.children if c.kind == "table")
    assert table.title == "Table 1 Tags in the app.json5 file"
    assert table.attrs["header"] == ["Name", "Description", "Data Type", "Initial Value Allowed"]
    assert table.attrs["rows"] > 10
    assert "| bundleName" not in tags.text
    assert any(r.target == "#icon" for r in pf.references)
    assert any(r.target.endswith("application-component-configuration-stage.md") for r in pf.references)


def test_contentslot_skipped_nothing_and_languages():
    pf = _real("arkts-rendering-control-contentslot.md")
    api = section_titled(pf, "ContentSlot API")
    assert parent_of(pf, api).title == "APIs"
    langs = {c.language for c in drafts_of_kind(pf, "code")}
    assert "ts" in langs and ("c++" in langs or "javascript" in langs)


def test_no_section_text_contains_a_code_body(corpus_files):
    for f in corpus_files:
        pf = parse_markdown(f.read_text(encoding="utf-8"), f"quickstart/{f.name}")
        for section in drafts_of_kind(pf, "section") + [pf.root]:
            assert "```" not in section.text, (f.name, section.title)
            for code in (c for c in section.children if c.kind == "code"):
                body = [ln for ln in code.text.splitlines() if len(ln.strip()) > 25]
                for ln in body[:3]:
                    assert ln not in section.text.splitlines(), (f.name, section.title, ln)


# ---------------------------------------------------------------- synthetic


def test_setext_headings_and_line_ranges():
    src = "intro\n\nTitle\n=====\n\ntext one\n\nSub\n---\n\ntext two\n"
    pf = parse_markdown(src, "a.md")
    assert pf.root.title == "Title"
    assert pf.root.text == "intro"
    (h1,) = [c for c in pf.root.children if c.kind == "section"]
    assert (h1.subkind, h1.start_line, h1.end_line) == ("h1", 3, 11)
    (h2,) = h1.children
    assert (h2.subkind, h2.title, h2.start_line, h2.end_line) == ("h2", "Sub", 8, 11)
    assert h1.text == "Title\n=====\n\ntext one"
    assert h2.text == "Sub\n---\n\ntext two"


def test_headings_inside_list_items_and_blockquotes():
    src = "# Top\n\n- item\n  ## Inner *emph* [link](other.md) `code`\n  body\n\n> ### Quoted\n> more\n"
    pf = parse_markdown(src, "a.md")
    top = section_titled(pf, "Top")
    inner = section_titled(pf, "Inner emph link code")
    quoted = section_titled(pf, "Quoted")
    assert parent_of(pf, inner) is top
    assert parent_of(pf, quoted) is inner
    assert inner.start_line == 4 and inner.end_line == 8
    assert "body" in inner.text and "more" in quoted.text
    (ref,) = pf.references
    assert ref.source is inner and ref.target == "other.md" and ref.attrs == {"text": "link", "line": 4}


def test_skipped_levels_nest_under_nearest_smaller():
    src = "# A\n### C\n## B\n#### D\n# E\n"
    pf = parse_markdown(src, "a.md")
    a, e = pf.root.children
    assert [c.title for c in a.children] == ["C", "B"]
    b = a.children[1]
    assert [c.title for c in b.children] == ["D"]
    assert (a.end_line, b.end_line, e.end_line) == (4, 4, 5)
    assert a.children[0].end_line == 2


def test_unterminated_fence_and_indented_code():
    src = "# S\n\nbefore\n\n    indented code\n\nafter\n\n~~~~Python\nx = 1\n~~~\nstill code\n"
    pf = parse_markdown(src, "a.md")
    s = section_titled(pf, "S")
    indented, fenced = s.children
    assert (indented.subkind, indented.language, indented.text) == ("indented", None, "indented code")
    assert (indented.start_line, indented.end_line) == (5, 5)
    assert fenced.subkind == "fenced" and fenced.language == "python"
    assert fenced.text == "x = 1\n~~~\nstill code"
    assert fenced.title == "python block in S"
    assert (fenced.start_line, fenced.end_line) == (9, 12)
    assert pf.notes == ["unterminated code fence at line 9"]
    assert [c.slug for c in s.children] == ["code-1", "code-2"]
    assert s.text == "# S\n\nbefore\n\nafter"


def test_closed_fences_are_not_reported():
    src = "```\na\n```\n\n- x\n\n  ````ts\n  b\n  `````\n> ```\n> c\n> ```\n"
    pf = parse_markdown(src, "a.md")
    assert pf.notes == []
    assert [c.text for c in drafts_of_kind(pf, "code")] == ["a", "b", "c"]


def test_context_before_and_after():
    src = "# S\n\np1\np2\n\np3\n\n```js\ncode\n```\n\na1\n\na2\n## Next\nother\n"
    pf = parse_markdown(src, "a.md", context_lines=2)
    code = section_titled(pf, "S").children[0]
    assert code.attrs["context_before"] == "p2\np3"
    assert code.attrs["context_after"] == "a1\na2"  # stops at the next heading
    pf0 = parse_markdown(src, "a.md", context_lines=0)
    assert section_titled(pf0, "S").children[0].attrs["context_before"] == ""


def test_pipe_table_and_html_table_with_th():
    src = (
        "# T\n\nShort caption:\n\n| A | *B* |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\n"
        "<table>\n<tr><th>Key</th><th>Value <b>x</b></th></tr>\n\n<tr><td>k</td><td>v</td></tr>\n</table>\n\ntail\n"
    )
    pf = parse_markdown(src, "a.md")
    pipe, html = section_titled(pf, "T").children
    assert (pipe.kind, pipe.subkind, pipe.slug) == ("table", "pipe", "table-1")
    assert pipe.attrs["header"] == ["A", "B"] and pipe.attrs["rows"] == 2
    assert pipe.title == "Short caption:"
    assert pipe.text == "| A | *B* |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |"
    assert (html.subkind, html.slug) == ("html", "table-2")
    assert html.attrs["header"] == ["Key", "Value x"] and html.attrs["rows"] == 1
    assert html.text.startswith("<table>") and html.text.endswith("</table>")
    assert (html.start_line, html.end_line) == (10, 14)  # spans the blank line
    assert html.attrs["context_after"] == "tail"
    section_text = section_titled(pf, "T").text
    assert "<td>" not in section_text and "| 1 |" not in section_text


def test_table_title_falls_back_when_caption_long():
    src = "# Params\n\n" + "word " * 30 + "\n\n| a |\n|---|\n| 1 |\n"
    (table,) = section_titled(parse_markdown(src, "a.md"), "Params").children
    assert table.title == "table in Params"


def test_images_resolution_and_text():
    src = (
        "# Pics\n\n![Diagram of flow](../img/flow.png \"Flow\")\n\n"
        "Inline ![icon](icons/i.svg) in a sentence.\n\n"
        "![](../../../etc/passwd.png)\n\n![remote](https://x.org/a.png)\n\n"
        '<img src="figures/b.png" alt="B pic">\n'
    )
    pf = parse_markdown(src, "docs/guide/page.md")
    flow, icon, outside, remote, html = drafts_of_kind(pf, "image")
    assert (flow.title, flow.text, flow.subkind) == ("Diagram of flow", "Diagram of flow", "markdown")
    assert flow.attrs["resolved"] == "docs/img/flow.png" and flow.attrs["src"] == "../img/flow.png"
    assert flow.attrs["alt"] == "Diagram of flow"
    assert flow.start_line == flow.end_line == 3
    assert icon.attrs["resolved"] == "docs/guide/icons/i.svg"
    assert icon.attrs["context_before"].endswith("Inline ![icon](icons/i.svg) in a sentence.")
    assert outside.text == "passwd.png" and outside.attrs["resolved"] is None
    assert outside.attrs["outside_root"] is True
    assert remote.attrs["resolved"] is None and remote.attrs["external"] is True
    assert (html.subkind, html.title, html.attrs["resolved"]) == ("html", "B pic", "docs/guide/figures/b.png")
    assert [i.slug for i in drafts_of_kind(pf, "image")] == [f"image-{n}" for n in range(1, 6)]
    text = section_titled(pf, "Pics").text
    assert "Inline ![icon](icons/i.svg) in a sentence." in text  # inline: sentence kept
    assert "flow.png" not in text and "<img" not in text  # alone on the line: dropped
    assert pf.references == []  # image srcs are not links


def test_resolve_src_rules():
    assert resolve_src("a.png", "x.md") == {"resolved": "a.png"}
    assert resolve_src("./a%20b.png?raw=1#frag", "d/x.md") == {"resolved": "d/a b.png"}
    assert resolve_src("/root.png", "d/e/x.md") == {"resolved": "root.png"}
    assert resolve_src("data:image/png;base64,AAA", "x.md")["external"] is True
    assert resolve_src("../a.png", "x.md") == {"resolved": None, "outside_root": True}


def test_front_matter_valid():
    src = "---\ntitle: From YAML\ntags: [a, b]\ndate: 2024-01-02\n---\n\nlead\n\n# Heading\n"
    pf = parse_markdown(src, "a.md")
    assert pf.root.title == "From YAML"
    assert pf.root.attrs["front_matter"] == {"title": "From YAML", "tags": ["a", "b"], "date": "2024-01-02"}
    assert pf.root.text == "lead"
    assert pf.notes == []


@pytest.mark.parametrize(
    "fm, note",
    [("- just\n- a list", "not a mapping"), ("key: [unclosed", "could not be parsed")],
)
def test_front_matter_invalid(fm, note):
    pf = parse_markdown(f"---\n{fm}\n---\n# H\n", "dir/page.md")
    assert pf.root.attrs["front_matter_raw"] == fm
    assert "front_matter" not in pf.root.attrs
    assert any(note in n for n in pf.notes)
    assert pf.root.title == "H"
    assert pf.root.text == "H"  # nothing before the heading but front matter


def test_title_falls_back_to_stem():
    pf = parse_markdown("just text\n", "dir/my-page.md")
    assert pf.root.title == "my-page" and pf.root.text == "just text"
    assert pf.root.children == []


def test_duplicate_slugs_and_anchors():
    src = (
        "# Guide\n## Example\n### Example\n## Example\n## What's new? (v2)\n"
        '<a name="legacy"></a>\n## Setup\n## <a id="inline-id"></a>Install `pkg`\n'
    )
    pf = parse_markdown(src, "a.md")
    guide = section_titled(pf, "Guide")
    assert [c.slug for c in guide.children] == ["example", "example-1", "whats-new-v2", "setup", "install-pkg"]
    first, second = guide.children[0], guide.children[1]
    nested = first.children[0]
    assert nested.slug == "example"  # only siblings are de-duplicated
    # GitHub anchors are de-duplicated file-wide, in document order
    assert first.attrs["anchor"] == "example"
    assert nested.attrs["anchor"] == "example-1"
    assert second.attrs["anchor"] == "example-2"
    setup = guide.children[3]
    assert setup.attrs["anchors"] == ["setup", "legacy"]
    assert guide.children[4].attrs["anchors"] == ["install-pkg", "inline-id"]


def test_github_slug():
    assert github_slug("Hello, World!") == "hello-world"
    assert github_slug("@Prop Nesting Scenario") == "prop-nesting-scenario"
    assert github_slug("snake_case and-dash") == "snake_case-and-dash"
    assert github_slug("Überblick 概述") == "überblick-概述"
    assert github_slug("A & B") == "a--b"


def test_links_kinds():
    src = (
        "Top [intro](intro.md).\n\n# S\n\n[jump](#s) [ext](https://x.org) [mail](mailto:a@b) "
        "[ref][r] <a href=\"html.md#h\">html link</a>\n\n<p><a href=\"block.md\">in block</a></p>\n\n[r]: ../ref.md\n"
    )
    pf = parse_markdown(src, "d/a.md")
    got = [(r.source.title, r.target, r.attrs["text"], r.attrs["line"]) for r in pf.references]
    assert got == [
        (pf.root.title, "intro.md", "intro", 1),
        ("S", "#s", "jump", 5),
        ("S", "../ref.md", "ref", 5),
        ("S", "html.md#h", "html link", 5),
        ("S", "block.md", "in block", 7),
    ]
    assert pf.references[0].source is pf.root


def test_link_line_in_multiline_paragraph():
    src = "# S\n\nfirst line\nsecond with [a](a.md)\nthird `code\nspan` then [b](b.md)\n"
    pf = parse_markdown(src, "x.md")
    assert [(r.target, r.attrs["line"]) for r in pf.references] == [("a.md", 4), ("b.md", 6)]


def test_crlf_and_bom():
    src = "\ufeff# Title\r\n\r\nline one\r\n\r\n```py\r\nx = 1\r\n```\r\n\r\n## Sub\r\ntext\r\n"
    pf = parse_markdown(src, "a.md")
    title = section_titled(pf, "Title")
    assert title.text == "# Title\n\nline one"
    assert "\r" not in "".join(d.text for d in pf.root.walk())
    (code, sub) = title.children
    assert code.text == "x = 1" and (code.start_line, code.end_line) == (5, 7)
    assert (sub.start_line, sub.end_line) == (9, 10)
    assert pf.root.end_line == 10


def test_empty_and_blank_inputs():
    for src in ("", "\n\n", "\ufeff", "#\n"):
        pf = parse_markdown(src, "docs/empty.md")
        assert pf.root.kind == "file"
        assert pf.root.title and pf.root.text
        for d in pf.root.walk():
            assert d.text.strip()


def test_deeply_nested_list_does_not_recurse():
    src = "".join("  " * i + "- item\n" for i in range(1000)) + "\n# After\n\ntext [x](y.md)\n"
    pf = parse_markdown(src, "a.md")
    assert not any("failed" in n for n in pf.notes)
    assert any("nesting deeper than" in n for n in pf.notes)
    after = section_titled(pf, "After")
    assert after.start_line == 1002
    assert [r.target for r in pf.references] == ["y.md"]
    assert "- item" in pf.root.text


def test_deep_blockquote_and_thousand_headings():
    pf = parse_markdown(">" * 5000 + " deep\n\n# After\n\ntext\n", "a.md")
    assert pf.root.text.startswith(">>>") and pf.root.text.endswith("deep")
    assert section_titled(pf, "After").text == "# After\n\ntext"
    src = "".join(f"{'#' * (i % 6 + 1)} H{i}\n\npara {i}\n\n" for i in range(1000))
    pf = parse_markdown(src, "a.md")
    sections = drafts_of_kind(pf, "section")
    assert len(sections) == 1000
    assert all(len(s.children) <= 1 for s in sections)
    assert sections[-1].end_line == 4000


def test_hostile_inputs_never_raise():
    cases = [
        "<a " * 20000,
        "[" * 20000 + "(" * 20000,
        "<table>\n\n" * 3000,
        "---\n" + "[" * 5000 + "\n---\n# x\n",
        "\x00\x0b\u2028# a\r\r\n",
        "*" * 50000,
        "```\n" * 5001,
        "| a |\n|---|\n" + "| x |\n" * 5000,
    ]
    for src in cases:
        pf = parse_markdown(src, "h.md")
        assert pf.root.kind == "file" and pf.root.text


def test_large_file_is_fast():
    block = ("## Part {i}\n\nSome prose with a [link](other.md#x) and *emphasis*.\n\n"
             "```py\nprint({i})\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n")
    src = "# Big\n\n" + "".join(block.format(i=i) for i in range(8400))
    assert src.count("\n") > 100_000
    pf = parse_markdown(src, "big.md")
    assert len(drafts_of_kind(pf, "code")) == 8400 and len(pf.references) == 8400
