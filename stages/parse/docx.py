"""DOCX → :class:`ParsedFile`: sections by heading style, plus table and image leaves.

python-docx is an optional dependency (the ``docx`` extra); without it a
``.docx`` becomes a bare file draft with a note saying how to install it.

The body is walked once, in document order, over its block elements
(``w:p`` and ``w:tbl``, looking inside content controls ``w:sdt``). A DOCX
has no source lines, so the 1-based index of each body block (paragraph or
table) serves as its "line": ``start_line``/``end_line`` of a section span
its heading up to the block before the next heading of the same or a higher
level, as in Markdown.

Heading levels: the ``Title`` style is level 0 (the document title: it holds
every other section, like a Markdown ``# Title``, with subkind ``title``);
``Heading 1``..``Heading 9`` are levels 1..9 (subkind ``h1``..``h9``); any
other style whose paragraph or style chain sets an outline level
(``w:outlineLvl`` 0..8) counts as that heading level.

Paragraph text is read from the XML (``w:t``, tabs, breaks), so hyperlinks,
tracked insertions, fields and content controls keep their words, deleted
text stays out, and ``mc:Fallback`` copies are skipped. Inline pictures
(``w:drawing`` → ``a:blip`` ``r:embed``; legacy VML ``v:imagedata``) become
image drafts whose bytes go to ``ParsedFile.blobs``; alt text is the
``wp:docPr`` ``descr`` (else its ``title``).
"""

from __future__ import annotations

import hashlib
import io
import re
from typing import Any
from collections.abc import Iterator

from strata.stages.parse.common import file_stem as _stem, squash as _squash, pipe_table
from strata.stages.parse.model import Draft, ParsedFile
from strata.stages.parse.sections import Section, SectionBuilder, github_slug

__all__ = ["parse_docx"]

MISSING_NOTE = "python-docx is not installed; install strata[docx] to parse .docx"

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_WP = "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
_V = "urn:schemas-microsoft-com:vml"
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"


def _q(ns: str, tag: str) -> str:
    return f"{{{ns}}}{tag}"


W_P, W_TBL, W_TR, W_TC, W_SDT, W_SDT_CONTENT = (_q(_W, t) for t in ("p", "tbl", "tr", "tc", "sdt", "sdtContent"))
W_CUSTOM_XML, W_T, W_TAB, W_BR, W_CR = (_q(_W, t) for t in ("customXml", "t", "tab", "br", "cr"))
W_NB_HYPHEN, W_DRAWING, W_PICT, W_OBJECT = (_q(_W, t) for t in ("noBreakHyphen", "drawing", "pict", "object"))
W_PPR, W_NUMPR, W_OUTLINE, W_VAL, W_TCPR, W_GRIDSPAN = (
    _q(_W, t) for t in ("pPr", "numPr", "outlineLvl", "val", "tcPr", "gridSpan"))
W_DEL, W_MOVE_FROM = _q(_W, "del"), _q(_W, "moveFrom")
A_BLIP, WP_DOCPR, V_IMAGEDATA = _q(_A, "blip"), _q(_WP, "docPr"), _q(_V, "imagedata")
R_EMBED, R_LINK, R_ID = _q(_R, "embed"), _q(_R, "link"), _q(_R, "id")
MC_FALLBACK = _q(_MC, "Fallback")

_HEADING_STYLE = re.compile(r"heading\s*([1-9])", re.IGNORECASE)
_CAPTION = re.compile(r"(?:figure|fig\.)\s*\S", re.IGNORECASE)
_MAX_STYLE_DEPTH = 10


# --------------------------------------------------------------------------
# public entry point


def parse_docx(data: bytes, path: str, *, context_lines: int = 5) -> ParsedFile:
    """Parse one Word document into a draft tree; never raises."""
    path = str(path or "")
    try:
        import docx
    except ImportError:
        return _bare(path, MISSING_NOTE)
    except Exception as exc:  # noqa: BLE001 - a broken install must not crash the build
        return _bare(path, f"python-docx could not be imported: {_describe(exc)}")
    from strata.stages.parse.bounds import zip_problem

    too_big = zip_problem(bytes(data or b""))
    if too_big:  # never inflated: python-docx would read every part whole
        return _bare(path, too_big)
    try:
        document = docx.Document(io.BytesIO(bytes(data or b"")))
    except Exception as exc:  # noqa: BLE001 - bad zip, missing parts, wrong content type
        return _bare(path, f"unreadable DOCX: {_describe(exc)}")
    try:
        return _Builder(document, path, max(0, int(context_lines))).build()
    except Exception as exc:  # noqa: BLE001 - the contract is "never raise"
        return _fallback(document, path, exc)


