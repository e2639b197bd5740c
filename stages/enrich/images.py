"""Image nodes → checked image records, perceptual hashes and near-duplicate groups.

Two plain functions the pipeline wires into assets:

* :func:`image_records` locates and safely opens the picture behind every
  image node (a corpus file for Markdown/HTML, a blob for PDF/DOCX) and says
  what is wrong with it when something is: ``missing``, ``external``,
  ``outside_root``, ``broken`` (corrupt or truncated) or ``too_large``
  (decompression bombs). It never raises and never reads a path outside the
  corpus root (or the blob directory).
* :func:`dedup_images` groups near-duplicates: a 64-bit dHash or pHash per
  usable image, the pairs within a Hamming distance from a range search of
  faiss's binary index, optionally confirmed by SSIM; the groups are the
  connected components of those pairs (scipy) and the largest picture
  represents each one.

Grouping rules:
- nodes pointing at the same file, and files with identical bytes, are
  one group without any hashing;
- images that are not ``ok`` are always a group of their own;
- representative: most pixels (width × height), then a corpus file before a
  PDF/DOCX blob (a path a reader can open), then the lexicographically
  smallest image path, then the smallest node id (nodes sharing one file).
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
from PIL import Image

from strata.core.config.schema import IMAGES as IMAGE_GROUPS
from strata.core.config.schema import python_table

__all__ = [
    "ImageRecord",
    "IMAGE_GROUPS",
    "image_records",
    "read_image_bytes",
    "image_hash",
    "near_duplicate_pairs",
    "dedup_images",
    "duplicate_mapping",
]

# Status values.
OK, MISSING, EXTERNAL, OUTSIDE_ROOT, BROKEN, TOO_LARGE = (
    "ok", "missing", "external", "outside_root", "broken", "too_large",
)
STATUSES = (OK, MISSING, EXTERNAL, OUTSIDE_ROOT, BROKEN, TOO_LARGE)

# Files above this size are not even read (a plain byte cap before decoding).
MAX_IMAGE_BYTES = 64 * 1024 * 1024
HASH_BITS = 64
SSIM_SIDE = 128

_BLOB_NAME = re.compile(r"^[0-9A-Za-z_\-]{1,128}$")
_BLOB_EXT = re.compile(r"^[0-9A-Za-z]{1,10}$")



@dataclass
class ImageRecord:
    """One image node and the state of the picture behind it."""

    node_id: str
    source: str  # file | blob | external | missing | outside_root
    location: str | None  # absolute path of the bytes, when they were found
    status: str  # ok | missing | external | outside_root | broken | too_large
    error: str | None = None
    width: int | None = None
    height: int | None = None
    byte_hash: str | None = None  # sha256 hex of the file bytes
    image_path: str = ""  # corpus-relative path, blob file name, or the raw src
    doc_path: str = ""  # the document the node belongs to
    subkind: str | None = None
    format: str | None = None  # Pillow's format name (PNG, JPEG, …)
    alt: str = ""
    title: str = ""  # the image's title attribute / the node title
    caption: str = ""  # figure caption (HTML figcaption, PDF/DOCX "Figure N" line)
    context_before: str = ""
    context_after: str = ""
    page: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def name(self) -> str:
        """A short name for messages and fallbacks: the image file's base name."""
        return posixpath.basename(self.image_path.rstrip("/")) or self.image_path or self.node_id


# --------------------------------------------------------------------------
# locating and opening


