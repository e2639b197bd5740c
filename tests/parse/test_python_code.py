"""Tests for stages.parse.python_code on real stdlib sources and targeted snippets."""

from __future__ import annotations

import ast
import asyncio.base_events
import inspect
import sysconfig
import textwrap
from pathlib import Path

import pytest

from strata.stages.parse.python_code import MAX_DEPTH, module_names, parse_python, resolve_relative

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def by_path(parsed):
    return {d.node_path: d for d in parsed.root.walk()}


def parse_snippet(src, module="pkg.sub.mod", is_package=False):
    return parse_python(textwrap.dedent(src), module.replace(".", "/") + ".py", module, is_package)


def imports_of(parsed):
    return [(r.target, r.attrs["names"], r.attrs["level"], r.source.node_path) for r in parsed.references]


@pytest.fixture(scope="module")
def base_events():
    text = (STDLIB / "asyncio" / "base_events.py").read_text(encoding="utf-8")
    return text, parse_python(text, "asyncio/base_events.py", "asyncio.base_events")


# --------------------------------------------------------------------------
# Real stdlib: asyncio/base_events.py


def test_call_soon_is_a_method_with_the_real_line_range(base_events):
    _, parsed = base_events
    nodes = by_path(parsed)
    call_soon = nodes["asyncio.base_events.BaseEventLoop.call_soon"]
    assert call_soon.kind == "code"
    assert call_soon.subkind == "method"
    assert call_soon.title == "BaseEventLoop.call_soon"
    assert call_soon.slug == "call_soon"
    assert call_soon.language == "python"
    lines, start = inspect.getsourcelines(asyncio.base_events.BaseEventLoop.call_soon)
    assert (call_soon.start_line, call_soon.end_line) == (start, start + len(lines) - 1)
    assert call_soon.attrs["signature"] == "def call_soon(self, callback, *args, context=None)"
    assert call_soon.attrs["async"] is False
    assert call_soon.attrs["docstring"].startswith("Arrange for a callback to be called as soon as possible.")
    assert "handle = self._call_soon(callback, args, context)" in call_soon.text


def test_class_text_keeps_placeholders_not_method_bodies(base_events):
    _, parsed = base_events
    nodes = by_path(parsed)
    loop = nodes["asyncio.base_events.BaseEventLoop"]
    assert loop.subkind == "class"
    assert loop.attrs["bases"] == ["events.AbstractEventLoop"]
    assert loop.attrs["signature"] == "class BaseEventLoop(events.AbstractEventLoop)"
    assert "    def call_soon(self, callback, *args, context=None): ..." in loop.text.splitlines()
    assert "handle = self._call_soon(callback, args, context)" not in loop.text
    assert "Arrange for a callback" not in loop.text
    lines, start = inspect.getsourcelines(asyncio.base_events.BaseEventLoop)
    assert (loop.start_line, loop.end_line) == (start, start + len(lines) - 1)
    # Methods are children of the class, in source order.
    child_lines = [c.start_line for c in loop.children]
    assert child_lines == sorted(child_lines)
    assert nodes["asyncio.base_events.BaseEventLoop.create_connection"].attrs["async"] is True


def test_every_definition_matches_ast_line_ranges_and_decorators(base_events):
    text, parsed = base_events
    nodes = by_path(parsed)
    tree = ast.parse(text)
    checked = 0
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            draft = nodes.get(f"asyncio.base_events.{cls.name}.{fn.name}")
            assert draft is not None, fn.name
            first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
            assert (draft.start_line, draft.end_line) == (first, fn.end_lineno)
            assert draft.attrs["decorators"] == [ast.unparse(d) for d in fn.decorator_list]
            checked += 1
    assert checked > 50


def test_decorated_property_starts_at_its_decorator(base_events):
    text, parsed = base_events
    sockets = by_path(parsed)["asyncio.base_events.Server.sockets"]
    assert sockets.attrs["decorators"] == ["property"]
    assert text.splitlines()[sockets.start_line - 1].strip() == "@property"
    server = by_path(parsed)["asyncio.base_events.Server"]
    assert "    @property\n    def sockets(self): ..." in server.text


def test_module_root_draft(base_events):
    text, parsed = base_events
    root = parsed.root
    assert (root.kind, root.subkind, root.language) == ("file", "python", "python")
    assert root.node_path == root.title == root.slug == "asyncio.base_events"
    assert (root.start_line, root.end_line) == (1, len(text.splitlines()))
    assert root.attrs["docstring"].startswith("Base implementation of event loop.")
    assert "from . import events" in root.text
    assert "MAXIMUM_SELECT_TIMEOUT = 24 * 3600" in root.text
    assert "class BaseEventLoop(events.AbstractEventLoop): ..." in root.text.splitlines()
    assert "def call_soon" not in root.text


