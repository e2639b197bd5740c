"""How a build's texts are grouped into forward passes on torch, so that a text's
vector does not depend on the texts encoded with it.

Why: the kernels a transformer runs on a CPU depend on the shape of the batch. A
batch with no padding takes the attention path without a mask, the padded length
decides how the sequence is tiled, and on CPUs with AMX the number of rows decides
how the matmuls are blocked; each changes the rounding of a text's vector in
bfloat16 (and its last bits in float32). A text's place in the batch, the other
rows and the thread count do not. So every pass has one shape per padded length,
and an incremental build, which encodes other batches than a fresh one, gives
every text the vector a fresh build gives it.
"""

from __future__ import annotations

from collections.abc import Iterator

PAD_STEP = 16  # the sequence tile of the CPU kernels: lengths in one step share a padding
# Token positions in one forward pass (:func:`rows_per_pass`), and the bounds on its
# rows: about as many texts a second as the fastest row count at every length, and a
# pass small enough that a small edit, which pays a whole pass for each padded length
# it touches, stays cheap.
PASS_TOKENS, MIN_ROWS, MAX_ROWS = 1024, 8, 64


def padded_length(tokens: int) -> int:
    """The length a text of ``tokens`` tokens is padded to: the next multiple of
    ``PAD_STEP`` strictly above it (at least one pad, so attention always runs masked)."""
    return PAD_STEP * (tokens // PAD_STEP + 1)


def rows_per_pass(length: int) -> int:
    """The rows of every forward pass at padded ``length``: ``PASS_TOKENS``
    positions, as a power of two within the bounds. A function of the length
    alone: that is what keeps a text's vector independent of what it is encoded with."""
    rows = MAX_ROWS
    while rows > MIN_ROWS and rows * length > PASS_TOKENS:
        rows //= 2
    return rows


def shape_batches(counts: list[int], cap: int) -> Iterator[tuple[int, list[int]]]:
    """(padded length, rows) for each forward pass over texts of ``counts``
    tokens: texts grouped by the padded length each is computed at (never above
    ``cap``, the model's longest input), shortest first, and every pass at a
    length exactly :func:`rows_per_pass` rows: a group's last pass is filled with
    its first text again (those rows' outputs are the same vector, written to the
    same place)."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(counts):
        groups.setdefault(min(padded_length(n), cap), []).append(i)
    for length, members in sorted(groups.items()):
        step = rows_per_pass(length)
        for start in range(0, len(members), step):
            rows = members[start:start + step]
            yield length, rows + [rows[0]] * (step - len(rows))


def max_positions(model) -> int:
    """How long a padded input a sentence-transformers model takes (its position
    embeddings), or no cap."""
    try:
        return int(model[0].auto_model.config.max_position_embeddings)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return 1 << 30
