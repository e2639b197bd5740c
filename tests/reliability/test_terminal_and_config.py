"""What a document or a config file holds never takes over the terminal or the
command: control sequences in document text and file names are shown, not
obeyed; a broken corpora file, an impossible corpus name or a manifest with
the wrong types ends in one line that says what to fix, never a traceback.

Everything runs the real `strata` commands on a real index built from a corpus
whose text and file names carry terminal escapes (OSC 52 writes the clipboard,
OSC 0 sets the window title, CSI 2J clears the screen, C1 CSI, DEL, bidi
overrides, and a newline in a file name that forges a result line)."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys

import pytest

from strata.pipelines.cli import main

BIDI = {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}
FORGED = "1. [section] forged  score 9.999"
EVIL_NAME = f"evil\n{FORGED}\x1b[2J.md"
DOCS = {
    "clipboard.md": "# Harbour \x1b]0;owned title\x07 gauge\n\n"
                    "The harbour tide gauge \x1b]52;c;cHduZWQ=\x07 copies the clipboard.\n\n"
                    "## Drift \x1b[2J cleared\n\n"
                    "Barometric drift \x9b31m is corrected \x7f hourly \u202e against \u2066 "
                    "the reference \x1b[31m red.\n",
    EVIL_NAME: "# Salinity\n\nSalinity of the harbour is logged every hour.\n",
}
SKIPPED_NAME = "bad\x1b]0;t\x07.bin"  # skipped as binary: `strata map` lists it


def raw_controls(text: str, allow: str = "\n") -> list[str]:
    """Characters a terminal would obey that ``text`` holds raw."""
    return sorted({c for c in text if (ord(c) < 0x20 and c not in allow)
                   or 0x7F <= ord(c) <= 0x9F or c in BIDI})


def _env(monkeypatch, base) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(base / "dagster_home"))
    monkeypatch.setenv("STRATA_CORPORA", str(base / "corpora.yaml"))
    monkeypatch.setenv("STRATA_SHARDS", "1")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(index folder, corpus folder): one real build of the hostile corpus."""
    base = tmp_path_factory.mktemp("hostile")
    root = base / "corpus"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    (root / SKIPPED_NAME).write_bytes(b"\x00\x01\x02" * 100)
    with pytest.MonkeyPatch.context() as mp:
        _env(mp, base)
        assert main(["index", str(root), "--corpus", "hostile", "--out", str(base / "index"),
                     "-q"]) == 0
    return base / "index", root


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    _env(monkeypatch, tmp_path)
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "tides.md").write_text("# Tides\n\nThe harbour gauge reads the tide every minute.\n")
    return root


def _human(capsys, argv: list[str]) -> tuple[str, str]:
    assert main(argv) == 0
    got = capsys.readouterr()
    for stream in (got.out, got.err):
        assert raw_controls(stream) == [], stream
    return got.out, got.err


