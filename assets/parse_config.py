"""The parse settings, taken by the ``nodes`` asset and by every parse shard step
(the shard graph maps its one config onto all of them)."""

import dagster as dg


class ParseConfig(dg.Config):
    chunk_tokens: int = 200
    """Estimated-token budget of a chunk; longer sections are split into chunk children."""
    context_lines: int = 5
    """Prose lines kept before/after each code block, table and image as its context."""