def test_real_imports_resolve_to_absolute_modules(base_events):
    text, parsed = base_events
    refs = parsed.references
    assert all(r.type == "import" and r.relation == "imports" for r in refs)
    events = [r for r in refs if r.attrs["names"] == ["events"]]
    assert len(events) == 1
    assert events[0].target == "asyncio"
    assert events[0].attrs["level"] == 1
    assert events[0].source is parsed.root
    assert text.splitlines()[events[0].attrs["line"] - 1] == "from . import events"
    targets = {r.target for r in refs}
    assert {"asyncio.log", "collections.abc", "concurrent.futures", "ssl"} <= targets
    # Every from-import in the real file yields one reference with the same names.
    expected = [
        [a.name for a in n.names] for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.ImportFrom)
    ]
    got = [r.attrs["names"] for r in refs if r.attrs["level"] or r.attrs["names"]]
    assert sorted(got) == sorted(expected)


def test_real_package_init_star_imports():
    text = (STDLIB / "asyncio" / "__init__.py").read_text(encoding="utf-8")
    parsed = parse_python(text, "asyncio/__init__.py", "asyncio", is_package=True)
    star = {r.target for r in parsed.references if r.attrs["names"] == ["*"]}
    assert {"asyncio.base_events", "asyncio.events", "asyncio.tasks"} <= star
    assert parsed.root.node_path == "asyncio"


def test_whole_asyncio_package_parses_with_unique_paths():
    listing = [p.relative_to(STDLIB).as_posix() for p in (STDLIB / "asyncio").glob("*.py")]
    names = module_names(listing)
    assert names["asyncio/__init__.py"] == ("asyncio", True)
    for rel, (module, is_package) in names.items():
        parsed = parse_python((STDLIB / rel).read_text(encoding="utf-8"), rel, module, is_package)
        assert parsed.notes == []
        paths = [d.node_path for d in parsed.root.walk()]
        assert len(paths) == len(set(paths)), rel
        for ref in parsed.references:
            if ref.attrs["level"]:
                assert ref.target.startswith("asyncio"), (rel, ref.target)
                assert "unresolvable" not in ref.attrs


# --------------------------------------------------------------------------
# module_names


def test_module_names_follow_package_layout():
    paths = [
        "pkg/__init__.py",
        "pkg/core.py",
        "pkg/sub/__init__.py",
        "pkg/sub/mod.py",
        "pkg/sub/deep/leaf.py",  # no deep/__init__.py: not part of the package
        "pkg/stubs.pyi",
        "tools/scripts/run.py",
        "lonely/sub/__init__.py",  # package "sub" whose parent is not a package
        "lonely/sub/thing.py",
        "setup.py",
        "README.md",
        "pkg/data.json",
    ]
    names = module_names(iter(paths))
    assert names == {
        "pkg/__init__.py": ("pkg", True),
        "pkg/core.py": ("pkg.core", False),
        "pkg/sub/__init__.py": ("pkg.sub", True),
        "pkg/sub/mod.py": ("pkg.sub.mod", False),
        "pkg/sub/deep/leaf.py": ("leaf", False),
        "pkg/stubs.pyi": ("pkg.stubs", False),
        "tools/scripts/run.py": ("run", False),
        "lonely/sub/__init__.py": ("sub", True),
        "lonely/sub/thing.py": ("sub.thing", False),
        "setup.py": ("setup", False),
    }


def test_module_names_stub_only_package_and_root_init():
    names = module_names(["typed/__init__.pyi", "typed/api.pyi", "__init__.py", "api.py"])
    assert names["typed/__init__.pyi"] == ("typed", True)
    assert names["typed/api.pyi"] == ("typed.api", False)
    assert names["api.py"] == ("api", False)
    assert names["__init__.py"] == ("__init__", False)


def test_module_names_on_real_stdlib_layout():
    listing = [
        p.relative_to(STDLIB).as_posix()
        for pattern in ("os.py", "asyncio/*.py", "email/*.py", "email/mime/*.py")
        for p in STDLIB.glob(pattern)
    ]
    names = module_names(listing)
    assert names["os.py"] == ("os", False)
    assert names["asyncio/base_events.py"] == ("asyncio.base_events", False)
    assert names["asyncio/__init__.py"] == ("asyncio", True)
    assert names["email/mime/text.py"] == ("email.mime.text", False)
    assert names["email/mime/__init__.py"] == ("email.mime", True)


# --------------------------------------------------------------------------
# Imports


