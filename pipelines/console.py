"""Terminal output: tables and results, plain when not on a terminal."""

from __future__ import annotations

import sys


def kv_table(title: str, data: dict) -> str:
    if not data:
        return f"{title}: (none)"
    width = max(len(str(k)) for k in data)
    lines = [f"{title}:"] + [f"  {str(k).ljust(width)}  {v}" for k, v in data.items()]
    return "\n".join(lines)


def _lines(r) -> str:
    if r.start_line is None:
        return ""
    return f":{r.start_line}" + (f"-{r.end_line}" if r.end_line and r.end_line != r.start_line else "")


def print_results(results, file=None) -> None:
    file = file or sys.stdout
    color = file.isatty()
    bold, dim, reset = ("\033[1m", "\033[2m", "\033[0m") if color else ("", "", "")
    if not results:
        print("no results", file=file)
    for i, r in enumerate(results, 1):
        print(f"{bold}{i}. [{r.kind}] {r.breadcrumb}{reset}  {dim}score {r.score:.3f}{reset}", file=file)
        print(f"   {dim}{r.path}{_lines(r)}  {r.node_path}{reset}", file=file)
        snippet = " ".join(r.text.split())[:240]
        print(f"   {snippet}", file=file)
