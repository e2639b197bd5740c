"""Split long prose into chunks on paragraph, then sentence, boundaries.

Token counts are :func:`strata.core.tokens.estimate_tokens` (words and
punctuation), not the embedding model's tokenizer: parsing must not load a model,
and the estimate only needs to keep chunks under the encoder's window, which it
does with the default budget (200 estimated tokens against MiniLM's 256 word pieces).
"""

from __future__ import annotations

import re

from strata.core.tokens import estimate_tokens
# A sentence ends at . ! ? (optionally followed by a closing quote/bracket)
# and whitespace. Linear-time: no nested quantifiers. The closing mark sits in
# a lookbehind so that ``split`` keeps it with its sentence.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+")


def _split_long(unit: str, budget: int) -> list[str]:
    """A single paragraph over budget: by sentences, then by words."""
    sentences = [s for s in _SENTENCE_END.split(unit) if s.strip()]
    out: list[str] = []
    for s in sentences:
        if estimate_tokens(s) <= budget:
            out.append(s)
            continue
        words = s.split()
        step = max(1, int(budget * 0.7))  # words are ~1.3 estimated tokens
        out.extend(" ".join(words[i:i + step]) for i in range(0, len(words), step))
    return out


def split_text(text: str, budget: int = 200) -> list[str]:
    """Pack paragraphs (and sentences of over-long ones) into chunks ≤ budget.

    Returns ``[text]`` when it already fits, so callers can tell "no split".
    """
    if estimate_tokens(text) <= budget:
        return [text]
    units: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        if not para.strip():
            continue
        units.extend([para] if estimate_tokens(para) <= budget else _split_long(para, budget))
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for u in units:
        n = estimate_tokens(u)
        if current and size + n > budget:
            chunks.append("\n\n".join(current))
            current, size = [], 0
        current.append(u)
        size += n
    if current:
        chunks.append("\n\n".join(current))
    return chunks