def test_relative_imports_from_a_module():
    parsed = parse_snippet(
        """
        from . import y
        from .sibling import a, b
        from .. import top
        from ..util import f as g
        from ... import too_far
        from ...x.y import z
        """
    )
    refs = parsed.references
    assert [(r.target, r.attrs["names"], r.attrs["level"]) for r in refs] == [
        ("pkg.sub", ["y"], 1),
        ("pkg.sub.sibling", ["a", "b"], 1),
        ("pkg", ["top"], 2),
        ("pkg.util", ["f"], 2),
        ("...", ["too_far"], 3),
        ("x.y", ["z"], 3),
    ]
    assert refs[3].attrs["aliases"] == {"f": "g"}
    assert [bool(r.attrs.get("unresolvable")) for r in refs] == [False] * 4 + [True] * 2


def test_relative_imports_from_a_package_init():
    parsed = parse_snippet(
        """
        from . import mod
        from .mod import thing
        from .. import core
        from ..core import helper
        """,
        module="pkg.sub",
        is_package=True,
    )
    assert [(r.target, r.attrs["names"], r.attrs["level"]) for r in parsed.references] == [
        ("pkg.sub", ["mod"], 1),
        ("pkg.sub.mod", ["thing"], 1),
        ("pkg", ["core"], 2),
        ("pkg.core", ["helper"], 2),
    ]
    assert not any("unresolvable" in r.attrs for r in parsed.references)


def test_resolve_relative_edges():
    assert resolve_relative("run", False, 1, "helpers") == ("helpers", False)
    assert resolve_relative("pkg", True, 2, None) == ("..", False)
    assert resolve_relative("pkg", True, 1, None) == ("pkg", True)
    assert resolve_relative("anything", False, 0, "os.path") == ("os.path", True)


def test_plain_aliased_star_and_nested_imports():
    parsed = parse_snippet(
        """
        import a.b.c
        import a.b as c, os
        from x import *
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from collections.abc import Iterator

        def load():
            import json
            from .codec import decode
            return json

        class Thing:
            from math import pi

            def method(self):
                try:
                    import yaml
                except ImportError:
                    yaml = None
        """
    )
    assert imports_of(parsed) == [
        ("a.b.c", [], 0, "pkg.sub.mod"),
        ("a.b", [], 0, "pkg.sub.mod"),
        ("os", [], 0, "pkg.sub.mod"),
        ("x", ["*"], 0, "pkg.sub.mod"),
        ("typing", ["TYPE_CHECKING"], 0, "pkg.sub.mod"),
        ("collections.abc", ["Iterator"], 0, "pkg.sub.mod"),
        ("json", [], 0, "pkg.sub.mod.load"),
        ("pkg.sub.codec", ["decode"], 1, "pkg.sub.mod.load"),
        ("math", ["pi"], 0, "pkg.sub.mod.Thing"),
        ("yaml", [], 0, "pkg.sub.mod.Thing.method"),
    ]
    by_target = {r.target: r for r in parsed.references}
    assert by_target["a.b"].attrs["aliases"] == {"a.b": "c"}
    assert "aliases" not in by_target["os"].attrs
    assert by_target["json"].attrs["line"] == 10


# --------------------------------------------------------------------------
# Structure


def test_property_setter_and_overloads_get_unique_paths():
    parsed = parse_snippet(
        """
        from typing import overload

        class Box:
            @property
            def x(self):
                return self._x

            @x.setter
            def x(self, value):
                self._x = value

            @x.deleter
            def x(self):
                del self._x

        @overload
        def f(a: int) -> int: ...
        @overload
        def f(a: str) -> str: ...
        def f(a):
            return a
        """
    )
    nodes = by_path(parsed)
    xs = [nodes["pkg.sub.mod.Box.x"], nodes["pkg.sub.mod.Box.x-1"], nodes["pkg.sub.mod.Box.x-2"]]
    assert [d.slug for d in xs] == ["x", "x-1", "x-2"]
    assert [d.attrs["decorators"] for d in xs] == [["property"], ["x.setter"], ["x.deleter"]]
    assert all(d.title == "Box.x" for d in xs)
    assert "self._x = value" in xs[1].text
    fs = [nodes["pkg.sub.mod.f"], nodes["pkg.sub.mod.f-1"], nodes["pkg.sub.mod.f-2"]]
    assert [d.attrs["signature"] for d in fs] == ["def f(a: int) -> int", "def f(a: str) -> str", "def f(a)"]
    paths = [d.node_path for d in parsed.root.walk()]
    assert len(paths) == len(set(paths))


