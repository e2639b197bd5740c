"""Source code in twelve more languages → a tree of drafts plus import references.

JavaScript, TypeScript, Go, Rust, Java, C, C++, C#, Ruby, PHP, Kotlin and
Swift are parsed by one pure-Python engine, no grammar packages: a per-language
lexer first blanks comments and string/char/regex literals (offsets and line
breaks are kept), so braces, keywords and ``end`` only count where they are
code. Definitions are then found on that masked text:

* brace languages: every top-level ``{`` of a scope is matched (one pass,
  stack based) and the text before it is classified as a declaration
  (keyword languages: the last line starting a declaration; C, C++, Java,
  C#: the statement since the previous ``;``/``}``);
* Ruby: ``class``/``module``/``def``/``if``/``do`` … ``end`` are paired.

Rules:

* The file draft's ``node_path`` is the dotted path without extension, except
  Java/Kotlin with a ``package`` (``a.b`` + file stem), Go (the package
  directory, dotted) and Rust (the module path: ``src/net/http.rs`` →
  ``crate.net.http``). Definitions get ``<prefix>.<qualname>`` where the prefix
  is the Java/Kotlin package, the C#/PHP namespace, or the file's node path.
* Children are classes, interfaces, structs, enums, traits, ``impl`` blocks
  (Rust ``impl Foo``; Swift ``extension Foo``), modules (Ruby ``module``, Rust
  inline ``mod``), functions and methods. Members are scanned inside classes
  and the like, never inside function bodies; namespaces and ``extern "C"``
  blocks are looked through. Go receiver methods and C++ out-of-line members
  (``void Server::stop()``) stay under the file, titled ``Server.stop``.
  Declarations without a body are skipped (prototypes, abstract signatures),
  except Rust ``struct X;``, Kotlin ``data class P(...)`` / ``fun f() = …``
  and JS/TS ``const f = (...) => expr``.
* Each node's text is its own source with every child that starts below its
  first line replaced by ``<signature> { ... }`` (Ruby ``... end``); a child
  on its parent's first line (one-liners) stays inline as well.
* Repeated names in one scope get ``-1``, ``-2`` slugs (overloads).
* Imports are ``Reference(type="import", relation="imports")`` from the file
  draft, target as written (Rust use-groups are expanded one path each; a
  Rust ``super::`` inside an inline ``mod`` is rewritten relative to the file,
  the original kept in ``attrs["written"]``; PHP ``__DIR__ . '/x.php'`` →
  ``__DIR__/x.php``). :func:`resolve_import` maps a target to a corpus path.

Every regular expression here is linear: repetitions are bounded or run over
disjoint character sets, and scans never restart from an earlier offset.
Nesting is capped (:data:`MAX_DEPTH`) and the parser never raises: anything
unexpected yields a plain file draft with a note.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from dataclasses import dataclass, field
from functools import lru_cache

from stages.parse.model import Draft, ParsedFile, Reference

LANGUAGE_BY_EXTENSION: dict[str, str] = {
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".kt": "kotlin", ".kts": "kotlin",
    ".swift": "swift",
}
LANGUAGES = frozenset(LANGUAGE_BY_EXTENSION.values())

# Code nodes this many levels below the file are not split out (they stay in
# their parent's text): guards generated or hostile input.
MAX_DEPTH = 24
# A declaration header (text before its "{") longer than this is not one.
MAX_HEADER = 4000
MAX_SIGNATURE = 400

_JS = ("javascript", "typescript")
_C = ("c", "cpp")
_STATEMENT_LANGS = ("c", "cpp", "java", "csharp")  # declarations found per statement
_CLASS_LIKE = {"class", "interface", "struct", "enum", "trait", "impl"}
_PLACEHOLDER_BODY = " { ... }"

# Words that look like a call before "{" but never name a function (C family).
_CONTROL_WORDS = frozenset(
    "if else for foreach while do switch case catch try finally return new delete throw "
    "sizeof typeof synchronized using lock fixed checked unchecked yield await assert goto "
    "co_return co_await static_assert decltype alignof nameof".split())
_JS_NOT_MEMBERS = frozenset("if else for while do switch case catch try finally return function new "
                            "delete throw typeof await yield super this".split())


# --------------------------------------------------------------------------
# Public API


def parse_code(text: str, path: str, language: str) -> ParsedFile:
    """Parse one source file of ``language`` (a value of :data:`LANGUAGE_BY_EXTENSION`).

    Never raises: input the engine cannot handle is indexed as one plain file
    draft with a note in :attr:`ParsedFile.notes`.
    """
    source = (text or "").replace("\r\n", "\n").replace("\r", "\n")
    if language not in LANGUAGES:
        return _fallback(source, path, language, f"no code parser for language {language!r}")
    try:
        return _Parser(source, path, language).parse()
    except Exception as exc:  # noqa: BLE001 - the contract is "never raise" (RecursionError, MemoryError too)
        return _fallback(source, path, language, f"{type(exc).__name__}: {exc}")


def resolve_import(target: str, src_path: str, language: str,
                   files: frozenset[str] | set[str]) -> str | None:
    """Corpus-relative POSIX path of the file an import refers to, or None.

    ``target`` is a reference target from :func:`parse_code`, ``src_path`` the
    importing file and ``files`` every path of the corpus. Packages outside
    the corpus (npm packages, the Go or Rust standard library) give None.
    Pass one frozenset for all calls of a build: its lookup index is built
    once and cached (a plain set is copied and indexed on every call).
    """
    resolver = _RESOLVERS.get(language)
    if resolver is None or not target or not isinstance(target, str):
        return None
    try:
        index = _file_index(files if isinstance(files, frozenset) else frozenset(files))
        return resolver(target.strip(), posixpath.normpath(src_path), index)
    except Exception:  # noqa: BLE001 - resolution is best effort
        return None


def _fallback(source: str, path: str, language: str, why: str) -> ParsedFile:
    name = posixpath.basename(path) or path
    try:
        node_path = _dotted_path(path)
    except Exception:  # noqa: BLE001
        node_path = path
    root = Draft(kind="file", subkind=language, language=language, title=name, slug=name,
                 node_path=node_path, text=source if source.strip() else name, start_line=1,
                 end_line=_line_count(source), attrs={"docstring": ""})
    return ParsedFile(root=root, notes=[f"{language} parser fell back to plain text: {why}"])


def _line_count(source: str) -> int:
    count = source.count("\n") + (0 if source.endswith("\n") else 1)
    return max(count, 1)


def _dotted_path(path: str) -> str:
    p = posixpath.normpath(path).lstrip("/")
    if p.endswith(".d.ts"):
        p = p[: -len(".d.ts")]
    else:
        p = posixpath.splitext(p)[0]
    return p.replace("/", ".")


# --------------------------------------------------------------------------
# Lexer: blank comments and literals, keeping offsets


_NOT_NL = re.compile(r"[^\n]")
_BRACE = re.compile(r"[{}]")


def _blank(s: str, fill: str = " ") -> str:
    return _NOT_NL.sub(fill, s)


@dataclass(frozen=True)
class _Str:
    """How a string literal ends: closing delimiter, escapes, line breaks, interpolation."""

    closer: str
    esc: bool = True
    multiline: bool = False
    hole: str = ""  # interpolation opener inside the string ("${", "#{", "\\(", "{")
    doubled: bool = False  # closer doubled is an escape (C# verbatim "")

    @property
    def rx(self) -> re.Pattern:
        return _str_rx(self.closer[0], self.esc, self.multiline, self.hole[:1])


@lru_cache(maxsize=64)
def _str_rx(closer: str, esc: bool, multiline: bool, hole: str) -> re.Pattern:
    chars = {closer}
    if esc:
        chars.add("\\")
    if not multiline:
        chars.add("\n")
    if hole:
        chars.add(hole)
    return re.compile("[" + "".join(re.escape(c) for c in sorted(chars)) + "]")


def _scan_string(t: str, pos: int, d: _Str) -> tuple[int, bool, bool]:
    """From inside a literal: (offset after it, stopped at an interpolation hole, terminated)."""
    rx = d.rx
    n = len(t)
    while True:
        m = rx.search(t, pos)
        if m is None:
            return n, False, False
        j = m.start()
        c = t[j]
        if d.hole and t.startswith(d.hole, j):
            if d.hole == "{" and t.startswith("{{", j):
                pos = j + 2
                continue
            return j + len(d.hole), True, True
        if c == "\\" and d.esc:
            pos = j + 2
            continue
        if c == "\n" and not d.multiline:
            return j, False, False
        if t.startswith(d.closer, j):
            if d.doubled and t.startswith(d.closer, j + len(d.closer)):
                pos = j + 2 * len(d.closer)
                continue
            return j + len(d.closer), False, True
        pos = j + 1


@dataclass
class _Hole:
    d: _Str
    start: int  # where the enclosing literal started
    opener: str
    closer: str
    depth: int = 1


_C_COMMENT = r"(?P<lc>//)|(?P<bc>/\*)"
_CODE_TOKENS = {
    "c": _C_COMMENT + r"""|(?P<dir>^[ \t]*\#)|(?P<raw>(?<![\w])(?:u8|[uUL])?R"[^()\\\s"]{0,16}\()"""
                      r"""|(?P<str>(?:(?<![\w])(?:u8|[uUL]))?")|(?P<chr>(?:(?<![\w])(?:u8|[uUL]))?')""",
    "java": _C_COMMENT + r'''|(?P<tq>""")|(?P<str>")|(?P<chr>')''',
    "csharp": _C_COMMENT + r'''|(?P<dir>^[ \t]*\#)|(?P<cs>\$*@\$*"|@?\$+"""|"""|\$+")|(?P<str>")|(?P<chr>')''',
    "go": _C_COMMENT + r"""|(?P<str>")|(?P<chr>')|(?P<bt>`)""",
    "rust": _C_COMMENT + r"""|(?P<raw>(?<![\w])b?r\#{0,16}")|(?P<str>(?:(?<![\w])b)?")|(?P<chr>(?:(?<![\w])b)?')""",
    "javascript": _C_COMMENT + r"""|(?P<str>["'])|(?P<bt>`)|(?P<re>/)""",
    "kotlin": _C_COMMENT + r'''|(?P<tq>""")|(?P<str>")|(?P<chr>')|(?P<bt>`)''',
    "swift": _C_COMMENT + r'''|(?P<sraw>\#{1,16}"(?:"")?)|(?P<tq>""")|(?P<str>")|(?P<bt>`)''',
    "ruby": r"""(?P<rbdoc>^=begin\b)|(?P<dend>^__END__[ \t]*$)|(?P<lc>\#)|(?P<skip>\$[^\w\s{])"""
            r"""|(?P<hd><<[~-](?P<hq>["'`]?)(?P<hid>[A-Za-z_]\w{0,64})(?P=hq))"""
            r"""|(?P<pct>%[qQwWiIrsx][^\w\s])|(?P<str>["'`])|(?P<re>/)""",
    "php": r"""(?P<lc>//|\#(?!\[))|(?P<bc>/\*)|(?P<html>\?>)"""
           r"""|(?P<hd><<<[ \t]*(?P<hq>["']?)(?P<hid>[A-Za-z_]\w{0,64})(?P=hq))|(?P<str>["'`])""",
}
_CODE_TOKENS["cpp"] = _CODE_TOKENS["c"]
_CODE_TOKENS["typescript"] = _CODE_TOKENS["javascript"]


@lru_cache(maxsize=32)
def _token_rx(language: str, holes: bool) -> re.Pattern:
    pattern = _CODE_TOKENS[language]
    if holes:
        pattern += r"|(?P<hb>[{}()])"
    return re.compile(pattern, re.M)


_NESTED_COMMENT = re.compile(r"/\*|\*/")
_RUST_CHAR = re.compile(r"'(?:[^\\'\n]|\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.))'")
_REGEX_BODY = re.compile(r"(?:[^\\/\[\n]|\\.|\[(?:[^\]\\\n]|\\.){0,500}\]){0,1000}/[A-Za-z]{0,8}")
_REGEX_PRECEDERS = set("(,=:[!&|?{};+-*%~^")  # not "<" ">": JSX closing tags
_REGEX_WORDS = frozenset("return typeof case do else in of new delete void throw yield await "
                         "instanceof if unless when and or not puts".split())
_PHP_OPEN = re.compile(r"<\?(?:php\b|=)?")
_RUBY_DOC_END = re.compile(r"^=end\b[^\n]*", re.M)
_PAIRS = {"(": ")", "[": "]", "{": "}", "<": ">"}


