"""Reading a file whose kind and size Strata does not control: corpus documents
and configuration files alike.

A path can name something that is not a file at all: a FIFO (opening it blocks
until a writer comes, reading it until the writer writes), a device
(``/dev/zero`` never ends, ``/dev/tty`` waits for the keyboard), a socket or a
folder; or a regular file far larger than what it is for. The corpus walk reads
documents through :func:`read_regular` and :func:`hash_regular`, and every
configuration file the commands and the sensors read (the corpora files, the
API-key file, the Dagster instance file Strata keeps up to date) goes through
:func:`read_config_file`, which refuses anything but a regular file of at most
:data:`MAX_CONFIG_BYTES` in one line naming the setting that pointed at it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from pydantic_core import PydanticCustomError

__all__ = ["NotRegular", "TooLarge", "ConfigFileError", "MAX_CONFIG_BYTES", "file_kind",
           "open_regular", "read_regular", "hash_regular", "read_config_file", "folder_problem",
           "folder_field"]

#: the largest configuration file read: far above any real corpora or key file,
#: far below what would strain memory
MAX_CONFIG_BYTES = 4 * 1024 * 1024


class NotRegular(OSError):
    """Not a regular file (a FIFO, a device, a socket): never opened for reading.
    ``kind`` says what it is (:func:`file_kind`)."""

    def __init__(self, kind: str):
        super().__init__(f"not a regular file: {kind}")
        self.kind = kind


class TooLarge(OSError):
    """More bytes than the cap allows (checked before reading, and while reading)."""

    def __init__(self, size: int, cap: int):
        super().__init__(f"too large: {size / 2**20:.1f} MiB > {cap / 2**20:.0f} MiB cap")
        self.size, self.cap = size, cap


class ConfigFileError(ValueError):
    """A configuration file that cannot be read; the message is one line naming
    the setting (variable or flag) that pointed at it and the path."""


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder"))


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words: "a folder", "a character device", ..."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def open_regular(path: str | os.PathLike) -> tuple[int, os.stat_result]:
    """An fd for reading ``path`` and its stat, only if it is a regular file.

    Opened with ``O_NONBLOCK`` (a FIFO without a writer would otherwise block
    the open itself) and checked with ``fstat`` on the open fd, so a file swapped
    for a FIFO or a device between a listing and the read is caught too."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(file_kind(st.st_mode))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(file_kind(st.st_mode))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (:class:`TooLarge`
    before reading when its size says so, or when it grew while being read)."""
    fd, st = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        if st.st_size > max_bytes:
            raise TooLarge(st.st_size, max_bytes)
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLarge(len(data), max_bytes)
    return data


def hash_regular(path: str | os.PathLike, max_bytes: int, block: int = 1 << 20) -> tuple[str, int]:
    """(content hash, size) of a regular file of at most ``max_bytes``, read in
    blocks (memory: one block, whatever the file's size)."""
    fd, st = open_regular(path)
    h = hashlib.blake2b(digest_size=16)
    n = 0
    with os.fdopen(fd, "rb") as f:
        if st.st_size > max_bytes:
            raise TooLarge(st.st_size, max_bytes)
        while True:
            chunk = f.read(min(block, max_bytes + 1 - n))
            if not chunk:
                break
            n += len(chunk)
            if n > max_bytes:
                raise TooLarge(n, max_bytes)
            h.update(chunk)
    return h.hexdigest(), n


def read_config_file(path: str | os.PathLike, named: str | None = None,
                     max_bytes: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of the configuration file at ``path``, or :class:`ConfigFileError`
    in one line: ``named`` (what pointed at the file, e.g. ``$STRATA_CORPORA=PATH``
    or ``--api-keys PATH``; default the path) and why it cannot be used. A FIFO,
    a device, a socket or a folder is refused without being read (a FIFO without
    a writer does not hang the open), and so is a file over ``max_bytes``."""
    named = named or str(path)
    try:
        return read_regular(path, max_bytes)
    except NotRegular as e:
        raise ConfigFileError(f"{named} is {e.kind}, not a regular file; a configuration file "
                              "must be a regular file") from None
    except TooLarge as e:
        raise ConfigFileError(f"{named} is too large ({e.size / 2**20:.1f} MiB; a configuration "
                              f"file is read up to {max_bytes / 2**20:g} MiB)") from None
    except OSError as e:
        raise ConfigFileError(f"{named} cannot be read ({e.strerror or e})") from None


def folder_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be a folder setting's folder: it, or the nearest of its
    parents that exists, is something else (``/dev/null``, a file); None when it
    is a folder or can be made as one. A folder that cannot be looked at
    (permissions) is left to the command that uses it to report."""
    given = Path(path).expanduser()
    for p in (given, *given.parents):
        try:
            st = os.stat(p)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return None
        if stat.S_ISDIR(st.st_mode):
            return None
        return (f"{file_kind(st.st_mode)}, not a folder" if p == given
                else f"{p} is {file_kind(st.st_mode)}, not a folder")
    return None


def folder_field(value):
    """A settings field's check (a pydantic ``AfterValidator``): a folder setting's
    value that cannot be a folder (:func:`folder_problem`) is refused, in words."""
    why = None if value is None else folder_problem(value)
    if why:
        raise PydanticCustomError("not_a_folder", "{why}", {"why": why})
    return value
