"""Where the project's source lives, read from the tree itself so that no test keeps a
list of packages that a new folder would make stale: strata/ itself (with strata.core)
and each top-level folder strata/ links in as a subpackage."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# assets, pipelines, resources, retrieval, service, stages: the user's folders
LINKED = tuple(sorted(p.name for p in (REPO / "strata").iterdir() if p.is_symlink()))
SOURCE_DIRS = ("strata", *LINKED)


def source_files() -> list[Path]:
    """Every Python module of the package, each once (strata/'s links are not followed)."""
    return sorted(p for d in SOURCE_DIRS for p in (REPO / d).rglob("*.py"))
