"""Where a build's working files live while its steps run, one implementation
per kind, chosen by the corpus's ``shared:`` field (a code location builds
corpora that live in different places, so the kind is the corpus's, not the
deployment's).

Every kind gives a step the same thing: a POSIX folder (the corpus's ``out``) it
reads and writes as a build on one machine does. What differs is what happens
around a step:

``folder``
    the folder *is* the build: one machine, or a volume every worker mounts
    (:mod:`.folder`); nothing happens around a step.
``store``
    the workers share only the corpus's object store (its ``mirror``): a step
    pulls the build from the store first and pushes what it wrote after, and a
    published version goes to the store (:mod:`.store`).

A new kind is one entry here and one module beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class StepStorage(Protocol):
    """What a step's storage does before and after the step, and at publish;
    each returns a line for the step's log, or None when there is nothing to say."""

    def pull(self) -> str | None: ...

    def push(self) -> str | None: ...

    def publish(self, version_dir: Path) -> str | None: ...


def _folder(mirror: str | None, root: Path) -> StepStorage:
    from strata.core.storage.kinds.folder import FolderStorage

    return FolderStorage(root)


def _store(mirror: str | None, root: Path) -> StepStorage:
    from strata.core.storage.kinds.store import ObjectStoreStorage

    if not mirror:
        raise ValueError("a build kept on an object store needs the corpus's mirror URI")
    return ObjectStoreStorage(mirror, root)


#: kind → factory(mirror, out folder); the names a corpus's ``shared:`` takes, the
#: CLI's ``--shared`` choices and the corpus validation read them here
KINDS = {"folder": _folder, "store": _store}
#: the kinds that keep the build beside the mirror, so need a ``mirror`` URI
NEEDS_MIRROR = frozenset({"store"})


def step_storage(kind: str, mirror: str | None, root: Path) -> StepStorage:
    """The storage of one corpus's build (``kind`` is its ``shared:``)."""
    try:
        make = KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown build storage {kind!r}: use one of {', '.join(KINDS)}") from None
    return make(mirror, Path(root))
