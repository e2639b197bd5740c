"""Memory a build's process has freed but still holds, handed back between steps."""

from __future__ import annotations


def release_freed_memory() -> None:
    """Hand back to the system the heap this process has freed but still holds:
    pyarrow's memory pool (``release_unused``) and glibc's arenas (``malloc_trim``).

    Why: a build runs its steps in one process, and allocators keep freed memory
    for reuse. What one kept is resident but of no use to another: the encoder's
    activations and the Lance writer's buffers (glibc, in their own threads'
    arenas), Arrow's readers (its pool). Without this, a later step that allocates
    elsewhere stacks its own high-water mark on top of the earlier ones'. It returns
    only memory already freed, so it complements, never replaces, a step that
    streams instead of holding a whole table. Does nothing where glibc is absent."""
    import ctypes
    import ctypes.util

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        pass
