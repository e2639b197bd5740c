"""Strata's foundation, shared by the pipeline and the query side: the artifact
schema, the on-disk layout of an index, and the encoders."""

import os as _os

# Quiet the native libraries' chatter (Lance's Rust logger, Hugging Face
# progress bars) unless the user asked for it.
_os.environ.setdefault("LANCEDB_LOG", "error")
_os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
_os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
_os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
