"""The one token estimate: words and punctuation marks, counted by a regular expression.

Chunking keeps chunks under the encoder's window with it, the budget of a search
(`budget_tokens`) is filled with it and the MCP tools report and cut with it, so
"200 tokens" means the same thing wherever a user meets it. It is an estimate, not
the embedding model's or an LLM's tokenizer: parsing and querying must not load a
model, and counting every word and mark separately errs on the high side of BPE
tokenizers for prose and code, so a budget filled by it is not overrun.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+|[^\w\s]")


def estimate_tokens(text: str | None) -> int:
    """The number of words and punctuation marks in ``text``."""
    return len(_TOKEN.findall(text or ""))