def test_nested_functions_and_classes():
    parsed = parse_snippet(
        '''
        class Outer:
            """Outer doc."""
            LIMIT = 3

            class Inner(Base, metaclass=Meta):
                def deep(self):
                    pass

            async def run(self):
                def helper():
                    def too_deep():
                        return 1
                    return too_deep()
                return helper()

        def factory():
            class Made:
                def m(self):
                    return 1
            return Made
        '''
    )
    nodes = by_path(parsed)
    inner = nodes["pkg.sub.mod.Outer.Inner"]
    assert inner.subkind == "class"
    assert inner.attrs["bases"] == ["Base"]
    assert inner.attrs["signature"] == "class Inner(Base, metaclass=Meta)"
    assert nodes["pkg.sub.mod.Outer.Inner.deep"].subkind == "method"
    run = nodes["pkg.sub.mod.Outer.run"]
    assert (run.subkind, run.attrs["async"]) == ("method", True)
    helper = nodes["pkg.sub.mod.Outer.run.helper"]
    assert (helper.subkind, helper.title) == ("function", "Outer.run.helper")
    assert "        def helper(): ..." in run.text.splitlines()
    # Only one level of nested functions is split out; deeper ones stay inline.
    assert "pkg.sub.mod.Outer.run.helper.too_deep" not in nodes
    assert "return 1" in helper.text
    assert nodes["pkg.sub.mod.factory.Made.m"].subkind == "method"
    outer = nodes["pkg.sub.mod.Outer"]
    assert outer.attrs["docstring"] == "Outer doc."
    assert "LIMIT = 3" in outer.text
    assert "pass" not in outer.text


def test_definitions_inside_if_and_try_blocks_are_found():
    parsed = parse_snippet(
        """
        import sys
        if sys.platform == "win32":
            def path_sep():
                return "\\\\"
        else:
            def path_sep():
                return "/"
        try:
            from fast import speedup
        except ImportError:
            def speedup(x):
                return x
        """
    )
    nodes = by_path(parsed)
    assert {"pkg.sub.mod.path_sep", "pkg.sub.mod.path_sep-1", "pkg.sub.mod.speedup"} <= set(nodes)
    assert "    def path_sep(): ..." in parsed.root.text.splitlines()
    assert 'return "/"' not in parsed.root.text


def test_empty_and_definition_only_modules():
    empty = parse_python("", "pkg/empty.py", "pkg.empty")
    assert empty.root.text == "pkg.empty"
    assert empty.root.attrs["docstring"] == ""
    assert empty.notes == []
    crlf = parse_python("x = 1\r\ndef f():\r\n    return 2\r\n", "m.py", "m")
    f = by_path(crlf)["m.f"]
    assert (f.start_line, f.end_line) == (2, 3)
    assert crlf.root.end_line == 3
    assert crlf.root.text.splitlines() == ["x = 1", "def f(): ..."]


# --------------------------------------------------------------------------
# Failure modes


def test_syntax_error_falls_back_to_text():
    src = "def ok():\n    return 1\n\nprint 'python 2'\n"
    parsed = parse_python(src, "legacy.py", "legacy")
    assert parsed.root.subkind == "text"
    assert parsed.root.text == src
    assert parsed.root.children == []
    assert parsed.references == []
    assert len(parsed.notes) == 1
    assert parsed.notes[0].startswith("python syntax error at line 4: ")
    assert parsed.notes[0].endswith("; indexed as plain text")


def test_null_byte_falls_back_with_its_line():
    parsed = parse_python("x = 1\ny = '\0'\n", "bin.py", "bin")
    assert parsed.root.subkind == "text"
    assert parsed.notes[0].startswith("python syntax error at line 2: ")


def test_200_nested_defs_do_not_raise():
    src = "".join("    " * i + f"def f{i}():\n" for i in range(200)) + "    " * 200 + "pass\n"
    parsed = parse_python(src, "deep.py", "deep")
    # The tokenizer caps indentation at 100 levels: text fallback, no exception.
    assert parsed.root.subkind == "text"
    assert "python syntax error at line" in parsed.notes[0]


def test_deep_but_valid_nesting_is_bounded():
    depth = 95  # just under the tokenizer's indentation cap
    classes = "".join(" " * i + f"class C{i}:\n" for i in range(depth)) + " " * depth + "import os\n"
    parsed = parse_python(classes, "deep.py", "deep")
    assert parsed.notes == []
    drafts = list(parsed.root.walk())
    assert len(drafts) == MAX_DEPTH + 1
    # The import sits deeper than the cap: attributed to the deepest draft.
    assert parsed.references[0].target == "os"
    assert parsed.references[0].source is drafts[-1]
    funcs = "".join(" " * i + f"def f{i}():\n" for i in range(depth)) + " " * depth + "import os\n"
    parsed = parse_python(funcs, "deep.py", "deep")
    assert [d.node_path for d in parsed.root.walk()] == ["deep", "deep.f0", "deep.f0.f1"]
    assert parsed.references[0].source.node_path == "deep.f0.f1"


def test_huge_expression_does_not_raise():
    parsed = parse_python("x = " + "1+" * 200_000 + "1\n", "big.py", "big")
    assert parsed.root.subkind == "text"
    assert parsed.notes and "indexed as plain text" in parsed.notes[0]
