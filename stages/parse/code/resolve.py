"""Import targets → corpus files, one resolver per language family.

A resolver gets a reference target as the parser wrote it, the importing
file's corpus path and an index of every corpus path, and returns the file the
import names or None (a package outside the corpus: npm, the Go or Rust
standard library, a system header). Pure path logic: no parsing here.
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache


def rust_inline_path(path: str, depth: int) -> str:
    """A use path written inside ``depth`` inline ``mod`` blocks, seen from the file's module."""
    if depth <= 0:
        return path
    segs = path.split("::")
    if segs[0] == "self":
        return "self::" + "::".join(segs[1:]) if len(segs) > 1 else "self"
    supers = 0
    while supers < len(segs) and segs[supers] == "super":
        supers += 1
    if supers == 0:
        return path
    absorbed = min(supers, depth)
    rest = segs[absorbed:]
    if absorbed == supers:  # climbed back to the file's own module
        return "::".join(["self"] + rest[supers - absorbed:]) if rest else "self"
    return "::".join(rest)



def rust_module_path(path: str) -> str:
    """``src/net/http.rs`` → ``crate.net.http``; ``lib.rs``/``main.rs`` → ``crate``; ``x/mod.rs`` → ``crate.x``."""
    parts = posixpath.normpath(path).lstrip("/").split("/")
    src = max((i for i, p in enumerate(parts[:-1]) if p == "src"), default=None)
    rel = parts[src + 1:] if src is not None else parts[-1:]
    return ".".join(["crate"] + _rust_rel_module(rel))


def _rust_rel_module(rel: list[str]) -> list[str]:
    if not rel:
        return []
    last = rel[-1]
    if len(rel) == 1 and last in ("lib.rs", "main.rs"):
        return []
    if last == "mod.rs":
        return rel[:-1]
    return rel[:-1] + [posixpath.splitext(last)[0]]


# --------------------------------------------------------------------------
# Import resolution


class _FileIndex:
    def __init__(self, files: frozenset[str]):
        self.files = {posixpath.normpath(f).lstrip("/") for f in files}
        self.by_name: dict[str, list[str]] = {}
        self.dirs: dict[str, list[str]] = {}
        self.dir_by_name: dict[str, list[str]] = {}
        for f in sorted(self.files):
            self.by_name.setdefault(posixpath.basename(f), []).append(f)
            d = posixpath.dirname(f)
            self.dirs.setdefault(d, []).append(f)
        for d in self.dirs:
            self.dir_by_name.setdefault(posixpath.basename(d), []).append(d)

    def suffix_all(self, suffix: str) -> list[str]:
        suffix = suffix.lstrip("/")
        base = posixpath.basename(suffix)
        return [p for p in self.by_name.get(base, ()) if p == suffix or p.endswith("/" + suffix)]

    def suffix(self, suffix: str, near: str = "") -> str | None:
        return _best(self.suffix_all(suffix), near)


@lru_cache(maxsize=8)
def file_index(files: frozenset[str]) -> _FileIndex:
    return _FileIndex(files)


def _best(candidates: list[str], near: str = "") -> str | None:
    """Closest candidate to ``near`` (most leading directories shared), then shortest, then alphabetical."""
    if not candidates:
        return None
    near_parts = posixpath.dirname(near).split("/") if near else []

    def key(p: str):
        parts = p.split("/")
        shared = 0
        for a, b in zip(parts[:-1], near_parts):
            if a != b:
                break
            shared += 1
        return (-shared, len(parts), p)

    return min(candidates, key=key)


def _join(src: str, rel: str) -> str | None:
    p = posixpath.normpath(posixpath.join(posixpath.dirname(src), rel))
    if p == ".." or p.startswith("../"):
        return None
    return p


def _without_parents(target: str) -> str:
    """``target`` normalised with its leading ``../`` steps dropped: what is left
    is matched as a path suffix when the relative join leaves the corpus."""
    clean = posixpath.normpath(target)
    while clean.startswith("../"):
        clean = clean[3:]
    return clean


_JS_EXTENSIONS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts")
_JS_SWAP = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}


