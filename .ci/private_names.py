"""`make lint`: product code uses no other library's private names, outside the
modules listed in ALLOWED.

A private name is a module path, an imported name or an attribute that starts with
one underscore (``dagster._core``, ``from bm25s.scoring import _x``,
``threading._shutdown()``), reached from a name bound by an import of another
package. Strata's own private names (``index._columns``) are not this check's
business, and neither are dunders. Each allowed module says why it needs what it
uses; tests/test_private_names.py fails loudly when an upgrade moves one of them.

Usage: python .ci/private_names.py [ROOT]  (exit 1 and one line per use when any)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PRODUCT = ("assets", "pipelines", "resources", "retrieval", "service", "stages", "strata/core")
OWN = "strata"
# module (relative to the repository) → why it may use another library's private names
ALLOWED = {
    "strata/core/lexical/bm25_matrix.py": "bm25s builds its index only from token lists; its scoring "
                                  "helpers build one from the flat arrays Strata keeps",
    "pipelines/dask_engine.py": "dagster-dask's step loop restated with boxed arguments; "
                                "Dagster's interrupt helpers have no public name",
    "pipelines/interrupt.py": "Dagster's compute-log mirror started in a process group of its "
                              "own, so that Ctrl-C does not print its watcher's traceback",
}
# underscored names that the standard library documents as public
DOCUMENTED = {"os._exit", "sys._getframe"}


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each use of another library's private name in ``source``."""
    tree = ast.parse(source)
    external: dict[str, str] = {}  # a local name → the module it was imported from
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top == OWN or top == "__future__":
                    continue
                if any(_private(p) for p in alias.name.split(".")):
                    found.append((node.lineno, f"import {alias.name}"))
                external[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level or module.split(".")[0] in (OWN, "__future__"):
                continue
            if any(_private(p) for p in module.split(".")):
                found.append((node.lineno, f"from {module} import ..."))
            for alias in node.names:
                if _private(alias.name):
                    found.append((node.lineno, f"from {module} import {alias.name}"))
                external[alias.asname or alias.name] = f"{module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = _root(node.value)
            dotted = _dotted(node)
            if root in external and dotted not in DOCUMENTED:
                found.append((node.lineno, dotted))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            head = node.value.split(".")
            if len(head) > 1 and head[0] in external and _private(head[1]):
                found.append((node.lineno, repr(node.value)))
    return sorted(set(found))


def check(root: Path) -> list[str]:
    """One line per use outside :data:`ALLOWED`, for the product folders below ``root``."""
    lines = []
    for folder in PRODUCT:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel in ALLOWED:
                continue
            for line, what in uses(path.read_text(encoding="utf-8")):
                lines.append(f"{rel}:{line}: another library's private name: {what}")
    return lines


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    problems = check(root)
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} use(s) of private names outside the allowed modules "
              f"({', '.join(ALLOWED)}); use a public API, or add the module to ALLOWED in "
              ".ci/private_names.py with its reason, an upgrade test in "
              "tests/test_private_names.py and a line in docs/development.md")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
