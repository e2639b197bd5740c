"""Nothing read from a corpus, an index or a model is ever executed or
unpickled: a scan of the project's own source for the calls that
would do it. Model output is parsed as JSON/text only (see strata.core.llm.parsing)."""

from __future__ import annotations

import ast

from tests.conftest import REPO
from tests.source_tree import source_files

FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_ATTRS = {("pickle", "load"), ("pickle", "loads"), ("marshal", "loads"),
                   ("yaml", "load"), ("yaml", "unsafe_load"), ("yaml", "full_load"),
                   ("shelve", "open"), ("dill", "loads"), ("joblib", "load"),
                   ("np", "load"), ("numpy", "load"), ("torch", "load")}


def _np_load_without_pickle(call: ast.Call) -> bool:
    """``np.load(..., allow_pickle=False)`` reads an array and nothing else: the
    query arrays are memory-mapped that way."""
    f = call.func
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
        and (f.value.id, f.attr) in {("np", "load"), ("numpy", "load")} \
        and any(k.arg == "allow_pickle" and isinstance(k.value, ast.Constant)
                and k.value.value is False for k in call.keywords)


def _violations(path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in FORBIDDEN_CALLS:
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {f.id}()")
        if _np_load_without_pickle(node):
            continue
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and (f.value.id, f.attr) in FORBIDDEN_ATTRS:
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {f.value.id}.{f.attr}()")
        if isinstance(f, ast.Attribute) and f.attr == "read_pickle":
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: read_pickle()")
    return found


def test_no_eval_exec_or_unpickling_in_the_project():
    files = source_files()
    assert len(files) > 30
    bad = [v for p in files for v in _violations(p)]
    assert not bad, "\n".join(bad)


def test_the_scan_would_catch_them():
    hits = _violations_for_text("import pickle, yaml\npickle.loads(b'')\neval('1')\n"
                                "yaml.load('a')\nyaml.safe_load('a')\n")
    assert len(hits) == 3, hits


def _violations_for_text(text: str) -> list[str]:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(dir=REPO) as d:
        p = Path(d) / "probe.py"
        p.write_text(text)
        return _violations(p)
