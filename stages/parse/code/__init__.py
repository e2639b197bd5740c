"""Source code in twenty languages → a tree of drafts plus import references.

Parsing is tree-sitter's, on the per-language grammar wheels from PyPI
(compiled, installed offline, nothing downloaded at run time); what counts as
a definition or an import is each language's query in ``queries/``; one
engine (:mod:`.engine`) turns the captures into drafts; :mod:`.languages` is
the registry; :mod:`.resolve` maps import targets to corpus files.
Python keeps its own ``ast`` parser (stages/parse/python_code.py).
"""

from __future__ import annotations

import posixpath

from strata.stages.parse.code import engine  # noqa: F401 - tests patch engine.PARSE_SECONDS
from strata.stages.parse.code.engine import MAX_DEPTH, Builder, line_count
from strata.stages.parse.code.languages import LANGUAGE_BY_EXTENSION, LANGUAGES, dotted_path
from strata.stages.parse.code.resolve import file_index
from strata.stages.parse.model import Draft, ParsedFile

__all__ = ["LANGUAGES", "LANGUAGE_BY_EXTENSION", "MAX_DEPTH", "parse_code", "resolve_import"]


def parse_code(text: str, path: str, language: str) -> ParsedFile:
    """Parse one source file of ``language`` (a key of :data:`LANGUAGES`).

    Never raises: input the engine cannot handle is indexed as one plain file
    draft with a note in :attr:`ParsedFile.notes`.
    """
    source = (text or "").replace("\r\n", "\n").replace("\r", "\n")
    spec = LANGUAGES.get(language)
    if spec is None:
        return _fallback(source, path, language, f"no code parser for language {language!r}")
    try:
        return Builder(source, path, spec, posixpath.splitext(path)[1].lower()).parse()
    except Exception as exc:  # noqa: BLE001 - the contract is "never raise" (RecursionError, MemoryError too)
        return _fallback(source, path, language, f"{type(exc).__name__}: {exc}")


def resolve_import(target: str, src_path: str, language: str,
                   files: frozenset[str] | set[str]) -> str | None:
    """Corpus-relative POSIX path of the file an import refers to, or None.

    Pass one frozenset for all calls of a build: its lookup index is built
    once and cached (a plain set is copied and indexed on every call).
    """
    spec = LANGUAGES.get(language)
    if spec is None or spec.resolver is None or not target or not isinstance(target, str):
        return None
    try:
        index = file_index(files if isinstance(files, frozenset) else frozenset(files))
        return spec.resolver(target.strip(), posixpath.normpath(src_path), index)
    except Exception:  # noqa: BLE001 - resolution is best effort
        return None


def _fallback(source: str, path: str, language: str, why: str) -> ParsedFile:
    name = posixpath.basename(path) or path
    root = Draft(kind="file", subkind=language, language=language, title=name, slug=name,
                 node_path=dotted_path(path), text=source if source.strip() else name, start_line=1,
                 end_line=line_count(source), attrs={"docstring": ""})
    return ParsedFile(root=root, notes=[f"{language} parser fell back to plain text: {why}"])
