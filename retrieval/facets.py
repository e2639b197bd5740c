"""Questions that name two things, and evidence for both.

"What is the difference between X and Y", "V2 … compared with V1", "X
instead of Y", "X vs Y": the answer often lives in two places (X's page and
Y's), and one ranking by similarity to the whole question fills the top with
whichever side the question's wording leans to. Here the question is split at
its comparison into its two sides, each side is recalled on its own, and the
best unit of a side the top of the list does not already cover is placed at
its end — the leading results keep their places, the list gains the other
side's evidence.

Only explicit comparisons split a question: a plain "and" joins the parts of
one request far more often than two subjects ("how do I enable X, and can I
cap it?"), and splitting those would spend places on half-questions.
"""

from __future__ import annotations

import re

WINDOW = 5  # the top places in which each side should have evidence

# (pattern, how the two sides are taken): "between X and Y" takes X and Y; the
# others take what precedes and what follows the comparison word
_BETWEEN = re.compile(r"\bdifferences? between (?P<x>.+?) and (?P<y>.+?)(?:[,;?]|$)", re.I)
_VERSUS = re.compile(r"\b(?:vs\.?|versus|instead of|compared (?:to|with)|rather than)\s",
                     re.I)
_MIN_WORDS = 2  # a side shorter than this ("it") is not a subject of its own


def split(question: str) -> list[str]:
    """The two sides of a comparison in ``question``, or [] when it names none."""
    m = _BETWEEN.search(question)
    if m:
        sides = [m.group("x"), m.group("y")]
    else:
        m = _VERSUS.search(question)
        if not m:
            return []
        sides = [question[:m.start()], question[m.end():]]
    sides = [" ".join(s.strip(" ,;:?.").split()) for s in sides]
    if any(len(s.split()) < _MIN_WORDS and not any(c.isupper() or c.isdigit() for c in s)
           for s in sides) or not all(sides):
        return []
    return sides


def place(rows: list[int], sides: list[int | None], window: int = WINDOW) -> list[int]:
    """``rows`` (best first) with each side's best row placed at the end of the
    top ``window`` when that window does not already hold it (its own
    occurrence further down is moved up, not duplicated)."""
    top = set(rows[:window])
    missing = [s for s in dict.fromkeys(sides) if s is not None and s not in top]
    if not missing:
        return rows
    keep = [r for r in rows if r not in set(missing)]
    at = max(1, min(window, len(keep) + len(missing)) - len(missing))
    return keep[:at] + missing + keep[at:]
