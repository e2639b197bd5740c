"""The prose inside a unit of code: its docstring, else its comments.

A function's docstring says what it does in the author's own sentences, and an
offline answer (:mod:`retrieval.extractive`) may quote it as it quotes a
document; the code around it may not be quoted as prose. :func:`code_prose`
returns that prose as plain text (lines, paragraphs split by blank lines) for
the sentence splitter, and nothing of the code itself:

- Python: the docstring of the unit's definition (a function, a method, a
  class) or of the module, read with :mod:`ast`; a method's source is
  indented, so it is dedented first, and a unit that still does not parse on
  its own (a chunk of a file, Python 2) falls back to a docstring found right
  after its ``def``/``class`` line, and then to its comments;
- any other language, or Python code without a docstring: its whole-line
  comments (``#`` for Python, shell and the like, ``//`` and ``/* */`` for
  the C family), with the comment markers removed; a comment at the end of a
  line of code, a shebang or a pragma is not prose.

Text whose language is unknown gets nothing: without knowing the syntax a
``#`` line may as well be a heading or a shell prompt.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

# languages whose comments start with '#'; every other known language uses '//'
HASH_COMMENTS = frozenset({"python", "py", "bash", "sh", "shell", "zsh", "ruby", "rb", "perl",
                           "r", "yaml", "yml", "toml", "make", "makefile", "cmake", "dockerfile",
                           "powershell", "ps1", "nim", "julia", "elixir", "tcl", "conf", "ini"})
# text that is not code, or whose comment syntax is not known
NOT_CODE = frozenset({"", "text", "txt", "plaintext", "markdown", "md", "rst", "html", "json",
                      "csv", "console", "output"})
_PY_DEF = re.compile(r"^[ \t]*(?:async[ \t]+def|def|class)\b[^\n]*?:[ \t]*(?:#[^\n]*)?\n"
                     r"[ \t]*[rRuU]?(\"\"\"|''')(.*?)\1", re.DOTALL | re.MULTILINE)
_PRAGMA = re.compile(r"^\s*(?:!|-\*-|(?:noqa|type:|pragma|pylint:|fmt:|isort:|nolint|NOLINT|"
                     r"eslint|ts-|prettier|clang-format|region|endregion)\b)")


def code_prose(text: str, language: str | None) -> str:
    """The prose of a unit of code whose source is ``text``: its docstring
    (Python), else its whole-line comments, as lines of plain text with blank
    lines between paragraphs; '' when it has neither or ``language`` is not
    a known programming language."""
    lang = (language or "").lower()
    if not text or lang in NOT_CODE:
        return ""
    if lang in ("python", "py"):
        doc = python_docstring(text)
        if doc:
            return doc
    return comments(text, "#" if lang in HASH_COMMENTS else "//")


def python_docstring(text: str) -> str:
    """The docstring of the first definition in ``text`` (or of the module when
    ``text`` opens with one), indentation cleaned; '' when there is none."""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError):
        m = _PY_DEF.search(text)
        return inspect.cleandoc(m.group(2)) if m else ""
    doc = ast.get_docstring(tree)
    if doc:
        return doc
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return ast.get_docstring(node) or ""
    return ""


def comments(text: str, marker: str) -> str:
    """The whole-line comments of ``text`` (``marker`` is ``#`` or ``//``; with
    ``//``, ``/* … */`` blocks count too), markers removed: consecutive comment
    lines make a paragraph; code or a blank line ends it."""
    paras: list[list[str]] = [[]]
    in_block = False
    for raw in text.splitlines():
        line = raw.strip()
        body = None
        if marker == "//" and (in_block or line.startswith("/*")):
            in_block = "*/" not in line
            body = line.split("*/")[0].lstrip("/").lstrip("*")
        elif line.startswith(marker):
            body = line[len(marker):].lstrip("/!" if marker == "//" else "")
            if marker == "#" and line.startswith("#!"):
                body = None
        if body is not None and _PRAGMA.match(body):
            body = None
        if body is None or not body.strip():
            if paras[-1]:
                paras.append([])
            continue
        paras[-1].append(body[1:] if body.startswith(" ") else body)
    return "\n\n".join("\n".join(p) for p in paras if p)
