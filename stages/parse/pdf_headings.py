"""Which lines of a PDF are headings, and which are page furniture.

Headings come from the document outline when it has one (each entry located
on its page by its title, after a numbering prefix, or wrapped over lines of
one block), else from font sizes (body size by character count; a short line
1.15x larger, or bold at body size, is a heading; levels rank the sizes).
Lines repeated in the top/bottom margin of most pages are furniture. A mixin
of :class:`stages.parse.pdf._Builder`, which reads the pages into ``lines``,
``page_first`` and ``page_sizes``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from strata.stages.parse.common import squash as _squash

_MAX_PAGE_NOTES = 10
_HEADING_RATIO = 1.15
_MAX_HEADING_CHARS = 120
_MAX_LEVEL = 6
_MARGIN_BAND = 0.08  # top/bottom share of the page searched for running headers/footers
# What may precede an outline title on its heading line: "2.1", "IV.", "A.3",
# "Chapter 2" (compared after _norm, which keeps only letters and digits).
_NUMBERING = re.compile(r"(?:chapter|section|part|appendix)?[a-z]?[0-9ivxlc]{0,8}")
_DIGITS = re.compile(r"\d+")
# A printed table-of-contents entry: "Introduction . . . . . 3" / "Setup ....... 12"
_LEADER = re.compile(r"(?:\.\s*){4,}\S*\s*$|\.{4,}")

Key = tuple[int, int, int]  # (page, line index, sub): the document order


@dataclass
class _Line:
    page: int  # 0-based
    block: int  # block number on its page
    bbox: tuple[float, float, float, float]
    text: str
    size: float
    bold: bool
    role: str = "prose"  # prose | heading | furniture


@dataclass
class _Heading:
    key: Key
    level: int
    title: str
    page: int  # 0-based
    lines: list[int]  # indexes into _Builder.lines; empty when located by page only


def _norm(text: str) -> str:
    """Letters and digits only, casefolded: compares titles across spacing,
    punctuation and line wrapping."""
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def _describe(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


class HeadingFinder:
    def _mark_furniture(self) -> None:
        """Running headers and footers: the same text (digits aside) in the
        top or bottom margin band of at least half the pages (3 or more)."""
        pages = len(self.page_sizes)
        if pages < 3:
            return
        seen: dict[str, set[int]] = {}
        where: dict[str, list[int]] = {}
        for i, ln in enumerate(self.lines):
            height = self.page_sizes[ln.page][1] if ln.page < len(self.page_sizes) else 0.0
            if height <= 0:
                continue
            if ln.bbox[3] > height * _MARGIN_BAND and ln.bbox[1] < height * (1 - _MARGIN_BAND):
                continue
            norm = _DIGITS.sub("#", _squash(ln.text).casefold())
            seen.setdefault(norm, set()).add(ln.page)
            where.setdefault(norm, []).append(i)
        need = max(3, math.ceil(pages / 2))
        for norm, on_pages in seen.items():
            if len(on_pages) >= need:
                for i in where[norm]:
                    self.lines[i].role = "furniture"

    # ---- headings -------------------------------------------------------

    def _outline_headings(self) -> tuple[list[_Heading] | None, str]:
        try:
            toc = self.doc.get_toc(simple=True)
        except Exception as exc:  # noqa: BLE001
            self.notes.append(f"outline could not be read: {_describe(exc)}")
            return None, ""
        if not toc:
            return None, ""
        pages = len(self.page_sizes)
        headings: list[_Heading] = []
        cursor = 0  # first line index a later entry may claim
        prev_key: Key = (0, 0, -3)
        prev_page = 0
        missing = 0
        for entry in toc:
            try:
                level, raw_title, pno = int(entry[0]), str(entry[1]), int(entry[2])
            except (TypeError, ValueError, IndexError):
                continue
            level = max(1, level)
            title = _squash(raw_title) or "Untitled section"
            page = pno - 1 if 1 <= pno <= pages else prev_page
            found = self._locate(title, page, cursor)
            if found:
                key: Key = (page, found[0], 0)
                cursor = found[-1] + 1
            else:
                key = (page, self.page_first[page], -2)
                if key < prev_key:
                    key = (prev_key[0], max(cursor, prev_key[1]), -2)
                    page = prev_key[0]
                cursor = max(cursor, key[1])
                missing += 1
                if missing <= _MAX_PAGE_NOTES:
                    self.notes.append(f"outline entry {title!r} not found on page {page + 1}; "
                                      "its section starts at the top of the page")
            headings.append(_Heading(key, level, title, page, found or []))
            prev_key, prev_page = key, page
        if missing > _MAX_PAGE_NOTES:
            self.notes.append(f"{missing - _MAX_PAGE_NOTES} more outline entries were not found")
        if not headings:
            return None, ""
        return headings, "outline"

    def _locate(self, title: str, page: int, cursor: int) -> list[int]:
        """Line indexes of ``title`` on ``page`` at or after ``cursor``."""
        want = _norm(title)
        if not want or page + 1 >= len(self.page_first):
            return []
        start, end = max(self.page_first[page], cursor), self.page_first[page + 1]
        for i in range(start, end):
            ln = self.lines[i]
            if ln.role != "prose":
                continue
            got = _norm(ln.text)
            if not got:
                continue
            if got == want or (got.endswith(want) and _NUMBERING.fullmatch(got[: len(got) - len(want)])):
                return [i]
            if len(got) < len(want) and (want.startswith(got) or _prefix_after_numbering(got, want)):
                acc, taken = got, [i]
                for j in range(i + 1, end):
                    nxt = self.lines[j]
                    if nxt.block != ln.block or nxt.role != "prose":
                        break
                    acc += _norm(nxt.text)
                    taken.append(j)
                    if acc == want or (acc.endswith(want)
                                       and _NUMBERING.fullmatch(acc[: len(acc) - len(want)])):
                        return taken
                    if len(acc) >= len(want) + 12:
                        break
        return []

    def _font_headings(self) -> list[_Heading]:
        prose = [ln for ln in self.lines if ln.role == "prose" and ln.size > 0]
        sizes: Counter[float] = Counter()
        for ln in prose:
            sizes[ln.size] += sum(1 for ch in ln.text if not ch.isspace())
        if not sizes:
            return []
        body = max(sizes.items(), key=lambda kv: (kv[1], -kv[0]))[0]
        block_bold: dict[tuple[int, int], bool] = {}
        block_len: Counter[tuple[int, int]] = Counter()
        for ln in self.lines:
            k = (ln.page, ln.block)
            block_bold[k] = block_bold.get(k, True) and ln.bold
            block_len[k] += 1

        candidates: list[tuple[int, float]] = []  # line index, size bucket
        for i, ln in enumerate(self.lines):
            if ln.role != "prose":
                continue
            text = _squash(ln.text)
            if len(text) >= _MAX_HEADING_CHARS or sum(ch.isalnum() for ch in text) < 2:
                continue
            if not any(ch.isalpha() for ch in text) or _LEADER.search(text):
                continue
            big = ln.size >= body * _HEADING_RATIO
            bold = (ln.bold and ln.size >= body * 0.9 and not text.endswith((".", ",", ";"))
                    and block_bold[(ln.page, ln.block)] and block_len[(ln.page, ln.block)] <= 3)
            if big or bold:
                candidates.append((i, round(max(ln.size, body) * 2) / 2))

        # consecutive candidate lines of one block and size form one heading
        groups: list[tuple[list[int], float]] = []
        for i, bucket in candidates:
            if groups:
                last, last_bucket = groups[-1]
                prev = self.lines[last[-1]]
                ln = self.lines[i]
                if (last[-1] == i - 1 and bucket == last_bucket and prev.page == ln.page
                        and prev.block == ln.block):
                    last.append(i)
                    continue
            groups.append(([i], bucket))
        ranks = {b: r for r, b in enumerate(sorted({b for _, b in groups}, reverse=True), 1)}
        headings = []
        for idxs, bucket in groups:
            first = self.lines[idxs[0]]
            title = _squash(" ".join(self.lines[i].text for i in idxs))
            headings.append(_Heading((first.page, idxs[0], 0), min(ranks[bucket], _MAX_LEVEL),
                                     title, first.page, idxs))
        return headings


def _prefix_after_numbering(got: str, want: str) -> bool:
    """``got`` is a numbering prefix plus the start of ``want`` ("21mounting")."""
    for cut in range(1, min(len(got), 12)):
        if _NUMBERING.fullmatch(got[:cut]) and want.startswith(got[cut:]) and got[cut:]:
            return True
    return False
