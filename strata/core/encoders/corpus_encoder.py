"""Which encoder a build of a corpus uses: the corpus's declaration, the
embedding settings, and the encoder its index was last built with.

Why here and not on the embedder resource: the ``strata index`` command starts
loading the encoder before it imports Dagster (:mod:`strata.core.encoder_process`),
and must name the very encoder the run's steps will ask for, so both sides
settle it with these two functions; the resource's ``spec_for`` is
:func:`encoder_for` with its own fields as the defaults.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from strata.core.encoders.embedding import AUTO, DEFAULT_MODEL, EncoderSpec, resolve_runtime
from strata.core.storage.layout import IndexLayout, read_json_or_empty


class EncoderDefaults(Protocol):
    """What :func:`encoder_for` reads of its defaults: the fields of
    :class:`strata.core.config.settings.EmbedSettings` (the settings themselves, or the
    embedder resource built from them)."""

    backend: str
    model: str
    base_url: str | None
    api_key_env: str
    runtime: str


def encoder_for(defaults: EncoderDefaults, corpus_spec: EncoderSpec | None,
                previous: EncoderSpec | None = None) -> EncoderSpec:
    """The encoder a build of a corpus declaring ``corpus_spec`` uses: the
    corpus's own model when it names one, else the defaults'; the corpus's runtime
    when it declares one, else the defaults'. ``previous`` (what the index was
    last built with: :func:`built_encoder`) settles ``auto`` so that a rebuild
    keeps its runtime and encodes nothing again."""
    declared = corpus_spec is not None and (corpus_spec.model != DEFAULT_MODEL
                                            or corpus_spec.backend != "sentence-transformers")
    spec = corpus_spec if declared else EncoderSpec(
        backend=defaults.backend, model=defaults.model, base_url=defaults.base_url,
        api_key_env=defaults.api_key_env)
    assert spec is not None
    if spec.backend != "sentence-transformers":  # runtimes are a local model's
        return replace(spec, runtime="torch")
    setting = corpus_spec.runtime if corpus_spec is not None and corpus_spec.runtime != AUTO \
        else defaults.runtime
    before = previous.runtime if previous is not None and previous.same_model(spec) else None
    return replace(spec, runtime=resolve_runtime(setting, before, spec.model))


def built_encoder(layout: IndexLayout) -> EncoderSpec | None:
    """The encoder the corpus's vectors were last built with (``build/encoder.json``),
    or None before its first build; every step that settles the encoder (the
    shards, the embeddings asset, the run's tags, the command's early start)
    passes it to :func:`encoder_for`, so they settle ``auto`` alike."""
    previous = read_json_or_empty(layout.build / "encoder.json")
    try:
        return EncoderSpec.from_manifest(previous) if previous else None
    except (TypeError, ValueError):  # written by another version: settle afresh
        return None
