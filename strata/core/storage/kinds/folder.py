"""The ``folder`` build storage: the corpus's ``out`` folder is the build, on
one machine's disk or on a volume every worker mounts. Steps write it in place
(atomic renames, hard-linked snapshots, :mod:`strata.core.storage.layout`), so
nothing happens around a step and a published version is already where readers
open it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class FolderStorage:
    root: Path

    def pull(self) -> str | None:
        return None

    def push(self) -> str | None:
        return None

    def publish(self, version_dir: Path) -> str | None:
        return None