class _Lexer:
    """One pass over the text recording comment, literal and directive ranges."""

    def __init__(self, text: str, language: str):
        self.t = text
        self.n = len(text)
        self.lang = "c" if language == "cpp" else language
        self.cpp = language in _C
        self.comments: list[tuple[int, int]] = []
        self.strings: list[tuple[int, int]] = []
        self.directives: list[tuple[int, int]] = []
        self.hidden: list[tuple[int, int]] = []  # inline HTML in PHP, Ruby __END__ data
        self.notes: list[str] = []
        self.holes: list[_Hole] = []
        self.heredocs: list[str] = []
        self.heredoc_nl = -1

    def run(self) -> None:
        t, n = self.t, self.n
        i = self._php_prologue() if self.lang == "php" else 0
        code_rx = _token_rx(self.lang, False)
        hole_rx = _token_rx(self.lang, True)
        while i < n:
            m = (hole_rx if self.holes else code_rx).search(t, i)
            if self.heredocs and (m is None or m.start() > self.heredoc_nl):
                i = max(i, self._flush_heredocs())
                continue
            if m is None:
                break
            i = self._token(m)
        if self.holes:
            self._literal(self.holes[0].start, n)
            self.holes.clear()
            self._note_unterminated("interpolated string", n)

    # -- tokens

    def _token(self, m: re.Match) -> int:
        t = self.t
        kind, s, e = m.lastgroup, m.start(), m.end()
        if kind == "lc":
            end = t.find("\n", e)
            return self._comment(s, self.n if end < 0 else end)
        if kind == "bc":
            if self.lang in ("rust", "kotlin", "swift"):
                end, ok = self._nested_comment_end(e)
            else:
                j = t.find("*/", e)
                end, ok = (self.n, False) if j < 0 else (j + 2, True)
            if not ok:
                self._note_unterminated("block comment", s)
            return self._comment(s, end)
        if kind == "rbdoc":
            m2 = _RUBY_DOC_END.search(t, e)
            end = m2.end() if m2 else self.n
            if not m2:
                self._note_unterminated("=begin comment", s)
            return self._comment(s, end)
        if kind == "dend":
            self.hidden.append((s, self.n))
            return self.n
        if kind == "dir":
            return self._directive(s, e)
        if kind == "skip":
            return e
        if kind == "hb":
            return self._hole_brace(m.group(), e)
        if kind == "re":
            return self._regex(s, e)
        if kind == "pct":
            return self._percent(s, e)
        if kind == "hd":
            return self._heredoc(m, e)
        if kind == "html":
            j = _PHP_OPEN.search(t, e)
            end = j.end() if j else self.n
            self.hidden.append((s, end))
            return end
        d = self._literal_kind(kind, m.group(), s)
        if d is None:
            return e
        if isinstance(d, int):  # a char literal already measured
            self._literal(s, d)
            return d
        return self._string(s, e, d)

    def _literal_kind(self, kind: str, tok: str, s: int) -> _Str | int | None:
        lang = self.lang
        if kind == "str":
            q = tok[-1]
            if lang == "kotlin":
                return _Str('"', hole="${")
            if lang == "swift":
                return _Str('"', hole="\\(")
            if lang == "rust":
                return _Str('"', multiline=True)
            if lang == "ruby":
                return _Str(q, multiline=True, hole="" if q == "'" else "#{")
            if lang == "php":
                return _Str(q, multiline=True)
            return _Str(q)
        if kind == "bt":
            if lang in _JS:
                return _Str("`", multiline=True, hole="${")
            if lang == "go":
                return _Str("`", esc=False, multiline=True)
            return _Str("`", esc=False)
        if kind == "tq":
            if lang == "kotlin":
                return _Str('"""', esc=False, multiline=True, hole="${")
            if lang == "swift":
                return _Str('"""', multiline=True, hole="\\(")
            return _Str('"""', multiline=True)
        if kind == "cs":
            if tok.endswith('"""'):
                return _Str('"""', esc=False, multiline=True)
            if "@" in tok:
                return _Str('"', esc=False, multiline=True, hole="{" if "$" in tok else "", doubled=True)
            return _Str('"', hole="{")
        if kind == "raw":
            if lang == "rust":
                return _Str('"' + "#" * tok.count("#"), esc=False, multiline=True)
            delim = tok[tok.index('"') + 1:-1]
            return _Str(")" + delim + '"', esc=False, multiline=True)
        if kind == "sraw":
            hashes = "#" * tok.count("#")
            return _Str(('"""' if tok.endswith('"""') else '"') + hashes, esc=False, multiline=True)
        if kind == "chr":
            q = s + len(tok) - 1  # the quote itself
            if lang == "rust":
                m = _RUST_CHAR.match(self.t, q)
                return m.end() if m else None  # else a lifetime or label
            if self.cpp and self._digit_separator(q):
                return None
            return _Str("'")
        return None

    def _digit_separator(self, q: int) -> bool:
        """C++14 ``1'000'000``: a quote inside a number literal."""
        t = self.t
        k = q - 1
        stop = max(0, q - 64)
        while k >= stop and (t[k].isalnum() or t[k] in "_.'"):
            k -= 1
        return k + 1 < q and t[k + 1].isdigit()

    def _string(self, start: int, pos: int, d: _Str) -> int:
        end, hole, ok = _scan_string(self.t, pos, d)
        if hole:
            opener = "(" if d.hole.endswith("(") else "{"
            self.holes.append(_Hole(d, start, opener, ")" if opener == "(" else "}"))
            return end
        if not ok and end >= self.n and end - start > 1:
            self._note_unterminated("string literal", start)
        self._literal(start, end)
        return end

    def _hole_brace(self, c: str, e: int) -> int:
        top = self.holes[-1]
        if c == top.opener:
            top.depth += 1
        elif c == top.closer:
            top.depth -= 1
            if top.depth == 0:
                self.holes.pop()
                end, hole, _ = _scan_string(self.t, e, top.d)
                if hole:
                    self.holes.append(_Hole(top.d, top.start, top.opener, top.closer))
                else:
                    self._literal(top.start, end)
                return end
        return e

    def _literal(self, start: int, end: int) -> None:
        if not self.holes:
            self.strings.append((start, end))

    def _comment(self, start: int, end: int) -> int:
        if not self.holes:
            self.comments.append((start, end))
        return end

    def _nested_comment_end(self, pos: int) -> tuple[int, bool]:
        depth = 1
        for m in _NESTED_COMMENT.finditer(self.t, pos):
            depth += 1 if m.group() == "/*" else -1
            if depth == 0:
                return m.end(), True
        return self.n, False

    def _directive(self, s: int, e: int) -> int:
        t = self.t
        j = e
        while True:
            k = t.find("\n", j)
            if k < 0:
                end = self.n
                break
            if t[k - 1] == "\\":
                j = k + 1
                continue
            end = k
            break
        opened = t.rfind("/*", e, end)
        if opened >= 0 and t.find("*/", opened + 2, end) < 0:
            close = t.find("*/", end)
            end = self.n if close < 0 else close + 2
        self.directives.append((s, end))
        return end

    def _regex(self, s: int, e: int) -> int:
        t = self.t
        k = s - 1
        while k >= 0 and s - k < 256 and t[k] in " \t":
            k -= 1
        allowed = k < 0 or t[k] == "\n" or t[k] in _REGEX_PRECEDERS
        if not allowed and (t[k].isalnum() or t[k] in "_$"):
            w = k
            while w >= 0 and k - w < 12 and (t[w].isalnum() or t[w] in "_$"):
                w -= 1
            allowed = t[w + 1:k + 1] in _REGEX_WORDS and (w < 0 or t[w] != ".")
        if not allowed:
            return e
        m = _REGEX_BODY.match(t, e)
        if m is None:
            return e
        self._literal(s, m.end())
        return m.end()

    def _percent(self, s: int, e: int) -> int:
        t = self.t
        delim = t[e - 1]
        closer = _PAIRS.get(delim, delim)
        if closer == delim:
            end, _, ok = _scan_string(t, e, _Str(delim, multiline=True))
        else:
            rx = _str_rx(closer, True, True, delim)
            depth, pos, end, ok = 1, e, self.n, False
            while True:
                m = rx.search(t, pos)
                if m is None:
                    break
                c = t[m.start()]
                if c == "\\":
                    pos = m.start() + 2
                    continue
                depth += 1 if c == delim else -1
                pos = m.end()
                if depth == 0:
                    end, ok = pos, True
                    break
        if not ok:
            self._note_unterminated("percent literal", s)
        self._literal(s, end)
        return end

    def _heredoc(self, m: re.Match, e: int) -> int:
        nl = self.t.find("\n", e)
        if nl < 0:
            return e
        if not self.heredocs:
            self.heredoc_nl = nl
        self.heredocs.append(m.group("hid"))
        return e

    def _flush_heredocs(self) -> int:
        t = self.t
        pos = self.heredoc_nl + 1
        for ident in self.heredocs:
            end = -1
            j = t.find(ident, pos)
            while j >= 0:
                line_start = t.rfind("\n", 0, j) + 1
                after = j + len(ident)
                if not t[max(line_start, pos):j].strip(" \t") and (after >= self.n or not (
                        t[after].isalnum() or t[after] == "_")):
                    end = after
                    break
                j = t.find(ident, after)
            if end < 0:
                end = self.n
                self._note_unterminated("heredoc", pos)
            self.strings.append((pos, end))
            pos = end
        self.heredocs.clear()
        return pos

    def _php_prologue(self) -> int:
        m = _PHP_OPEN.search(self.t)
        if m is not None and not self.t[:m.start()].strip():  # the usual `<?php` first line
            self.hidden.append((m.start(), m.end()))
            return m.end()
        if m is None:
            return 0  # no open tag at all: treat everything as code (snippets)
        self.hidden.append((0, m.end()))
        return m.end()

    def _note_unterminated(self, what: str, at: int) -> None:
        line = self.t.count("\n", 0, at) + 1
        self.notes.append(f"unterminated {what} at line {line}; it runs to the end of the file")


def _apply_blanks(text: str, ranges: list[tuple[int, int]], literals: list[tuple[int, int]] = (),
                  literal_fill: str = " ") -> str:
    """``text`` with each range blanked (line breaks kept); ``literals`` are filled with ``literal_fill``."""
    out: list[str] = []
    cur = 0
    marked = [(s, e, " ") for s, e in ranges] + [(s, e, literal_fill) for s, e in literals]
    for s, e, fill in sorted(marked):
        if e <= cur:
            continue
        s = max(s, cur)
        out.append(text[cur:s])
        out.append(_blank(text[s:e], fill))
        cur = e
    out.append(text[cur:])
    return "".join(out)


