"""Write the MuSiQue-100 passage corpus as one Markdown file per passage.

Each entry of ``shared/data/musique_100/corpus.json`` becomes
``p{i:04d}.md`` containing ``# {title}\\n\\n{text}\\n``, so the normal parse
stage turns it into a file node with one h1 section (and chunks when long).
HippoRAG's passages are ``title + "\\n" + text``; see
``stages.enrich.openie.match_import`` for how they are matched back.

Usage: ``python -m benchmarks.musique_corpus OUT_DIR``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.common import size

MUSIQUE_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "musique_100"
CORPUS_FILE = MUSIQUE_DIR / "corpus.json"
OPENIE_FILE = MUSIQUE_DIR / "openie_gpt-3.5-turbo-1106.json"
# a smoke run's passages: the first ones, the candidates of the first question
SMOKE_PASSAGES = 20


def passage_file(i: int) -> str:
    return f"p{i:04d}.md"


def passage_count() -> int | None:
    """How many passages (the first ones) a run writes: None for all of them."""
    return size(None, SMOKE_PASSAGES)


def write_corpus(out_dir, corpus_file: Path = CORPUS_FILE) -> int:
    """Write every corpus entry (the first :func:`passage_count`) to ``out_dir``;
    returns the number of files."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    entries = json.loads(Path(corpus_file).read_text(encoding="utf-8"))[:passage_count()]
    for i, entry in enumerate(entries):
        body = f"# {entry['title']}\n\n{entry['text']}\n"
        (out / passage_file(i)).write_text(body, encoding="utf-8")
    return len(entries)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m benchmarks.musique_corpus OUT_DIR", file=sys.stderr)
        return 2
    n = write_corpus(args[0])
    print(f"wrote {n} passages to {args[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
