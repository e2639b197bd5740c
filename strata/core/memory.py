"""Memory a build's process has freed but still holds: handed back between steps, and
kept from scattering over many allocator arenas in the first place."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator

# glibc's malloc arenas a building process may use (``MALLOC_ARENA_MAX``), where the
# user has not chosen: two, as commonly advised for long-lived threaded servers.
BUILD_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number for the arena limit (glibc's malloc.h)


def few_malloc_arenas() -> None:
    """Cap the glibc malloc arenas of a building process and of the processes it
    starts (``MALLOC_ARENA_MAX``, unless the user set it or glibc's ``arena_max`` tunable).

    Why: glibc gives each new thread an arena of its own, up to eight per core, and
    an arena keeps what was freed in it for that arena's reuse. A build's native
    libraries run many threads (Lance's readers and writers, the encoder's), so the
    memory a step freed lies scattered over arenas that the next step's threads may
    never allocate from: resident, of no use, more of it the larger the corpus, and
    ``malloc_trim`` hands back only whole free pages of it. With two arenas the freed
    memory is found again by the next allocation. The variable reaches the child
    processes (Dagster's run and step processes) before their allocator starts;
    ``mallopt`` applies the same limit to this process, whose allocator has started
    but whose native libraries have not yet made their threads: the build command and
    the Dagster code location call it first thing. Does nothing where glibc is
    absent."""
    _build_setting("MALLOC_ARENA_MAX", "arena_max", _M_ARENA_MAX, BUILD_ARENAS)


def build_allocators() -> None:
    """Set up the allocators of a building process and of the processes it starts,
    before its native libraries allocate: few glibc arenas
    (:func:`few_malloc_arenas`), large blocks given pages of their own for the whole
    build (:func:`pinned_mmap_threshold`) and Arrow's buffers from the C library's malloc
    (:func:`system_arrow_pool`). The build command and the Dagster code location
    call it first thing."""
    few_malloc_arenas()
    pinned_mmap_threshold()
    system_arrow_pool()


def system_arrow_pool() -> None:
    """Give Arrow's buffers, in a building process and the processes it starts, to the
    C library's malloc instead of the pool pyarrow's wheel defaults to (mimalloc)
    (``ARROW_DEFAULT_MEMORY_POOL=system``, unless the variable is set).

    Why: a build makes its large Arrow columns with builders that grow by
    reallocation (a column of every text, every hash), and mimalloc keeps the
    smaller buffers each growth freed resident in its segments for reuse, about as
    much again as the column itself, until the pool is released between steps; a
    step holds that beside the column through its peak. glibc moves such a buffer
    with ``mremap`` and keeps nothing behind. The variable is read when pyarrow
    loads, so a process that has loaded it already also switches its default pool
    (buffers allocated before stay in theirs)."""
    import sys

    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:  # the user's own choice
        return
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    if "pyarrow" in sys.modules:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())


@functools.cache
def _glibc():
    """This process's C library when it is glibc (it has ``mallopt`` and
    ``malloc_trim``); None elsewhere (musl, macOS), where there is nothing to tune.
    Looked up once: ``find_library`` runs ``ldconfig``, and every step asks."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


def _build_setting(variable: str, tunable: str, param: int, value: int) -> None:
    """One of glibc's malloc parameters for a building process (``mallopt``, where
    glibc is the C library) and for the processes it starts (``variable``, which their
    glibc reads when it starts), unless the user set it, by the variable or by
    ``tunable`` in ``GLIBC_TUNABLES``: glibc read it when this process started, and
    it is theirs."""
    if variable in os.environ or f"glibc.malloc.{tunable}=" in os.environ.get(
            "GLIBC_TUNABLES", ""):
        return
    os.environ[variable] = str(value)
    libc = _glibc()
    if libc is not None:
        libc.mallopt(param, value)


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
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


# mallopt's parameter number for the size from which a block gets pages of its own
# (glibc's malloc.h); the variable glibc reads it from at start; the size a building
# process fixes it at (glibc's own starting value); and glibc's ceiling for the
# threshold it moves by itself (64-bit).
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"
PINNED_THRESHOLD = 128 << 10
_MOVING_THRESHOLD_MAX = 32 << 20


def pinned_mmap_threshold() -> None:
    """Keep glibc giving every block of ``PINNED_THRESHOLD`` bytes or more pages of its
    own (``mmap``), handed back to the system when the block is freed, in a building
    process and the processes it starts (``MALLOC_MMAP_THRESHOLD_``, unless the user
    set it or glibc's ``mmap_threshold`` tunable).

    Why: glibc starts at this threshold, but each time a mapped block is freed it
    raises the threshold to that block's size (up to 32 MiB), so after the first large
    buffer of a build, blocks of a few MB come from the heap. Each step allocates and
    frees many such blocks (Arrow columns, NumPy arrays, the Lance writer's buffers),
    and a freed one stays resident: within the step until the heap is trimmed (the
    build trims between steps, :func:`release_freed_memory`), and after that wherever
    later small allocations took part of its pages. So a step's peak carries blocks it
    had freed, and later steps start above what it left, more the larger the corpus.
    A mapped block goes back to the system when it is freed. Setting the threshold
    ends glibc's moving rule. Encoding is the exception (:func:`heap_blocks`). Does
    nothing where glibc is absent."""
    _build_setting(MMAP_THRESHOLD_ENV, "mmap_threshold", _M_MMAP_THRESHOLD, PINNED_THRESHOLD)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cycle collection while a build command sets itself up (its imports, the
    Dagster instance, the run's plan); the run collects again from its start
    (:func:`long_lived_objects_frozen`), and collection is back as it was when the
    command ends.

    Why: what a process makes while it imports lives as long as it does. The
    collector runs a full collection whenever the objects it tracks grew by a
    quarter since the last one, so a build command that comes to ~220k of them
    traverses them four times on the way, and finds nothing to free."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


_freeze_depth = 0  # open long_lived_objects_frozen blocks in this process


@contextlib.contextmanager
def long_lived_objects_frozen() -> Iterator[None]:
    """Cycle collection during a run, with the objects that exist when it starts
    kept out of the collector's traversals (``gc.freeze``) until it ends
    (``gc.unfreeze``, and collection left as it was before the run).

    Why: by the time a run executes, its process holds a few hundred thousand
    objects that live as long as it does (the modules, classes and schemas of
    Dagster, pydantic and polars, the job's definitions, the instance). Every
    full collection traverses all of them, and a step that makes many small
    objects (a row per text, a JSON cache) sets off several: time that grows with
    what was imported, not with what is being built. Frozen, they are out of its
    sight. The objects the steps make are collected as before, and reference
    counting still frees a frozen object that dies; only a reference cycle among
    frozen objects waits for the end of the run. Unfrozen then, so a process that
    runs many builds (a test session, a code server) collects what each left.

    Nested (``strata index`` around its run, the strata executor around the steps
    it runs in that process), only the outermost block freezes and unfreezes: an
    inner one ending would otherwise unfreeze what the outer one froze while the
    outer run still goes on."""
    import gc

    global _freeze_depth
    outermost, was = _freeze_depth == 0, gc.isenabled()
    _freeze_depth += 1
    if outermost:
        gc.freeze()
        gc.enable()
    try:
        yield
    finally:
        _freeze_depth -= 1
        if outermost:
            gc.unfreeze()
            if not was:
                gc.disable()


@contextlib.contextmanager
def heap_blocks() -> Iterator[None]:
    """Inside the block, blocks under 32 MiB come from the heap, as under glibc's
    moving threshold once a large block has been freed; on leaving, the build's pinned
    threshold (:func:`pinned_mmap_threshold`) holds again.

    Why: an encoder allocates and frees its activations, blocks of a few MB, on every
    call. Mapped, each costs a ``mmap``, page faults on fresh zeroed pages and a
    ``munmap``: torch's encoding took about a quarter longer. From the heap they are
    reused call after call, and what the heap keeps once the encoding is done is free
    memory the next ``malloc_trim`` hands back. Only where the build pinned the
    threshold: a process with the user's own setting, or a query process, is left as
    it is."""
    libc = _glibc()
    if libc is None or os.environ.get(MMAP_THRESHOLD_ENV) != str(PINNED_THRESHOLD):
        yield
        return
    libc.mallopt(_M_MMAP_THRESHOLD, _MOVING_THRESHOLD_MAX)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD, PINNED_THRESHOLD)
