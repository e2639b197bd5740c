"""Strata's foundation: what the build and the query side both stand on.

The settings model, the artifact schema and the on-disk layout of an index, the
encoders and the LLM client, the lexical index, the build lock and the stop signal.
Nothing here imports Dagster, the stages or the query side (the import contracts in
pyproject.toml check it), and this package imports none of its modules eagerly, so a
query loads only the pieces it uses.
"""