def _match_braces(masked: str) -> dict[int, int]:
    """Offset of each "{" → offset of its "}" (unmatched ones are absent)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE.finditer(masked):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


# --------------------------------------------------------------------------
# Declarations


@dataclass
class _Decl:
    start: int  # where the node's range starts (attributes included)
    sig_at: int  # where the declaration proper starts (signature, indent)
    subkind: str = ""
    name: str = ""  # slug base; may hold dots for children-by-name (Go methods)
    display: str = ""  # title segment when it differs from name (impl Foo)
    member_qual: str = ""  # qualname prefix for members when it differs (impl → type)
    container: bool = False
    namespace: str | None = None  # a transparent block (namespace, extern "C")
    attrs: dict = field(default_factory=dict)
    end: int | None = None  # bodyless declarations: where they end
    sig_end: int | None = None
    placeholder_suffix: str = _PLACEHOLDER_BODY


_INLINE = _Decl(start=-1, sig_at=-1)  # a brace that belongs to the header (Go `interface{}`)


@dataclass
class _Node:
    draft: Draft
    start: int
    end: int  # exclusive
    sig_at: int
    kind: str  # file | a subkind
    qual: str  # qualname prefix for members' titles
    prefix: str  # node_path prefix for members
    depth: int
    name: str = ""
    body: tuple[int, int] | None = None
    placeholder: str = ""
    children: list["_Node"] = field(default_factory=list)
    access: str = ""  # C++: the access label in force in the body
    seen: dict = field(default_factory=dict)


_WS = re.compile(r"\s*")
_EXPR_STOP = re.compile(r"[()\[\]{};\n]")
_HEADER_BREAKS = re.compile(r"[()\[\]\n]")
_CONT_WORD = re.compile(r"(?:where|extends|implements|throws|rethrows|async)\b")
_STRUCT = re.compile(r"[{};()]")
_IDENT_AFTER = re.compile(r"[ \t]+(?:r#)?([A-Za-z_$][\w$]*)")
_SOL = r"(?:^|(?<=[{};\]]))[ \t]*"  # start of a line, or right after a block/statement end

# Go
_GO_START = re.compile(r"(?m)^[ \t]*(?P<d>(?:func|type)\b)")
_GO_METHOD = re.compile(r"func[ \t]*\([ \t]*(?:\w+[ \t]+)?\*?[ \t]*(\w+)[^)\n]{0,200}\)[ \t]*(\w+)")
_GO_FUNC = re.compile(r"func[ \t]+(\w+)")
_GO_TYPE = re.compile(r"type[ \t]+(\w+)(?:\[[^\]\n]{0,200}\])?[ \t]+(struct|interface)[ \t]*$")
_GO_INLINE_TYPE = re.compile(r"\b(?:interface|struct)[ \t]*$")
_GO_PACKAGE = re.compile(r"(?m)^[ \t]*package[ \t]+(\w+)")

# Rust
_RUST_VIS = r"(?P<vis>pub(?:[ \t]*\([^)\n]{0,80}\))?[ \t]+)?"
_RUST_START = re.compile(r"(?m)" + _SOL + r"(?P<d>" + _RUST_VIS +
                         r"(?:(?:default|const|async|unsafe|extern)[ \t]+){0,4}"
                         r"(?P<kw>fn|struct|enum|union|trait|impl|mod)\b)")
_RUST_BODYLESS = re.compile(r"(?m)" + _SOL + r"(?P<d>" + _RUST_VIS + r"(?P<kw>struct|union)[ \t]+(?P<n>\w+))")

# JavaScript / TypeScript
_JS_TOP = re.compile(r"(?m)" + _SOL + r"(?P<d>(?P<exp>export[ \t]+(?P<dflt>default[ \t]+)?)?(?:declare[ \t]+)?"
                     r"(?:abstract[ \t]+)?(?:async[ \t]+)?(?P<kw>function\b|class\b|interface\b|"
                     r"(?:const[ \t]+)?enum\b|namespace\b|module\b|global\b|const\b|let\b|var\b))")
_JS_MEMBER = re.compile(r"(?m)" + _SOL + r"(?P<d>(?P<mods>(?:(?:public|private|protected|static|readonly|async|"
                        r"abstract|override|declare|get|set|accessor)[ \t]+){0,6})\*?[ \t]*"
                        r"(?P<n>#?[A-Za-z_$][\w$]*)[ \t]*\??[ \t]*(?P<k>[<(=:]))")
_JS_FN_NAME = re.compile(r"function\b[ \t]*\*?[ \t]*([A-Za-z_$][\w$]*)?")
_JS_CLASS_NAME = re.compile(r"class\b[ \t]*([A-Za-z_$][\w$]*)?")
_JS_ARROW_HEAD = re.compile(r"[ \t]+([A-Za-z_$][\w$]*)[ \t]*(?::[^=\n]{0,200})?=[ \t]*(?:async\b[ \t]*)?"
                            r"(function\b|\(|[A-Za-z_$][\w$]*[ \t]*=>|<)")
_JS_ARROW_STMT = re.compile(r"(?m)" + _SOL + r"(?P<d>(?P<exp>export[ \t]+)?(?:const|let|var)[ \t]+"
                            r"(?P<n>[A-Za-z_$][\w$]*)[ \t]*(?::[^=\n]{0,200})?=[ \t]*(?:async\b[ \t]*)?"
                            r"(?:\([^()\n]{0,500}\)|[A-Za-z_$][\w$]*)[ \t]*(?::[^=\n]{0,200})?=>)")
_JS_NAMESPACE_REST = re.compile(r"[ \t]+[\w$.]*[ \t]*$|\s*$")

# Kotlin
_KT_MODS = (r"(?P<mods>(?:(?:public|private|protected|internal|open|abstract|final|sealed|data|enum|annotation|"
            r"inner|value|inline|override|suspend|operator|infix|tailrec|external|expect|actual|companion|"
            r"const|lateinit|fun)[ \t]+){0,6})")
_KT_START = re.compile(r"(?m)" + _SOL + r"(?P<d>" + _KT_MODS + r"(?P<kw>class|interface|object|fun|constructor|init)\b)")
_KT_BODYLESS = re.compile(r"(?m)" + _SOL + r"(?P<d>" + _KT_MODS + r"(?P<kw>class|interface|object|fun)\b)")
_KT_PACKAGE = re.compile(r"(?m)^[ \t]*(?P<kw>package)[ \t]+([\w.`]+)")
_KT_FUN_NAME = re.compile(r"[ \t]*([\w.`?]+?)[ \t]*\(")

# Swift
_SWIFT_START = re.compile(
    r"(?m)" + _SOL + r"(?P<d>(?P<mods>(?:(?:@\w+(?:\([^)\n]{0,200}\))?|public|private|fileprivate|internal|open|"
    r"package|final|static|class|override|mutating|nonmutating|convenience|required|lazy|indirect|dynamic|"
    r"optional|nonisolated|isolated|distributed)(?:\([\w \t]{0,20}\))?[ \t]+){0,6})"
    r"(?P<kw>class|struct|enum|protocol|extension|actor|func|init|deinit|subscript)\b)")
_SWIFT_TYPE_AFTER = re.compile(r"[ \t]+([\w.]+)")
_SWIFT_FUNC_NAME = re.compile(r"[ \t]+([^\s(<]+)")
_SWIFT_NOT_NAMES = frozenset("var let func class struct enum protocol init subscript".split())

# PHP
_PHP_START = re.compile(r"(?m)" + _SOL + r"(?P<d>(?P<mods>(?:(?:abstract|final|public|private|protected|static|"
                        r"readonly)[ \t]+){0,5})(?P<kw>function|class|interface|trait|enum|namespace)\b)")
_PHP_FN_NAME = re.compile(r"[ \t]*&?[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_NAMESPACE_STMT = re.compile(r"\s*namespace[ \t]+([\w.\\]+)\s*$")

# Java / C#
_JAVA_PACKAGE = re.compile(r"(?m)^[ \t]*package[ \t]+([\w.]+)[ \t]*;")
_JAVA_TYPE = re.compile(
    r"(?P<mods>(?:(?:public|private|protected|internal|static|final|abstract|sealed|non-sealed|strictfp|partial|"
    r"readonly|unsafe|new|file|ref)\s+){0,8})(?P<kw>class|interface|enum|record(?:\s+(?:struct|class))?|struct|"
    r"@interface)\s+(?P<n>\w+)")
_CS_NAMESPACE = re.compile(r"namespace\s+([\w.]+)\s*$")
_JAVA_MODS = frozenset("public private protected internal static final abstract sealed strictfp partial "
                       "readonly unsafe new file ref virtual override async extern synchronized native default "
                       "transient volatile".split())

# C / C++
_C_TYPE = re.compile(r"(?P<td>typedef\s+)?(?P<kw>class|struct|union|enum(?:\s+(?:class|struct))?)\b(?P<rest>.*)", re.S)
_C_TYPE_REST = re.compile(r"\s*(?:(?P<macro>[A-Z_][A-Z0-9_]*)\s+(?=\w))?(?P<n>[A-Za-z_]\w*)?\s*"
                          r"(?:final\b\s*)?(?::(?!:).*)?$", re.S)
_C_TYPEDEF_NAME = re.compile(r"\s*\**\s*([A-Za-z_]\w*)[^;{}]{0,200};")
_CPP_NAMESPACE = re.compile(r"(?:inline\s+)?namespace\b[\w\s:]*$|extern\s*$|extern\s+\S{0,8}\s*$")
_C_ATTRIBUTE = re.compile(r"(?:__attribute__|__declspec|alignas)\s*\(")
_CPP_LABEL = re.compile(r"(public|private|protected)\s*:(?!:)")
_C_PRE_OK = re.compile(r"[\w\s*&<>:,\[\]~.]*$")
_OPERATOR = re.compile(r"\boperator\b\s*(\(\s*\)|\[\s*\]|new\b|delete\b|[^\w\s(]{1,3}|\w+)")

_VIS_WORDS = ("public", "private", "protected", "internal", "fileprivate", "open", "package")


# --------------------------------------------------------------------------
# Imports


_JS_MODULE_KW = re.compile(r"\b(?:import|export)\b")
_JS_CLAUSE_STOP = re.compile(r"""['"`;()]|\b(?:from|import|export)\b""")
_JS_QUOTED = re.compile(r"""[ \t]*(?P<q>['"`])(?P<spec>[^'"`\n]{0,500})(?P=q)""")
_JS_DYNAMIC = re.compile(r"""[ \t]*\([ \t]*(?P<q>['"`])(?P<spec>[^'"`\n]{0,500})(?P=q)""")
_JS_REQUIRE = re.compile(r"""\brequire[ \t]*\([ \t]*(?P<q>['"`])(?P<spec>[^'"`\n]{0,500})(?P=q)[ \t]*\)""")
_GO_IMPORT = re.compile(r"(?m)^[ \t]*import\b")
_GO_IMPORT_ONE = re.compile(r"""[ \t]*(?P<alias>[\w.]+[ \t]+)?(?P<q>["`])(?P<spec>[^"`\n]{0,500})(?P=q)""")
_GO_IMPORT_SPEC = re.compile(r"""(?m)^[ \t]*(?P<alias>[\w.]+[ \t]+)?(?P<q>["`])(?P<spec>[^"`\n]{0,500})(?P=q)""")
_RUST_USE = re.compile(r"(?m)" + _SOL + r"(?:pub(?:[ \t]*\([^)\n]{0,80}\))?[ \t]+)?use[ \t]+")
_RUST_MOD = re.compile(r"(?m)" + _SOL + r"(?:pub(?:[ \t]*\([^)\n]{0,80}\))?[ \t]+)?mod[ \t]+(?P<n>\w+)[ \t]*;")
_RUST_USE_TOKEN = re.compile(r"::|[{},*]|\bas\b|[A-Za-z_][\w]*")
_JAVA_IMPORT = re.compile(r"(?m)^[ \t]*import[ \t]+(?P<static>static[ \t]+)?(?P<spec>\w+(?:\.\w+)*(?:\.\*)?)[ \t]*;")
_KT_IMPORT = re.compile(r"(?m)^[ \t]*(?P<kw>import)[ \t]+(?P<spec>[\w`]+(?:\.[\w`]+)*(?:\.\*)?)(?:[ \t]+as[ \t]+(?P<alias>\w+))?")
_C_INCLUDE = re.compile(r"""(?m)^[ \t]*\#[ \t]*(?:include|import|include_next)[ \t]*(?P<q>[<"])(?P<spec>[^>"\n]{0,500})[>"]""")
_CS_USING = re.compile(r"(?m)^[ \t]*(?:global[ \t]+)?using[ \t]+(?P<static>static[ \t]+)?"
                       r"(?:(?P<alias>\w+)[ \t]*=[ \t]*)?(?P<spec>[\w.]+)[ \t]*;")
_RB_REQUIRE = re.compile(r"""(?<![\w.:])(?P<kw>require_relative|require|autoload)\b[ \t]*\(?[ \t]*"""
                         r"""(?:(?::\w+|['"]\w+['"])[ \t]*,[ \t]*)?(?P<q>['"])(?P<spec>[^'"\n]{0,500})(?P=q)""")
_PHP_USE = re.compile(r"(?m)^[ \t]*use[ \t]+")
_PHP_INCLUDE = re.compile(r"""(?<![\w$>:])(?P<kw>require_once|require|include_once|include)\b[ \t]*\(?[ \t]*"""
                          r"""(?P<dir>(?:__DIR__|dirname[ \t]*\([ \t]*__FILE__[ \t]*\))[ \t]*\.[ \t]*)?"""
                          r"""(?P<q>['"])(?P<spec>[^'"\n]{0,500})(?P=q)""")
_SWIFT_IMPORT = re.compile(r"(?m)^[ \t]*(?:@\w+(?:\([^)\n]{0,200}\))?[ \t]+){0,4}import[ \t]+"
                           r"(?:(?:typealias|struct|class|enum|protocol|let|var|func)[ \t]+)?(?P<spec>[\w.]+)")


# --------------------------------------------------------------------------
# Ruby


_RB_TOK = re.compile(r"(?<![\w.$@:])(class|module|def|if|unless|while|until|case|begin|for|do|end)\b(?![?!]|:(?!:))")
_RB_DEF = re.compile(r"def[ \t]+(?:(?P<recv>self|[A-Z]\w*)\.)?(?P<n>[A-Za-z_]\w*[?!=]?|\[\]=?|[+\-*/%<>=!~^&|]{1,3}|`)")
_RB_ENDLESS = re.compile(r"[ \t]*=(?![=~>])")
_RB_NAME = re.compile(r"[ \t]+([A-Za-z_][\w]*(?:::[A-Za-z_]\w*)*)")
_RB_SCLASS = re.compile(r"[ \t]*<<")
_RB_VIS = re.compile(r"(?m)^([ \t]*)(private|protected|public)[ \t]*$")
_RB_STMT_CHARS = set("=(,[{|&!?:;+-*/<>%")
_RB_STMT_WORDS = ("then", "else", "do", "begin", "and", "or", "not")


# --------------------------------------------------------------------------
# The parser


class _Parser:
    def __init__(self, text: str, path: str, language: str):
        self.text = text
        self.path = path
        self.lang = language
        self.n = len(text)
        self.lines = text.split("\n")
        self.line_starts = [0]
        pos = text.find("\n")
        while pos >= 0:
            self.line_starts.append(pos + 1)
            pos = text.find("\n", pos + 1)
        lexer = _Lexer(text, language)
        lexer.run()
        self.notes = lexer.notes
        self.comments = sorted(lexer.comments)
        self.comment_starts = [c[0] for c in self.comments]
        self.directive_starts = {s for s, _ in lexer.directives}
        self.nc = _apply_blanks(text, lexer.comments + lexer.hidden)
        # Ruby: a blanked literal must still read as an expression (`x = 'a' if y` is a modifier)
        self.masked = _apply_blanks(text, lexer.comments + lexer.hidden + lexer.directives, lexer.strings,
                                    "_" if language == "ruby" else " ")
        self.braces = _match_braces(self.masked) if language != "ruby" else {}
        self.references: list[Reference] = []
        self.all_nodes: list[_Node] = []

    # -- helpers

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, max(0, offset))

    def line_start(self, offset: int) -> int:
        return self.line_starts[self.line_of(offset) - 1]

    def indent_at(self, offset: int) -> str:
        line = self.lines[self.line_of(offset) - 1]
        return line[: len(line) - len(line.lstrip())]

    def signature(self, a: int, b: int) -> str:
        sig = " ".join(self.nc[a:b].split())
        return sig if len(sig) <= MAX_SIGNATURE else sig[: MAX_SIGNATURE - 1] + "…"

    def in_code(self, pos: int) -> bool:
        return 0 <= pos < self.n and self.masked[pos] == self.text[pos] and self.text[pos] != " "

    # -- top level

    def parse(self) -> ParsedFile:
        root_path, child_prefix, extra = self._naming()
        name = posixpath.basename(self.path) or self.path
        root_draft = Draft(kind="file", subkind=self.lang, language=self.lang, title=name, slug=name,
                           node_path=root_path, text="", start_line=1, end_line=_line_count(self.text),
                           attrs={"docstring": self._file_docstring(), **extra})
        root = _Node(draft=root_draft, start=0, end=self.n, sig_at=0, kind="file", qual="",
                     prefix=child_prefix, depth=0, body=(0, self.n))
        if self.lang == "ruby":
            self._root_for_ruby = root
            self._ruby(root)
        else:
            work = [root]
            while work:
                scope = work.pop()
                work.extend(reversed(self._scan_scope(scope)))
        self._imports(root)
        self._render(root)
        if not root_draft.text.strip():
            root_draft.text = name
        self.references.sort(key=lambda r: r.attrs["line"])
        return ParsedFile(root=root_draft, references=self.references, notes=list(dict.fromkeys(self.notes)))

    def _naming(self) -> tuple[str, str, dict]:
        """(root node_path, node_path prefix for top-level definitions, extra root attrs)."""
        lang, path = self.lang, self.path
        default = _dotted_path(path)
        stem = posixpath.splitext(posixpath.basename(path))[0]
        if lang == "java":
            m = _JAVA_PACKAGE.search(self.masked)
            if m:
                # The file keeps its extension so it never collides with its
                # public class (a.b.Gauge.java holds the class a.b.Gauge).
                return f"{m.group(1)}.{stem}.java", m.group(1), {"package": m.group(1)}
        if lang == "kotlin":
            m = next((m for m in _KT_PACKAGE.finditer(self.nc) if self.in_code(m.start("kw"))), None)
            if m:
                pkg = m.group(2).replace("`", "")
                return f"{pkg}.{stem}.kt", pkg, {"package": pkg}
        if lang == "go":
            m = _GO_PACKAGE.search(self.masked)
            directory = posixpath.dirname(posixpath.normpath(path).lstrip("/"))
            pkg_path = directory.replace("/", ".") if directory else (m.group(1) if m else stem)
            return pkg_path, pkg_path, ({"package": m.group(1)} if m else {})
        if lang == "rust":
            module = _rust_module_path(path)
            return module, module, {}
        return default, default, {}

    def _file_docstring(self) -> str:
        """The comment block at the very top of the file (after a PHP open tag or shebang)."""
        if not self.comments:
            return ""
        first = self.comments[0]
        head = self.text[: first[0]]
        head = re.sub(r"^(?:#![^\n]*\n|\s*<\?php\b)", "", head)
        if head.strip():
            return ""
        block = self._comment_block(0)
        return _clean_comment(block)

    def _comment_block(self, index: int) -> str:
        """Consecutive comments from ``comments[index]`` on, separated by at most a line break."""
        parts = [self.text[slice(*self.comments[index])]]
        i = index
        while i + 1 < len(self.comments) and len(parts) < 200:
            gap = self.text[self.comments[i][1]:self.comments[i + 1][0]]
            if gap.strip() or gap.count("\n") > 1:
                break
            i += 1
            parts.append(self.text[slice(*self.comments[i])])
        return "\n".join(parts)

    def _doc_above(self, start: int) -> str:
        """Comment block directly above ``start`` (no blank line in between)."""
        i = bisect.bisect_right(self.comment_starts, start) - 1
        parts: list[str] = []
        limit = start
        while i >= 0 and len(parts) < 200:
            cs, ce = self.comments[i]
            if ce > limit:
                break
            gap = self.text[ce:limit]
            if gap.strip() or gap.count("\n") > 1:
                break
            if self.text[self.line_start(cs):cs].strip():  # a trailing comment of some code
                break
            parts.append(self.text[cs:ce])
            limit = cs
            i -= 1
        return _clean_comment("\n".join(reversed(parts)))

    # -- brace languages: scopes

    def _scan_scope(self, scope: _Node) -> list[_Node]:
        """Find the definitions of one scope; return the containers to scan next."""
        if scope.body is None or scope.depth >= MAX_DEPTH:
            return []
        M = self.masked
        before = len(scope.children)
        stack = [(scope.body[0], scope.body[1], scope.prefix, False)]
        while stack:
            lo, hi, prefix, is_ns = stack.pop()
            pos = stmt = lo
            paren = 0
            while True:
                m = _STRUCT.search(M, pos, hi)
                if m is None:
                    self._gap(scope, stmt, hi, prefix)
                    break
                p = m.start()
                c = M[p]
                if c == "(":
                    paren += 1
                    pos = p + 1
                    continue
                if c == ")":
                    paren = max(0, paren - 1)
                    pos = p + 1
                    continue
                if c == ";":
                    if paren == 0:
                        ns = _NAMESPACE_STMT.match(M, stmt, p) if self.lang in ("csharp", "php") else None
                        if ns:
                            prefix, is_ns = ns.group(1).replace("\\", "."), True
                        else:
                            self._gap(scope, stmt, p + 1, prefix)
                        stmt = p + 1
                    pos = p + 1
                    continue
                if c == "}":  # stray closer
                    self._gap(scope, stmt, p, prefix)
                    stmt = pos = p + 1
                    paren = 0
                    continue
                close = self.braces.get(p, hi)
                close = min(close, hi)
                after = min(close + 1, hi)
                if paren > 0:  # a block inside an expression: f(function () {...})
                    pos = after
                    continue
                decl = self._classify(scope, stmt, p, close)
                if decl is _INLINE:
                    pos = after
                    continue
                if decl is None:
                    self._gap(scope, stmt, p, prefix)
                elif decl.namespace is not None:
                    self._gap(scope, stmt, decl.start, prefix)
                    inner = prefix
                    if self.lang in ("csharp", "php") and decl.namespace:
                        name = decl.namespace.replace("\\", ".")
                        inner = f"{prefix}.{name}" if is_ns else name
                    stack.append((after, hi, prefix, is_ns))
                    stack.append((p + 1, close, inner, is_ns or (self.lang in ("csharp", "php") and bool(decl.namespace))))
                    break
                else:
                    self._gap(scope, stmt, decl.start, prefix)
                    if decl.end is not None and decl.end > after:  # typedef struct {...} name;
                        after = min(decl.end, hi)
                    self._add(scope, decl, prefix, end=after, body=(p + 1, close))
                stmt = pos = after
                paren = 0
        return [c for c in scope.children[before:] if c.body is not None]

    def _add(self, scope: _Node, decl: _Decl, prefix: str, end: int,
             body: tuple[int, int] | None = None) -> _Node:
        display = decl.display or decl.name
        title = f"{scope.qual}.{display}" if scope.qual else display
        key = (prefix, decl.name)
        count = scope.seen.get(key, 0)
        scope.seen[key] = count + 1
        slug = decl.name if count == 0 else f"{decl.name}-{count}"
        node_path = f"{prefix}.{slug}" if prefix else slug
        while end > decl.start + 1 and self.text[end - 1] in " \t\n":
            end -= 1
        sig_end = decl.sig_end if decl.sig_end is not None else (body[0] - 1 if body else end)
        signature = self.signature(decl.sig_at, sig_end)
        attrs = {"signature": signature, "docstring": self._doc_above(decl.start)}
        attrs.update(decl.attrs)
        draft = Draft(kind="code", subkind=decl.subkind, language=self.lang, title=title, slug=slug,
                      node_path=node_path, text="", start_line=self.line_of(decl.start),
                      end_line=self.line_of(max(decl.start, end - 1)), attrs=attrs)
        member_qual = decl.member_qual or display
        if scope.qual and decl.member_qual:
            member_qual = f"{scope.qual}.{decl.member_qual}"
        elif not decl.member_qual:
            member_qual = title
        container = decl.container and body is not None and scope.depth + 1 < MAX_DEPTH
        node = _Node(draft=draft, start=decl.start, end=end, sig_at=decl.sig_at, kind=decl.subkind,
                     qual=member_qual, prefix=node_path, depth=scope.depth + 1, name=decl.name,
                     body=body if container else None,
                     placeholder=self.indent_at(decl.sig_at) + signature + decl.placeholder_suffix)
        if self.lang == "cpp" and decl.subkind == "class":
            node.access = "private"
        elif self.lang == "cpp" and decl.subkind == "struct":
            node.access = "public"
        scope.draft.add(draft)
        scope.children.append(node)
        return node

    def _gap(self, scope: _Node, lo: int, hi: int, prefix: str) -> None:
        """Text between blocks: access labels and bodyless definitions."""
        if hi <= lo:
            return
        lang = self.lang
        if lang == "cpp" and scope.kind in ("class", "struct"):
            for m in _CPP_LABEL.finditer(self.masked, lo, hi):
                scope.access = m.group(1)
        elif lang == "rust":
            last = lo
            for m in _RUST_BODYLESS.finditer(self.masked, lo, hi):
                if m.start() < last:
                    continue
                semi = self.masked.find(";", m.end(), min(hi, m.end() + 2000))
                if semi < 0 or "{" in self.masked[m.end():semi]:
                    continue
                last = end = semi + 1
                d = m.start("d")
                vis = (m.group("vis") or "").strip()
                decl = _Decl(start=self._attr_start(lo, d), sig_at=d, subkind="struct", name=m.group("n"),
                             end=end, placeholder_suffix="",
                             attrs={"visibility": vis or "private", "exported": vis == "pub"})
                self._add(scope, decl, prefix, end=end)
        elif lang in _JS and scope.kind == "file":
            last = lo
            for m in _JS_ARROW_STMT.finditer(self.masked, lo, hi):
                if m.start() < last:
                    continue
                last = end = self._expr_end(m.end(), hi)
                d = m.start("d")
                decl = _Decl(start=self._attr_start(lo, d), sig_at=d, subkind="function", name=m.group("n"),
                             sig_end=m.end(), placeholder_suffix=" ...",
                             attrs={"exported": bool(m.group("exp")), "arrow": True})
                self._add(scope, decl, prefix, end=end)
        elif lang == "kotlin":
            last = lo
            for m in _KT_BODYLESS.finditer(self.masked, lo, hi):
                if m.start() < last:
                    continue
                end = self._expr_end(m.end(), hi)
                last = end
                decl = self._kotlin_decl(scope, m, end, bodyless=True)
                if decl is not None:
                    self._add(scope, decl, prefix, end=end)

    def _expr_end(self, pos: int, hi: int) -> int:
        """End of a statement without a body of its own: ";" or a line break at depth 0."""
        M = self.masked
        depth = 0
        while True:
            m = _EXPR_STOP.search(M, pos, hi)
            if m is None:
                return hi
            j = m.start()
            c = M[j]
            if c in "([":
                depth += 1
            elif c in ")]":
                depth = max(0, depth - 1)
            elif c == "{":
                close = self.braces.get(j)
                pos = close + 1 if close is not None and close < hi else hi
                continue
            elif c == "}":
                return j
            elif c == ";" and depth == 0:
                return j + 1
            elif c == "\n" and depth == 0 and not self._continues(j, hi):
                return j
            pos = j + 1

    def _continues(self, nl: int, hi: int) -> bool:
        """Whether the line break at ``nl`` continues the statement (operator at either side)."""
        M = self.masked
        k = nl - 1
        stop = max(0, nl - 256)
        while k >= stop and M[k] in " \t":
            k -= 1
        if k >= stop and M[k] in ",([:=>|&+-*.?<\\":
            return True
        j = nl + 1
        stop = min(hi, nl + 256)
        while j < stop and M[j] in " \t\n":
            j += 1
        if j >= hi:
            return True
        if j < stop and M[j] in ":,.)]>|&=?{+-*":
            return True
        return _CONT_WORD.match(M, j, stop) is not None

    def _one_statement(self, a: int, b: int) -> bool:
        """Whether ``masked[a:b]`` is one declaration (no line break ends a statement in it)."""
        M = self.masked
        depth = 0
        for m in _HEADER_BREAKS.finditer(M[a:b]):
            c = m.group()
            if c in "([":
                depth += 1
            elif c in ")]":
                depth = max(0, depth - 1)
            elif depth == 0:
                if self.lang == "go":
                    return False
                if not self._continues(a + m.start(), b):
                    return False
        return True

    def _attr_start(self, lo: int, at: int) -> int:
        """Extend a declaration upward over attribute/decorator lines (``#[...]``, ``@x``)."""
        prefixes = {"rust": ("#[",), "php": ("#[",), "javascript": ("@",), "typescript": ("@",),
                    "kotlin": ("@",), "swift": ("@",)}.get(self.lang)
        if not prefixes:
            return at
        start = at
        line = self.line_of(at)
        for _ in range(50):
            if line <= 1:
                break
            prev_start = self.line_starts[line - 2]
            if prev_start < lo:
                break
            content = self.masked[prev_start:self.line_starts[line - 1]].strip()
            if not content.startswith(prefixes):
                break
            start = prev_start + len(self.masked[prev_start:self.line_starts[line - 1]]) - len(
                self.masked[prev_start:self.line_starts[line - 1]].lstrip())
            line -= 1
        return start

    # -- classification

    def _classify(self, scope: _Node, stmt: int, brace: int, close: int) -> _Decl | None:
        if self.lang in _STATEMENT_LANGS:
            return self._classify_statement(scope, stmt, brace, close)
        rx = {
            "go": _GO_START, "rust": _RUST_START, "kotlin": _KT_START, "swift": _SWIFT_START, "php": _PHP_START,
        }.get(self.lang)
        if rx is None:  # javascript / typescript
            rx = _JS_MEMBER if scope.kind == "class" else _JS_TOP
        lo = max(stmt, brace - MAX_HEADER)
        M = self.masked
        m = None
        depth, prev = 0, lo
        for cand in rx.finditer(M, lo, brace):
            at = cand.start()
            depth += (M.count("(", prev, at) - M.count(")", prev, at) + M.count("[", prev, at)
                      - M.count("]", prev, at) + M.count("{", prev, at) - M.count("}", prev, at))
            prev = at
            if depth <= 0:  # not a parameter line of an enclosing declaration
                m = cand
        if m is None:
            return None
        d = m.start("d")
        if not self._one_statement(d, brace):
            return None
        header = self.masked[d:brace]
        start = self._attr_start(lo, d)
        handler = getattr(self, "_decl_" + ("js" if self.lang in _JS else self.lang))
        decl = handler(scope, m, header, start, d, brace, close)
        return decl

    def _decl_go(self, scope, m, header, start, d, brace, close):
        if scope.kind != "file":
            return None
        if header.startswith("func"):
            if _GO_INLINE_TYPE.search(header):
                return _INLINE  # `func f() interface{} {`: the first brace is the return type
            mm = _GO_METHOD.match(header)
            if mm:
                recv, name = mm.group(1), mm.group(2)
                return _Decl(start, d, "method", f"{recv}.{name}",
                             attrs={"receiver": recv, "exported": name[:1].isupper()})
            mm = _GO_FUNC.match(header)
            if mm:
                name = mm.group(1)
                return _Decl(start, d, "function", name, attrs={"exported": name[:1].isupper()})
            return None
        mm = _GO_TYPE.match(header)
        if mm:
            name = mm.group(1)
            return _Decl(start, d, mm.group(2), name, attrs={"exported": name[:1].isupper()})
        return None

    def _decl_rust(self, scope, m, header, start, d, brace, close):
        kw = m.group("kw")
        vis = (m.group("vis") or "").strip()
        attrs = {"visibility": vis or "private", "exported": vis == "pub"}
        rest = self.masked[m.end("kw"):brace]
        if kw == "impl":
            trait, typ = _rust_impl_parts(rest)
            if not typ:
                return None
            display = f"impl {trait} for {typ}" if trait else f"impl {typ}"
            attrs = {"type": typ}
            if trait:
                attrs["trait"] = trait
            return _Decl(start, d, "impl", display.replace(" ", "-"), display=display, member_qual=typ,
                         container=True, attrs=attrs)
        mm = _IDENT_AFTER.match(rest)
        if not mm:
            return None
        name = mm.group(1)
        if kw == "fn":
            subkind = "method" if scope.kind in ("impl", "trait") else "function"
            return _Decl(start, d, subkind, name, attrs=attrs)
        subkind = {"mod": "module", "union": "struct"}.get(kw, kw)
        return _Decl(start, d, subkind, name, container=kw in ("trait", "mod"), attrs=attrs)

    def _decl_js(self, scope, m, header, start, d, brace, close):
        if header.rstrip().endswith((":", "|", "&", ",", "<")):
            return _INLINE  # `f(): { a: number } {`: this brace is part of a type
        if scope.kind == "class":
            name = m.group("n")
            mods = (m.group("mods") or "").split()
            if name in _JS_NOT_MEMBERS:
                return None
            if m.group("k") in "=:" and not header.rstrip().endswith("=>"):
                return None
            vis = next((w for w in mods if w in _VIS_WORDS), "private" if name.startswith("#") else "public")
            attrs = {"visibility": vis}
            if "static" in mods:
                attrs["static"] = True
            return _Decl(start, d, "method", name, attrs=attrs)
        kw = m.group("kw").split()[-1]
        exported = bool(m.group("exp"))
        default = bool(m.group("dflt"))
        attrs = {"exported": exported}
        after = m.end("kw")
        if kw == "function":
            mm = _JS_FN_NAME.match(self.masked, m.start("kw"), brace)
            name = (mm.group(1) if mm else None) or ("default" if default else None)
            return _Decl(start, d, "function", name, attrs=attrs) if name else None
        if kw == "class":
            mm = _JS_CLASS_NAME.match(self.masked, m.start("kw"), brace)
            name = mm.group(1) if mm else None
            if name in (None, "extends", "implements"):
                name = "default" if default else None
            return _Decl(start, d, "class", name, container=True, attrs=attrs) if name else None
        if kw in ("interface", "enum"):
            mm = _IDENT_AFTER.match(self.masked, after, brace)
            return _Decl(start, d, kw, mm.group(1), attrs=attrs) if mm else None
        if kw in ("namespace", "module", "global"):
            rest = self.masked[after:brace]
            if kw == "module" and not rest[:1].isspace():
                return None
            return _Decl(start, d, namespace="") if _JS_NAMESPACE_REST.match(rest) else None
        # const / let / var
        mm = _JS_ARROW_HEAD.match(self.masked, after, brace)
        if not mm:
            return None
        if mm.group(2) != "function" and not header.rstrip().endswith("=>"):
            return None
        attrs["arrow"] = mm.group(2) != "function"
        return _Decl(start, d, "function", mm.group(1), attrs=attrs)

    def _decl_kotlin(self, scope, m, header, start, d, brace, close):
        return self._kotlin_decl(scope, m, None, start=start)

    def _kotlin_decl(self, scope, m, end, bodyless=False, start=None):
        kw = m.group("kw")
        mods = (m.group("mods") or "").split()
        d = m.start("d")
        start = d if start is None else start
        vis = next((w for w in mods if w in _VIS_WORDS), "public")
        attrs = {"visibility": vis}
        after = m.end("kw")
        limit = end if end is not None else self.n
        if kw in ("class", "interface"):
            mm = _IDENT_AFTER.match(self.masked, after, limit)
            if not mm:
                return None
            subkind = "enum" if "enum" in mods else ("interface" if kw == "interface" else "class")
            return _Decl(start, d, subkind, mm.group(1), container=not bodyless, attrs=attrs, end=end,
                         placeholder_suffix="" if bodyless else _PLACEHOLDER_BODY)
        if kw == "object":
            mm = _IDENT_AFTER.match(self.masked, after, limit)
            name = mm.group(1) if mm else ("Companion" if "companion" in mods else None)
            if not name:
                return None
            attrs["object"] = True
            return _Decl(start, d, "class", name, container=not bodyless, attrs=attrs, end=end,
                         placeholder_suffix="" if bodyless else _PLACEHOLDER_BODY)
        subkind = "method" if scope.kind in _CLASS_LIKE else "function"
        if kw == "constructor":
            return _Decl(start, d, subkind, "constructor", attrs=attrs)
        if kw != "fun":
            return None
        pos = after
        while pos < limit and self.masked[pos] in " \t":
            pos += 1
        if pos < limit and self.masked[pos] == "<":
            pos = _skip_balanced(self.masked, pos, "<", ">", limit)
        mm = _KT_FUN_NAME.match(self.masked, pos, limit)
        if not mm:
            return None
        full = mm.group(1).replace("`", "")
        receiver, _, name = full.rpartition(".")
        if receiver:
            attrs["receiver"] = receiver
        if bodyless:
            body_eq = self.masked.find("=", mm.end(), end)
            if body_eq < 0:
                return None  # an abstract signature, not a definition
            return _Decl(start, d, subkind, name, attrs=attrs, end=end, sig_end=body_eq,
                         placeholder_suffix=" = ...")
        return _Decl(start, d, subkind, name, attrs=attrs)

    def _decl_swift(self, scope, m, header, start, d, brace, close):
        kw = m.group("kw")
        mods = (m.group("mods") or "").split()
        vis = next((w.split("(")[0] for w in mods if w.split("(")[0] in _VIS_WORDS), "internal")
        attrs = {"visibility": vis}
        after = m.end("kw")
        if kw in ("class", "struct", "enum", "protocol", "actor"):
            mm = _IDENT_AFTER.match(self.masked, after, brace)
            if not mm or mm.group(1) in _SWIFT_NOT_NAMES:
                return None
            subkind = {"protocol": "interface", "actor": "class"}.get(kw, kw)
            return _Decl(start, d, subkind, mm.group(1), container=True, attrs=attrs)
        if kw == "extension":
            mm = _SWIFT_TYPE_AFTER.match(self.masked, after, brace)
            if not mm:
                return None
            typ = mm.group(1)
            attrs["type"] = typ
            return _Decl(start, d, "impl", f"extension-{typ}", display=f"extension {typ}", member_qual=typ,
                         container=True, attrs=attrs)
        subkind = "method" if scope.kind in _CLASS_LIKE else "function"
        if kw == "func":
            mm = _SWIFT_FUNC_NAME.match(self.masked, after, brace)
            return _Decl(start, d, subkind, mm.group(1), attrs=attrs) if mm else None
        name = kw + (self.masked[after] if after < brace and self.masked[after] in "?!" else "")
        return _Decl(start, d, "method" if scope.kind in _CLASS_LIKE else "function", name, attrs=attrs)

    def _decl_php(self, scope, m, header, start, d, brace, close):
        kw = m.group("kw")
        mods = (m.group("mods") or "").split()
        after = m.end("kw")
        if kw == "namespace":
            rest = self.masked[after:brace].strip()
            if rest and not re.fullmatch(r"[\w\\]+", rest):
                return None
            return _Decl(start, d, namespace=rest.strip("\\"))
        attrs = {}
        if scope.kind in _CLASS_LIKE:
            attrs["visibility"] = next((w for w in mods if w in _VIS_WORDS), "public")
        if kw == "function":
            mm = _PHP_FN_NAME.match(self.masked, after, brace)
            if not mm:
                return None  # a closure
            if "static" in mods:
                attrs["static"] = True
            subkind = "method" if scope.kind in _CLASS_LIKE else "function"
            return _Decl(start, d, subkind, mm.group(1), attrs=attrs)
        mm = _IDENT_AFTER.match(self.masked, after, brace)
        if not mm:
            return None
        return _Decl(start, d, kw, mm.group(1), container=True, attrs=attrs)

    def _classify_statement(self, scope: _Node, stmt: int, brace: int, close: int) -> _Decl | None:
        """C, C++, Java, C#: the statement since the last ";" / "}" / "{" is the header."""
        M = self.masked
        a = _WS.match(M, stmt, brace).end()
        if brace - a > MAX_HEADER or a >= brace:
            return None
        h = M[a:brace]
        label_end, k = _strip_prefix(h, self.lang)
        if label_end:
            lm = None
            for lm in _CPP_LABEL.finditer(h, 0, label_end):
                pass
            if lm is not None and self.lang == "cpp":
                scope.access = lm.group(1)
        start = a + label_end
        start += len(h[label_end:]) - len(h[label_end:].lstrip())
        body = h[k:]
        d = a + k
        lang = self.lang
        if lang == "csharp":
            mm = _CS_NAMESPACE.match(body)
            if mm:
                return _Decl(start, d, namespace=mm.group(1))
        if lang == "cpp" and _CPP_NAMESPACE.match(body):
            return _Decl(start, d, namespace="")
        if lang == "c" and re.match(r"extern\s*$", body):
            return _Decl(start, d, namespace="")
        if lang in ("java", "csharp"):
            mm = _JAVA_TYPE.match(body)
            if mm:
                kw = mm.group("kw")
                subkind = ("struct" if "struct" in kw else "interface" if "interface" in kw
                           else "enum" if kw == "enum" else "class")
                attrs = self._jvm_visibility(mm.group("mods").split(), scope)
                if kw.startswith("record"):
                    attrs["record"] = True
                return _Decl(start, d, subkind, mm.group("n"), container=True, attrs=attrs)
        else:
            decl = self._c_type(scope, body, start, d, close)
            if decl is not None:
                return decl
        fn = _c_function(body)
        if fn is None:
            return None
        name, pre, rest = fn
        pre_words = pre.replace("*", " ").replace("&", " ").split()
        if name.split("::")[-1] in _CONTROL_WORDS or any(w in _CONTROL_WORDS for w in pre_words):
            return None
        if "=" in _strip_parens(rest) or ";" in rest:
            return None
        if not _C_PRE_OK.match(pre.replace("@", "")):
            return None
        in_class = scope.kind in _CLASS_LIKE
        simple = name.split("::")[-1]
        if not pre_words or all(w in _JAVA_MODS for w in pre_words):
            # no return type: only constructors/destructors (or C++ out-of-line members)
            if not (in_class and simple.lstrip("~") == scope.name) and "::" not in name:
                return None
        if lang == "c" and "::" in name:
            return None
        if lang in ("java", "csharp"):
            attrs = self._jvm_visibility(pre_words, scope)
            if "static" in pre_words:
                attrs["static"] = True
            return _Decl(start, d, "method" if in_class else "function", name, attrs=attrs)
        qualified = "::" in name.strip(":")
        slug = ".".join(p for p in name.split("::") if p)
        attrs = {}
        if lang == "cpp" and in_class:
            attrs["visibility"] = scope.access or ("private" if scope.kind == "class" else "public")
        elif scope.kind == "file":
            attrs["exported"] = "static" not in pre_words
        subkind = "method" if (in_class or qualified) else "function"
        return _Decl(start, d, subkind, slug, attrs=attrs)

    def _c_type(self, scope, body, start, d, close) -> _Decl | None:
        mm = _C_TYPE.match(body)
        if not mm:
            return None
        rest = _strip_c_attributes(mm.group("rest"))
        rm = _C_TYPE_REST.match(rest)
        if not rm:
            return None
        kw = mm.group("kw").split()[0]
        name = rm.group("n")
        decl_end = None
        if not name:
            if not mm.group("td"):
                return None
            tm = _C_TYPEDEF_NAME.match(self.masked, close + 1)
            if not tm:
                return None
            name = tm.group(1)
            decl_end = tm.end()
        subkind = {"union": "struct"}.get(kw, kw)
        container = self.lang == "cpp" and kw in ("class", "struct", "union")
        attrs = {}
        if self.lang == "cpp" and scope.kind in ("class", "struct"):
            attrs["visibility"] = scope.access or ("private" if scope.kind == "class" else "public")
        if mm.group("td"):
            attrs["typedef"] = True
        return _Decl(start, d, subkind if subkind != "union" else "struct", name, container=container,
                     attrs=attrs, end=decl_end)

    def _jvm_visibility(self, words: list[str], scope: _Node) -> dict:
        vis = next((w for w in words if w in _VIS_WORDS), None)
        if vis is None:
            if self.lang == "java":
                vis = "public" if scope.kind == "interface" else "package"
            else:
                vis = "internal" if scope.kind == "file" else ("public" if scope.kind == "interface" else "private")
        return {"visibility": vis}

    # -- Ruby

    def _ruby(self, root: _Node) -> None:
        M = self.masked
        stack: list[dict] = []
        pos = 0
        while True:
            m = _RB_TOK.search(M, pos)
            if m is None:
                break
            kw, s = m.group(1), m.start()
            pos = m.end()
            if kw == "end":
                if stack:
                    self._ruby_close(stack.pop(), m.end())
                continue
            if kw in ("if", "unless", "while", "until", "for") and not self._rb_statement_start(s):
                continue  # a modifier: `return x if y`
            if kw == "do" and stack and stack[-1]["kw"] in ("while", "until", "for") \
                    and stack[-1]["line"] == self.line_of(s) and not stack[-1]["do"]:
                stack[-1]["do"] = True
                continue
            parent = stack[-1] if stack else None
            block = {"kw": kw, "start": s, "line": self.line_of(s), "do": False, "node": None, "parent": parent}
            promotable = parent is None or (parent["node"] is not None and parent["kw"] in ("class", "module")) \
                or (parent["kw"] == "sclass" and parent.get("owner") is not None)
            if kw == "def":
                dm = _RB_DEF.match(M, s)
                if dm is None:
                    stack.append(block)
                    continue
                pos = dm.end()
                head_end = pos
                j = pos
                while j < self.n and M[j] in " \t":
                    j += 1
                if j < self.n and M[j] == "(":
                    close = M.find(")", j, j + 2000)
                    head_end = close + 1 if close >= 0 else pos
                if _RB_ENDLESS.match(M, head_end):  # def name(args) = expr
                    if promotable:
                        end = M.find("\n", head_end)
                        block["end"] = self.n if end < 0 else end
                        self._ruby_node(block, dm, head_end, endless=True)
                    continue
                if promotable:
                    self._ruby_node(block, dm, head_end)
            elif kw == "class":
                if _RB_SCLASS.match(M, pos):
                    block["kw"] = "sclass"
                    if parent is not None and parent["node"] is not None and parent["kw"] in ("class", "module"):
                        block["owner"] = parent["node"]
                else:
                    nm = _RB_NAME.match(M, pos)
                    if nm and promotable:
                        self._ruby_node(block, nm, None)
            elif kw == "module":
                nm = _RB_NAME.match(M, pos)
                if nm and promotable:
                    self._ruby_node(block, nm, None)
            stack.append(block)
        unclosed = [b for b in stack if b.get("leaf") is not None]
        if unclosed:
            self.notes.append(f"ruby: {len(unclosed)} definition(s) without `end`, the first "
                              f"`{unclosed[0]['kw']}` at line {unclosed[0]['line']}; they run to the end of the file")
        while stack:
            self._ruby_close(stack.pop(), self.n)
        self._ruby_visibility()

    def _rb_statement_start(self, s: int) -> bool:
        """Whether the keyword at ``s`` starts a statement (else it is a modifier)."""
        M = self.masked
        lo = max(0, s - 200)
        cut = max(M.rfind("\n", lo, s), M.rfind(";", lo, s))
        prefix = M[cut + 1 if cut >= 0 else lo:s].rstrip()
        if not prefix:
            return True
        if prefix[-1] in _RB_STMT_CHARS:
            return True
        return prefix.split()[-1] in _RB_STMT_WORDS

    def _ruby_node(self, block: dict, m: re.Match, head_end: int | None, endless: bool = False) -> None:
        kw = block["kw"]
        parent_block = block["parent"]
        if parent_block is None:
            scope = self._ruby_scope_root()
            singleton = False
        elif parent_block["kw"] == "sclass":
            scope = parent_block["owner"]
            singleton = True
        else:
            scope = parent_block["node"]
            singleton = False
        if scope.depth + 1 >= MAX_DEPTH:
            return  # too deep: stays in its parent's text
        s = block["start"]
        if kw == "def":
            name = m.group("n")
            recv = m.group("recv")
            subkind = "method" if scope.kind in ("class", "module") else "function"
            attrs = {}
            if recv or singleton:
                attrs["singleton"] = True
            sig_end = block["end"] if endless else head_end
            decl = _Decl(s, s, subkind, name, attrs=attrs, sig_end=sig_end,
                         placeholder_suffix="" if endless else " ... end")
        else:
            full = m.group(1)
            parts = full.split("::")
            line_end = self.masked.find("\n", m.end())
            line_end = self.n if line_end < 0 else line_end
            semi = self.masked.find(";", m.end(), line_end)
            sig_end = semi if semi >= 0 else line_end
            decl = _Decl(s, s, "class" if kw == "class" else "module", ".".join(parts), container=True,
                         sig_end=sig_end, placeholder_suffix=" ... end")
        block["decl"] = decl
        block["scope"] = scope
        node = self._add(scope, decl, scope.prefix, end=block.get("end", s + 1))
        block["node"] = node if kw in ("class", "module") else None
        block["leaf"] = node
        if "end" in block:  # endless def: already complete
            self._ruby_fix_end(node, block["end"])

    def _ruby_scope_root(self) -> _Node:
        return self._root_for_ruby

    def _ruby_close(self, block: dict, end: int) -> None:
        node = block.get("leaf")
        if node is not None:
            self._ruby_fix_end(node, end)

    def _ruby_fix_end(self, node: _Node, end: int) -> None:
        node.end = end
        node.draft.end_line = self.line_of(max(node.start, end - 1))

    def _ruby_visibility(self) -> None:
        """``private`` / ``protected`` lines apply to later methods at the same indentation."""
        markers = [(m.start(2), len(m.group(1)), m.group(2)) for m in _RB_VIS.finditer(self.masked)]
        positions = [p for p, _, _ in markers]
        for node in self._walk(self._root_for_ruby):
            if node.kind != "class" and node.kind != "module":
                continue
            i = bisect.bisect_right(positions, node.start)
            current: dict[int, str] = {}
            for child in node.children:
                if child.draft.subkind != "method":
                    continue
                while i < len(markers) and markers[i][0] < child.start:
                    current[markers[i][1]] = markers[i][2]
                    i += 1
                indent = len(self.indent_at(child.start))
                vis = current.get(indent, "public")
                line_prefix = self.masked[self.line_start(child.start):child.start]
                for word in ("private", "protected", "public"):
                    if re.search(r"\b" + word + r"\b", line_prefix):
                        vis = word
                child.draft.attrs["visibility"] = vis

    @staticmethod
    def _walk(node: _Node):
        stack = [node]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(n.children)

    # -- imports

    def _imports(self, root: _Node) -> None:
        getattr(self, "_imports_" + ("js" if self.lang in _JS else "c" if self.lang in _C else self.lang))(root)

    def _ref(self, root: _Node, target: str, pos: int, kind: str, names: list[str] | None = None,
             **extra) -> None:
        attrs = {"language": self.lang, "line": self.line_of(pos), "kind": kind}
        if names is not None:
            attrs["names"] = names
        attrs.update({k: v for k, v in extra.items() if v not in (None, False, "")})
        self.references.append(Reference(source=root.draft, target=target, type="import",
                                         relation="imports", attrs=attrs))

    def _imports_js(self, root):
        nc, n = self.nc, self.n
        for m in _JS_MODULE_KW.finditer(nc):
            s, kw = m.start(), m.group()
            if not self.in_code(s) or (s > 0 and nc[s - 1] in ".$"):
                continue
            after = m.end()
            if kw == "import":
                dm = _JS_DYNAMIC.match(nc, after)
                if dm:
                    self._ref(root, dm.group("spec"), s, "import", dynamic=True)
                    continue
                bm = _JS_QUOTED.match(nc, after)
                if bm:
                    self._ref(root, bm.group("spec"), s, "import", names=[])
                    continue
            # `import clause from "x"` / `export {a} from "x"`: the clause ends at `from`
            stop = _JS_CLAUSE_STOP.search(nc, after, min(n, after + 4000))
            if stop is None or stop.group() != "from":
                continue
            qm = _JS_QUOTED.match(nc, stop.end())
            if qm is None:
                continue
            clause = nc[after:stop.start()]
            type_only = clause.lstrip().startswith("type ")
            if type_only:
                clause = clause.lstrip()[5:]
            if kw == "export" and not clause.strip().startswith(("*", "{")):
                continue
            self._ref(root, qm.group("spec"), s, "import", names=_js_import_names(clause),
                      reexport=kw == "export", type_only=type_only)
        for m in _JS_REQUIRE.finditer(nc):
            s = m.start()
            if self.in_code(s) and not (s > 0 and nc[s - 1] in ".$"):
                self._ref(root, m.group("spec"), s, "require")

    def _imports_go(self, root):
        nc = self.nc
        for m in _GO_IMPORT.finditer(self.masked):
            # masked has the strings blanked; read the specs from nc at the same offsets
            after = _WS.match(nc, m.end()).end()
            if nc.startswith("(", after):
                close = self.masked.find(")", after)
                close = self.n if close < 0 else close
                for sm in _GO_IMPORT_SPEC.finditer(nc, after + 1, close):
                    alias = (sm.group("alias") or "").strip()
                    self._ref(root, sm.group("spec"), sm.start("q"), "import", alias=alias)
            else:
                sm = _GO_IMPORT_ONE.match(nc, m.end())
                if sm:
                    alias = (sm.group("alias") or "").strip()
                    self._ref(root, sm.group("spec"), sm.start("q"), "import", alias=alias)

    def _imports_rust(self, root):
        inline_mods = sorted((c.start, c.end) for c in self._walk(root) if c.kind == "module")
        for m in _RUST_USE.finditer(self.masked):
            end = self.masked.find(";", m.end(), m.end() + 4000)
            if end < 0:
                continue
            # `use super::x` inside `mod tests { }` means the file's own module: each
            # enclosing inline module takes one `super` (resolution only knows files).
            depth = sum(1 for a, b in inline_mods if a < m.start() < b)
            for written, alias in _rust_use_paths(self.masked[m.end():end]):
                path = _rust_inline_path(written, depth)
                segs = path.split("::")
                names = [segs[-1]] if len(segs) > 1 else []
                self._ref(root, path, m.end(), "use", names=names, alias=alias,
                          written=written if path != written else "")
        for m in _RUST_MOD.finditer(self.masked):
            self._ref(root, m.group("n"), m.start("n"), "mod", names=[])

    def _imports_java(self, root):
        for m in _JAVA_IMPORT.finditer(self.masked):
            spec = m.group("spec")
            self._ref(root, spec, m.start("spec"), "import", names=[spec.rsplit(".", 1)[-1]],
                      static=bool(m.group("static")))

    def _imports_kotlin(self, root):
        for m in _KT_IMPORT.finditer(self.nc):  # nc: `backticked` names are intact there
            if not self.in_code(m.start("kw")):
                continue
            spec = m.group("spec").replace("`", "")
            self._ref(root, spec, m.start("spec"), "import", names=[spec.rsplit(".", 1)[-1]],
                      alias=m.group("alias"))

    def _imports_c(self, root):
        for m in _C_INCLUDE.finditer(self.nc):
            if m.start() not in self.directive_starts:
                continue
            system = m.group("q") == "<"
            self._ref(root, m.group("spec").strip(), m.start("q"), "include", system=system)

    def _imports_csharp(self, root):
        for m in _CS_USING.finditer(self.masked):
            self._ref(root, m.group("spec"), m.start("spec"), "use", names=[],
                      static=bool(m.group("static")), alias=m.group("alias"))

    def _imports_ruby(self, root):
        for m in _RB_REQUIRE.finditer(self.nc):
            if not self.in_code(m.start()):
                continue
            kw = m.group("kw")
            self._ref(root, m.group("spec"), m.start(), "require", relative=kw == "require_relative",
                      autoload=kw == "autoload")

    def _imports_php(self, root):
        # top-level definitions are disjoint: bisect for "inside a class body"
        ranges = sorted((c.start, c.end) for c in root.children)
        starts = [a for a, _ in ranges]
        for m in _PHP_USE.finditer(self.masked):
            s = m.start()
            i = bisect.bisect_right(starts, s) - 1
            if i >= 0 and s < ranges[i][1]:
                continue  # `use SomeTrait;` inside a class body
            end = self.masked.find(";", m.end(), m.end() + 4000)
            if end < 0:
                continue
            for spec, alias, what in _php_use_specs(self.masked[m.end():end]):
                self._ref(root, spec, m.end(), "use", names=[spec.rsplit("\\", 1)[-1]], alias=alias,
                          symbol=what)
        for m in _PHP_INCLUDE.finditer(self.nc):
            if not self.in_code(m.start()):
                continue
            spec = m.group("spec")
            if m.group("dir"):
                spec = "__DIR__" + (spec if spec.startswith("/") else "/" + spec)
            kind = "require" if m.group("kw").startswith("require") else "include"
            self._ref(root, spec, m.start(), kind)

    def _imports_swift(self, root):
        for m in _SWIFT_IMPORT.finditer(self.masked):
            spec = m.group("spec")
            self._ref(root, spec, m.start("spec"), "import", names=[])

    # -- text

    def _render(self, root: _Node) -> None:
        for node in self._walk(root):
            if node is root:
                start, end = 1, _line_count(self.text)
            else:
                start, end = node.draft.start_line, node.draft.end_line
            cuts = []
            for child in node.children:
                cs, ce = child.draft.start_line, child.draft.end_line
                if node is not root and cs <= start:
                    continue  # on its parent's header line (one-liner): keep inline
                cuts.append((cs, min(ce, end), child.placeholder))
            node.draft.text = _render_lines(self.lines, start, end, cuts)