def js(target: str, src: str, idx: _FileIndex) -> str | None:
    spec = target.split("?", 1)[0].split("#", 1)[0]
    if spec.startswith("/"):
        base = posixpath.normpath(spec.lstrip("/"))
    elif spec in (".", "..") or spec.startswith(("./", "../")):
        base = _join(src, spec)
    else:
        return None  # a package
    if base is None:
        return None
    files = idx.files
    if base in files:
        return base
    stem, ext = posixpath.splitext(base)
    for alt in _JS_SWAP.get(ext, ()):
        if stem + alt in files:
            return stem + alt
    for ext in _JS_EXTENSIONS:
        if base + ext in files:
            return base + ext
    for ext in _JS_EXTENSIONS:
        cand = posixpath.join(base, "index" + ext)
        if cand in files:
            return cand
    return None


def go(target: str, src: str, idx: _FileIndex) -> str | None:
    segs = [s for s in target.strip().split("/") if s and s != "."]
    if not segs:
        return None
    dotted = "." in segs[0]
    for k in range(len(segs), 0, -1):
        if not dotted and k < len(segs):
            break  # a standard-library style path must match whole
        suffix = "/".join(segs[-k:])
        dirs = [d for d in idx.dir_by_name.get(segs[-1], ())
                if (d == suffix or d.endswith("/" + suffix)) and any(f.endswith(".go") for f in idx.dirs[d])]
        if dirs:
            d = _best([posixpath.join(x, "_") for x in dirs], src)
            return _go_file(idx, posixpath.dirname(d))
    return None


def _go_file(idx: _FileIndex, d: str) -> str | None:
    go = [f for f in idx.dirs.get(d, ()) if f.endswith(".go")]
    main = [f for f in go if not f.endswith("_test.go")] or go
    if not main:
        return None
    named = posixpath.join(d, posixpath.basename(d) + ".go") if d else ""
    return named if named in main else sorted(main)[0]


def _rust_src_root(src: str, idx: _FileIndex) -> str:
    d = posixpath.dirname(src)
    while True:
        if posixpath.join(d, "Cargo.toml") in idx.files:
            return posixpath.join(d, "src")
        for root in ("src/lib.rs", "src/main.rs"):
            if posixpath.join(d, root) in idx.files:
                return posixpath.join(d, "src")
        if not d:
            break
        d = posixpath.dirname(d)
    parts = src.split("/")
    if "src" in parts[:-1]:
        return "/".join(parts[:parts.index("src") + 1])
    return posixpath.dirname(src)


def rust(target: str, src: str, idx: _FileIndex) -> str | None:
    t = target.strip()
    if t.startswith("::"):
        return None
    segs = [s for s in t.split("::") if s and s != "*"]
    if not segs or not all(re.fullmatch(r"\w+", s) for s in segs):
        return None
    root = _rust_src_root(src, idx)
    rel = src[len(root) + 1:].split("/") if root and src.startswith(root + "/") else (
        src.split("/") if not root else [posixpath.basename(src)])
    current = _rust_rel_module(rel)
    if segs[0] == "crate":
        base, rest, minimum = [], segs[1:], 0
    elif segs[0] == "self":
        base, rest = current, segs[1:]
        minimum = len(current) + 1
    elif segs[0] == "super":
        k = 0
        while k < len(segs) and segs[k] == "super":
            k += 1
        if k > len(current):
            return None
        base, rest = current[:len(current) - k], segs[k:]
        minimum = len(base)
    else:  # a path relative to the current module (or an external crate)
        base, rest = current, segs
        minimum = len(current) + 1
    full = base + rest
    for length in range(len(full), minimum - 1, -1):
        parts = full[:length]
        if not parts:
            for name in ("lib.rs", "main.rs"):
                cand = posixpath.join(root, name)
                if cand in idx.files:
                    return cand
            return None
        p = posixpath.join(root, *parts)
        for cand in (p + ".rs", posixpath.join(p, "mod.rs")):
            if cand in idx.files:
                return cand
    return None


