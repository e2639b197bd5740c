"""The parse settings, taken by the ``nodes`` asset and by every parse shard step
(the shard graph maps its one config onto all of them)."""

import dagster as dg

from strata.core.config.settings import ChunkingSettings, settings_base


class ParseConfig(settings_base(ChunkingSettings, dg.Config)):
    """A build's chunking, set in the UI's launchpad or by ``strata index``: the
    fields of :class:`strata.core.config.settings.ChunkingSettings` (defaults and
    descriptions from there; the parse stage checks the bounds)."""