# --------------------------------------------------------------------------
# Small helpers


def _render_lines(lines: list[str], start: int, end: int, cuts: list[tuple[int, int, str]]) -> str:
    """Lines ``start..end`` (1-based, inclusive) with each cut range replaced by its placeholder."""
    out: list[str] = []
    current = start
    for cut_start, cut_end, replacement in sorted(cuts, key=lambda c: c[0]):
        if cut_start < current:  # overlaps the previous cut (two definitions on one line)
            if cut_end >= current:
                current = cut_end + 1
            continue
        out.extend(lines[current - 1:cut_start - 1])
        out.append(replacement)
        current = cut_end + 1
    out.extend(lines[current - 1:end])
    return "\n".join(out)


def _clean_comment(raw: str) -> str:
    out: list[str] = []
    for line in raw.split("\n"):
        s = line.strip()
        if s.startswith("/**"):
            s = s[3:]
        elif s.startswith("/*"):
            s = s[2:]
        elif s.startswith("///") or s.startswith("//!"):
            s = s[3:]
        elif s.startswith("//"):
            s = s[2:]
        elif s.startswith("#"):
            s = s.lstrip("#")
        elif s.startswith("=begin") or s.startswith("=end"):
            continue
        if s.endswith("*/"):
            s = s[:-2]
        s = s.strip()
        if s.startswith("* ") or s == "*":
            s = s[1:].strip()
        out.append(s)
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def _skip_balanced(s: str, i: int, opener: str, closer: str, limit: int | None = None) -> int:
    """Index just after the ``closer`` matching ``s[i] == opener`` (or ``limit``)."""
    limit = len(s) if limit is None else limit
    depth = 0
    j = i
    while j < limit:
        c = s[j]
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return limit


