"""Enrichment stages: summaries, captions, OpenIE, image dedup, the semantic graph."""
