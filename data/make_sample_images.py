"""Generate every binary file of the Strata sample corpus (data/sample/).

Run from anywhere:

    python data/make_sample_images.py

The output is deterministic (fixed seeds, no timestamps in the PNGs), so
running it again rewrites byte-identical files. It writes:

* docs/images/tide-chart.png          - three days of water level, area chart
* docs/images/tide-chart-large.png    - near-duplicate of tide-chart.png:
                                        1.5x scaled plus a small watermark dot
                                        (same dHash neighbourhood, different bytes)
* docs/images/architecture.png        - box diagram of the processing pipeline
* docs/images/sensor-photo.png        - photo-like picture of a gauge on a piling
* docs/images/drift-residuals.png     - scatter of residuals before/after the
                                        barometric correction
* notes/corrupted.md                  - binary bytes behind a text extension

docs/images/missing-diagram.png is referenced by docs/processing.md but is
deliberately NOT generated (a dangling image reference).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "sample"
IMAGES = SAMPLE / "docs" / "images"
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


def main() -> None:
    chart = draw_tide_chart()
    outputs = {
        IMAGES / "tide-chart.png": png_bytes(chart),
        IMAGES / "tide-chart-large.png": png_bytes(near_duplicate(chart)),
        IMAGES / "architecture.png": png_bytes(draw_architecture()),
        IMAGES / "sensor-photo.png": png_bytes(draw_sensor_photo()),
        IMAGES / "drift-residuals.png": png_bytes(draw_drift_residuals()),
        NOTES / "corrupted.md": corrupted_bytes(),
    }
    for path, data in outputs.items():
        write(path, data)
    missing = IMAGES / "missing-diagram.png"
    if missing.exists():
        missing.unlink()
        print(f"removed   {missing.relative_to(HERE.parent)} (must stay missing: dangling reference)")


if __name__ == "__main__":
    main()