def _strip_parens(s: str) -> str:
    out = []
    depth = 0
    for c in s:
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def _strip_prefix(h: str, lang: str) -> tuple[int, int]:
    """(end of access labels, start of the declaration proper) in a C-family header."""
    i = 0
    label_end = 0
    n = len(h)
    for _ in range(64):
        while i < n and h[i].isspace():
            i += 1
        if i >= n:
            break
        if lang == "cpp":
            m = _CPP_LABEL.match(h, i)
            if m:
                i = label_end = m.end()
                continue
            if h.startswith("template", i):
                j = i + 8
                while j < n and h[j].isspace():
                    j += 1
                if j < n and h[j] == "<":
                    i = _skip_balanced(h, j, "<", ">")
                    continue
        if h.startswith("[[", i) and lang in _C:
            i = _skip_balanced(h, i, "[", "]")
            continue
        if h[i] == "[" and lang == "csharp":
            i = _skip_balanced(h, i, "[", "]")
            continue
        if h[i] == "@" and lang == "java" and not h.startswith("@interface", i):
            j = i + 1
            while j < n and (h[j].isalnum() or h[j] in "_."):
                j += 1
            k = j
            while k < n and h[k] in " \t":
                k += 1
            i = _skip_balanced(h, k, "(", ")") if k < n and h[k] == "(" else j
            continue
        m = _C_ATTRIBUTE.match(h, i) if lang in _C else None
        if m:
            i = _skip_balanced(h, m.end() - 1, "(", ")")
            continue
        break
    return label_end, i


