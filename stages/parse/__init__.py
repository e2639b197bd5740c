"""Parsers: one per format, all producing :class:`stages.parse.model.ParsedFile`."""
