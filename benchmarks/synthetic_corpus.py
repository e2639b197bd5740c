"""A reproducible corpus of any size for build-throughput benchmarks.

Documents are Markdown pages (sections, sub-sections, a code block, a table,
links to other pages) and Python modules (classes, methods, docstrings,
imports of other modules), written from the sample corpus's own vocabulary so
chunking, summaries, OpenIE and embeddings see text of a realistic shape. The
same seed gives byte-identical files, so runs are comparable.

Usage: ``python -m benchmarks.synthetic_corpus OUT --files 2000``
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

from benchmarks.common import REPO

SAMPLE = REPO / "data" / "sample"
PY_SHARE = 0.25  # a quarter of the files are Python modules


def _vocabulary() -> list[str]:
    words: list[str] = []
    for p in sorted(SAMPLE.rglob("*")):
        if p.suffix in (".md", ".py", ".rst"):
            words += re.findall(r"[A-Za-z][a-z]{3,}", p.read_text(errors="replace"))
    return sorted({w.lower() for w in words})


class _Writer:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.words = _vocabulary()

    def sentence(self, topic: list[str]) -> str:
        n = self.rng.randint(6, 12)
        ws = [self.rng.choice(topic) if self.rng.random() < 0.3 else self.rng.choice(self.words)
              for _ in range(n)]
        return ws[0].capitalize() + " " + " ".join(ws[1:]) + "."

    def paragraph(self, topic: list[str]) -> str:
        return " ".join(self.sentence(topic) for _ in range(self.rng.randint(2, 3)))

    def ident(self) -> str:
        return "_".join(self.rng.sample(self.words, 2))

    def page(self, i: int, n_pages: int) -> str:
        topic = self.rng.sample(self.words, 6)
        title = " ".join(w.capitalize() for w in topic[:3])
        out = [f"# {title}", "", self.paragraph(topic), ""]
        for s in range(self.rng.randint(1, 3)):
            out += [f"## {topic[s].capitalize()} {self.rng.choice(self.words)}", "",
                    self.paragraph(topic), ""]
            if self.rng.random() < 0.2:
                out += [f"### {self.rng.choice(self.words).capitalize()} notes", "",
                        self.paragraph(topic), ""]
            if s == 0 and self.rng.random() < 0.4:
                fn = self.ident()
                out += ["```python", f"def {fn}(value: float) -> float:",
                        f"    return value * {self.rng.randint(2, 9)}", "```", ""]
            if s == 1 and self.rng.random() < 0.5:
                out += ["| setting | value |", "|---|---|"]
                out += [f"| {self.rng.choice(self.words)} | {self.rng.randint(1, 500)} |"
                        for _ in range(self.rng.randint(2, 5))]
                out += [""]
        other = self.rng.randrange(n_pages)
        out += [f"See [the related page](page-{other:05d}.md).", ""]
        return "\n".join(out)

    def module(self, i: int, n_modules: int) -> str:
        topic = self.rng.sample(self.words, 5)
        other = self.rng.randrange(n_modules)
        out = [f'"""{self.paragraph(topic)}"""', "", f"from pkg.mod_{other:05d} import helper", ""]
        for c in range(self.rng.randint(1, 2)):
            cls = "".join(w.capitalize() for w in self.rng.sample(topic, 2)) + str(c)
            out += ["", f"class {cls}:", f'    """{self.sentence(topic)}"""', ""]
            for _ in range(self.rng.randint(1, 3)):
                out += [f"    def {self.ident()}(self, x: int) -> int:",
                        f'        """{self.sentence(topic)}"""',
                        f"        return helper(x) + {self.rng.randint(1, 99)}", ""]
        out += ["", "def helper(x: int) -> int:", f'    """{self.sentence(topic)}"""',
                "    return x", ""]
        return "\n".join(out)


def generate(out: Path, files: int = 2000, seed: int = 7) -> list[Path]:
    """Write the corpus into ``out`` (replacing what is there); returns the files."""
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    (out / "docs").mkdir(parents=True)
    (out / "pkg").mkdir()
    (out / "pkg" / "__init__.py").write_text('"""Generated package."""\n')
    w = _Writer(seed)
    n_mod = int(files * PY_SHARE)
    n_pages = files - n_mod - 1
    written = [out / "pkg" / "__init__.py"]
    for i in range(n_pages):
        p = out / "docs" / f"page-{i:05d}.md"
        p.write_text(w.page(i, n_pages))
        written.append(p)
    for i in range(n_mod):
        p = out / "pkg" / f"mod_{i:05d}.py"
        p.write_text(w.module(i, n_mod))
        written.append(p)
    return written


def edit_fraction(root: Path, fraction: float, seed: int = 11) -> list[str]:
    """Edit ``fraction`` of the files in place (a new paragraph or function);
    returns their relative paths."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "__init__.py")
    rng = random.Random(seed)
    chosen = rng.sample(files, max(1, round(len(files) * fraction)))
    w = _Writer(seed)
    for p in chosen:
        if p.suffix == ".md":
            p.write_text(p.read_text() + "\n## Edited\n\n" + w.paragraph(w.words[:50]) + "\n")
        else:
            p.write_text(p.read_text() + f"\n\ndef edited_{rng.randrange(10**6)}() -> int:\n"
                         "    return 1\n")
    return [str(p.relative_to(root)) for p in chosen]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    n = len(generate(args.out, args.files, args.seed))
    print(f"wrote {n} files to {args.out}")


if __name__ == "__main__":
    main()
