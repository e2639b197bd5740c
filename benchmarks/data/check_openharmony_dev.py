"""Validate the OpenHarmony dev question set (openharmony_dev.yaml).

For every entry this checks that:
  * it has non-empty string fields id, question, file, heading, and the id is unique;
  * ``file`` exists under the document folder (exact, case-sensitive relative path);
  * ``heading`` occurs exactly once as a Markdown ATX heading in that file
    (headings inside fenced code blocks are ignored).
It also checks the set-level rules: at most --max-per-file questions per file,
at least --min-questions questions and at least --min-files distinct files.

Exits 1 listing every failure, otherwise prints "N questions over M files OK".

Usage:
    python benchmarks/data/check_openharmony_dev.py [--yaml PATH] [--root DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
DEFAULT_YAML = HERE / "openharmony_dev.yaml"
DEFAULT_ROOT = Path(__file__).resolve().parents[3] / "shared/data/openharmony_quickstart"

REQUIRED_FIELDS = ("id", "question", "file", "heading")

# CommonMark ATX heading: up to 3 spaces of indent, 1-6 '#', then a space/tab or end of line.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
# Optional closing sequence: whitespace followed by only '#' characters.
_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")


def atx_headings(text: str) -> list[str]:
    """Return heading texts (trimmed, closing #'s removed) outside fenced code blocks."""
    headings: list[str] = []
    fence: str | None = None  # the opening fence run, e.g. "```" or "~~~~"
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = m.group(1)
                continue
        else:
            # A closing fence uses the same character, is at least as long, and has no info string.
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2).strip():
                fence = None
            continue
        h = _ATX.match(line)
        if h:
            content = h.group(2) or ""
            content = _CLOSING.sub("", content).strip()
            headings.append(content)
    return headings


def check(yaml_path: Path, root: Path, max_per_file: int, min_questions: int, min_files: int) -> tuple[list[str], int, int]:
    failures: list[str] = []
    try:
        data = yaml.safe_load(yaml_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        return [f"cannot load {yaml_path}: {exc}"], 0, 0
    if not isinstance(data, list):
        return [f"{yaml_path}: top level must be a YAML list, got {type(data).__name__}"], 0, 0
    if not root.is_dir():
        return [f"document folder not found: {root}"], len(data), 0

    root_resolved = root.resolve()
    heading_cache: dict[str, list[str]] = {}
    ids: Counter[str] = Counter()
    per_file: Counter[str] = Counter()

    for idx, entry in enumerate(data):
        where = f"entry #{idx + 1}"
        if not isinstance(entry, dict):
            failures.append(f"{where}: not a mapping")
            continue
        if isinstance(entry.get("id"), str):
            where = f"{entry['id']} (entry #{idx + 1})"
        missing = [k for k in REQUIRED_FIELDS if not isinstance(entry.get(k), str) or not entry[k].strip()]
        if missing:
            failures.append(f"{where}: missing or empty field(s): {', '.join(missing)}")
            continue
        extra = sorted(set(entry) - set(REQUIRED_FIELDS))
        if extra:
            failures.append(f"{where}: unexpected field(s): {', '.join(extra)}")
        ids[entry["id"]] += 1

        rel = entry["file"]
        path = root / rel
        try:
            inside = path.resolve().is_relative_to(root_resolved)
        except OSError:
            inside = False
        parts = rel.split("/")
        canonical = "\\" not in rel and all(part not in ("", ".", "..") for part in parts)
        if Path(rel).is_absolute() or not inside or not canonical:
            failures.append(f"{where}: file {rel!r} is not a plain relative path inside {root} (no '.', '..', empty parts or backslashes)")
            continue
        if not path.is_file():
            failures.append(f"{where}: file {rel!r} not found under {root}")
            continue
        per_file[rel] += 1

        if rel not in heading_cache:
            heading_cache[rel] = atx_headings(path.read_text(encoding="utf-8"))
        n = heading_cache[rel].count(entry["heading"])
        if n != 1:
            what = "not found" if n == 0 else f"found {n} times (ambiguous)"
            failures.append(f"{where}: heading {entry['heading']!r} {what} as an ATX heading in {rel}")

    for qid, n in sorted(ids.items()):
        if n > 1:
            failures.append(f"duplicate id {qid!r} ({n} entries)")
    for rel, n in sorted(per_file.items()):
        if n > max_per_file:
            failures.append(f"{rel}: {n} questions (max {max_per_file} per file)")
    if len(data) < min_questions:
        failures.append(f"only {len(data)} questions (need at least {min_questions})")
    if len(per_file) < min_files:
        failures.append(f"only {len(per_file)} distinct files (need at least {min_files})")
    return failures, len(data), len(per_file)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--yaml", type=Path, default=DEFAULT_YAML, help=f"question file (default: {DEFAULT_YAML})")
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"document folder (default: {DEFAULT_ROOT})")
    ap.add_argument("--max-per-file", type=int, default=3)
    ap.add_argument("--min-questions", type=int, default=34)
    ap.add_argument("--min-files", type=int, default=25)
    args = ap.parse_args(argv)

    failures, n_questions, n_files = check(args.yaml, args.root, args.max_per_file, args.min_questions, args.min_files)
    if failures:
        print(f"{args.yaml}: {len(failures)} problem(s):", file=sys.stderr)
        for f in failures:
            print(f"  - {f}", file=sys.stderr)
        return 1
    print(f"{n_questions} questions over {n_files} files OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