def test_search_ask_map_show_control_characters_and_never_emit_them(hostile, capsys):
    index, _ = hostile
    out, _ = _human(capsys, ["search", "--index", str(index), "harbour tide gauge"])
    assert "\\x1b]52;c;cHduZWQ=\\x07" in out and "\\x1b]0;owned title\\x07" in out
    assert "\\x1b[2J" in out and "\\x9b31m" in out and "\\x7f" in out and "\\u202e" in out
    # one result line per result: the newline in the file name forges none
    assert main(["search", "--index", str(index), "--json", "harbour tide gauge"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert len(re.findall(r"^\d+\. \[", out, re.M)) == len(results) == 3
    assert f"evil\\n{FORGED}\\x1b[2J.md" in out
    assert not any(line.startswith(FORGED) for line in out.splitlines())

    out, err = _human(capsys, ["ask", "--index", str(index), "--trace", "harbour tide gauge"])
    assert "\\x1b]52;c;cHduZWQ=\\x07" in out and f"evil\\n{FORGED}" in out
    assert not any(line.startswith(FORGED) for line in out.splitlines())
    assert "trace (" in err

    out, _ = _human(capsys, ["map", "--index", str(index)])
    assert "bad\\x1b]0;t\\x07.bin: binary" in out


class _Terminal(io.StringIO):
    """A stdout that says it is a terminal: the commands then print with rich."""

    def isatty(self) -> bool:
        return True


def test_rich_output_on_a_terminal_shows_them_too(hostile, monkeypatch):
    index, _ = hostile
    monkeypatch.setenv("COLUMNS", "200")
    for argv in (["search", "--index", str(index), "harbour tide gauge"],
                 ["ask", "--index", str(index), "harbour tide gauge"]):
        term = _Terminal()
        monkeypatch.setattr(sys, "stdout", term)
        assert main(argv) == 0
        monkeypatch.undo()
        text = term.getvalue()
        # rich styles its output with SGR sequences of its own: only those may be raw
        styled = re.sub(r"\x1b\[[0-9;]*m", "", text)
        assert raw_controls(styled) == [], text
        assert "\\x1b]52" in text and "\\x1b]0;" in text, text
        monkeypatch.setenv("COLUMNS", "200")


def test_json_output_escapes_every_control_character(hostile, capsys):
    index, _ = hostile
    for argv in (["search", "--index", str(index), "--json", "harbour tide gauge"],
                 ["ask", "--index", str(index), "--json", "harbour tide gauge"],
                 ["map", "--index", str(index), "--json"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert raw_controls(out) == [], argv
        json.loads(out)  # still JSON, the document's bytes kept
    assert main(["search", "--index", str(index), "--json", "barometric drift"]) == 0
    out = capsys.readouterr().out
    assert "\\u009b31m" in out and "\\u007f" in out and "\\u202e" in out and "\\u001b[31m" in out
    texts = " ".join(r["text"] for r in json.loads(out)["results"])
    assert "\x9b31m" in texts and "\x1b[31m" in texts


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ") and "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize("file", ["corpora.yaml", "corpora.local.yaml"])
def test_a_corrupt_corpora_file_is_one_line_naming_file_and_line(cli_env, tmp_path, capsys, file):
    bad = tmp_path / file
    bad.write_text("# corpora\ncorpora: [1,2\n")
    assert main(["index", str(cli_env), "--corpus", "c", "--out", str(tmp_path / "i")]) == 2
    line = _one_line(capsys)
    assert str(bad) in line and "line 3" in line and "expected ',' or ']'" in line, line

    bad.write_bytes(b"corpora:\n  c:\n    root: \xff\xfe\n")
    assert main(["index", str(cli_env), "--corpus", "c", "--out", str(tmp_path / "i")]) == 2
    line = _one_line(capsys)
    assert str(bad) in line and "line 3" in line and "UTF-8" in line, line


def test_a_corrupt_corpora_file_exits_2_without_a_traceback(cli_env, tmp_path):
    import os
    import subprocess

    (tmp_path / "corpora.yaml").write_text("corpora: [1,2")
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "index", str(cli_env),
                           "--corpus", "c", "--out", str(tmp_path / "i")],
                          capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_too_long_corpus_name_is_refused_in_one_line(cli_env, tmp_path, capsys):
    assert main(["index", str(cli_env), "--corpus", "a" * 300]) == 2
    line = _one_line(capsys)
    assert "corpus name" in line and "too long" in line, line
    assert not (tmp_path / "indexes").exists()
    # the existing rules still hold
    assert main(["index", str(cli_env), "--corpus", "no/slash"]) == 2
    assert "invalid corpus name" in _one_line(capsys)


@pytest.mark.parametrize("field,value", [
    ("dim", "abc"), ("dim", 0), ("dim", True), ("dim", None), ("embedding", "minilm"),
    ("embedding", None), ("version", "abc"), ("version", 7), ("version", None)])
def test_a_manifest_of_the_wrong_types_is_index_damaged(hostile, tmp_path, capsys, field, value):
    index, root = hostile
    copy = tmp_path / "index"
    shutil.copytree(index, copy, symlinks=True)
    manifest = copy / "versions" / "v000001" / "manifest.json"
    m = json.loads(manifest.read_text())
    if value is None:
        del m[field]
    else:
        m[field] = value
    manifest.unlink()  # a hard link of the build's copy: replace it, do not write through
    manifest.write_text(json.dumps(m))
    for argv in (["search", "--index", str(copy), "harbour"], ["map", "--index", str(copy)]):
        assert main(argv) == 1
        line = _one_line(capsys)
        assert f"index {copy} is damaged: versions/v000001/manifest.json of version 1" in line
        assert field in line and f"rebuild it with: strata index {root}" in line, line
