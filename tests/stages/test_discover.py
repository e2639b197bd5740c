"""Tests for stages.discover on real files: globbing, symlinks, decoding,
size caps and content hashes."""

from __future__ import annotations

import os
import pathlib
from pathlib import Path

import pytest

from strata.stages import discover as discover_mod
from strata.stages.discover import content_hash, decode, discover, iter_paths, read_source


# ---------------------------------------------------------------- helpers


def _write(root: Path, rel: str, data: bytes | str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        p.write_text(data, encoding="utf-8")
    else:
        p.write_bytes(data)
    return p


def _by_path(root: Path, **kw) -> dict:
    return {s.path: s for s in discover(root, **kw)}


def _paths(root: Path, include=("**/*",), exclude=()) -> list[str]:
    return [rel for rel, _ in iter_paths(root, include, exclude)]


# ---------------------------------------------------------------- globbing


def test_include_glob_matches_any_depth_below_docs(tmp_path):
    for rel in ["docs/a.md", "docs/x/y/a.md", "docs/b.txt", "a.md", "other/docs/c.md",
                "docsy/d.md"]:
        _write(tmp_path, rel, "# hi\n")
    assert _paths(tmp_path, include=["docs/**/*.md"]) == ["docs/a.md", "docs/x/y/a.md"]


def test_several_includes_and_an_exclude(tmp_path):
    for rel in ["docs/a.md", "docs/draft/b.md", "src/m.py", "src/m.txt", "README.md"]:
        _write(tmp_path, rel, "text\n")
    got = _paths(tmp_path, include=["docs/**/*.md", "**/*.py"], exclude=["docs/draft/**"])
    assert got == ["docs/a.md", "src/m.py"]


def test_default_excludes_drop_vcs_caches_and_node_modules(tmp_path):
    keep = ["a.md", "pkg/mod.py", "pkg/sub/notes.txt"]
    drop = [".git/config", ".git/objects/ab/cdef", "pkg/__pycache__/mod.cpython-311.pyc",
            "__pycache__/x.pyc", "node_modules/lib/index.js", "web/node_modules/react/index.js",
            "sub/.git/HEAD", ".venv/lib/site.py", "pkg.egg-info/PKG-INFO", "pkg/.DS_Store"]
    for rel in keep + drop:
        _write(tmp_path, rel, "x\n")
    assert _paths(tmp_path) == sorted(keep)
    assert sorted(_by_path(tmp_path)) == sorted(keep)


def test_negation_brings_a_file_back_and_the_last_matching_line_decides(tmp_path):
    for rel in ["a.log", "keep.log", "logs/b.log", "logs/keep.log", "notes.md"]:
        _write(tmp_path, rel, "x\n")
    # a pattern without a slash matches at any depth; '!' re-includes, later lines win
    assert _paths(tmp_path, exclude=["*.log", "!keep.log"]) == ["keep.log", "notes.md",
                                                                 "logs/keep.log"]
    assert _paths(tmp_path, exclude=["*.log", "!keep.log", "logs/keep.log"]) == [
        "keep.log", "notes.md"]
    assert _paths(tmp_path, exclude=["!keep.log", "*.log"]) == ["notes.md"]
    # includes take negations too
    assert _paths(tmp_path, include=["**/*.log", "!logs/**"]) == ["a.log", "keep.log"]


def test_an_excluded_folder_is_not_walked_but_its_contents_pattern_can_be_negated(tmp_path):
    for rel in ["build/keep.md", "build/x.md", "build/sub/y.md", "src/a.md"]:
        _write(tmp_path, rel, "x\n")
    # as in git: a file cannot be brought back from inside an excluded folder ...
    assert _paths(tmp_path, exclude=["build/", "!build/keep.md"]) == ["src/a.md"]
    # ... but 'build/**' excludes the folder's contents, not the folder, so it can
    assert _paths(tmp_path, exclude=["build/**", "!build/keep.md"]) == ["build/keep.md",
                                                                         "src/a.md"]
    assert _paths(tmp_path, exclude=["build/**"]) == ["src/a.md"]


def test_character_classes_and_ranges(tmp_path):
    for rel in ["ch1.md", "ch2.md", "ch3.md", "chx.md", "a/ch2.md", "Notes.md", "notes.md"]:
        _write(tmp_path, rel, "x\n")
    assert _paths(tmp_path, include=["ch[12].md"]) == ["ch1.md", "ch2.md", "a/ch2.md"]
    assert _paths(tmp_path, include=["ch[0-9].md"], exclude=["/ch[!1].md"]) == ["ch1.md",
                                                                                "a/ch2.md"]
    assert _paths(tmp_path, include=["[Nn]otes.md"]) == ["Notes.md", "notes.md"]


def test_directory_only_patterns_leave_files_of_that_name(tmp_path):
    for rel in ["out", "docs/out", "out/a.md", "docs/out/b.md", "docs/c.md"]:
        if rel in ("out", "docs/out"):
            continue
        _write(tmp_path, rel, "x\n")
    _write(tmp_path, "src/out", "a file called out\n")
    assert _paths(tmp_path, exclude=["out/"]) == ["docs/c.md", "src/out"]
    assert _paths(tmp_path, exclude=["out"]) == ["docs/c.md"]  # files and folders alike
    assert _paths(tmp_path, exclude=["/out/"]) == ["docs/c.md", "docs/out/b.md", "src/out"]


def test_a_default_exclusion_can_be_negated(tmp_path):
    for rel in ["a.md", "node_modules/pkg/README.md", ".git/HEAD"]:
        _write(tmp_path, rel, "x\n")
    assert _paths(tmp_path) == ["a.md"]
    assert _paths(tmp_path, exclude=["!node_modules/"]) == ["a.md", "node_modules/pkg/README.md"]


def test_an_invalid_pattern_is_named(tmp_path):
    with pytest.raises(ValueError, match="invalid exclude pattern.*'!'"):
        _paths(tmp_path, exclude=["*.log", "!"])


def test_paths_are_relative_posix_and_in_a_stable_order(tmp_path):
    for rel in ["b/z.md", "a.md", "b/a.md", "c.md", "b/c/d.md"]:
        _write(tmp_path, rel, "x\n")
    got = _paths(tmp_path)
    # Walk order: each folder's files sorted, then its sorted subfolders.
    assert got == ["a.md", "c.md", "b/a.md", "b/z.md", "b/c/d.md"]
    assert [s.path for s in discover(tmp_path)] == got


def test_discover_on_missing_root_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        discover(tmp_path / "nope")


# ---------------------------------------------------------------- symlinks


def test_symlink_outside_root_is_reported_and_never_read(tmp_path, monkeypatch):
    root = tmp_path / "corpus"
    secret = _write(tmp_path, "outside/secret.md", "# top secret\n\npassword\n")
    secret_img = _write(tmp_path, "outside/secret.png", b"\x89PNG\r\n\x1a\nsecret")
    _write(root, "ok.md", "# fine\n")
    (root / "leak.md").symlink_to(secret)
    (root / "leak.png").symlink_to(secret_img)

    opened: list[str] = []
    real_read_bytes = pathlib.Path.read_bytes
    real_open = open

    def spy_read_bytes(self):
        opened.append(str(Path(self).resolve()))
        return real_read_bytes(self)

    def spy_open(file, *a, **kw):
        opened.append(str(Path(file).resolve()))
        return real_open(file, *a, **kw)

    real_os_open = os.open

    def spy_os_open(file, *a, **kw):  # what read_regular opens files with
        opened.append(str(Path(file).resolve()))
        return real_os_open(file, *a, **kw)

    monkeypatch.setattr(pathlib.Path, "read_bytes", spy_read_bytes)
    monkeypatch.setattr(discover_mod, "open", spy_open, raising=False)
    monkeypatch.setattr(discover_mod.os, "open", spy_os_open)

    got = _by_path(root)
    assert sorted(got) == ["leak.md", "leak.png", "ok.md"]
    for rel in ("leak.md", "leak.png"):
        s = got[rel]
        assert s.reason == "symlink points outside the corpus root"
        assert s.text is None
        assert s.size == 0
        assert s.content_hash == ""
    assert got["ok.md"].text == "# fine\n"
    assert str(secret.resolve()) not in opened
    assert str(secret_img.resolve()) not in opened
    assert str((root / "ok.md").resolve()) in opened  # the spy does see real reads


def test_symlink_to_file_inside_root_is_read(tmp_path):
    _write(tmp_path, "real/a.md", "# A\n")
    (tmp_path / "alias.md").symlink_to(tmp_path / "real" / "a.md")
    got = _by_path(tmp_path)
    assert got["alias.md"].reason is None
    assert got["alias.md"].text == "# A\n"
    assert got["alias.md"].content_hash == got["real/a.md"].content_hash


def test_directory_symlink_loop_does_not_recurse(tmp_path):
    _write(tmp_path, "a/doc.md", "# doc\n")
    _write(tmp_path, "top.md", "# top\n")
    (tmp_path / "a" / "loop").symlink_to("..", target_is_directory=True)
    (tmp_path / "a" / "self").symlink_to(".", target_is_directory=True)
    got = _by_path(tmp_path)
    assert sorted(got) == ["a/doc.md", "top.md"]


def test_directory_symlink_is_not_descended(tmp_path):
    outside = tmp_path / "outside"
    _write(outside, "x.md", "# x\n")
    root = tmp_path / "root"
    _write(root, "in.md", "# in\n")
    (root / "ext").symlink_to(outside, target_is_directory=True)
    assert _paths(root) == ["in.md"]


def test_file_symlink_loop_is_a_reason_not_an_exception(tmp_path):
    (tmp_path / "self.md").symlink_to(tmp_path / "self.md")
    _write(tmp_path, "ok.md", "# ok\n")
    got = _by_path(tmp_path)
    assert got["self.md"].text is None
    assert got["self.md"].reason.startswith("cannot read: ")
    assert got["ok.md"].text == "# ok\n"


# ---------------------------------------------------------------- content


def test_zero_byte_file_is_empty(tmp_path):
    _write(tmp_path, "empty.md", b"")
    _write(tmp_path, "blank.txt", b"  \n\n\t\n")
    got = _by_path(tmp_path)
    assert got["empty.md"].reason == "empty file"
    assert got["empty.md"].text is None
    assert got["empty.md"].size == 0
    assert got["blank.txt"].reason == "empty file"


def test_nul_bytes_in_markdown_is_binary(tmp_path):
    _write(tmp_path, "weird.md", b"# Title\n\x00\x01\x02 payload\n")
    s = _by_path(tmp_path)["weird.md"]
    assert s.format == "markdown"
    assert s.text is None
    assert s.reason == "binary content (NUL bytes) in a file with a text extension"
    assert s.content_hash == content_hash(b"# Title\n\x00\x01\x02 payload\n")


def test_utf16_with_bom_is_decoded(tmp_path):
    text = "# Überschrift\n\nNormaler Text.\n"
    _write(tmp_path, "u16.md", text.encode("utf-16"))
    s = _by_path(tmp_path)["u16.md"]
    assert s.text == text
    assert s.note == "decoded as UTF-16"


FRENCH = ("# Café\n\nLe café du coin est très agréable, déjà vu à côté de l'église. "
          "Où êtes-vous allé hier soir? Très bien, merci beaucoup.\n")


@pytest.mark.parametrize("text", [
    "café déjà vu " * 20,
    FRENCH,
    "# Notes\n\nRésumé: la réunion a été reportée à jeudi. Voilà.\n",
    "A informação não está disponível. São Paulo é uma cidade grande, não é?\n",
    "Här är en svensk text. Åsa åt en god smörgås på ön.\n",
    "He said “hello” — and then… left. It costs 5€ – cheap!\n",
])
def test_cp1252_text_decodes_to_the_right_text(tmp_path, text):
    data = text.encode("cp1252")
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    _write(tmp_path, "legacy.md", data)
    s = _by_path(tmp_path)["legacy.md"]
    assert s.reason is None
    assert s.text == text
    assert s.note.startswith("not UTF-8")
    assert s.content_hash == content_hash(data)


def test_latin1_bytes_decode_with_a_note(tmp_path):
    text = "Größe der Straße für Fußgänger, ungewöhnlich schön. " * 5
    _write(tmp_path, "de.txt", text.encode("latin-1"))
    s = _by_path(tmp_path)["de.txt"]
    assert s.text == text
    assert s.note.startswith("not UTF-8; decoded as ")


@pytest.mark.parametrize("text,encoding", [
    ("Привет, как дела? Это пример текста на русском языке, который закодирован. " * 3,
     "cp1251"),
    ("Zażółć gęślą jaźń. Przykładowy tekst w języku polskim, łódź i źdźbło trawy. " * 3,
     "cp1250"),
    ("Türkçe metin örneği: ağaç, şeker, ılık, İstanbul, göğüs, çiçek ve güneş. " * 3,
     "cp1254"),
    ("Αυτό είναι ένα ελληνικό κείμενο για τον έλεγχο της κωδικοποίησης χαρακτήρων. " * 3,
     "cp1253"),
])
def test_other_legacy_code_pages_are_not_taken_for_cp1252(text, encoding):
    got, note = decode(text.encode(encoding))
    assert got == text
    assert note.startswith("not UTF-8; decoded as ")
    assert "cp1252" not in note


def test_utf8_bom_is_stripped(tmp_path):
    _write(tmp_path, "bom.md", b"\xef\xbb\xbf# Title\n\nbody\n")
    s = _by_path(tmp_path)["bom.md"]
    assert s.text == "# Title\n\nbody\n"
    assert s.note is None
    assert s.size == len(b"\xef\xbb\xbf# Title\n\nbody\n")


def test_plain_utf8_has_no_note(tmp_path):
    _write(tmp_path, "u.md", "# Ünïcödé ✓ 日本語\n")
    s = _by_path(tmp_path)["u.md"]
    assert s.text == "# Ünïcödé ✓ 日本語\n"
    assert s.note is None and s.reason is None


def test_file_over_size_cap_is_too_large(tmp_path):
    p = _write(tmp_path, "big.md", "x" * 150 + "\n")
    s = read_source(tmp_path, "big.md", p, max_bytes=100)
    assert s.text is None
    assert s.reason.startswith("too large")
    assert s.size == 151
    small = _write(tmp_path, "small.md", "x" * 50 + "\n")
    assert read_source(tmp_path, "small.md", small, max_bytes=100).text == "x" * 50 + "\n"


# ---------------------------------------------------------------- formats


def test_formats_by_extension(tmp_path):
    files = {
        "img/logo.png": (b"\x89PNG\r\n\x1a\n\x00\x00", "asset"),
        "img/photo.JPG": (b"\xff\xd8\xff\xe0\x00", "asset"),
        "img/icon.svg": (b"<svg/>", "asset"),
        "lib/_ext.so": (b"\x7fELF\x02\x01\x01\x00", "binary"),
        "dist/pkg.whl": (b"PK\x03\x04", "binary"),
        "doc.md": (b"# doc\n", "markdown"),
        "doc.markdown": (b"# doc\n", "markdown"),
        "mod.py": (b"x = 1\n", "python"),
        "stub.pyi": (b"x: int\n", "python"),
        "notes.txt": (b"plain\n", "text"),
        "Makefile": (b"all:\n\techo\n", "text"),
    }
    for rel, (data, _) in files.items():
        _write(tmp_path, rel, data)
    got = _by_path(tmp_path)
    assert {p: s.format for p, s in got.items()} == {p: f for p, (_, f) in files.items()}
    for rel in ("img/logo.png", "lib/_ext.so"):
        s = got[rel]
        assert s.text is None and s.reason is None
        assert s.size == len(files[rel][0])
        assert s.content_hash == content_hash(files[rel][0])


def test_names_with_spaces_and_unicode(tmp_path):
    names = ["my notes.md", "café/résumé.md", "日本語/ドキュメント.md", "emoji 🚀.txt"]
    for i, rel in enumerate(names):
        _write(tmp_path, rel, f"# doc {i}\n")
    got = _by_path(tmp_path)
    assert sorted(got) == sorted(names)
    for i, rel in enumerate(names):
        assert got[rel].text == f"# doc {i}\n"
    assert _paths(tmp_path, include=["café/*.md"]) == ["café/résumé.md"]


# ---------------------------------------------------------------- hashing


def test_content_hash_changes_iff_bytes_change(tmp_path):
    p = _write(tmp_path, "a.md", "# A\n\nfirst\n")
    h1 = _by_path(tmp_path)["a.md"].content_hash
    assert len(h1) == 32

    p.write_text("# A\n\nfirst\n")  # same bytes, new mtime
    os.utime(p, (1_000_000, 1_000_000))
    assert _by_path(tmp_path)["a.md"].content_hash == h1

    _write(tmp_path, "copy.md", "# A\n\nfirst\n")  # same bytes elsewhere
    assert _by_path(tmp_path)["copy.md"].content_hash == h1

    p.write_text("# A\n\nfirsT\n")  # one byte differs
    h2 = _by_path(tmp_path)["a.md"].content_hash
    assert h2 != h1

    p.write_text("# A\n\nfirst\n")  # back to the original bytes
    assert _by_path(tmp_path)["a.md"].content_hash == h1


def test_content_hash_is_of_raw_bytes_not_decoded_text(tmp_path):
    _write(tmp_path, "plain.md", b"# T\n")
    _write(tmp_path, "bom.md", b"\xef\xbb\xbf# T\n")
    got = _by_path(tmp_path)
    assert got["plain.md"].text == got["bom.md"].text == "# T\n"
    assert got["plain.md"].content_hash != got["bom.md"].content_hash


def test_empty_python_module_is_indexed_not_skipped(tmp_path):
    """An empty ``__init__.py`` defines a package: it must become a module node."""
    _write(tmp_path, "pkg/__init__.py", b"")
    (src,) = discover(tmp_path)
    assert src.reason is None and src.text == "" and src.note == "empty file"


# --------------------------------------------------------------------------- odd files

def _in_thread(fn, timeout=120):
    """Run ``fn``; a hang fails the test instead of the suite."""
    import threading

    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported to the caller
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "hung"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_a_fifo_is_skipped_without_being_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe.md")
    _write(tmp_path, "ok.md", "# ok\n")
    got = _in_thread(lambda: {s.path: s for s in discover(tmp_path)})
    assert got["pipe.md"].text is None and "FIFO" in got["pipe.md"].reason
    assert got["ok.md"].text == "# ok\n"


def test_a_character_device_is_never_read(tmp_path):
    """/dev/zero never ends: reading it 'until EOF' would take all memory."""
    src = _in_thread(lambda: read_source(Path("/dev"), "zero.md", Path("/dev/zero")))
    assert src.text is None and "character device" in src.reason
    try:
        os.mknod(tmp_path / "zero.md", 0o644 | __import__("stat").S_IFCHR, os.makedev(1, 5))
    except (PermissionError, OSError):
        return  # no CAP_MKNOD here: /dev/zero itself was checked above
    got = _in_thread(lambda: {s.path: s for s in discover(tmp_path)})
    assert "character device" in got["zero.md"].reason


def test_a_file_over_the_cap_is_never_read_or_hashed(tmp_path, monkeypatch):
    with open(tmp_path / "huge.png", "wb") as f:
        f.truncate(3 * 2**30)  # sparse: no disk
    with open(tmp_path / "huge.md", "wb") as f:
        f.truncate(3 * 2**30)
    reads: list[int] = []
    real_read = os.read

    def spy(fd, n):
        reads.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", spy)
    got = {s.path: s for s in discover(tmp_path)}
    for name in ("huge.png", "huge.md"):
        assert "too large" in got[name].reason and got[name].content_hash.startswith("size:")
    assert not reads


def test_an_asset_is_hashed_in_blocks(tmp_path):
    """An image under the cap is hashed as it streams by; the hash is the hash of
    its bytes (the parse cache key must not change with the reading strategy)."""
    data = os.urandom(3 * 2**20 + 17)
    (tmp_path / "pic.png").write_bytes(data)
    src = read_source(tmp_path, "pic.png", tmp_path / "pic.png")
    assert src.content_hash == content_hash(data) and src.size == len(data)


def test_nul_free_binaries_are_skipped_with_a_reason(tmp_path):
    _write(tmp_path, "random.md", os.urandom(20000).replace(b"\x00", b"\x01"))
    _write(tmp_path, "fake.py", b"\x7fELF\x02\x01\x01" + os.urandom(4000).replace(b"\x00", b"\x02"))
    _write(tmp_path, "notes.md", "# Café\n\nla señora del tercer piso\n".encode("cp1252"))
    _write(tmp_path, "mz.md", "MZ is how the manual abbreviates the main zone.\n")
    got = {s.path: s for s in discover(tmp_path)}
    assert got["random.md"].text is None and "control bytes" in got["random.md"].reason
    assert got["fake.py"].text is None and "ELF" in got["fake.py"].reason
    assert "señora" in got["notes.md"].text  # legacy text still decodes
    assert got["mz.md"].text.startswith("MZ is")  # a signature in letters is not enough


def test_a_name_that_is_not_utf8_is_indexed_under_an_escaped_name(tmp_path):
    (tmp_path / os.fsdecode(b"caf\xe9.md")).write_text("# Cafe\n\nnotes\n")
    got = {s.path: s for s in discover(tmp_path)}
    assert list(got) == ["caf\\xe9.md"]
    src = got["caf\\xe9.md"]
    assert src.text.startswith("# Cafe") and "not valid UTF-8" in src.note
    src.path.encode("utf-8")  # storable in Parquet