def _strip_c_attributes(rest: str) -> str:
    rest = rest.lstrip()
    for _ in range(8):
        if rest.startswith("[["):
            rest = rest[_skip_balanced(rest, 0, "[", "]"):].lstrip()
            continue
        m = _C_ATTRIBUTE.match(rest)
        if m:
            rest = rest[_skip_balanced(rest, m.end() - 1, "(", ")"):].lstrip()
            continue
        break
    return rest


def _c_function(h: str) -> tuple[str, str, str] | None:
    """(qualified name, text before it, text after the parameter list) of a function header."""
    op = _OPERATOR.search(h)
    if op:
        open_paren = h.find("(", op.end())
        if op.group(1).startswith("("):
            open_paren = h.find("(", op.end())
        if open_paren < 0:
            return None
        name_end = op.end()
        k = op.start()
        while k > 0 and (h[k - 1].isalnum() or h[k - 1] in "_:~"):
            k -= 1
        name = h[k:op.start()] + "operator" + "".join(op.group(1).split())
        name_start = k
    else:
        open_paren = -1
        angle = 0
        for i, c in enumerate(h):
            if c == "<" and i > 0 and (h[i - 1].isalnum() or h[i - 1] in "_ "):
                angle += 1
            elif c == ">" and angle > 0:
                angle -= 1
            elif c == "(" and angle == 0:
                open_paren = i
                break
        if open_paren <= 0:
            return None
        k = open_paren
        while k > 0 and h[k - 1] in " \t\n":
            k -= 1
        if k > 0 and h[k - 1] == ">":  # generic method: Foo<T>(
            depth = 0
            while k > 0:
                c = h[k - 1]
                if c == ">":
                    depth += 1
                elif c == "<":
                    depth -= 1
                    if depth == 0:
                        k -= 1
                        break
                k -= 1
            name_end = k
        else:
            name_end = k
        k = name_end
        while k > 0 and (h[k - 1].isalnum() or h[k - 1] in "_:~$"):
            k -= 1
        name_start = k
        name = h[name_start:name_end]
    name = name.strip()
    if name.startswith("::"):
        name = name[2:]
    if not name or name.endswith(":") or not (name[0].isalpha() or name[0] in "_~"):
        return None
    close = _skip_balanced(h, open_paren, "(", ")")
    if close > len(h) or h[close - 1] != ")":
        return None
    return name, h[:name_start].strip(), h[close:].strip()


