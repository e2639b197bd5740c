"""HTML inside Markdown: what an inline tag or an HTML block holds.

The stdlib parser scans each fragment (never a regular expression over a whole
block): images, links and their text, ``<a name/id>`` anchors and, for tables,
the header cells and body row count. Used by :mod:`stages.parse.markdown`.
"""

from __future__ import annotations

from html.parser import HTMLParser

from strata.stages.parse.common import squash as _squash


class HtmlScan(HTMLParser):
    """Collects what we index from an HTML fragment: <img>, <a href>, <a name/id>
    and, for tables, the header cells and body row count. Line numbers are
    0-based offsets inside the fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.images: list[tuple[int, dict[str, str]]] = []
        self.links: list[tuple[int, str, str]] = []
        self.anchors: list[str] = []
        self.headers: list[str] = []
        self.rows = 0
        self.has_text = False
        self._row_th: list[str] | None = None
        self._row_td = False
        self._cell: list[str] | None = None
        self._open_links: list[tuple[int, str, list[str]]] = []

    @classmethod
    def run(cls, fragment: str) -> HtmlScan:
        scan = cls()
        try:
            scan.feed(fragment)
            scan.close()
        except Exception:  # noqa: BLE001 - keep whatever was collected
            pass
        scan._flush_row()
        return scan

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        line = self.getpos()[0] - 1
        if tag == "img":
            self.images.append((line, a))
        elif tag == "a":
            for key in ("name", "id"):
                if a.get(key):
                    self.anchors.append(a[key])
            if a.get("href"):
                self._open_links.append((line, a["href"], []))
        elif tag == "tr":
            self._flush_row()
            self._row_th = []
        elif tag == "th":
            self._close_cell()
            self._cell = []
        elif tag == "td":
            self._close_cell()
            self._row_td = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open_links:
            line, href, text = self._open_links.pop()
            self.links.append((line, href, _squash("".join(text))))
        elif tag == "th":
            self._close_cell()
        elif tag in ("tr", "table", "thead"):
            self._flush_row()

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.has_text = True
        if self._cell is not None:
            self._cell.append(data)
        for _, _, text in self._open_links:
            text.append(data)

    def close(self) -> None:
        super().close()
        for line, href, text in self._open_links:  # unclosed <a href>
            self.links.append((line, href, _squash("".join(text))))
        self._open_links = []

    def _close_cell(self) -> None:
        if self._cell is not None:
            if self._row_th is None:
                self._row_th = []
            self._row_th.append(_squash("".join(self._cell)))
            self._cell = None

    def _flush_row(self) -> None:
        self._close_cell()
        if self._row_th and not self.headers:
            self.headers = self._row_th
        if self._row_td:
            self.rows += 1
        self._row_th, self._row_td = None, False
