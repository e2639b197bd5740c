"""What every OpenIE source shares: the output type and the text keys.

:class:`OpenIEOut` is what the LLM path, the HippoRAG import and the offline
heuristic all return; :func:`normalize` is the one key by which entity names
are compared, triples are grounded in their unit's text and imported passages
are matched. It lives apart from :mod:`stages.enrich.openie` (the stage) and
:mod:`stages.enrich.openie_offline` (the heuristic) so both can import it
without importing each other.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OpenIEOut", "Triple", "normalize", "clean", "strip_article", "unit_title",
           "unit_context"]

Triple = tuple[str, str, str]


@dataclass
class OpenIEOut:
    entities: list[tuple[str, str]] = field(default_factory=list)  # (name, description)
    triples: list[Triple] = field(default_factory=list)  # (head, relation, tail)
    ref: str | None = None  # provenance of imported output: the HippoRAG doc ``idx``


# Everything but letters/digits of every script becomes a space, except "+"/"#"
# ending a word (C++, C#, F#); "Science+Business" and "#tag" are split.
_NON_WORD = re.compile(r"[^\w+#]+|_+|[+#]+(?=\w)|(?<![\w+#])[+#]+")
_SPACES = re.compile(r"\s+")
_SYMBOLS_ONLY = re.compile(r"[+#]+")  # a "#" heading mark or a lone "+" is not a word
_ARTICLES = ("the ", "a ", "an ")
_PART_SUFFIX = re.compile(r"\s*\(part \d+/\d+\)$")


def normalize(text: str) -> str:
    """Lowercase, NFKC, punctuation to spaces, whitespace collapsed: the key used
    to compare entity names, ground triples in text and match imported passages."""
    s = unicodedata.normalize("NFKC", text or "").casefold()
    return " ".join(w for w in _NON_WORD.sub(" ", s).split() if not _SYMBOLS_ONLY.fullmatch(w))


def clean(text: Any) -> str:
    """Whitespace runs to one space, ends stripped; None becomes ""."""
    return _SPACES.sub(" ", str(text)).strip() if text is not None else ""


def strip_article(norm: str) -> str:
    """A normalized name without a leading "the", "a" or "an"."""
    for a in _ARTICLES:
        if norm.startswith(a) and len(norm) > len(a):
            return norm[len(a):]
    return norm


def unit_title(title: str | None) -> str:
    """A chunk's title without its "(part i/n)" suffix."""
    return _PART_SUFFIX.sub("", (title or "").strip())


def unit_context(text: str, title: str | None) -> str:
    """What a unit's triples are grounded against: its text plus its title, so the
    subject a chunk is about ("Adolescence (part 2/2)") counts as mentioned."""
    t = unit_title(title)
    return f"{t}\n{text}" if t else text
