"""The one registry of file formats: what each extension is and who parses it.

Discovery (:mod:`stages.discover`: extension → format, which formats are read
as bytes), dispatch (:func:`stages.nodes.parse_source`) and OpenIE eligibility
(:data:`stages.enrich.openie.PROSE_FILE_SUBKINDS`) all read this table, so a new
format is one :class:`ParserSpec` here plus its parser module. Code languages
come from their own registry (:mod:`stages.parse.code.languages`), one spec each.

Parser modules are imported when a file of theirs is parsed, not here:
discovery imports this module and must stay light.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Callable

from strata.stages.parse.code.languages import LANGUAGES
from strata.stages.parse.model import ParsedFile

if TYPE_CHECKING:
    from strata.stages.discover import SourceFile
    from strata.stages.parse.finalize import ParseSettings

PROSE, CODE, DATA = "prose", "code", "data"
# (source file, parse settings, Python module names by path) → parsed file
ParseFn = Callable[["SourceFile", "ParseSettings", dict], ParsedFile]


@dataclass(frozen=True)
class ParserSpec:
    name: str  # the format, and the subkind of its file nodes
    extensions: tuple[str, ...]
    parse: ParseFn
    binary: bool = False  # parsed from the raw bytes (PDF, DOCX), not decoded text
    kind: str = PROSE  # prose (OpenIE reads its file nodes) | code | data

    @property
    def prose(self) -> bool:
        return self.kind == PROSE


def _markdown(src, settings, modules):
    from strata.stages.parse.markdown import parse_markdown
    return parse_markdown(src.text, src.path, context_lines=settings.context_lines)


def _html(src, settings, modules):
    from strata.stages.parse.html import parse_html
    return parse_html(src.text, src.path, context_lines=settings.context_lines)


def _pdf(src, settings, modules):
    from strata.stages.parse.pdf import parse_pdf
    return parse_pdf(src.data or b"", src.path, context_lines=settings.context_lines)


def _docx(src, settings, modules):
    from strata.stages.parse.docx import parse_docx
    return parse_docx(src.data or b"", src.path, context_lines=settings.context_lines)


def _python(src, settings, modules):
    from strata.stages.parse.python_code import parse_python
    module, is_pkg = modules.get(src.path, (src.path.rsplit("/", 1)[-1].split(".")[0], False))
    return parse_python(src.text, src.path, module, is_pkg)


def _config(src, settings, modules):
    from strata.stages.parse.config_files import parse_config
    return parse_config(src.text, src.path, src.format)


def _code(src, settings, modules):
    from strata.stages.parse.code import parse_code
    return parse_code(src.text, src.path, src.format)


def _text(src, settings, modules):
    import posixpath

    from strata.stages.parse.plain_text import parse_plain_text
    ext = posixpath.splitext(src.path)[1].lower()
    known = src.format == "text" and ext in TEXT.extensions
    return parse_plain_text(src.text or "", src.path,
                            note=None if known else f"no parser for '{ext or src.format}' files; "
                                                    "indexed as plain text")


TEXT = ParserSpec("text", ("", ".txt", ".text"), _text)

PARSERS: dict[str, ParserSpec] = {spec.name: spec for spec in [
    ParserSpec("markdown", (".md", ".markdown", ".mdown", ".mkd"), _markdown),
    ParserSpec("html", (".html", ".htm", ".xhtml"), _html),
    ParserSpec("pdf", (".pdf",), _pdf, binary=True),
    ParserSpec("docx", (".docx",), _docx, binary=True),
    ParserSpec("python", (".py", ".pyi"), _python, kind=CODE),
    ParserSpec("json", (".json",), _config, kind=DATA),
    ParserSpec("yaml", (".yaml", ".yml"), _config, kind=DATA),
    ParserSpec("toml", (".toml",), _config, kind=DATA),
    *(ParserSpec(lang.name, lang.extensions, _code, kind=CODE) for lang in LANGUAGES.values()),
    TEXT,
]}

# Extension → format. Anything else that decodes as text is indexed as "text".
FORMATS: dict[str, str] = {ext: spec.name for spec in PARSERS.values() for ext in spec.extensions if ext}
BINARY_PARSED: frozenset[str] = frozenset(name for name, spec in PARSERS.items() if spec.binary)
PROSE_FORMATS: tuple[str, ...] = tuple(name for name, spec in PARSERS.items() if spec.prose)


def parser_for(fmt: str) -> ParserSpec:
    """The spec of a format; unknown formats are read as plain text."""
    return PARSERS.get(fmt, TEXT)
