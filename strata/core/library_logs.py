"""The native libraries' chatter (Lance's Rust logger, Hugging Face progress bars,
transformers' notices, the tokenizers' fork warning) kept quiet unless the user
asked for it.

Called right before one of those libraries is imported or first used, not when a
Strata module is imported: importing Strata changes nothing in the process, and
a variable the user set always wins.
"""

from __future__ import annotations

import os

QUIET = {
    "LANCEDB_LOG": "error",  # read once, when lancedb's native module loads
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",  # no warning when a process forks after tokenizing
}


def quiet_libraries() -> None:
    """Set each of :data:`QUIET` that the environment does not already set."""
    for name, value in QUIET.items():
        os.environ.setdefault(name, value)