def _jvm(target: str, src: str, idx: _FileIndex, exts: tuple[str, ...]) -> str | None:
    t = target.replace("`", "").strip()
    wildcard = t.endswith(".*")
    if wildcard:
        t = t[:-2]
    segs = [s for s in t.split(".") if s]
    if not segs:
        return None
    if wildcard:
        suffix = "/".join(segs)
        dirs = [d for d in idx.dir_by_name.get(segs[-1], ()) if d == suffix or d.endswith("/" + suffix)]
        for ext in exts:
            cands = [f for d in dirs for f in idx.dirs[d] if f.endswith(ext)]
            if cands:
                return sorted(cands, key=lambda p: (p.count("/"), p))[0]
        return None
    for length in range(len(segs), 0, -1):
        if length < len(segs) and not segs[length - 1][:1].isupper():
            break  # only drop members of classes (static imports, nested classes)
        suffix = "/".join(segs[:length])
        for ext in exts:
            found = idx.suffix(suffix + ext, src)
            if found:
                return found
    return None


def c(target: str, src: str, idx: _FileIndex) -> str | None:
    t = target.strip()
    if not t:
        return None
    rel = _join(src, t)
    if rel and rel in idx.files:
        return rel
    clean = _without_parents(t)
    if clean.startswith("/") or clean in (".", ".."):
        return None
    return idx.suffix(clean, src)


def ruby(target: str, src: str, idx: _FileIndex) -> str | None:
    t = target.strip()
    if not t:
        return None
    if not t.endswith(".rb"):
        t += ".rb"
    rel = _join(src, t)
    if t.startswith("."):
        return rel if rel in idx.files else None
    if rel and rel in idx.files:
        return rel
    cands = idx.suffix_all(t)
    lib = [p for p in cands if p == "lib/" + t or p.endswith("/lib/" + t)]
    return _best(lib or cands, src)


def php(target: str, src: str, idx: _FileIndex) -> str | None:
    t = target.strip()
    if not t:
        return None
    m = re.match(r"(?:__DIR__|dirname\s*\(\s*__FILE__\s*\))\s*\.?\s*", t)
    if m:
        rel = _join(src, "./" + t[m.end():].lstrip("/"))
        if rel and rel in idx.files:
            return rel
        return idx.suffix(t[m.end():].lstrip("/").lstrip("./"), src)
    is_path = "/" in t or t.endswith((".php", ".inc", ".phtml"))
    if "\\" in t or not is_path:
        segs = [s for s in t.strip("\\").split("\\") if s]
        if not segs:
            return None
        for length in range(len(segs), min(2, len(segs)) - 1, -1):
            suffix = "/".join(segs[-length:]) + ".php"
            cands = idx.suffix_all(suffix)
            if cands:
                preferred = [p for p in cands if re.search(r"(?:^|/)(?:src|app|lib)/", p)]
                return _best(preferred or cands, src)
        return None
    rel = _join(src, t)
    if rel and rel in idx.files:
        return rel
    return idx.suffix(_without_parents(t).lstrip("/"), src)


def java(target: str, src: str, idx: _FileIndex) -> str | None:
    return _jvm(target, src, idx, (".java", ".kt"))


def kotlin(target: str, src: str, idx: _FileIndex) -> str | None:
    return _jvm(target, src, idx, (".kt", ".java", ".kts"))



def scala(target: str, src: str, idx: _FileIndex) -> str | None:
    return _jvm(target.replace("._", ".*"), src, idx, (".scala", ".java"))


def modules(*exts: str, lower_first: bool = False, snake: bool = False):
    """A resolver for dotted module names (``Data.Map``, ``a.b``) → ``Data/Map.<ext>``,
    matched as a path suffix (nearest to the importing file first)."""
    def resolver(target: str, src: str, idx: _FileIndex) -> str | None:
        segs = [s for s in re.split(r"[./]", target.strip()) if s]
        if not segs or not all(re.fullmatch(r"[\w-]+", s) for s in segs):
            return None
        if snake:  # Elixir: Tide.GaugeReader → tide/gauge_reader.ex
            segs = [re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", s).lower() for s in segs]
        if lower_first:
            segs[-1] = segs[-1][:1].lower() + segs[-1][1:]
        for ext in exts:
            found = idx.suffix("/".join(segs) + ext, src)
            if found:
                return found
        return None
    return resolver
