"""What Strata owns on disk, so that it never indexes it and never overwrites or
deletes what it does not own.

Two rules follow from one record:

* **A build never indexes Strata's own folders.** Index folders, the Dagster
  home and the project's corpus registry can sit inside a folder someone
  indexes (``cd notes && strata index . --corpus self``); indexing them would
  make every build grow the next one and change the folder the change sensor
  watches. They are recognised by what they are, not by names a user may
  change: a folder holding the record file :data:`MARKER`, a folder laid out
  as an index (``CURRENT`` beside ``versions/``) or as a Dagster home
  (``dagster.yaml`` beside its storage), and the registry files by identity.
* **A build writes into ``--out`` only what it owns.** A new or empty folder
  becomes an index and gets the record; an index gets it on its next build; a
  non-empty folder that is neither is refused unless the user says so, and
  even then Strata will not take a name that is already there. ``--force``
  removes only what the record lists.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from strata.core.storage.buildlock import LOCK_FILE
from strata.core.storage.layout import BUILD, CACHE, CURRENT, VERSIONS, write_text_atomic
from strata.core.config.schema import MANIFEST

MARKER = ".strata-owned.json"
# what a build writes at the top of an index folder
INDEX_NAMES = (CURRENT, MANIFEST, VERSIONS, BUILD, CACHE, LOCK_FILE, MARKER)
_DAGSTER_PARTS = ("storage", "history", "schedules", "logs")


class NotOurs(ValueError):
    """``--out`` names a folder Strata may not build into; the message is one line."""


def looks_owned(folder: Path) -> bool:
    """Whether ``folder`` is one of Strata's own: it holds the record, or is laid
    out as an index or as a Dagster home."""
    try:
        if (folder / MARKER).is_file():
            return True
        if (folder / "CURRENT").is_file() and (folder / "versions").is_dir():
            return True
        return (folder / "dagster.yaml").is_file() and \
            any((folder / p).is_dir() for p in _DAGSTER_PARTS)
    except OSError:
        return False


def own_files() -> frozenset[Path]:
    """The project's registry files (resolved), never part of a corpus."""
    from strata.core.config.settings import SettingsError, corpora_file, local_registry_path

    try:
        registry = corpora_file()
    except (SettingsError, OSError):
        return frozenset()
    return frozenset(p.resolve() for p in (registry, local_registry_path(registry)))


def read_record(folder: Path) -> dict:
    try:
        data = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def owned_names(folder: Path) -> set[str]:
    """The top-level names of ``folder`` that Strata wrote (from its record)."""
    names = read_record(folder).get("names")
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def mark(folder: Path, kind: str, names: tuple[str, ...] | list[str] = ()) -> None:
    """Write (or extend) the record of ``folder``: Strata's ``kind`` of folder
    ("index", "dagster-home") and the top-level names it may write there."""
    folder.mkdir(parents=True, exist_ok=True)
    record = read_record(folder)
    have = set(owned_names(folder))
    record.update(kind=kind, names=sorted(have | set(names) | {MARKER}))
    write_text_atomic(folder / MARKER, json.dumps(record, indent=2) + "\n")


def claim_index(out: Path, allow_foreign: bool = False) -> None:
    """Make ``out`` an index folder Strata may build into, or raise
    :class:`NotOurs` saying why not: a new or empty folder, an index (recorded
    or laid out as one) and, with ``allow_foreign``, a non-empty folder none of
    whose entries bears a name Strata writes."""
    try:
        entries = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    except OSError as e:
        raise NotOurs(f"{out} cannot be read ({e.strerror or e})") from None
    if out.exists() and not out.is_dir():
        raise NotOurs(f"--out {out} is a file, not a folder")
    if (out / MARKER).is_file() or not entries:
        mark(out, "index", INDEX_NAMES)
        return
    if (out / "CURRENT").is_file() and (out / "versions").is_dir():
        mark(out, "index", INDEX_NAMES)  # an index from before the record
        return
    shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    if not allow_foreign:
        raise NotOurs(f"{out} is not empty and is not a Strata index (it holds {shown}); choose "
                      "a new or empty --out, or pass --yes to build into it")
    taken = [n for n in INDEX_NAMES if n in entries]
    if taken:
        raise NotOurs(f"{out} holds {', '.join(taken)}, which Strata did not write and would "
                      "overwrite; choose another --out")
    mark(out, "index", INDEX_NAMES)


def as_private_as(folder: Path, source: Path) -> None:
    """Make ``folder`` (made when missing) no more open to other users than the
    folder ``source``: the read, write and search bits for the group and for
    others that ``source`` lacks are taken off ``folder``; its owner's stay.

    An index holds the text of its corpus, and the files a build writes (tables,
    vectors, caches) get the umask's modes, typically readable by everyone. A
    corpus folder of mode 0700 therefore gets an index folder of mode 0700, and
    nothing inside it can be reached by others whatever the files' own modes; a
    folder shared with a group keeps its index shared with it. A folder this
    user may not change the mode of (another user's) is left as it is."""
    try:
        allowed = stat.S_IMODE(os.stat(source).st_mode) | stat.S_IRWXU
    except OSError:
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir(mode=allowed)  # and the umask takes off what it takes off
        return
    except FileExistsError:
        pass
    mode = stat.S_IMODE(os.stat(folder).st_mode)
    if mode & ~allowed:
        try:
            os.chmod(folder, mode & allowed)
        except PermissionError:
            pass