def _rust_impl_parts(rest: str) -> tuple[str, str]:
    """``impl<T> Trait<T> for Type<T> where ...`` → ("Trait", "Type")."""
    s = rest.strip()
    if s.startswith("<"):
        s = s[_skip_balanced(s, 0, "<", ">"):].strip()
    m = re.search(r"\bwhere\b", s)
    if m:
        s = s[:m.start()]
    trait, sep, typ = s.partition(" for ")
    if not sep:
        trait, typ = "", s
    return _rust_type_name(trait), _rust_type_name(typ)


def _rust_type_name(s: str) -> str:
    s = s.strip()
    if not s:
        return ""
    out = []
    depth = 0
    for c in s:
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    s = "".join(out).split("->")[0]
    s = re.sub(r"\([^()]*\)", "", s)  # Fn(A) -> B, tuples
    s = re.sub(r"&\s*(?:'\w+\s*)?(?:mut\b\s*)?|\b(?:dyn|impl|mut|const)\s+|[!*\[\];]", " ", s).strip()
    s = s.split("::")[-1].strip()
    words = re.findall(r"\w+", s)
    return words[-1] if words else ""


def _rust_use_paths(tree: str) -> list[tuple[str, str]]:
    """Expand a use tree: ``a::{b, c::{D, E as F}}`` → [("a::b", ""), ("a::c::D", ""), ("a::c::E", "F")]."""
    tokens = _RUST_USE_TOKEN.findall(tree)
    out: list[tuple[str, str]] = []
    pos = 0

    def parse_tree(prefix: list[str], depth: int) -> None:
        nonlocal pos
        path = list(prefix)
        while pos < len(tokens):
            tok = tokens[pos]
            if tok == "::":
                pos += 1
                continue
            if tok == "{":
                pos += 1
                if depth >= 8:  # absurd nesting: keep the prefix only
                    out.append(("::".join(path), ""))
                    skip = 1
                    while pos < len(tokens) and skip:
                        skip += {"{": 1, "}": -1}.get(tokens[pos], 0)
                        pos += 1
                    return
                while pos < len(tokens) and tokens[pos] != "}":
                    if tokens[pos] == ",":
                        pos += 1
                        continue
                    parse_tree(path, depth + 1)
                pos += 1
                return
            if tok in (",", "}"):
                break
            if tok == "*":
                out.append(("::".join(path + ["*"]), ""))
                pos += 1
                return
            if tok == "as":
                alias = tokens[pos + 1] if pos + 1 < len(tokens) else ""
                pos += 2
                out.append(("::".join(path), alias))
                return
            if tok == "self" and path and pos > 0 and tokens[pos - 1] in ("{", ","):
                pos += 1
                if pos < len(tokens) and tokens[pos] == "as":
                    continue
                out.append(("::".join(path), ""))
                return
            path.append(tok)
            pos += 1
        if path and path != prefix:
            out.append(("::".join(path), ""))

    guard = 0
    while pos < len(tokens) and guard < 1000:
        guard += 1
        before = pos
        parse_tree([], 0)
        if pos == before:
            pos += 1
    return [(p, a) for p, a in out if p]


