"""Generate every binary file of the Strata sample corpus (data/sample/).

Run from anywhere:

    python data/make_sample_files.py

The output is deterministic (fixed seeds, no timestamps in the PNGs, a fixed
creation date and document id in the PDF, fixed core properties and zip
entry times in the DOCX), so running it again rewrites byte-identical files
and reports them as "unchanged". It writes:

* docs/images/tide-chart.png          - three days of water level, area chart
* docs/images/tide-chart-large.png    - near-duplicate of tide-chart.png:
                                        1.5x scaled plus a small watermark dot
                                        (same dHash neighbourhood, different bytes)
* docs/images/architecture.png        - box diagram of the processing pipeline
* docs/images/sensor-photo.png        - photo-like picture of a gauge on a piling
* docs/images/drift-residuals.png     - scatter of residuals before/after the
                                        barometric correction
* docs/field-manual.pdf               - 4-page field deployment manual (PyMuPDF):
                                        an outline (bookmarks), a ruled table of
                                        maintenance intervals on page 3, the
                                        sensor photo (a 128-colour copy, to stay
                                        small) with a "Figure 1" caption below
                                        it, and a running "page N of 4" footer
* docs/site-survey.docx               - site survey checklist (python-docx):
                                        Title, Heading 1/2 sections, a table and
                                        an inline picture (architecture.png) with
                                        alt text
* notes/corrupted.md                  - binary bytes behind a text extension

docs/images/missing-diagram.png is referenced by docs/processing.md but is
deliberately NOT generated (a dangling image reference).

The DOCX needs python-docx (``pip install python-docx``, the ``docx`` extra);
without it the DOCX is left as it is and a line says so.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "sample"
DOCS = SAMPLE / "docs"
IMAGES = DOCS / "images"
NOTES = SAMPLE / "notes"

FONT = ImageFont.load_default()

SEA = (28, 92, 140)
SEA_LIGHT = (150, 196, 226)
INK = (30, 30, 30)
GRID = (218, 222, 228)
PAPER = (250, 250, 247)


def tide_levels(n: int) -> np.ndarray:
    """Semi-diurnal tide with a diurnal inequality, three days long, in metres."""
    hours = np.linspace(0.0, 72.0, n)
    m2 = 1.45 * np.cos(2 * np.pi * hours / 12.42)
    k1 = 0.35 * np.cos(2 * np.pi * hours / 23.93 + 0.8)
    s2 = 0.30 * np.cos(2 * np.pi * hours / 12.00 + 1.9)
    return m2 + k1 + s2


def draw_tide_chart(width: int = 640, height: int = 320) -> Image.Image:
    img = Image.new("RGB", (width, height), PAPER)
    d = ImageDraw.Draw(img)
    left, right, top, bottom = 56, width - 16, 34, height - 36
    lo, hi = -2.5, 2.5

    def y_of(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * (bottom - top)

    # grid: one line per metre, one per 12 hours
    for v in range(-2, 3):
        y = y_of(v)
        d.line([(left, y), (right, y)], fill=GRID)
        d.text((left - 30, y - 6), f"{v:+d} m", fill=INK, font=FONT)
    for h in range(0, 73, 12):
        x = left + h / 72 * (right - left)
        d.line([(x, top), (x, bottom)], fill=GRID)
        d.text((x - 8, bottom + 6), f"{h}h", fill=INK, font=FONT)

    n = right - left + 1
    levels = tide_levels(n)
    pts = [(left + i, y_of(v)) for i, v in enumerate(levels)]
    d.polygon([(left, bottom)] + pts + [(right, bottom)], fill=SEA_LIGHT)
    d.line(pts, fill=SEA, width=3)
    # mean lower low water reference line
    y_mllw = y_of(levels.min())
    d.line([(left, y_mllw), (right, y_mllw)], fill=(200, 60, 50), width=1)
    d.text((right - 40, y_mllw - 14), "MLLW", fill=(200, 60, 50), font=FONT)

    d.rectangle([left, top, right, bottom], outline=INK)
    d.text((left, 10), "Station 8443970 - water level, 1-3 March 2024", fill=INK, font=FONT)
    return img


def near_duplicate(img: Image.Image) -> Image.Image:
    """1.5x upscale with a tiny watermark dot: perceptually the same picture."""
    w, h = img.size
    big = img.resize((w * 3 // 2, h * 3 // 2), Image.Resampling.LANCZOS)
    d = ImageDraw.Draw(big)
    x, y = big.width - 22, big.height - 22
    d.ellipse([x, y, x + 8, y + 8], fill=(220, 40, 40))
    # an adaptive 64-colour palette keeps the file small; the picture is unchanged to the eye
    return big.quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)


def draw_architecture(width: int = 720, height: int = 300) -> Image.Image:
    img = Image.new("RGB", (width, height), (236, 242, 248))
    d = ImageDraw.Draw(img)
    stages = [
        ("read_csv", "tidewater.io"),
        ("despike", "smoothing"),
        ("fill_gaps", "smoothing"),
        ("smooth", "smoothing"),
        ("Calibrator", "calibration"),
        ("export_parquet", "tidewater.io"),
    ]
    colours = [(247, 201, 72), (120, 190, 140), (120, 190, 140), (120, 190, 140),
               (230, 130, 110), (110, 150, 220)]
    box_w, box_h, gap = 100, 64, 16
    y0 = 60
    for i, ((name, module), colour) in enumerate(zip(stages, colours)):
        x0 = 16 + i * (box_w + gap)
        d.rounded_rectangle([x0, y0, x0 + box_w, y0 + box_h], radius=10, fill=colour, outline=INK, width=2)
        d.text((x0 + 8, y0 + 16), name, fill=INK, font=FONT)
        d.text((x0 + 8, y0 + 36), module, fill=(60, 60, 60), font=FONT)
        if i < len(stages) - 1:
            ax = x0 + box_w
            ay = y0 + box_h // 2
            d.line([(ax + 1, ay), (ax + gap - 2, ay)], fill=INK, width=2)
            d.polygon([(ax + gap - 2, ay), (ax + gap - 8, ay - 5), (ax + gap - 8, ay + 5)], fill=INK)
    # barometer feeding into the calibration stage
    bx = 16 + 4 * (box_w + gap)
    d.rounded_rectangle([bx, 200, bx + box_w, 264], radius=10, fill=(200, 200, 210), outline=INK, width=2)
    d.text((bx + 8, 216), "barometer", fill=INK, font=FONT)
    d.text((bx + 8, 236), "air pressure", fill=(60, 60, 60), font=FONT)
    d.line([(bx + box_w // 2, 200), (bx + box_w // 2, y0 + box_h + 2)], fill=INK, width=2)
    d.text((16, 20), "Tidewater processing pipeline", fill=INK, font=FONT)
    return img


def draw_sensor_photo(width: int = 256, height: int = 192, seed: int = 7) -> Image.Image:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    horizon = height * 0.45
    sky = np.stack([170 + 50 * yy / horizon, 200 + 30 * yy / horizon, 235 + 0 * yy], axis=-1)
    depth = np.clip((yy - horizon) / (height - horizon), 0, 1)
    sea = np.stack([40 - 25 * depth, 110 - 50 * depth, 150 - 40 * depth], axis=-1)
    ripple = 8 * np.sin(xx / 6.0 + 3 * np.sin(yy / 11.0))[..., None]
    arr = np.where((yy < horizon)[..., None], sky, sea + ripple)
    # a weathered wooden piling
    cx, half_w = width * 0.66, width * 0.066
    pile = np.abs(xx - cx) < half_w
    shade = 0.65 + 0.35 * np.cos((xx - cx) / half_w * np.pi / 2)
    wood = np.stack([120 * shade, 92 * shade, 64 * shade], axis=-1)
    arr = np.where(pile[..., None], wood, arr)
    # the grey pressure-transducer housing strapped to it, half submerged
    hx0, hx1 = cx - half_w - width * 0.065, cx - half_w + width * 0.03
    housing = (xx > hx0) & (xx < hx1) & (yy > height * 0.37) & (yy < height * 0.79)
    hc, hr = (hx0 + hx1) / 2, (hx1 - hx0) / 2
    metal = np.stack([150 + 40 * np.cos((xx - hc) / hr)] * 3, axis=-1)
    arr = np.where(housing[..., None], metal, arr)
    arr = arr + rng.normal(0, 1.0, arr.shape)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")


def draw_drift_residuals(width: int = 480, height: int = 280, seed: int = 11) -> Image.Image:
    rng = np.random.default_rng(seed)
    # background fades from white (day 0) to pale grey (day 30)
    fade = np.linspace(255, 214, width, dtype=np.float32)[None, :, None]
    img = Image.fromarray(np.broadcast_to(fade, (height, width, 3)).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(img)
    left, right, top, bottom = 48, width - 12, 28, height - 28
    mid = (top + bottom) / 2
    d.line([(left, mid), (right, mid)], fill=(160, 160, 160))
    d.rectangle([left, top, right, bottom], outline=INK)
    days = np.linspace(0, 30, 240)
    weather = 0.09 * np.sin(2 * np.pi * days / 6.5) + 0.05 * np.sin(2 * np.pi * days / 2.3 + 1)
    before = weather + rng.normal(0, 0.012, days.size)
    after = rng.normal(0, 0.012, days.size)
    scale = (bottom - top) / 2 / 0.2
    for t, a, b in zip(days, before, after):
        x = left + t / 30 * (right - left)
        yb, ya = mid - a * scale, mid - b * scale
        d.ellipse([x - 2, yb - 2, x + 2, yb + 2], fill=(220, 110, 40))
        d.ellipse([x - 2, ya - 2, x + 2, ya + 2], fill=(40, 110, 200))
    d.text((left, 8), "Residual vs staff readings (m): before (orange) / after (blue)", fill=INK, font=FONT)
    d.text((left - 40, top), "+0.2", fill=INK, font=FONT)
    d.text((left - 40, bottom - 10), "-0.2", fill=INK, font=FONT)
    d.text((right - 40, bottom + 8), "day 30", fill=INK, font=FONT)
    return img


def corrupted_bytes(seed: int = 1234, size: int = 2048) -> bytes:
    """A PNG signature, an IHDR-like chunk, then random bytes salted with NULs.

    Not valid UTF-8 and full of control bytes, so any text reader must give up.
    """
    rng = np.random.default_rng(seed)
    body = rng.integers(0, 256, size, dtype=np.uint8)
    body[::7] = 0  # plenty of NUL bytes
    header = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00\x00\x00\x00\xc0\x08\x02"
    return header + body.tobytes()


def png_bytes(img: Image.Image) -> bytes:
    import io

    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    status = "unchanged" if path.exists() and path.read_bytes() == data else "wrote"
    if status == "wrote":
        path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()[:12]
    print(f"{status:9s} {path.relative_to(HERE.parent)}  {len(data):7d} bytes  sha256:{digest}")


# --------------------------------------------------------------------------
# field-manual.pdf (PyMuPDF)

PDF_TITLE = "Tidewater Field Manual"
PDF_DATE = "D:20240301090000Z"  # fixed, so the bytes do not change run to run
A4 = (595, 842)
MARGIN = 72

MANUAL_TOC = [
    [1, "Deployment", 1],
    [2, "Mounting the gauge", 1],
    [2, "Surveying the datum", 2],
    [1, "Maintenance", 3],
    [2, "Maintenance intervals", 3],
    [2, "Replacing the batteries", 4],
    [1, "Troubleshooting", 4],
]

MAINTENANCE_TABLE = [
    ["Task", "Interval", "Notes"],
    ["Clean the intake screen", "Monthly", "Scrub off barnacles"],
    ["Download the logger", "Monthly", "Keep the raw CSV"],
    ["Check against the staff", "Every visit", "Three readings"],
    ["Replace the batteries", "Every 12 months", "Lithium 3.6 V pack"],
    ["Re-survey the datum", "Every 5 years", "From two benchmarks"],
]


class _Writer:
    """A tiny top-to-bottom layout engine: wraps words with Helvetica metrics
    and starts a new page when the cursor reaches the bottom margin."""

    def __init__(self, doc) -> None:
        self.doc = doc
        self.page = None
        self.y = 0.0
        self.new_page()

    def new_page(self) -> None:
        self.page = self.doc.new_page(width=A4[0], height=A4[1])
        self.y = MARGIN

    def text(self, text: str, size: float = 11, bold: bool = False, gap: float = 6) -> None:
        import pymupdf

        font = "hebo" if bold else "helv"
        width = A4[0] - 2 * MARGIN
        lines, line = [], ""
        for word in text.split():
            trial = f"{line} {word}".strip()
            if line and pymupdf.get_text_length(trial, fontname=font, fontsize=size) > width:
                lines.append(line)
                line = word
            else:
                line = trial
        if line:
            lines.append(line)
        leading = size * 1.35
        for ln in lines:
            self.page.insert_text((MARGIN, self.y + size), ln, fontname=font, fontsize=size)
            self.y += leading
        self.y += gap

    def heading(self, text: str, level: int) -> None:
        self.y += 8 if level == 1 else 4
        self.text(text, size=18 if level == 1 else 14, bold=True, gap=4)

    def image(self, data: bytes, width: float, height: float, caption: str) -> None:
        import pymupdf

        x0 = MARGIN
        rect = pymupdf.Rect(x0, self.y, x0 + width, self.y + height)
        self.page.insert_image(rect, stream=data)
        self.y += height + 4
        self.text(caption, size=9, gap=10)

    def table(self, rows: list[list[str]], widths: list[float], row_h: float = 20) -> None:
        import pymupdf

        for r, row in enumerate(rows):
            x = MARGIN
            for cell, w in zip(row, widths):
                rect = pymupdf.Rect(x, self.y, x + w, self.y + row_h)
                self.page.draw_rect(rect, color=(0, 0, 0), width=0.6)
                self.page.insert_text((x + 4, self.y + 14), cell,
                                      fontname="hebo" if r == 0 else "helv", fontsize=10)
                x += w
            self.y += row_h
        self.y += 10

    def footers(self) -> None:
        total = self.doc.page_count
        for n, page in enumerate(self.doc, 1):
            page.insert_text((MARGIN, A4[1] - 40), f"{PDF_TITLE} - page {n} of {total}",
                             fontname="helv", fontsize=8)


def field_manual_pdf(photo: Image.Image) -> bytes:
    import pymupdf

    # A 128-colour palette keeps the embedded picture (and the PDF) small.
    photo_png = png_bytes(photo.quantize(colors=128, method=Image.Quantize.MEDIANCUT,
                                         dither=Image.Dither.NONE))

    doc = pymupdf.open()
    w = _Writer(doc)
    w.text(PDF_TITLE, size=24, bold=True, gap=8)
    w.text("This manual covers the field side of a Tidewater deployment: mounting a pressure "
           "gauge on a pier piling, tying its zero to the station datum by levelling, and the "
           "maintenance visits that keep the record clean. The processing of the downloaded "
           "CSV files is described in the library documentation.")

    # page 1
    w.heading("Deployment", 1)
    w.text("Plan a deployment at neap tide, when the low water leaves the most time to work on "
           "the piling. Two people are needed: one on the pier and one in the boat or on the "
           "ladder. Bring the gauge, the mounting kit, the levelling instrument and the site "
           "survey checklist.")
    w.heading("Mounting the gauge", 2)
    w.text("Strap the Kelpie PT-12 housing to the seaward face of a sound piling with two "
           "stainless steel bands, at least one metre below the lowest astronomical tide so it "
           "never dries. Point the intake down to keep sediment out, and run the cable up the "
           "landward face in a split conduit.")
    w.image(photo_png, 192, 144,
            "Figure 1: Kelpie PT-12 housing strapped to a pier piling, half below the waterline.")
    w.text("Tighten the bands again after one week: new timber shrinks as it dries above the "
           "waterline, and a loose gauge slides down and shifts the record.")

    # page 2
    w.new_page()
    w.heading("Surveying the datum", 2)
    w.text("A water level is only useful relative to a fixed datum. Level from the primary "
           "benchmark to the tide staff and to the gauge reference mark, then close the loop "
           "back to a second benchmark. The misclosure must stay below 3 mm; otherwise repeat "
           "the run.")
    w.text("Record the height of the gauge zero above chart datum in the station log. Tidewater "
           "reads this value from the station settings as the datum offset, so a mistake here "
           "moves every reading by the same amount.")
    w.text("Read the tide staff three times, six minutes apart, while the logger is running. "
           "These paired readings are the reference values used later for calibration.")

    # page 3
    w.new_page()
    w.heading("Maintenance", 1)
    w.text("Marine growth, flat batteries and a settling pier are the usual causes of a bad "
           "record. A short visit every month prevents most of them.")
    w.heading("Maintenance intervals", 2)
    w.text("Table 1: Maintenance intervals for a coastal pressure gauge.", size=10)
    w.table(MAINTENANCE_TABLE, [170, 120, 161])
    w.text("Log every visit, even when nothing was changed: the visit times explain short gaps "
           "in the record.")

    # page 4
    w.new_page()
    w.heading("Replacing the batteries", 2)
    w.text("Swap the lithium pack on a falling tide. Download the logger first, note the time of "
           "the swap in the station log and check the clock against GPS time before sealing the "
           "housing again.")
    w.heading("Troubleshooting", 1)
    w.text("A record that drifts slowly upward usually means the gauge is sinking with the "
           "piling or fouling is blocking the intake. A sudden step points to a loose band. "
           "Compare with the tide staff readings before correcting anything.")

    w.footers()
    doc.set_toc(MANUAL_TOC)
    doc.set_metadata({
        "title": PDF_TITLE,
        "author": "Tidewater project",
        "subject": "Field deployment and maintenance of a Tidewater tide gauge",
        "keywords": "tide gauge, deployment, datum, maintenance",
        "creator": "data/make_sample_files.py",
        "producer": "PyMuPDF",
        "creationDate": PDF_DATE,
        "modDate": PDF_DATE,
    })
    # no_new_id plus the fixed dates above: the same input gives the same bytes
    data = doc.tobytes(garbage=4, deflate=True, clean=True, no_new_id=True)
    doc.close()
    return data


# --------------------------------------------------------------------------
# site-survey.docx (python-docx)

DOCX_DATE = (2024, 3, 1, 9, 0, 0)


def site_survey_docx(diagram_png: bytes) -> bytes | None:
    try:
        import docx
        from docx.shared import Inches
    except ImportError:
        return None
    import datetime as dt
    import io
    import zipfile

    d = docx.Document()
    d.add_heading("Site Survey Checklist", level=0)
    d.add_paragraph("Use this checklist when visiting a candidate site for a Tidewater tide gauge. "
                    "A complete survey answers three questions: can the gauge be mounted safely, "
                    "can it be tied to a datum, and can it be reached for maintenance.")

    d.add_heading("Before the visit", level=1)
    d.add_paragraph("Collect the chart of the harbour, the list of benchmarks near the pier and "
                    "the contact of the harbour master.")
    d.add_heading("Permits and access", level=2)
    d.add_paragraph("Ask the pier owner for written permission to strap a gauge to a piling and to "
                    "run a cable to the logger cabinet. Check whether the pier is closed to the "
                    "public at night.")
    d.add_heading("Equipment list", level=2)
    d.add_paragraph("Pack the items below and tick them off before leaving the office.")
    table = d.add_table(rows=1, cols=3)
    table.style = "Table Grid"
    for cell, text in zip(table.rows[0].cells, ["Item", "Quantity", "Purpose"]):
        cell.text = text
    for row in [
        ("Levelling instrument and staff", "1", "Tie the gauge to the benchmarks"),
        ("Stainless steel bands", "4", "Strap the housing to the piling"),
        ("Tape measure (30 m)", "1", "Piling depth and cable run"),
        ("Camera", "1", "Photograph the piling and the benchmarks"),
    ]:
        cells = table.add_row().cells
        for cell, text in zip(cells, row):
            cell.text = text

    d.add_heading("On site", level=1)
    d.add_heading("Choosing the mounting point", level=2)
    d.add_paragraph("Pick a piling on the seaward side, away from propeller wash and outfalls. "
                    "The intake must stay at least one metre below the lowest astronomical tide.")
    d.add_paragraph("The diagram shows where the gauge record goes once it leaves the logger.")
    shape = d.add_picture(io.BytesIO(diagram_png), width=Inches(5.5))
    doc_pr = shape._inline.docPr
    doc_pr.set("descr", "Tidewater processing pipeline: read_csv, despike, fill_gaps, smooth, "
                        "Calibrator and export_parquet, with a barometer feeding the calibration")
    doc_pr.set("title", "Processing pipeline")
    d.add_paragraph("Figure 1: The processing pipeline that consumes the gauge record.")
    d.add_heading("Recording the survey", level=2)
    d.add_paragraph("Photograph every benchmark with a scale bar, note its identifier and measure "
                    "its height above the pier deck.")
    d.add_paragraph("Sketch the pier, mark the chosen piling and the cable route, and write down "
                    "the depth at low water.")

    d.add_heading("After the visit", level=1)
    d.add_paragraph("File the checklist, the photographs and the sketch with the station record, "
                    "and book the deployment for the next neap tide.")

    props = d.core_properties
    props.title = "Site Survey Checklist"
    props.author = "Tidewater project"
    props.last_modified_by = "Tidewater project"
    props.subject = "Checklist for surveying a tide-gauge site"
    props.keywords = "site survey, tide gauge, checklist"
    props.comments = ""  # the template says "generated by python-docx"
    props.created = dt.datetime(*DOCX_DATE)
    props.modified = dt.datetime(*DOCX_DATE)
    props.revision = 1

    raw = io.BytesIO()
    d.save(raw)
    # python-docx stamps every zip entry with the current time: rewrite the
    # archive with a fixed time so the bytes only change with the content.
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw.getvalue())) as src, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=DOCX_DATE)
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = 0o644 << 16
            dst.writestr(fixed, src.read(info.filename))
    return out.getvalue()


def main() -> None:
    chart = draw_tide_chart()
    photo = draw_sensor_photo()
    diagram = png_bytes(draw_architecture())
    outputs = {
        IMAGES / "tide-chart.png": png_bytes(chart),
        IMAGES / "tide-chart-large.png": png_bytes(near_duplicate(chart)),
        IMAGES / "architecture.png": diagram,
        IMAGES / "sensor-photo.png": png_bytes(photo),
        IMAGES / "drift-residuals.png": png_bytes(draw_drift_residuals()),
        DOCS / "field-manual.pdf": field_manual_pdf(photo),
        NOTES / "corrupted.md": corrupted_bytes(),
    }
    survey = site_survey_docx(diagram)
    if survey is None:
        print(f"skipped   {(DOCS / 'site-survey.docx').relative_to(HERE.parent)} "
              "(python-docx is not installed: pip install python-docx)")
    else:
        outputs[DOCS / "site-survey.docx"] = survey
    for path, data in outputs.items():
        write(path, data)
    missing = IMAGES / "missing-diagram.png"
    if missing.exists():
        missing.unlink()
        print(f"removed   {missing.relative_to(HERE.parent)} (must stay missing: dangling reference)")


if __name__ == "__main__":
    main()
