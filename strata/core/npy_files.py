"""Reading the ``.npy`` files of a version's query arrays: memory-mapped, never
unpickled, and without parsing Python where np.save wrote the header."""

from __future__ import annotations

import math
import re
import struct
import threading
from pathlib import Path

import numpy as np

from strata.core.query_checks import DamagedArrays

# np.load parses each header with ast.literal_eval, and CPython 3.11's AST conversion
# keeps its recursion depth in one per-interpreter counter: a request thread opening a
# version while any other thread parses Python (a build in the same process, a library
# importing) can fail with "AST constructor recursion depth mismatch". A lock around our
# own loads cannot cover the other threads, so the headers np.save writes are read
# without ast; only a header of another shape goes to np.load, one at a time.
_LOAD_LOCK = threading.Lock()
_HEADER = re.compile(r"\{'descr': '([<>|=][a-z]\d+)', 'fortran_order': (True|False), "
                     r"'shape': \(((?:\d+, ?)*\d*)\), \}\s*")
_HEADER_SIZE = {1: "<H", 2: "<I", 3: "<I"}


def _plain_npy(path: Path, mmap: bool) -> np.ndarray | None:
    """The array of a ``.npy`` file whose header is one np.save writes for a plain
    dtype, read without ast; None for any other header."""
    with open(path, "rb") as f:
        major, _ = np.lib.format.read_magic(f)
        if major not in _HEADER_SIZE:
            return None
        size_format = _HEADER_SIZE[major]
        (length,) = struct.unpack(size_format, f.read(struct.calcsize(size_format)))
        header = f.read(length).decode("utf-8" if major == 3 else "latin1")
        match = _HEADER.fullmatch(header)
        if match is None:
            return None
        dtype = np.dtype(match.group(1))
        order = "F" if match.group(2) == "True" else "C"
        shape = tuple(int(n) for n in match.group(3).replace(" ", "").split(",") if n)
        count = math.prod(shape)
        if mmap and count:
            return np.memmap(f, dtype=dtype, mode="r", offset=f.tell(), shape=shape, order=order)
        data = np.fromfile(f, dtype=dtype, count=count)
    if data.size != count:
        raise ValueError(f"{data.size} of {count} values present")
    return data.reshape(shape, order=order)


def npy(path: Path, mmap: bool = True) -> np.ndarray:
    """A ``.npy`` file, memory-mapped; never unpickled."""
    try:
        plain = _plain_npy(path, mmap)
        if plain is not None:
            return plain
        with _LOAD_LOCK:
            return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - missing, truncated, not an array: name the file
        raise DamagedArrays(path, e) from None
