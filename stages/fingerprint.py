"""A cheap fingerprint of a corpus folder, for "has anything changed?".

Two levels, so that a sensor ticking every minute over 100k files costs one
``stat`` per file and no reads when nothing changed: the *stat* digest covers
(path, size, inode, modification and change time) of every file the corpus
selects (the change time moves with every write, also one that keeps the size
and lands within the modification time's tick); only when it moves is the
*content* digest — (path, content hash) — recomputed, and only the content
digest decides whether the corpus changed (touching a file or copying it back
unchanged does not trigger a build; renaming does).

Only regular files are read (a FIFO would block the sensor forever, a character
device would never end), each in blocks, and never one over the build's size
cap: the build skips such a file unread, so its size stands for its content.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable

from strata.core.config.files import NotRegular, TooLarge, hash_regular
from strata.stages.discover import MAX_FILE_BYTES, iter_paths


@dataclass(frozen=True)
class Fingerprint:
    stat: str
    content: str
    files: int

    def to_dict(self) -> dict:
        return {"stat": self.stat, "content": self.content, "files": self.files}


def stat_digest(root: Path, include: Iterable[str], exclude: Iterable[str]) -> tuple[str, list]:
    h = hashlib.sha256()
    files = []
    for rel, full in iter_paths(root, include, exclude):
        try:
            st = os.stat(full)
        except OSError:  # vanished between listing and stat: absent from this view
            continue
        files.append((rel, full))
        h.update(f"{rel}\0{st.st_size}\0{st.st_ino}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\n"
                 .encode())
    return h.hexdigest(), files


def fingerprint(root: str | os.PathLike, include: Iterable[str] = ("**/*",),
                exclude: Iterable[str] = (), previous: dict | None = None) -> Fingerprint:
    """The corpus's fingerprint; ``previous`` (a :meth:`Fingerprint.to_dict`)
    lets an unchanged stat digest skip reading any file."""
    root = Path(root)
    stat, files = stat_digest(root, include, exclude)
    if previous and previous.get("stat") == stat and previous.get("content"):
        return Fingerprint(stat=stat, content=previous["content"], files=len(files))
    h = hashlib.sha256()
    for rel, full in files:
        try:
            digest, _ = hash_regular(full, MAX_FILE_BYTES)
        except TooLarge as e:  # not read by the build either: its size is its state
            digest = f"too-large:{e.size}"
        except NotRegular as e:
            digest = f"special:{e}"
        except OSError as e:  # unreadable now: its state is part of the fingerprint
            digest = f"unreadable:{type(e).__name__}"
        h.update(f"{rel}\0{digest}\n".encode())
    return Fingerprint(stat=stat, content=h.hexdigest(), files=len(files))
