"""PDF → :class:`ParsedFile`: sections from the outline or from font sizes,
plus table and image leaves, with PyMuPDF.

Text comes from ``page.get_text("rawdict")`` one *line* at a time (a PDF has
no source lines, so drafts carry ``page``/``attrs["page_end"]`` instead of
``start_line``/``end_line``). Every line, table and image gets an ordering
key ``(page, line index, sub)``; they are fed in that order to the shared
section builder (:mod:`stages.parse.sections`), so a section owns everything
from its key up to the next heading's key, with no recursion.

Headings, in order of preference:

* the document outline (``doc.get_toc()``): each entry is located on its page
  by matching its title against the text lines (exact, after a numbering
  prefix such as ``2.1``, or wrapped over several lines of one block); an
  entry that cannot be found starts at the top of its page and says so in a
  note;
* otherwise font sizes: the body size is the most common size by character
  count, and a short line (< 120 chars) is a heading when it is at least
  1.15× the body size, or bold at body size with no terminal period and its
  whole block bold. Levels rank the distinct heading sizes (0.5 pt steps),
  largest first, capped at h6. Lines with dot leaders (a printed table of
  contents) are never headings.

Lines repeated in the top/bottom margin of most pages (running headers,
"page N of M" footers) are page furniture: neither headings nor prose.

Tables are PyMuPDF's line-based ``find_tables`` (ruled tables); their lines
leave the section prose, and the cell text is read from the characters
inside each cell (``Table.extract`` loses spaces with base-14 fonts). Images
come from ``page.get_images`` + ``doc.extract_image``; the bytes go to
``ParsedFile.blobs`` under a content hash.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from strata.stages.parse.common import file_stem as _stem, squash as _squash, pipe_table
from strata.stages.parse.model import Draft, ParsedFile
from strata.stages.parse.pdf_headings import HeadingFinder, Key, _describe, _Heading, _Line
from strata.stages.parse.sections import Section, SectionBuilder, github_slug

__all__ = ["parse_pdf"]

_MIN_IMAGE_SIDE = 32
_CAPTION_GAP = 36.0  # points between an image edge and its caption line
_CAPTION = re.compile(r"(?:figure|fig\.)\s*\S", re.IGNORECASE)
_MAX_CAPTION = 300
_MAX_PAGE_NOTES = 10
_WEB_IMAGE_EXTS = {"png", "jpeg", "jpg", "gif", "webp", "bmp", "tiff", "tif"}
_BOLD_FONT = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_TITLE_FILE_NAME = re.compile(r"\.(?:pdf|docx?|odt|rtf|txt|tex|indd|pages)$", re.IGNORECASE)

# --------------------------------------------------------------------------
# public entry point


def parse_pdf(data: bytes, path: str, *, context_lines: int = 5) -> ParsedFile:
    """Parse one PDF into a draft tree; never raises.

    Unreadable, encrypted or text-less input still yields a file draft, with
    the reason in ``ParsedFile.notes``.
    """
    path = str(path or "")
    try:
        import pymupdf
    except Exception as exc:  # noqa: BLE001 - a broken install must not crash the build
        return _bare(path, f"PyMuPDF is not available: {type(exc).__name__}: {exc}")
    from strata.stages.parse.bounds import pdf_problem

    too_big = pdf_problem(bytes(data or b""))
    if too_big:  # PyMuPDF would inflate and interpret all of it
        return _bare(path, too_big)
    quiet = _Quiet(pymupdf)
    doc = None
    try:
        with quiet:
            try:
                doc = pymupdf.open(stream=bytes(data or b""), filetype="pdf")
                if not doc.needs_pass and doc.page_count < 1:
                    raise ValueError("no pages")
            except Exception as exc:  # noqa: BLE001 - any open failure is "unreadable"
                return _bare(path, f"unreadable PDF: {_describe(exc)}")
            try:
                return _Builder(pymupdf, doc, path, max(0, int(context_lines))).build()
            except Exception as exc:  # noqa: BLE001 - the contract is "never raise"
                return _fallback(doc, path, exc)
    except Exception as exc:  # noqa: BLE001 - even the fallback failed
        return _bare(path, f"unreadable PDF: {_describe(exc)}")
    finally:
        if doc is not None:
            try:
                doc.close()
            except Exception:  # noqa: BLE001
                pass


class _Quiet:
    """Silence MuPDF's stderr chatter about broken files while parsing, then
    restore the previous settings."""

    def __init__(self, pymupdf: Any) -> None:
        self.tools = getattr(pymupdf, "TOOLS", None)
        self.saved: tuple[Any, Any] | None = None

    def __enter__(self) -> _Quiet:
        try:
            self.saved = (self.tools.mupdf_display_errors(), self.tools.mupdf_display_warnings())
            self.tools.mupdf_display_errors(False)
            self.tools.mupdf_display_warnings(False)
        except Exception:  # noqa: BLE001 - older PyMuPDF: just stay noisy
            self.saved = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.saved is not None:
            try:
                self.tools.mupdf_display_errors(self.saved[0])
                self.tools.mupdf_display_warnings(self.saved[1])
            except Exception:  # noqa: BLE001
                pass


def _bare(path: str, note: str, *, title: str = "", attrs: dict[str, Any] | None = None) -> ParsedFile:
    """A lone file draft: the title stands in for the text nobody could read."""
    title = title or _stem(path)
    root = Draft(kind="file", subkind="pdf", title=title, text=title, page=1 if attrs else None,
                 attrs=attrs or {"pages": 0, "metadata": {}})
    return ParsedFile(root=root, notes=[note], unreadable=note)


def _fallback(doc: Any, path: str, exc: BaseException) -> ParsedFile:
    """Structured parse failed: keep whatever plain text the pages give."""
    parts: list[str] = []
    pages = 0
    try:
        pages = doc.page_count
        for page in doc:
            try:
                parts.append(page.get_text())
            except Exception:  # noqa: BLE001
                continue
    except Exception:  # noqa: BLE001
        pass
    title = _stem(path)
    text = "\n\n".join(p.strip() for p in parts if p and p.strip())
    root = Draft(kind="file", subkind="pdf", title=title, text=text or title, page=1,
                 attrs={"pages": pages, "metadata": {}})
    return ParsedFile(root=root, notes=[f"PDF parse failed: {_describe(exc)}; kept plain page text"])


# --------------------------------------------------------------------------
# what one pass over the pages collects


@dataclass
class _Leaf:
    """A table or an image waiting for its section."""

    kind: str
    key: Key
    page: int
    draft: Draft


@dataclass
class _TableGrid:
    bbox: tuple[float, float, float, float]
    cells: list[list[tuple[float, float, float, float] | None]]
    header_names: list[str] | None  # set when the header sits outside the grid
    text: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    row_spans: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for row in self.cells:
            boxes = [c for c in row if c is not None]
            self.row_spans.append((min(c[1] for c in boxes), max(c[3] for c in boxes)) if boxes
                                  else (math.inf, -math.inf))


# --------------------------------------------------------------------------
# the builder


class _Builder(HeadingFinder):
    def __init__(self, pymupdf: Any, doc: Any, path: str, context_lines: int) -> None:
        self.fitz = pymupdf
        self.doc = doc
        self.path = path
        self.context_lines = context_lines
        self.notes: list[str] = []
        self.blobs: dict[str, bytes] = {}
        self.lines: list[_Line] = []
        self.page_first: list[int] = []  # first line index of each page (len = pages + 1)
        self.page_sizes: list[tuple[float, float]] = []
        self.leaves: list[_Leaf] = []
        self.images: dict[int, Draft] = {}  # xref -> image draft (dedupe across pages)
        self.textless: list[int] = []
        self.flags = (pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_PRESERVE_LIGATURES
                      | pymupdf.TEXT_MEDIABOX_CLIP)
        # PyMuPDF (>= 1.27, pyproject) can gate tables by an optional layout model;
        # plain ruled-line detection is faster and the same on every install.
        self.table_kwargs = {"use_layout": False}

    # ---- entry ----------------------------------------------------------

    def build(self) -> ParsedFile:
        doc = self.doc
        metadata = self._metadata()
        pages = doc.page_count
        if doc.needs_pass and not doc.authenticate(""):
            title = self._usable_title(metadata.get("title", "")) or _stem(self.path)
            return _bare(self.path, "encrypted PDF: no text extracted", title=title,
                         attrs={"pages": pages, "metadata": metadata, "page_end": pages})
        if getattr(doc, "is_repaired", False):
            self.notes.append("damaged PDF was repaired while opening; content may be incomplete")

        for pno in range(pages):
            self.page_first.append(len(self.lines))
            try:
                self._read_page(pno)
            except Exception as exc:  # noqa: BLE001 - one bad page must not lose the rest
                if len(self.page_sizes) == pno:
                    self.page_sizes.append((0.0, 0.0))
                self.notes.append(f"page {pno + 1} could not be read: {_describe(exc)}")
        self.page_first.append(len(self.lines))
        self._note_textless()
        self._mark_furniture()

        headings, structure = self._outline_headings()
        if headings is None:
            headings = self._font_headings()
            structure = "fonts" if headings else "none"
        for h in headings:
            for i in h.lines:
                self.lines[i].role = "heading"

        title = (self._usable_title(metadata.get("title", ""))
                 or (headings[0].title if headings else "") or _stem(self.path))
        root = Draft(kind="file", subkind="pdf", title=title, text="", page=1,
                     attrs={"pages": pages, "metadata": metadata, "page_end": pages,
                            "structure": structure})
        self._assemble(root, headings)
        return ParsedFile(root=root, notes=self.notes, blobs=self.blobs)

    def _metadata(self) -> dict[str, str]:
        try:
            raw = self.doc.metadata or {}
        except Exception:  # noqa: BLE001
            return {}
        return {str(k): _squash(v) for k, v in raw.items() if isinstance(v, str) and v.strip()}

    @staticmethod
    def _usable_title(title: str) -> str:
        """Metadata titles are often junk: a file name or "untitled"."""
        title = _squash(title or "")
        if not title or title.casefold() in ("untitled", "untitled document", "title"):
            return ""
        if _TITLE_FILE_NAME.search(title) or title.casefold().startswith("microsoft word - "):
            return ""
        return title

    # ---- reading pages --------------------------------------------------

    def _read_page(self, pno: int) -> None:
        page = self.doc.load_page(pno)
        rect = page.rect
        self.page_sizes.append((float(rect.width), float(rect.height)))
        grids = self._find_tables(page, pno)
        raw = page.get_text("rawdict", flags=self.flags)
        count = 0
        for block in raw.get("blocks", []):
            if block.get("type", 0) != 0:
                continue
            bno = int(block.get("number", 0))
            for line in block.get("lines", []):
                spans = line.get("spans", [])
                text = "".join(c.get("c", "") for s in spans for c in s.get("chars", []))
                if not text.strip():
                    continue
                count += 1
                bbox = tuple(float(v) for v in line.get("bbox", (0, 0, 0, 0)))
                grid = self._grid_of(grids, bbox)
                if grid is not None:
                    self._fill_cells(grid, spans)
                    continue
                size, bold = self._style(spans)
                self.lines.append(_Line(pno, bno, bbox, text.rstrip(), size, bold))
        if count == 0:
            self.textless.append(pno + 1)
        for grid in grids:
            self._add_table(grid, pno)
        self._read_images(page, pno)

    @staticmethod
    def _style(spans: list[dict[str, Any]]) -> tuple[float, bool]:
        """Dominant size by character count; bold when every inked span is."""
        sizes: Counter[float] = Counter()
        bold = True
        for s in spans:
            n = sum(1 for c in s.get("chars", []) if not c.get("c", " ").isspace())
            if not n:
                continue
            sizes[round(float(s.get("size", 0.0)), 1)] += n
            if not (int(s.get("flags", 0)) & 16 or _BOLD_FONT.search(str(s.get("font", "")))):
                bold = False
        if not sizes:
            return 0.0, False
        return max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0], bold

    # ---- tables ---------------------------------------------------------

    def _find_tables(self, page: Any, pno: int) -> list[_TableGrid]:
        try:
            found = page.find_tables(**self.table_kwargs)
            tables = list(getattr(found, "tables", found) or [])
        except Exception as exc:  # noqa: BLE001
            self.notes.append(f"table detection failed on page {pno + 1}: {_describe(exc)}")
            return []
        grids = []
        for tab in tables:
            try:
                cells = [list(row.cells) for row in tab.rows]
                if len(cells) < 2 or max((len(r) for r in cells), default=0) < 2:
                    continue  # a single row or column is a frame, not a table
                header_names = None
                try:
                    header = tab.header
                    if header is not None and header.external:
                        header_names = [_squash(str(n or "")) for n in header.names]
                except Exception:  # noqa: BLE001 - the first row is the header then
                    header_names = None
                grids.append(_TableGrid(tuple(float(v) for v in tab.bbox), cells, header_names))
            except Exception as exc:  # noqa: BLE001
                self.notes.append(f"a table on page {pno + 1} could not be read: {_describe(exc)}")
        return grids

    @staticmethod
    def _grid_of(grids: list[_TableGrid], bbox: tuple[float, ...]) -> _TableGrid | None:
        cx, cy = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
        for g in grids:
            x0, y0, x1, y1 = g.bbox
            if x0 <= cx <= x1 and y0 <= cy <= y1:
                return g
        return None

    @staticmethod
    def _fill_cells(grid: _TableGrid, spans: list[dict[str, Any]]) -> None:
        """Characters of one text line, dealt into the cells that hold their centres."""
        pieces: dict[tuple[int, int], list[str]] = {}
        for s in spans:
            for ch in s.get("chars", []):
                x0, y0, x1, y1 = ch.get("bbox", (0, 0, 0, 0))
                cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
                for r, row in enumerate(grid.cells):
                    low, high = grid.row_spans[r]
                    if not low <= cy <= high:
                        continue
                    hit = None
                    for c, cell in enumerate(row):
                        if cell is not None and cell[0] <= cx <= cell[2] and cell[1] <= cy <= cell[3]:
                            hit = c
                            break
                    if hit is not None:
                        pieces.setdefault((r, hit), []).append(ch.get("c", ""))
                        break
        for rc, chars in pieces.items():
            grid.text.setdefault(rc, []).append("".join(chars))

    def _add_table(self, grid: _TableGrid, pno: int) -> None:
        rows = [[_squash(" ".join(grid.text.get((r, c), []))) for c in range(len(row))]
                for r, row in enumerate(grid.cells)]
        if not any(cell for row in rows for cell in row):
            return
        if grid.header_names is not None:
            header, body = grid.header_names, rows
        else:
            header, body = rows[0], rows[1:]
        draft = Draft(
            kind="table",
            subkind="pdf",
            title="",  # from the line above it, once sections are known
            text=pipe_table(header, body),
            page=pno + 1,
            attrs={"header": header, "rows": len(body), "columns": max([len(header)] + [len(r) for r in body]),
                   "bbox": [round(v, 1) for v in grid.bbox]},
        )
        self.leaves.append(_Leaf("table", self._key_below(pno, grid.bbox[1]), pno, draft))

    # ---- images ---------------------------------------------------------

    def _read_images(self, page: Any, pno: int) -> None:
        try:
            entries = page.get_images(full=True)
        except Exception as exc:  # noqa: BLE001
            self.notes.append(f"images on page {pno + 1} could not be listed: {_describe(exc)}")
            return
        for entry in entries:
            xref, width, height = int(entry[0]), int(entry[2]), int(entry[3])
            if xref in self.images:
                pages = self.images[xref].attrs["pages"]
                if pno + 1 not in pages:
                    pages.append(pno + 1)
                continue
            if width < _MIN_IMAGE_SIDE or height < _MIN_IMAGE_SIDE:
                continue
            try:
                draft = self._image(page, pno, xref)
            except Exception as exc:  # noqa: BLE001
                self.notes.append(f"image {xref} on page {pno + 1} could not be extracted: {_describe(exc)}")
                continue
            if draft is not None:
                self.images[xref] = draft

    def _image(self, page: Any, pno: int, xref: int) -> Draft | None:
        info = self.doc.extract_image(xref)
        if not info or not info.get("image"):
            return None
        data, ext = info["image"], str(info.get("ext") or "bin").lower()
        width, height = int(info.get("width") or 0), int(info.get("height") or 0)
        if width < _MIN_IMAGE_SIDE or height < _MIN_IMAGE_SIDE:
            return None
        if ext not in _WEB_IMAGE_EXTS:  # jbig2, jpx, ...: re-encode so any viewer can show it
            try:
                pix = self.fitz.Pixmap(self.doc, xref)
                if pix.n - pix.alpha >= 4:
                    pix = self.fitz.Pixmap(self.fitz.csRGB, pix)
                data, ext = pix.tobytes("png"), "png"
            except Exception:  # noqa: BLE001 - keep the original encoding
                pass
        blob = hashlib.sha256(data).hexdigest()[:32]
        self.blobs[blob] = data
        try:
            rects = page.get_image_rects(xref)
        except Exception:  # noqa: BLE001
            rects = []
        bbox = tuple(float(v) for v in rects[0]) if rects else None
        caption = self._caption(pno, bbox) if bbox else ""
        label = caption or f"image on page {pno + 1}"
        attrs: dict[str, Any] = {"blob": blob, "ext": ext, "width": width, "height": height,
                                 "page": pno + 1, "pages": [pno + 1]}
        if caption:
            attrs["caption"] = caption
        if bbox:
            attrs["bbox"] = [round(v, 1) for v in bbox]
        draft = Draft(kind="image", subkind="pdf", title=label, text=label, page=pno + 1, attrs=attrs)
        key = self._key_below(pno, bbox[1]) if bbox else (pno, self.page_first[pno], -1)
        self.leaves.append(_Leaf("image", key, pno, draft))
        return draft

    def _caption(self, pno: int, bbox: tuple[float, ...]) -> str:
        """A "Figure …"/"Fig. …" line just below (preferred) or above the image."""
        x0, y0, x1, y1 = bbox
        best: tuple[float, int] | None = None
        for i in range(self.page_first[pno], len(self.lines)):
            ln = self.lines[i]
            lx0, ly0, lx1, ly1 = ln.bbox
            if lx0 >= x1 or lx1 <= x0 or not _CAPTION.match(ln.text.lstrip()):
                continue
            if ly0 >= y1 - 3 and ly0 - y1 <= _CAPTION_GAP:
                score = ly0 - y1
            elif ly1 <= y0 + 3 and y0 - ly1 <= _CAPTION_GAP:
                score = 1000 + y0 - ly1  # above only when nothing is below
            else:
                continue
            if best is None or score < best[0]:
                best = (score, i)
        if best is None:
            return ""
        first = self.lines[best[1]]
        parts = [first.text]
        for ln in self.lines[best[1] + 1:]:
            if ln.page != first.page or ln.block != first.block:
                break
            parts.append(ln.text)
        return _squash(" ".join(parts))[:_MAX_CAPTION]

    def _key_below(self, pno: int, top: float) -> Key:
        """Place a table/image right after the lowest text line above it."""
        best, best_y = None, -math.inf
        for i in range(self.page_first[pno], len(self.lines)):
            ln = self.lines[i]
            mid = (ln.bbox[1] + ln.bbox[3]) / 2
            if mid < top and ln.bbox[3] > best_y:
                best, best_y = i, ln.bbox[3]
        if best is None:
            return (pno, self.page_first[pno], -1)
        return (pno, best, 1)

    # ---- page-level clean-up -------------------------------------------

    def _note_textless(self) -> None:
        for n in self.textless[:_MAX_PAGE_NOTES]:
            self.notes.append(f"page {n} has no text layer")
        if len(self.textless) > _MAX_PAGE_NOTES:
            self.notes.append(f"{len(self.textless) - _MAX_PAGE_NOTES} more pages have no text layer")

    # ---- assembling drafts ---------------------------------------------

    def _assemble(self, root: Draft, headings: list[_Heading]) -> None:
        """Headings, prose lines and leaves in document order (their keys; a heading
        before anything at its own key) through the section builder."""
        sections = SectionBuilder(root, self.context_lines)
        sections.root.data = ("", [])  # (heading text, own lines as (text, page, block))
        spans: list[tuple[Section, int]] = []  # section, index of the heading that ends it
        events: list[tuple[Key, int, int]] = [(h.key, 0, k) for k, h in enumerate(headings)]
        events += [((ln.page, i, 0), 1, i) for i, ln in enumerate(self.lines) if ln.role == "prose"]
        events += [(leaf.key, 2, j) for j, leaf in enumerate(self.leaves)]
        for key, what, i in sorted(events, key=lambda e: (e[0], e[1] > 0)):
            if what == 0:
                h = headings[i]
                spans.extend((closed, i) for closed in sections.close(h.level))
                heading_text = (_squash(" ".join(self.lines[j].text for j in h.lines)) if h.lines
                                else h.title)
                draft = Draft(kind="section", subkind=f"h{h.level}", title=h.title, text="", page=h.page + 1)
                section, anchor = sections.open(draft, h.level, github_slug(h.title) or "section",
                                                github_slug(h.title) or "section")
                draft.attrs = {"anchor": anchor}
                section.data = (heading_text, [])
            elif what == 1:
                ln = self.lines[i]
                sections.prose(key, ln.text.strip())
                sections.current.data[1].append((ln.text, ln.page, ln.block))
            else:
                sections.leaf(self.leaves[i].draft, key)
        spans.extend((section, len(headings)) for section in sections.stack[1:])

        page_top = self._page_top_keys()
        for section, end in spans:
            section.draft.attrs["page_end"] = self._page_end(
                section, headings[end] if end < len(headings) else None, page_top)
        for section in sections.sections:
            section.draft.text = self._scope_text(section)
        if not root.text.strip():
            root.text = root.title
        sections.finish()

    def _page_top_keys(self) -> dict[int, Key]:
        top: dict[int, Key] = {}
        for i, ln in enumerate(self.lines):
            top.setdefault(ln.page, (ln.page, i, 0))
        for leaf in self.leaves:
            if leaf.page not in top or leaf.key < top[leaf.page]:
                top[leaf.page] = leaf.key
        return top

    def _page_end(self, scope: Section, end: _Heading | None, page_top: dict[int, Key]) -> int:
        start = scope.draft.page or 1
        if end is None:
            return max(start, len(self.page_sizes))
        last = end.page + 1
        if end.key <= page_top.get(end.page, end.key):
            last -= 1  # the next section opens its page: this one ended on the page before
        return max(start, last)

    @staticmethod
    def _scope_text(section: Section) -> str:
        """Heading line + own prose; one paragraph per PDF text block."""
        title_text, lines = section.data
        out: list[str] = [title_text] if section.level > 0 and title_text else []
        prev: tuple[int, int] | None = None
        for text, page, block in lines:
            if prev is not None and (page, block) != prev and out and out[-1] != "":
                out.append("")
            elif prev is None and out:
                out.append("")
            out.append(text.strip())
            prev = (page, block)
        return "\n".join(out).strip("\n")

