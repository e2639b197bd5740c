"""The text encoder the embedding stage uses."""

from __future__ import annotations

import dagster as dg

from strata.embedding import DEFAULT_MODEL, Encoder, EncoderSpec
from strata.settings import EmbedSettings, default


class EmbedderResource(dg.ConfigurableResource):
    """Default encoder settings; a corpus's own ``embedding`` entry wins.

    ``backend`` is ``sentence-transformers`` (a local model: a name known to the
    sentence-transformers cache, a folder path, or the packaged default
    all-MiniLM-L6-v2) or ``openai`` (any OpenAI-compatible ``/embeddings``
    endpoint at ``base_url``; the key is read from the environment variable
    named by ``api_key_env`` and never stored).
    """

    # defaults from strata.settings.EmbedSettings (declared there with their variables)
    backend: str = default(EmbedSettings, "backend")
    model: str = default(EmbedSettings, "model")
    base_url: str | None = default(EmbedSettings, "base_url")
    api_key_env: str = default(EmbedSettings, "api_key_env")
    batch_size: int = default(EmbedSettings, "batch_size")
    runtime: str = default(EmbedSettings, "runtime")
    """How a local model runs: torch, onnx or onnx-int8 (ONNX Runtime on a graph
    exported locally from the same weights; see strata.onnx_runtime)."""

    def spec_for(self, corpus_spec: EncoderSpec | None) -> EncoderSpec:
        if corpus_spec is not None and (corpus_spec.model != DEFAULT_MODEL
                                        or corpus_spec.backend != "sentence-transformers"
                                        or corpus_spec.runtime != "torch"):
            return corpus_spec
        return EncoderSpec(backend=self.backend, model=self.model, base_url=self.base_url,
                           api_key_env=self.api_key_env, runtime=self.runtime)

    def load(self, spec: EncoderSpec) -> Encoder:
        from strata.embedding import load_encoder

        return load_encoder(spec, batch_size=self.batch_size)
