"""The text encoder the embedding stage uses."""

from __future__ import annotations

import dagster as dg

from strata.core.encoders.corpus_encoder import encoder_for
from strata.core.encoders.embedding import Encoder, EncoderSpec
from strata.core.config.settings import EmbedSettings, settings_base


# Settings of the encoding processes a build starts (how many, their threads, where
# exported graphs are kept): read where those processes start, not a choice of encoder
PROCESS_SETTINGS = ("model_cache", "encoding_processes", "torch_threads")


class EmbedderResource(settings_base(EmbedSettings, dg.ConfigurableResource,
                                     exclude=PROCESS_SETTINGS)):
    """Default encoder settings; a corpus's own ``embedding`` entry wins.

    Its fields are :class:`strata.core.config.settings.EmbedSettings`'s (the defaults, and
    a description naming the ``STRATA_EMBED_*`` variable each is read from), but
    :data:`PROCESS_SETTINGS`. ``backend`` is ``sentence-transformers`` (a local
    model: a name known to the sentence-transformers cache, a folder path, or the
    packaged default all-MiniLM-L6-v2) or ``openai`` (any OpenAI-compatible
    ``/embeddings`` endpoint at ``base_url``; the key is read from the environment
    variable named by ``api_key_env`` and never stored). ``runtime``: how a local
    model runs (see :mod:`strata.core.encoders.onnx_runtime` for the ONNX ones).
    """

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Where a build's step process starts: its idle OpenMP threads will sleep
        (:func:`strata.core.encoders.embedding.passive_waits`, unless ``OMP_WAIT_POLICY`` is
        set), before any step imports torch, which reads the policy once."""
        from strata.core.encoders.embedding import passive_waits

        passive_waits()

    def spec_for(self, corpus_spec: EncoderSpec | None,
                 previous: EncoderSpec | None = None) -> EncoderSpec:
        """The encoder a build of a corpus declaring ``corpus_spec`` uses, this
        resource's fields as the defaults (:func:`strata.core.encoders.corpus_encoder.encoder_for`)."""
        return encoder_for(self, corpus_spec, previous)

    def load(self, spec: EncoderSpec) -> Encoder:
        from strata.core.encoders.embedding import load_encoder

        return load_encoder(spec, batch_size=self.batch_size)
