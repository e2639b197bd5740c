"""Strata's one import name: the user's top-level folders (assets/, pipelines/,
retrieval/, ...) are its subpackages through relative symlinks, and strata.core is the
foundation both the build and the query side stand on."""

import os as _os

# Quiet the native libraries' chatter (Lance's Rust logger, Hugging Face
# progress bars) unless the user asked for it.
_os.environ.setdefault("LANCEDB_LOG", "error")
_os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
_os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
_os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
