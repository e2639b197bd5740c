"""One parser registry: discovery, dispatch and OpenIE eligibility all read it."""

from __future__ import annotations

from strata.stages.discover import BINARY_PARSED, FORMATS, detect_format
from strata.stages.enrich.openie import PROSE_FILE_SUBKINDS
from strata.stages.nodes import parse_source
from strata.stages.discover import SourceFile
from strata.stages.parse.code import LANGUAGES
from strata.stages.parse.finalize import ParseSettings
from strata.stages.parse.registry import PARSERS, parser_for

SNIPPETS = {
    "markdown": "# Title\n\nSome prose here.\n", "html": "<h1>Title</h1><p>Prose.</p>",
    "python": "def f():\n    return 1\n", "json": '{"a": 1}', "yaml": "a: 1\n", "toml": "a = 1\n",
    "text": "just words\n", "go": "package p\n\nfunc F() {}\n", "lua": "function f() end\n",
}


def test_every_extension_maps_to_its_parser():
    for spec in PARSERS.values():
        for ext in spec.extensions:
            if ext:
                assert FORMATS[ext] == spec.name
                assert detect_format(f"dir/file{ext.upper()}") == spec.name
    assert set(LANGUAGES) <= set(PARSERS)
    assert detect_format("photo.png") == "asset" and detect_format("no-extension") == "text"


def test_binary_and_prose_formats_come_from_the_specs():
    assert BINARY_PARSED == {"pdf", "docx"}
    assert set(PROSE_FILE_SUBKINDS) == {"text", "markdown", "html", "pdf", "docx"}
    assert all(not parser_for(name).prose for name in ("python", "json", *LANGUAGES))


def test_dispatch_reaches_each_parser():
    for fmt, text in SNIPPETS.items():
        ext = next(e for e in PARSERS[fmt].extensions if e) if fmt != "text" else ".txt"
        src = SourceFile(f"d/x{ext}", fmt, len(text), "h", text=text)
        pf = parse_source(src, ParseSettings(), {})
        assert pf.root.subkind == fmt, fmt
        assert not any("no parser" in n for n in pf.notes), fmt
    unknown = parse_source(SourceFile("d/x.weird", "text", 5, "h", text="hello"), ParseSettings(), {})
    assert unknown.root.subkind == "text" and unknown.notes == ["no parser for '.weird' files; indexed as plain text"]
