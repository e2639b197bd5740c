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
# Polars' allocator (its own jemalloc, configured by this variable when polars loads,
# after polars' own defaults) hands the pages a frame freed back at once instead of keeping them for reuse: a
# build runs its steps one after another in one process, and what one step's frames
# freed would otherwise stay resident beneath the next step's peak, more of it the
# larger the corpus.
_os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