def _rust_inline_path(path: str, depth: int) -> str:
    """A use path written inside ``depth`` inline ``mod`` blocks, seen from the file's module."""
    if depth <= 0:
        return path
    segs = path.split("::")
    if segs[0] == "self":
        return "self::" + "::".join(segs[1:]) if len(segs) > 1 else "self"
    supers = 0
    while supers < len(segs) and segs[supers] == "super":
        supers += 1
    if supers == 0:
        return path
    absorbed = min(supers, depth)
    rest = segs[absorbed:]
    if absorbed == supers:  # climbed back to the file's own module
        return "::".join(["self"] + rest[supers - absorbed:]) if rest else "self"
    return "::".join(rest)


def _js_import_names(clause: str) -> list[str]:
    clause = " ".join(clause.split())
    names: list[str] = []
    if not clause:
        return names
    brace = clause.find("{")
    head = clause if brace < 0 else clause[:brace]
    head = head.strip().rstrip(",").strip()
    if head.startswith("*"):
        names.append("*")
    elif head and head != "type":
        m = re.match(r"(?:type\s+)?([\w$]+)", head)
        if m:
            names.append("default")
        if "*" in head:
            names.append("*")
    if brace >= 0:
        inner = clause[brace + 1:clause.find("}", brace) if "}" in clause[brace:] else len(clause)]
        for part in inner.split(","):
            part = part.strip()
            if part.startswith("type "):
                part = part[5:].strip()
            name = part.split(" as ")[0].strip()
            if name:
                names.append(name)
    return names


def _php_use_specs(body: str) -> list[tuple[str, str, str]]:
    """``function A\\b, A\\{C, D as E}`` → [(spec, alias, "function"|"const"|"")]."""
    body = " ".join(body.split())
    what = ""
    m = re.match(r"(function|const)\s+", body)
    if m:
        what = m.group(1)
        body = body[m.end():]
    out: list[tuple[str, str, str]] = []
    brace = body.find("{")
    if brace >= 0:
        prefix = body[:brace].strip().rstrip("\\")
        inner = body[brace + 1:body.rfind("}") if "}" in body else len(body)]
        for part in inner.split(","):
            part = part.strip()
            sub_what = what
            m2 = re.match(r"(function|const)\s+", part)
            if m2:
                sub_what = m2.group(1)
                part = part[m2.end():]
            name, _, alias = part.partition(" as ")
            if name.strip():
                out.append((f"{prefix}\\{name.strip()}".lstrip("\\"), alias.strip(), sub_what))
        return out
    for part in body.split(","):
        name, _, alias = part.strip().partition(" as ")
        if name.strip():
            out.append((name.strip().lstrip("\\"), alias.strip(), what))
    return out


def _rust_module_path(path: str) -> str:
    """``src/net/http.rs`` → ``crate.net.http``; ``lib.rs``/``main.rs`` → ``crate``; ``x/mod.rs`` → ``crate.x``."""
    parts = posixpath.normpath(path).lstrip("/").split("/")
    src = max((i for i, p in enumerate(parts[:-1]) if p == "src"), default=None)
    rel = parts[src + 1:] if src is not None else parts[-1:]
    return ".".join(["crate"] + _rust_rel_module(rel))


def _rust_rel_module(rel: list[str]) -> list[str]:
    if not rel:
        return []
    last = rel[-1]
    if len(rel) == 1 and last in ("lib.rs", "main.rs"):
        return []
    if last == "mod.rs":
        return rel[:-1]
    return rel[:-1] + [posixpath.splitext(last)[0]]


# --------------------------------------------------------------------------
# Import resolution


class _FileIndex:
    def __init__(self, files: frozenset[str]):
        self.files = {posixpath.normpath(f).lstrip("/") for f in files}
        self.by_name: dict[str, list[str]] = {}
        self.dirs: dict[str, list[str]] = {}
        self.dir_by_name: dict[str, list[str]] = {}
        for f in sorted(self.files):
            self.by_name.setdefault(posixpath.basename(f), []).append(f)
            d = posixpath.dirname(f)
            self.dirs.setdefault(d, []).append(f)
        for d in self.dirs:
            self.dir_by_name.setdefault(posixpath.basename(d), []).append(d)

    def suffix_all(self, suffix: str) -> list[str]:
        suffix = suffix.lstrip("/")
        base = posixpath.basename(suffix)
        return [p for p in self.by_name.get(base, ()) if p == suffix or p.endswith("/" + suffix)]

    def suffix(self, suffix: str, near: str = "") -> str | None:
        return _best(self.suffix_all(suffix), near)


@lru_cache(maxsize=8)
def _file_index(files: frozenset[str]) -> _FileIndex:
    return _FileIndex(files)


def _best(candidates: list[str], near: str = "") -> str | None:
    """Closest candidate to ``near`` (most leading directories shared), then shortest, then alphabetical."""
    if not candidates:
        return None
    near_parts = posixpath.dirname(near).split("/") if near else []

    def key(p: str):
        parts = p.split("/")
        shared = 0
        for a, b in zip(parts[:-1], near_parts):
            if a != b:
                break
            shared += 1
        return (-shared, len(parts), p)

    return min(candidates, key=key)


def _join(src: str, rel: str) -> str | None:
    p = posixpath.normpath(posixpath.join(posixpath.dirname(src), rel))
    if p == ".." or p.startswith("../"):
        return None
    return p


_JS_EXTENSIONS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts")
_JS_SWAP = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}


def _resolve_js(target: str, src: str, idx: _FileIndex) -> str | None:
    spec = target.split("?", 1)[0].split("#", 1)[0]
    if spec.startswith("/"):
        base = posixpath.normpath(spec.lstrip("/"))
    elif spec in (".", "..") or spec.startswith(("./", "../")):
        base = _join(src, spec)
    else:
        return None  # a package
    if base is None:
        return None
    files = idx.files
    if base in files:
        return base
    stem, ext = posixpath.splitext(base)
    for alt in _JS_SWAP.get(ext, ()):
        if stem + alt in files:
            return stem + alt
    for ext in _JS_EXTENSIONS:
        if base + ext in files:
            return base + ext
    for ext in _JS_EXTENSIONS:
        cand = posixpath.join(base, "index" + ext)
        if cand in files:
            return cand
    return None


def _resolve_go(target: str, src: str, idx: _FileIndex) -> str | None:
    segs = [s for s in target.strip().split("/") if s and s != "."]
    if not segs:
        return None
    dotted = "." in segs[0]
    for k in range(len(segs), 0, -1):
        if not dotted and k < len(segs):
            break  # a standard-library style path must match whole
        suffix = "/".join(segs[-k:])
        dirs = [d for d in idx.dir_by_name.get(segs[-1], ())
                if (d == suffix or d.endswith("/" + suffix)) and any(f.endswith(".go") for f in idx.dirs[d])]
        if dirs:
            d = _best([posixpath.join(x, "_") for x in dirs], src)
            return _go_file(idx, posixpath.dirname(d))
    return None


def _go_file(idx: _FileIndex, d: str) -> str | None:
    go = [f for f in idx.dirs.get(d, ()) if f.endswith(".go")]
    main = [f for f in go if not f.endswith("_test.go")] or go
    if not main:
        return None
    named = posixpath.join(d, posixpath.basename(d) + ".go") if d else ""
    return named if named in main else sorted(main)[0]


def _rust_src_root(src: str, idx: _FileIndex) -> str:
    d = posixpath.dirname(src)
    while True:
        if posixpath.join(d, "Cargo.toml") in idx.files:
            return posixpath.join(d, "src")
        for root in ("src/lib.rs", "src/main.rs"):
            if posixpath.join(d, root) in idx.files:
                return posixpath.join(d, "src")
        if not d:
            break
        d = posixpath.dirname(d)
    parts = src.split("/")
    if "src" in parts[:-1]:
        return "/".join(parts[:parts.index("src") + 1])
    return posixpath.dirname(src)


def _resolve_rust(target: str, src: str, idx: _FileIndex) -> str | None:
    t = target.strip()
    if t.startswith("::"):
        return None
    segs = [s for s in t.split("::") if s and s != "*"]
    if not segs or not all(re.fullmatch(r"\w+", s) for s in segs):
        return None
    root = _rust_src_root(src, idx)
    rel = src[len(root) + 1:].split("/") if root and src.startswith(root + "/") else (
        src.split("/") if not root else [posixpath.basename(src)])
    current = _rust_rel_module(rel)
    if segs[0] == "crate":
        base, rest, minimum = [], segs[1:], 0
    elif segs[0] == "self":
        base, rest = current, segs[1:]
        minimum = len(current) + 1
    elif segs[0] == "super":
        k = 0
        while k < len(segs) and segs[k] == "super":
            k += 1
        if k > len(current):
            return None
        base, rest = current[:len(current) - k], segs[k:]
        minimum = len(base)
    else:  # a path relative to the current module (or an external crate)
        base, rest = current, segs
        minimum = len(current) + 1
    full = base + rest
    for length in range(len(full), minimum - 1, -1):
        parts = full[:length]
        if not parts:
            for name in ("lib.rs", "main.rs"):
                cand = posixpath.join(root, name)
                if cand in idx.files:
                    return cand
            return None
        p = posixpath.join(root, *parts)
        for cand in (p + ".rs", posixpath.join(p, "mod.rs")):
            if cand in idx.files:
                return cand
    return None


def _resolve_jvm(target: str, src: str, idx: _FileIndex, exts: tuple[str, ...]) -> str | None:
    t = target.replace("`", "").strip()
    wildcard = t.endswith(".*")
    if wildcard:
        t = t[:-2]
    segs = [s for s in t.split(".") if s]
    if not segs:
        return None
    if wildcard:
        suffix = "/".join(segs)
        dirs = [d for d in idx.dir_by_name.get(segs[-1], ()) if d == suffix or d.endswith("/" + suffix)]
        for ext in exts:
            cands = [f for d in dirs for f in idx.dirs[d] if f.endswith(ext)]
            if cands:
                return sorted(cands, key=lambda p: (p.count("/"), p))[0]
        return None
    for length in range(len(segs), 0, -1):
        if length < len(segs) and not segs[length - 1][:1].isupper():
            break  # only drop members of classes (static imports, nested classes)
        suffix = "/".join(segs[:length])
        for ext in exts:
            found = idx.suffix(suffix + ext, src)
            if found:
                return found
    return None


def _resolve_c(target: str, src: str, idx: _FileIndex) -> str | None:
    t = target.strip()
    if not t:
        return None
    rel = _join(src, t)
    if rel and rel in idx.files:
        return rel
    clean = posixpath.normpath(t)
    while clean.startswith("../"):
        clean = clean[3:]
    if clean.startswith("/") or clean in (".", ".."):
        return None
    return idx.suffix(clean, src)


def _resolve_ruby(target: str, src: str, idx: _FileIndex) -> str | None:
    t = target.strip()
    if not t:
        return None
    if not t.endswith(".rb"):
        t += ".rb"
    rel = _join(src, t)
    if t.startswith("."):
        return rel if rel in idx.files else None
    if rel and rel in idx.files:
        return rel
    cands = idx.suffix_all(t)
    lib = [p for p in cands if p == "lib/" + t or p.endswith("/lib/" + t)]
    return _best(lib or cands, src)


def _resolve_php(target: str, src: str, idx: _FileIndex) -> str | None:
    t = target.strip()
    if not t:
        return None
    m = re.match(r"(?:__DIR__|dirname\s*\(\s*__FILE__\s*\))\s*\.?\s*", t)
    if m:
        rel = _join(src, "./" + t[m.end():].lstrip("/"))
        if rel and rel in idx.files:
            return rel
        return idx.suffix(t[m.end():].lstrip("/").lstrip("./"), src)
    is_path = "/" in t or t.endswith((".php", ".inc", ".phtml"))
    if "\\" in t or not is_path:
        segs = [s for s in t.strip("\\").split("\\") if s]
        if not segs:
            return None
        for length in range(len(segs), min(2, len(segs)) - 1, -1):
            suffix = "/".join(segs[-length:]) + ".php"
            cands = idx.suffix_all(suffix)
            if cands:
                preferred = [p for p in cands if re.search(r"(?:^|/)(?:src|app|lib)/", p)]
                return _best(preferred or cands, src)
        return None
    rel = _join(src, t)
    if rel and rel in idx.files:
        return rel
    clean = posixpath.normpath(t)
    while clean.startswith("../"):
        clean = clean[3:]
    return idx.suffix(clean.lstrip("/"), src)


_RESOLVERS = {
    "javascript": _resolve_js,
    "typescript": _resolve_js,
    "go": _resolve_go,
    "rust": _resolve_rust,
    "java": lambda t, s, i: _resolve_jvm(t, s, i, (".java", ".kt")),
    "kotlin": lambda t, s, i: _resolve_jvm(t, s, i, (".kt", ".java", ".kts")),
    "c": _resolve_c,
    "cpp": _resolve_c,
    "ruby": _resolve_ruby,
    "php": _resolve_php,
}