def _describe(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def _bare(path: str, note: str) -> ParsedFile:
    title = _stem(path)
    root = Draft(kind="file", subkind="docx", title=title, text=title, start_line=1, end_line=1,
                 attrs={"paragraphs": 0, "metadata": {}})
    return ParsedFile(root=root, notes=[note], unreadable=note)


def _fallback(document: Any, path: str, exc: BaseException) -> ParsedFile:
    """Structured parse failed: keep the plain paragraph text."""
    parts: list[str] = []
    try:
        for el in document.element.body.iter(W_P):
            text = _squash(_text(el))
            if text:
                parts.append(text)
    except Exception:  # noqa: BLE001
        pass
    title = _stem(path)
    root = Draft(kind="file", subkind="docx", title=title, text="\n\n".join(parts) or title,
                 start_line=1, end_line=max(1, len(parts)), attrs={"paragraphs": len(parts), "metadata": {}})
    return ParsedFile(root=root, notes=[f"DOCX parse failed: {_describe(exc)}; kept plain paragraph text"])


# --------------------------------------------------------------------------
# XML helpers (explicit stacks: documents can nest tables and controls deeply)


def _blocks(container: Any) -> Iterator[Any]:
    """Body-level ``w:p``/``w:tbl`` in document order, looking through
    content controls and custom XML wrappers."""
    stack = [iter(container.iterchildren())]
    while stack:
        for el in stack[-1]:
            tag = el.tag
            if tag in (W_P, W_TBL):
                yield el
            elif tag == W_SDT:
                content = el.find(W_SDT_CONTENT)
                if content is not None:
                    stack.append(iter(content.iterchildren()))
                    break
            elif tag == W_CUSTOM_XML:
                stack.append(iter(el.iterchildren()))
                break
        else:
            stack.pop()


def _walk(el: Any) -> Iterator[Any]:
    """Descendants in document order, minus ``mc:Fallback`` copies and deleted runs."""
    stack = [el]
    while stack:
        node = stack.pop()
        yield node
        children = [c for c in node.iterchildren()
                    if isinstance(c.tag, str) and c.tag not in (MC_FALLBACK, W_DEL, W_MOVE_FROM)]
        stack.extend(reversed(children))


def _text(el: Any) -> str:
    """Visible text of a paragraph (or cell): ``w:t``, tabs and breaks;
    nested paragraphs (cells, text boxes) are separated by newlines."""
    out: list[str] = []
    for node in _walk(el):
        tag = node.tag
        if tag == W_T:
            out.append(node.text or "")
        elif tag == W_TAB:
            out.append("\t")
        elif tag in (W_BR, W_CR):
            out.append("\n")
        elif tag == W_NB_HYPHEN:
            out.append("-")
        elif tag == W_P and node is not el and out and out[-1] != "\n":
            out.append("\n")
    return "".join(out)


def _pictures(el: Any) -> list[tuple[str | None, str | None, dict[str, str]]]:
    """``(embed rId, link rId, docPr attributes)`` for each picture under ``el``."""
    found = []
    for node in _walk(el):
        if node.tag == W_DRAWING:
            doc_pr = next(node.iter(WP_DOCPR), None)
            props = dict(doc_pr.attrib.items() if doc_pr is not None else [])
            blips = list(node.iter(A_BLIP)) or [None]
            for blip in blips:
                embed = blip.get(R_EMBED) if blip is not None else None
                link = blip.get(R_LINK) if blip is not None else None
                if embed or link:
                    found.append((embed, link, props))
        elif node.tag in (W_PICT, W_OBJECT):
            for data in node.iter(V_IMAGEDATA):
                rid = data.get(R_ID)
                if rid:
                    found.append((rid, None, {"descr": data.get(_q(_V, "title")) or data.get("alt") or ""}))
    return found


# --------------------------------------------------------------------------
# the builder


class _Builder:
    def __init__(self, document: Any, path: str, context_lines: int) -> None:
        self.document = document
        self.path = path
        self.context_lines = context_lines
        self.notes: list[str] = []
        self.blobs: dict[str, bytes] = {}
        self.images: list[tuple[Draft, int, Section]] = []
        self.paragraphs: dict[int, tuple[str, str]] = {}  # block index -> (text, style name)
        self.style_levels: dict[str, int | None] = {}

    def build(self) -> ParsedFile:
        metadata = self._metadata()
        root = Draft(kind="file", subkind="docx", title="", text="", start_line=1,
                     attrs={"metadata": metadata})
        # A paragraph's block index is its prose key; a leaf's is its index + 0.5, so
        # prose in an image's own paragraph counts as before it.
        sections = SectionBuilder(root, self.context_lines, root_level=-1)
        sections.root.data = (0, [])  # (heading block index, own paragraph texts)
        self.sections = sections
        first_title = first_heading = ""
        n = 0
        for n, el in enumerate(_blocks(self.document.element.body), 1):
            if el.tag == W_TBL:
                self._table(el, n)
                self._images(el, n)
                continue
            text = _text(el).strip()
            style = self._style_name(el)
            self.paragraphs[n] = (_squash(text), style)
            level = self._level(el, style) if text else None
            if level is None:
                if text:
                    prefix = "- " if self._is_list(el, style) else ""
                    sections.prose(n, _squash(prefix + text))
                    sections.current.data[1].append(prefix + text)
                self._images(el, n)
                continue
            title = _squash(text)
            if level == 0 and not first_title:
                first_title = title
            elif level > 0 and not first_heading:
                first_heading = title
            for closed in sections.close(level):
                closed.draft.end_line = max(closed.data[0], n - 1)
            draft = Draft(kind="section", subkind="title" if level == 0 else f"h{level}", title=title,
                          text="", start_line=n, end_line=n)
            section, anchor = sections.open(draft, level, github_slug(title) or "section",
                                            github_slug(title) or "section")
            draft.attrs = {"anchor": anchor, "style": style}
            section.data = (n, [])
            self._images(el, n)
        total = max(1, n)
        for closed in sections.stack[1:]:
            closed.draft.end_line = max(closed.data[0], total)
        root.end_line = total
        root.title = (_squash(metadata.get("title", "")) or first_title or first_heading
                      or _stem(self.path))
        root.attrs["paragraphs"] = len(self.paragraphs)
        for section in sections.sections:
            parts = [section.draft.title] if section.level >= 0 else []
            section.draft.text = "\n\n".join(parts + section.data[1])
        if not root.text.strip():
            root.text = root.title
        sections.finish()
        for draft, n, section in self.images:
            caption = self._caption(n)
            if caption:
                draft.attrs["caption"] = caption
            draft.title = draft.text = draft.attrs.get("alt") or caption or f"image in {section.draft.title}"
        return ParsedFile(root=root, notes=self.notes, blobs=self.blobs)

    # ---- document-level ------------------------------------------------

    def _metadata(self) -> dict[str, str]:
        out: dict[str, str] = {}
        try:
            props = self.document.core_properties
        except Exception:  # noqa: BLE001
            return out
        for name in ("title", "subject", "author", "keywords", "category", "comments",
                     "last_modified_by", "created", "modified", "revision", "language", "identifier",
                     "content_status", "version"):
            try:
                value = getattr(props, name)
            except Exception:  # noqa: BLE001 - malformed dates and the like
                continue
            if value is None or value == "":
                continue
            text = value.isoformat() if hasattr(value, "isoformat") else str(value)
            if text.strip():
                out[name] = _squash(text)
        return out

    # ---- styles --------------------------------------------------------

    def _style_name(self, p: Any) -> str:
        try:
            from docx.text.paragraph import Paragraph

            style = Paragraph(p, self.document).style
            return str(style.name or "") if style is not None else ""
        except Exception:  # noqa: BLE001 - a broken styles part: treat as Normal
            return ""

    def _level(self, p: Any, style: str) -> int | None:
        """Heading level of a paragraph, or None for body text."""
        name = style.strip()
        if name.casefold() == "title":
            return 0
        m = _HEADING_STYLE.fullmatch(name)
        if m:
            return int(m.group(1))
        own = _outline_level(p.find(W_PPR))
        if own is not None:
            return own
        return self._style_outline(p)

    def _style_outline(self, p: Any) -> int | None:
        """Outline level set on the paragraph's style or one it is based on."""
        ppr = p.find(W_PPR)
        style_id = None
        if ppr is not None:
            ps = ppr.find(_q(_W, "pStyle"))
            style_id = ps.get(W_VAL) if ps is not None else None
        if not style_id:
            return None
        if style_id in self.style_levels:
            return self.style_levels[style_id]
        level = None
        try:
            styles = self.document.styles.element
            current, seen = style_id, set()
            for _ in range(_MAX_STYLE_DEPTH):
                if not current or current in seen:
                    break
                seen.add(current)
                el = next((s for s in styles.iterchildren(_q(_W, "style"))
                           if s.get(_q(_W, "styleId")) == current), None)
                if el is None:
                    break
                level = _outline_level(el.find(W_PPR))
                if level is not None:
                    break
                based = el.find(_q(_W, "basedOn"))
                current = based.get(W_VAL) if based is not None else None
        except Exception:  # noqa: BLE001
            level = None
        self.style_levels[style_id] = level
        return level

    @staticmethod
    def _is_list(p: Any, style: str) -> bool:
        ppr = p.find(W_PPR)
        return (ppr is not None and ppr.find(W_NUMPR) is not None) or style.casefold().startswith("list")

    # ---- tables --------------------------------------------------------

    def _table(self, tbl: Any, n: int) -> None:
        rows: list[list[str]] = []
        for tr in tbl.iter(W_TR):
            if _nearest_table(tr) is not tbl:
                continue  # a row of a nested table: its text is in the outer cell
            cells: list[str] = []
            for tc in tr.iterchildren(W_TC):
                cells.append(_squash(_text(tc)))
                span = _grid_span(tc)
                cells.extend([""] * (span - 1))
            rows.append(cells)
        if not any(c for r in rows for c in r):
            return
        header, body = rows[0], rows[1:]
        draft = Draft(
            kind="table",
            subkind="docx",
            title="",
            text=pipe_table(header, body),
            start_line=n,
            end_line=n,
            attrs={"header": header, "rows": len(body),
                   "columns": max([len(header)] + [len(r) for r in body])},
        )
        self.sections.leaf(draft, n + 0.5)

    # ---- images --------------------------------------------------------

    def _images(self, el: Any, n: int) -> None:
        for embed, link, props in _pictures(el):
            if not embed:
                self.notes.append(f"picture in paragraph {n} is linked, not embedded ({link}); skipped")
                continue
            try:
                part = self.document.part.related_parts[embed]
                data = part.blob
            except Exception:  # noqa: BLE001 - dangling relationship
                self.notes.append(f"picture {embed} in paragraph {n} is missing from the package")
                continue
            if not data:
                continue
            blob = hashlib.sha256(data).hexdigest()[:32]
            self.blobs[blob] = data
            alt = _squash(props.get("descr", "") or "")
            img_title = _squash(props.get("title", "") or "")
            attrs: dict[str, Any] = {"blob": blob, "ext": _ext(part), "alt": alt or img_title}
            size = _pixel_size(data)
            if size:
                attrs["width"], attrs["height"] = size
            if img_title:
                attrs["image_title"] = img_title
            if props.get("name"):
                attrs["name"] = _squash(props["name"])
            draft = Draft(kind="image", subkind="docx", title="", text="", start_line=n, end_line=n,
                          attrs=attrs)
            self.images.append((self.sections.leaf(draft, n + 0.5), n, self.sections.current))

    # ---- captions ----------------------------------------------------

    def _caption(self, n: int) -> str:
        """A "Figure …" line or Caption-styled paragraph right after (else before) the picture."""
        for j in (n + 1, n - 1, n):
            text, style = self.paragraphs.get(j, ("", ""))
            if text and (style.casefold() == "caption" or _CAPTION.match(text)):
                return text
        return ""


def _outline_level(ppr: Any) -> int | None:
    if ppr is None:
        return None
    el = ppr.find(W_OUTLINE)
    if el is None:
        return None
    try:
        val = int(el.get(W_VAL, ""))
    except ValueError:
        return None
    return val + 1 if 0 <= val <= 8 else None  # 9 means "body text"


def _nearest_table(el: Any) -> Any:
    parent = el.getparent()
    while parent is not None and parent.tag != W_TBL:
        parent = parent.getparent()
    return parent


def _grid_span(tc: Any) -> int:
    tcpr = tc.find(W_TCPR)
    span = tcpr.find(W_GRIDSPAN) if tcpr is not None else None
    try:
        return max(1, min(64, int(span.get(W_VAL)))) if span is not None else 1
    except (TypeError, ValueError):
        return 1


def _ext(part: Any) -> str:
    try:
        ext = str(part.partname.ext).lower()
        if ext:
            return "jpeg" if ext == "jpg" else ext
    except Exception:  # noqa: BLE001
        pass
    ctype = str(getattr(part, "content_type", "") or "")
    return ctype.rsplit("/", 1)[-1].lower() if "/" in ctype else "bin"


def _pixel_size(data: bytes) -> tuple[int, int] | None:
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            return int(im.width), int(im.height)
    except Exception:  # noqa: BLE001 - emf/wmf or no Pillow
        pass
    try:
        from docx.image.image import Image as DocxImage

        im = DocxImage.from_blob(data)
        return int(im.px_width), int(im.px_height)
    except Exception:  # noqa: BLE001
        return None
