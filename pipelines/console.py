"""Terminal output: tables and results, coloured (with ``rich`` when it is
importable) on a terminal, plain text otherwise."""

from __future__ import annotations

import sys

# exit codes of every `strata` command (README, `strata --help`)
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_LOCKED = 75  # another build of the index is running (EX_TEMPFAIL: try again later)


def say(msg: str = "", *, err: bool = False) -> None:
    """One line to stdout (data) or stderr (progress, errors), flushed."""
    print(msg, file=sys.stderr if err else sys.stdout, flush=True)


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


def _rich_console(file):
    """A rich Console for ``file`` when it is a terminal and rich is importable, else None."""
    try:
        if not file.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=file, highlight=False, soft_wrap=False)


def _snippet(text: str, n: int = 240) -> str:
    s = " ".join((text or "").split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _relation(r) -> str:
    return r.relation + (f" via {r.via}" if r.via else "")


def _context_line(r) -> str:
    """Where a hit sits: 'in <parent> · next to <siblings>' (empty without context)."""
    ctx = r.context or []
    parent = [c["title"] for c in ctx if c["relation"] in ("parent", "container")][:2]
    near = [c["title"] for c in ctx if c["relation"] == "sibling"]
    parts = ([f"in {' / '.join(parent)}"] if parent else []) + \
        ([f"next to {'; '.join(near)}"] if near else [])
    return _snippet(" · ".join(parts), 200)


def print_results(results, file=None) -> None:
    file = file or sys.stdout
    console = _rich_console(file)
    if console is not None:
        return _rich_results(console, results)
    if not results:
        print("no results", file=file)
    for i, r in enumerate(results, 1):
        rel = f"  {_relation(r)}" if r.relation != "seed" else ""
        print(f"{i}. [{r.kind}] {r.breadcrumb}  score {r.score:.3f}{rel}", file=file)
        print(f"   {r.path}{_lines(r)}  {r.node_path}", file=file)
        if _context_line(r):
            print(f"   {_context_line(r)}", file=file)
        print(f"   {_snippet(r.text)}", file=file)


def _rich_results(console, results) -> None:
    from rich.markup import escape
    from rich.table import Table

    if not results:
        console.print("[dim]no results[/dim]")
        return
    table = Table(show_lines=True, expand=True)
    table.add_column("#", justify="right", style="bold", no_wrap=True)
    table.add_column("result", ratio=3)
    table.add_column("kind", style="cyan", no_wrap=True)
    table.add_column("relation", style="magenta")
    table.add_column("score", justify="right", no_wrap=True)
    for i, r in enumerate(results, 1):
        where = _context_line(r)
        cell = (f"[bold]{escape(r.breadcrumb)}[/bold]\n[dim]{escape(r.path + _lines(r))}[/dim]\n"
                + (f"[dim italic]{escape(where)}[/dim italic]\n" if where else "")
                + f"{escape(_snippet(r.text, 300))}")
        rel = r.relation if r.relation == "seed" else f"[yellow]{escape(_relation(r))}[/yellow]"
        table.add_row(str(i), cell, r.kind, rel, f"{r.score:.3f}")
    console.print(table)


def format_trace(trace: dict) -> str:
    """A trace dict (``Trace.to_dict()`` plus the routed extras) as plain text."""
    lines = [f"trace ({trace.get('mode', '')}): {trace.get('total_ms', 0)} ms total"]
    for k, v in (trace.get("timings_ms") or {}).items():
        lines.append(f"  {k}: {v} ms")
    if trace.get("counts"):
        lines.append("  counts: " + ", ".join(f"{k}={v}" for k, v in trace["counts"].items()))
    for n in trace.get("notes") or []:
        lines.append(f"  note: {n}")
    return "\n".join(lines)


def print_trace(trace: dict, file=None) -> None:
    file = file or sys.stderr
    console = _rich_console(file)
    text = format_trace(trace)
    if console is None:
        print(text, file=file, flush=True)
        return
    from rich.markup import escape

    head, *rest = text.split("\n")
    console.print(f"[bold]{escape(head)}[/bold]")
    for line in rest:
        console.print(f"[dim]{escape(line)}[/dim]")


def _source_line(s: dict) -> str:
    loc = s["path"] + (f":{s['lines']}" if s.get("lines") and not str(s["lines"]).startswith("page")
                       else f" ({s['lines']})" if s.get("lines") else "")
    via = f"  (via {s['via']})" if s.get("via") else ""
    return f"[{s.get('n', '?')}] {loc} — {s['breadcrumb']}{via}"


def print_answer(answer, file=None) -> None:
    """An :class:`retrieval.answer.Answer`: text, sources, connections, reasoning."""
    file = file or sys.stdout
    console = _rich_console(file)
    if console is not None:
        from rich.markup import escape
        from rich.panel import Panel

        title = "answer (extractive)" if answer.extractive else "answer"
        console.print(Panel(escape(answer.text), title=title, border_style="green"))
        console.print("[bold]Sources consulted:[/bold]")
        for s in answer.sources or []:
            console.print(f"  {escape(_source_line(s))}")
        if not answer.sources:
            console.print("  [dim](none)[/dim]")
        if answer.connections:
            console.print("[bold]Connected files read (single-hop):[/bold]")
            for s in answer.connections:
                console.print(f"  [yellow]{escape(_source_line(s))}[/yellow]")
        console.print(f"[bold]Reasoning:[/bold] [dim]{escape(answer.reasoning)}[/dim]")
        return
    print(answer.text, file=file)
    print("", file=file)
    print("Sources consulted:", file=file)
    for s in answer.sources or []:
        print(f"  {_source_line(s)}", file=file)
    if not answer.sources:
        print("  (none)", file=file)
    if answer.connections:
        print("Connected files read (single-hop):", file=file)
        for s in answer.connections:
            print(f"  {_source_line(s)}", file=file)
    print(f"Reasoning: {answer.reasoning}", file=file)


def print_stats(idx, stats: dict) -> None:
    """What `strata index` and `strata map` print about an index."""
    m = idx.manifest
    say(f"index {idx.path} — corpus '{m['corpus']}', version {idx.version}, "
        f"model {m['model']} (dim {m['dim']})")
    say(f"files: {stats['files']}   nodes: {stats['nodes']}   edges: {stats['edges']}   "
        f"max depth: {stats['max_depth']}")
    say(kv_table("files by format", stats["files_by_format"]))
    say(kv_table("nodes by kind", stats["nodes_by_kind"]))
    say(kv_table("edges by type", stats["edges_by_type"]))
    say(kv_table("depth distribution", stats["depth_distribution"]))
    stages = m.get("stages", {})
    if stages:
        say(kv_table("stage seconds", {k: round(v.get("seconds", 0), 2) for k, v in stages.items()}))
        emb = stages.get("embed", {})
        parse = stages.get("parse", {})
        say(f"parse: {parse.get('parsed', 0)} files parsed, {parse.get('reused', 0)} reused; "
               f"embeddings: {emb.get('computed', 0)} computed, {emb.get('reused', 0)} reused")
    _listing("skipped", [f"{s['path']}: {s['reason']}" for s in stats["skipped"]], 30)
    if stats["notes"]:
        say(f"\nparser notes ({len(stats['notes'])}):")
        for n in stats["notes"][:10]:
            say(f"  {n['path']}: {n['note']}")
    failures = stats.get("failures") or []
    _listing("not sent to the LLM", [_failure(f) for f in failures if f.get("cause") == "input"],
             10, "offline stand-ins used")
    _listing("LLM failures", [_failure(f) for f in failures if f.get("cause") != "input"],
             10, "offline stand-ins used, retried next build")


def _failure(f: dict) -> str:
    return f"{f['stage']} {f['node_id']}: {_snippet(f['error'], 160)}"


def _listing(title: str, rows: list[str], limit: int, about: str = "") -> None:
    """A titled list of at most ``limit`` lines, then how many more there are."""
    if not rows:
        return
    say(f"\n{title} ({len(rows)}{'; ' + about if about else ''}):")
    for row in rows[:limit]:
        say(f"  {row}")
    if len(rows) > limit:
        say(f"  … and {len(rows) - limit} more (strata map --stats --json)")
