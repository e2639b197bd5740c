"""Small PNG pictures for the Dagster UI's materialization metadata.

A depth histogram or a row of near-duplicate thumbnails reads at a glance where
a table of numbers does not. The UI renders Markdown metadata, and Markdown can
carry an image inline as a data URI, so a picture travels with the
materialization event itself (no file server, nothing to clean up). Pictures
stay small (a few KB to a few tens of KB): event logs keep them forever.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import dagster as dg

MAX_BYTES = 200_000  # a picture larger than this is left out of the event


def md_image(png: bytes | None, alt: str) -> dg.MetadataValue:
    if not png:
        return dg.MetadataValue.md(f"_{alt}: nothing to draw_")
    if len(png) > MAX_BYTES:
        return dg.MetadataValue.md(f"_{alt}: picture left out ({len(png) // 1024} KB)_")
    return dg.MetadataValue.md(f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})")


def bar_chart(counts: dict, title: str, xlabel: str, ylabel: str = "count",
              log: bool = False) -> bytes | None:
    """A bar chart of ``counts`` (label → number), in the given key order.

    Drawn once per distinct chart and kept in the cache folder (``STRATA_CACHE_DIR``,
    ``charts/``): a rebuild whose counts did not move reuses the picture instead of
    loading matplotlib and drawing it again, which was a tenth of an unchanged build."""
    if not counts:
        return None
    import hashlib
    import json

    from strata.core.storage.layout import write_bytes_atomic
    from strata.core.storage.mirror import cache_root

    key = hashlib.sha256(json.dumps([list(map(str, counts)), [float(v) for v in counts.values()],
                                     title, xlabel, ylabel, log, CHART_VERSION]).encode())
    cached = cache_root() / "charts" / f"{key.hexdigest()[:32]}.png"
    try:
        return cached.read_bytes()
    except OSError:
        pass
    png = _draw_bar_chart(counts, title, xlabel, ylabel, log)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(cached, png)
    except OSError:
        pass  # a read-only cache only costs the drawing next time
    return png


CHART_VERSION = 1  # bump when the drawing below changes: cached pictures are keyed by it


def _draw_bar_chart(counts: dict, title: str, xlabel: str, ylabel: str, log: bool) -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    labels = [str(k) for k in counts]
    values = [float(v) for v in counts.values()]
    fig, ax = plt.subplots(figsize=(max(3.2, 0.45 * len(labels) + 1.6), 2.4), dpi=100)
    try:
        bars = ax.bar(labels, values, color="#4c78a8")
        ax.bar_label(bars, labels=[f"{int(v):,}" for v in values], fontsize=7, padding=1)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        if log:
            ax.set_yscale("log")
        ax.tick_params(labelsize=7)
        ax.spines[["top", "right"]].set_visible(False)
        ax.margins(y=0.18)  # room for the value labels under the title
        plt.setp(ax.get_xticklabels(), rotation=30 if len(labels) > 6 else 0, ha="right"
                 if len(labels) > 6 else "center")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)


def contact_sheet(groups: list[list[tuple[Path, bool]]], thumb: int = 72,
                  max_groups: int = 8, max_per_group: int = 6) -> bytes | None:
    """One row per duplicate group: its images as thumbnails, the representative
    (kept) framed in green, the merged ones in grey."""
    from PIL import Image, ImageDraw

    rows = [g[:max_per_group] for g in groups[:max_groups] if g]
    if not rows:
        return None
    pad = 6
    width = pad + max(len(r) for r in rows) * (thumb + pad)
    sheet = Image.new("RGB", (width, pad + len(rows) * (thumb + pad)), "white")
    draw = ImageDraw.Draw(sheet)
    for y, row in enumerate(rows):
        for x, (path, representative) in enumerate(row):
            left, top = pad + x * (thumb + pad), pad + y * (thumb + pad)
            try:
                with Image.open(path) as im:
                    im.thumbnail((thumb - 4, thumb - 4))
                    tile = im.convert("RGB")
            except Exception:  # noqa: BLE001 - an unreadable file is drawn as an empty tile
                tile = None
            if tile is not None:
                sheet.paste(tile, (left + (thumb - tile.width) // 2, top + (thumb - tile.height) // 2))
            draw.rectangle([left, top, left + thumb - 1, top + thumb - 1],
                           outline="#2e8b57" if representative else "#b0b0b0",
                           width=3 if representative else 1)
    buf = io.BytesIO()
    sheet.save(buf, format="PNG", optimize=True)
    return buf.getvalue()
