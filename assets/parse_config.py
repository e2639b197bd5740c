"""The parse settings, taken by the ``nodes`` asset and by every parse shard step
(the shard graph maps its one config onto all of them)."""

import dagster as dg

from strata.core.settings import ChunkingSettings, default


class ParseConfig(dg.Config):
    # defaults (and bounds, checked by stages.parse.finalize.ParseSettings) declared
    # in strata.core.settings.ChunkingSettings
    chunk_tokens: int = default(ChunkingSettings, "chunk_tokens")
    """Estimated-token budget of a chunk; longer sections are split into chunk children."""
    context_lines: int = default(ChunkingSettings, "context_lines")
    """Prose lines kept before/after each code block, table and image as its context."""
