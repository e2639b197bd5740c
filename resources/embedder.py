"""The text encoder the embedding stage uses."""

from __future__ import annotations

from dataclasses import replace

import dagster as dg

from strata.core.embedding import AUTO, DEFAULT_MODEL, Encoder, EncoderSpec, resolve_runtime
from strata.core.settings import EmbedSettings, settings_base


# Settings of the encoding processes a build starts (how many, their threads, where
# exported graphs are kept): read where those processes start, not a choice of encoder
PROCESS_SETTINGS = ("model_cache", "encoding_processes", "torch_threads", "warm_encoder")


class EmbedderResource(settings_base(EmbedSettings, dg.ConfigurableResource,
                                     exclude=PROCESS_SETTINGS)):
    """Default encoder settings; a corpus's own ``embedding`` entry wins.

    Its fields are :class:`strata.core.settings.EmbedSettings`'s (the defaults, and
    a description naming the ``STRATA_EMBED_*`` variable each is read from), but
    :data:`PROCESS_SETTINGS`. ``backend`` is ``sentence-transformers`` (a local
    model: a name known to the sentence-transformers cache, a folder path, or the
    packaged default all-MiniLM-L6-v2) or ``openai`` (any OpenAI-compatible
    ``/embeddings`` endpoint at ``base_url``; the key is read from the environment
    variable named by ``api_key_env`` and never stored). ``runtime``: how a local
    model runs (see :mod:`strata.core.onnx_runtime` for the ONNX ones).
    """

    def spec_for(self, corpus_spec: EncoderSpec | None,
                 previous: EncoderSpec | None = None) -> EncoderSpec:
        """The encoder a build of a corpus declaring ``corpus_spec`` uses: the
        corpus's own model when it names one, else this resource's; the corpus's
        runtime when it declares one, else this resource's. ``previous`` (what
        the index was last built with) settles ``auto`` so that a rebuild keeps its
        runtime and encodes nothing again."""
        declared = corpus_spec is not None and (corpus_spec.model != DEFAULT_MODEL
                                                or corpus_spec.backend != "sentence-transformers")
        spec = corpus_spec if declared else EncoderSpec(
            backend=self.backend, model=self.model, base_url=self.base_url,
            api_key_env=self.api_key_env)
        assert spec is not None
        if spec.backend != "sentence-transformers":  # runtimes are a local model's
            return replace(spec, runtime="torch")
        setting = corpus_spec.runtime if corpus_spec is not None and corpus_spec.runtime != AUTO \
            else self.runtime
        before = previous.runtime if previous is not None and previous.same_model(spec) else None
        return replace(spec, runtime=resolve_runtime(setting, before, spec.model))

    def load(self, spec: EncoderSpec) -> Encoder:
        from strata.core.embedding import load_encoder

        return load_encoder(spec, batch_size=self.batch_size)
