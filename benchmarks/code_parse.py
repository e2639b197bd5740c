"""Code parsing speed on one large generated Go file.

Times :func:`stages.parse.code.parse_code` (tree-sitter) on a generated
40,012-line Go file (3,334 commented receiver methods and structs), best of 3,
and, given ``--old FILE``, the hand-written parser it replaced on the same
input, e.g. ``git show bcdcc30:stages/parse/code_languages.py > /tmp/old.py``.
Prints the figures; asserts nothing.

Usage: ``python -m benchmarks.code_parse [--old /tmp/old.py] [--units 3334] [--json FILE]``
(``--json``: also write the figures there)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

from benchmarks.common import RESULTS, size
from strata.stages.parse.code import parse_code

UNIT = ("// F{i} returns a value.\nfunc (s *Server) F{i}(x int) (int, error) {{\n"
        "\tif x > {i} {{\n\t\treturn x, nil\n\t}}\n\treturn {i}, nil\n}}\n\n"
        "type T{i} struct {{\n\tA int\n}}\n\n")


def _load(path: str):
    spec = importlib.util.spec_from_file_location("old_code_languages", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.parse_code


def _time(parse, src: str) -> tuple[float, int]:
    best, count = float("inf"), 0
    for _ in range(3):
        t0 = time.perf_counter()
        parsed = parse(src, "big/gen.go", "go")
        best = min(best, time.perf_counter() - t0)
        count = sum(1 for _ in parsed.root.walk()) - 1
    return best, count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", help="the old code_languages.py, to compare")
    ap.add_argument("--units", type=int, default=size(3334, 50))
    ap.add_argument("--json", type=Path, default=size(None, RESULTS / "code_parse.json"),
                    help="also write the figures here")
    args = ap.parse_args()
    src = "package big\n\nimport \"fmt\"\n\n" + "".join(UNIT.format(i=i) for i in range(args.units))
    print(f"generated Go file: {src.count(chr(10)):,} lines, {len(src) / 2**20:.1f} MiB")
    parsers = [("tree-sitter", parse_code)] + ([("hand-written (old)", _load(args.old))] if args.old else [])
    figures = {}
    for name, parse in parsers:
        seconds, defs = _time(parse, src)
        figures[name] = {"seconds": round(seconds, 3), "definitions": defs}
        print(f"{name:>20}: {seconds:.2f} s best of 3, {defs:,} definitions")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"lines": src.count("\n"), "parsers": figures},
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
