"""Recognising a write that failed for want of space, wherever it was raised.

A full disk, an exhausted quota and the file size limit (``ulimit -f``) fail a
write the same way for a build: retrying re-encodes for minutes and fails
again at the same place, and the traceback hides the one thing to say. The
libraries a build writes through report it differently: Python and pyarrow as
an ``OSError`` with its errno, Rust libraries (LanceDB, polars) as an error
whose text ends in ``(os error 28)``, SQLite (Dagster's own storage) as
"database or disk is full", each possibly wrapped in another exception.
:func:`out_of_space` finds it in any of these and says it in one line.
"""

from __future__ import annotations

import errno
import os
import re

#: errnos of a write that cannot succeed until space is made (or the limit raised)
SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_OS_ERROR = re.compile(r"\(os error (\d+)\)|\[errno (\d+)\]", re.IGNORECASE)
# the system's words where no errno survived (not "File too large": said of other things)
_TEXTS = {os.strerror(code).lower(): code for code in (errno.ENOSPC, errno.EDQUOT)}
_SQLITE_FULL = "database or disk is full"


def _chain(exc: BaseException):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _code_of(exc: BaseException) -> int | None:
    if isinstance(exc, OSError) and exc.errno in SPACE_ERRNOS:
        return exc.errno
    text = str(exc)
    for m in _OS_ERROR.finditer(text):
        code = int(m.group(1) or m.group(2))
        if code in SPACE_ERRNOS:
            return code
    low = text.lower()
    if _SQLITE_FULL in low:
        return errno.ENOSPC
    return next((code for words, code in _TEXTS.items() if words in low), None)


def out_of_space(exc: BaseException, where: str | os.PathLike | None = None) -> str | None:
    """One line when ``exc`` (or an exception it was raised from) is a write
    that failed for want of space: the system's words for it and the file, else
    ``where`` (the folder being written); None for any other error."""
    for e in _chain(exc):
        code = _code_of(e)
        if code is None:
            continue
        path = getattr(e, "filename", None) if isinstance(e, OSError) else None
        path = path or where
        line = os.strerror(code) + (f": {os.fspath(path)}" if path else "")
        if code == errno.EFBIG:
            line += " (over the file size limit: `ulimit -f`, or the file system's)"
        return line
    return None