def _attrs(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _open_checked(data: bytes, max_pixels: int | None) -> tuple[Image.Image | None, str, str | None]:
    """Decode ``data`` safely: (image, status, error).

    Pillow's own decompression-bomb check (``Image.MAX_IMAGE_PIXELS``) is kept,
    with its warning turned into an error; ``max_pixels`` adds an explicit
    limit checked from the header, before any pixel is decoded.
    ``verify()`` catches most corruption cheaply; the image is then reopened
    (a verified image cannot be used) and fully loaded, which catches
    truncation.
    """
    limit = Image.MAX_IMAGE_PIXELS if max_pixels is None else max_pixels

    def too_big(im: Image.Image) -> str | None:
        w, h = im.size
        if limit is not None and w * h > limit:
            return f"image too large: {w}x{h} pixels exceeds the limit of {limit}"
        return None

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as probe:
                reason = too_big(probe)
                if reason:
                    return None, TOO_LARGE, reason
                probe.verify()
            im = Image.open(io.BytesIO(data))
            reason = too_big(im)
            if reason:
                return None, TOO_LARGE, reason
            im.load()
            return im, OK, None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        return None, TOO_LARGE, f"image too large (decompression bomb guard): {exc}"
    except Exception as exc:  # noqa: BLE001 - any decoder failure means a broken image
        return None, BROKEN, f"cannot decode image: {type(exc).__name__}: {exc}"


def _locate_file(resolved: str, root: Path) -> tuple[str, Path | None, str | None]:
    """(source, absolute path, error) for a corpus-relative path."""
    try:
        candidate = (root / resolved).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        return MISSING, None, f"image path cannot be resolved: {resolved}: {exc}"
    if not candidate.is_relative_to(root):
        return OUTSIDE_ROOT, None, f"image path escapes the corpus root: {resolved}"
    if not candidate.is_file():
        return MISSING, None, f"image file not found: {resolved}"
    return "file", candidate, None


def _locate_blob(blob: str, ext: str, blob_dir: Path | None) -> tuple[str, Path | None, str | None]:
    name = f"{blob}.{ext}"
    if blob_dir is None:
        return MISSING, None, f"image blob not found: {name} (no blob directory given)"
    if not _BLOB_NAME.match(blob) or not _BLOB_EXT.match(ext):
        return MISSING, None, f"invalid image blob name: {name!r}"
    try:
        base = Path(blob_dir).resolve()
        candidate = (base / name).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        return MISSING, None, f"image blob cannot be resolved: {name}: {exc}"
    if not candidate.is_relative_to(base):
        return OUTSIDE_ROOT, None, f"image blob escapes the blob directory: {name}"
    if not candidate.is_file():
        return MISSING, None, f"image blob not found: blobs/{name}"
    return "blob", candidate, None


def _record(node: Mapping[str, Any], root: Path, blob_dir: Path | None,
            max_pixels: int | None, max_bytes: int) -> ImageRecord:
    attrs = _attrs(node.get("attrs"))
    rec = ImageRecord(
        node_id=_text(node.get("node_id")),
        source=MISSING,
        location=None,
        status=MISSING,
        doc_path=_text(node.get("path")),
        subkind=node.get("subkind"),
        alt=_text(attrs.get("alt")).strip(),
        title=_text(attrs.get("image_title") or "").strip(),
        caption=_text(attrs.get("caption")).strip(),
        context_before=_text(attrs.get("context_before")).strip(),
        context_after=_text(attrs.get("context_after")).strip(),
        page=_int(node.get("page")) or _int(attrs.get("page")),
        width=_int(attrs.get("width")),
        height=_int(attrs.get("height")),
    )
    src = _text(attrs.get("src"))
    if attrs.get("blob"):
        blob, ext = _text(attrs["blob"]), _text(attrs.get("ext") or "bin").lower()
        rec.image_path = f"{blob}.{ext}"
        source, where, error = _locate_blob(blob, ext, blob_dir)
    elif attrs.get("external"):
        rec.image_path = src
        rec.source, rec.status = EXTERNAL, EXTERNAL
        rec.error = f"external image not fetched: {src[:200]}"
        return rec
    elif attrs.get("outside_root"):
        rec.image_path = src
        rec.source, rec.status = OUTSIDE_ROOT, OUTSIDE_ROOT
        rec.error = f"image path escapes the corpus root: {src}"
        return rec
    elif attrs.get("resolved"):
        rec.image_path = _text(attrs["resolved"])
        source, where, error = _locate_file(rec.image_path, root)
    else:
        rec.image_path = src
        rec.error = f"image has no resolvable target: {src!r}"
        return rec

    rec.source = source
    if where is None:
        rec.status = OUTSIDE_ROOT if source == OUTSIDE_ROOT else MISSING
        rec.error = error
        return rec
    rec.location = str(where)
    from strata.core.config.files import NotRegular, TooLarge, read_regular

    try:
        # a regular file only (a FIFO named x.png would block, a device never end)
        data = read_regular(where, max_bytes)
    except TooLarge as exc:
        rec.status = TOO_LARGE
        rec.error = f"image file too large: {exc.size} bytes exceeds the limit of {max_bytes}"
        return rec
    except NotRegular as exc:
        rec.status, rec.location = BROKEN, None
        rec.error = f"image file cannot be read: {rec.image_path}: {exc}"
        return rec
    except FileNotFoundError as exc:
        rec.source, rec.status, rec.location = MISSING, MISSING, None
        rec.error = f"image file cannot be read: {rec.image_path}: {exc}"
        return rec
    except OSError as exc:
        rec.status = BROKEN
        rec.error = f"image file cannot be read: {rec.image_path}: {exc}"
        return rec
    rec.byte_hash = hashlib.sha256(data).hexdigest()
    if not data:
        rec.status, rec.error = BROKEN, f"image file is empty: {rec.image_path}"
        return rec
    im, status, error = _open_checked(data, max_pixels)
    rec.status, rec.error = status, error
    if im is not None:
        rec.width, rec.height = im.size
        rec.format = im.format
        im.close()
    elif status == BROKEN and rec.image_path.lower().endswith((".svg", ".svgz")):
        rec.error = f"unsupported image format: svg is not a raster image ({rec.image_path})"
    return rec


def image_records(nodes: Any, corpus_root: Path, blob_dir: Path | None = None, *,
                  max_pixels: int | None = None,
                  max_bytes: int = MAX_IMAGE_BYTES) -> list[ImageRecord]:
    """One :class:`ImageRecord` per image node of ``nodes`` (a polars DataFrame,
    a pyarrow Table or a list of dicts), in node order. Never raises."""
    try:
        if hasattr(nodes, "to_dicts"):
            rows = nodes.to_dicts()
        elif hasattr(nodes, "to_pylist"):
            rows = nodes.to_pylist()
        else:
            rows = list(nodes or [])
    except Exception:  # noqa: BLE001
        return []
    try:
        root = Path(corpus_root).resolve()
    except (OSError, RuntimeError, TypeError, ValueError):
        root = Path(str(corpus_root))
    out: list[ImageRecord] = []
    for node in rows:
        if not isinstance(node, Mapping) or node.get("kind") != "image":
            continue
        try:
            out.append(_record(node, root, blob_dir, max_pixels, max_bytes))
        except Exception as exc:  # noqa: BLE001 - the contract is "never raise"
            out.append(ImageRecord(node_id=_text(node.get("node_id")), source=MISSING,
                                   location=None, status=BROKEN, doc_path=_text(node.get("path")),
                                   error=f"unexpected error: {type(exc).__name__}: {exc}"))
    return out


def read_image_bytes(record: ImageRecord) -> bytes | None:
    """The bytes behind an ``ok`` (or at least located) record; None otherwise.

    Only ``record.location`` is read, which :func:`image_records` set after
    checking it lies inside the corpus root or the blob directory."""
    if not record.location:
        return None
    from strata.core.config.files import read_regular

    try:
        return read_regular(record.location, MAX_IMAGE_BYTES)
    except OSError:  # gone, swapped for a FIFO, grown past the cap since it was checked
        return None


def _load(record: ImageRecord, max_pixels: int | None = None) -> Image.Image | None:
    data = read_image_bytes(record)
    if data is None:
        return None
    im, status, _ = _open_checked(data, max_pixels)
    if im is None or status != OK:
        return None
    return _flatten(im)


def _flatten(im: Image.Image) -> Image.Image:
    """First frame, transparency composited onto white, RGB or L."""
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if im.mode not in ("RGB", "L"):
        return im.convert("RGB")
    return im


# --------------------------------------------------------------------------
# hashing and near-duplicate pairs


def image_hash(im: Image.Image, method: str = "dhash") -> int:
    """64-bit perceptual hash of a PIL image as an int (dhash or phash)."""
    import imagehash

    if method == "dhash":
        h = imagehash.dhash(im, hash_size=8)
    elif method == "phash":
        h = imagehash.phash(im, hash_size=8)
    else:
        raise ValueError(f"unknown hash method {method!r} (dhash or phash)")
    return int(str(h), 16)


def near_duplicate_pairs(hashes: Sequence[int],
                         hamming_threshold: int = 6) -> Iterator[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, whose 64-bit hashes differ in at most
    ``hamming_threshold`` bits, each reported once, in order.

    An exact range search of faiss's binary flat index (SIMD popcounts over the
    8-byte codes): no pair within the threshold is missed, whatever the
    threshold, and nothing else is compared in Python."""
    n = len(hashes)
    if n < 2:  # nothing to compare: faiss is not even imported
        return
    import faiss

    vals = np.fromiter((int(h) & 0xFFFFFFFFFFFFFFFF for h in hashes), dtype=np.uint64, count=n)
    codes = vals.view(np.uint8).reshape(n, HASH_BITS // 8)
    index = faiss.IndexBinaryFlat(HASH_BITS)
    index.add(codes)
    lims, _, found = index.range_search(codes, int(hamming_threshold) + 1)  # distance < radius
    rows = np.repeat(np.arange(n), np.diff(lims).astype(np.int64))
    keep = found > rows
    pairs = np.stack([rows[keep], found[keep]], axis=1)
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    yield from (tuple(p) for p in pairs.tolist())


# --------------------------------------------------------------------------
# grouping


def _components(n: int, pairs: Iterable[tuple[int, int]]) -> np.ndarray:
    """Connected-component label of each of ``n`` items joined by ``pairs``
    (no pairs: each item its own, without importing scipy, which a corpus of
    distinct images or none would otherwise pay for on every build)."""
    edges = np.asarray(list(pairs), dtype=np.int64).reshape(-1, 2)
    edges = edges[edges[:, 0] != edges[:, 1]]  # an item joined to itself joins nothing
    if not len(edges):
        return np.arange(n, dtype=np.int32)
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(edges), np.int8), (edges[:, 0], edges[:, 1])), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def _gray(record: ImageRecord) -> np.ndarray | None:
    im = _load(record)
    if im is None:
        return None
    return np.asarray(im.convert("L").resize((SSIM_SIDE, SSIM_SIDE), Image.Resampling.LANCZOS),
                      dtype=np.uint8)


def _ssim(a: np.ndarray, b: np.ndarray) -> float:
    from skimage.metrics import structural_similarity

    return float(structural_similarity(a, b, data_range=255))


def _parse_hash(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, (int, np.integer)):
        return int(value) & 0xFFFFFFFFFFFFFFFF
    try:
        return int(str(value), 16) & 0xFFFFFFFFFFFFFFFF
    except ValueError:
        return None


def dedup_images(records: Sequence[ImageRecord], method: str = "dhash", hamming_threshold: int = 6,
                 use_ssim: bool = False, ssim_threshold: float = 0.90, *,
                 hashes: Mapping[str, Any] | None = None) -> pa.Table:
    """Near-duplicate groups of ``records`` as an :data:`IMAGE_GROUPS` table,
    one row per record, in record order.

    ``hashes`` optionally gives precomputed perceptual hashes (int or hex)
    per node id, e.g. reused from a previous build; they must have been made
    with the same ``method``. Images whose hash cannot be computed (the file
    changed since :func:`image_records`) become ``broken`` rows of their own.
    """
    if method not in ("dhash", "phash"):
        raise ValueError(f"unknown hash method {method!r} (dhash or phash)")
    records = list(records)
    n = len(records)
    status = [r.status for r in records]
    errors = [r.error for r in records]
    hvals: list[int | None] = [None] * n
    given = hashes or {}

    # Identical files: same location or same bytes, one class each; each class is
    # hashed once.
    same: list[tuple[int, int]] = []
    first_of: dict[tuple[str, str], int] = {}
    for i, r in enumerate(records):
        if r.status != OK:
            continue
        for key in (("loc", r.location), ("bytes", r.byte_hash)):
            if key[1]:
                same.append((first_of.setdefault(key, i), i))
    identical = _components(n, same)

    class_hash: dict[int, int] = {}
    for i, r in enumerate(records):
        if status[i] != OK:
            continue
        if identical[i] in class_hash:
            hvals[i] = class_hash[identical[i]]
            continue
        h = _parse_hash(given.get(r.node_id))
        if h is None:
            try:
                im = _load(r)
                h = image_hash(im, method) if im is not None else None
            except Exception as exc:  # noqa: BLE001
                errors[i] = f"cannot hash image: {type(exc).__name__}: {exc}"
                h = None
            if h is None:
                status[i] = BROKEN
                errors[i] = errors[i] or "image could not be reopened for hashing"
                continue
        hvals[i] = class_hash[identical[i]] = h

    # The edges of the final groups. A broken member must not keep its
    # identical-file class together: each class is its first ok member and the
    # ok members joined to it.
    edges: list[tuple[int, int]] = []
    first_ok: dict[int, int] = {}
    for i in range(n):
        if status[i] == OK:
            first = first_ok.setdefault(int(identical[i]), i)
            if first != i:
                edges.append((first, i))
    items = sorted(first_ok.values())  # one per class; near-duplicates among these
    if not use_ssim:
        # Equal hashes join outright; the range search runs over distinct values only.
        by_value: dict[int, list[int]] = {}
        for i in items:
            by_value.setdefault(hvals[i], []).append(i)
        heads = [members[0] for members in by_value.values()]
        edges += [(members[0], m) for members in by_value.values() for m in members[1:]]
        edges += [(heads[a], heads[b])
                  for a, b in near_duplicate_pairs(list(by_value), hamming_threshold)]
    else:
        grays: dict[int, np.ndarray | None] = {}

        def gray(i: int) -> np.ndarray | None:
            if i not in grays:
                grays[i] = _gray(records[i])
            return grays[i]

        for a, b in near_duplicate_pairs([hvals[i] for i in items], hamming_threshold):
            i, j = items[a], items[b]
            ga, gb = gray(i), gray(j)
            if ga is not None and gb is not None and _ssim(ga, gb) >= ssim_threshold:
                edges.append((i, j))

    # Groups (records that are not ok have no edge: a group of their own each),
    # representatives and rows.
    groups: dict[int, list[int]] = {}
    for i, label in enumerate(_components(n, edges).tolist()):
        groups.setdefault(label, []).append(i)

    def rank(i: int) -> tuple:
        r = records[i]
        area = (r.width or 0) * (r.height or 0)
        return (-area, r.source != "file", r.image_path or "", r.node_id)

    rep_of: dict[int, int] = {}
    for members in groups.values():
        best = min(members, key=rank)
        for m in members:
            rep_of[m] = best

    rows = []
    for i, r in enumerate(records):
        rep = records[rep_of[i]]
        rows.append({
            "node_id": r.node_id,
            "path": r.image_path,
            "source": r.source,
            "status": status[i],
            "error": errors[i],
            "hash": f"{hvals[i]:016x}" if status[i] == OK and hvals[i] is not None else None,
            "byte_hash": r.byte_hash,
            "width": r.width,
            "height": r.height,
            "group_id": f"group:{rep.node_id}",
            "representative_id": rep.node_id,
            "is_representative": rep_of[i] == i,
        })
    return python_table(rows, IMAGE_GROUPS)


def duplicate_mapping(table: pa.Table | Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``{node_id: representative_id}`` for every non-representative row."""
    rows = table.to_pylist() if hasattr(table, "to_pylist") else list(table)
    return {
        r["node_id"]: r["representative_id"]
        for r in rows
        if not r.get("is_representative") and r.get("representative_id")
        and r["representative_id"] != r["node_id"]
    }
