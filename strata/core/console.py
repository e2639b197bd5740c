"""Terminal output: tables and results, coloured (with ``rich`` when it is
importable) on a terminal, plain text otherwise.

Document text, titles and file names come from whoever wrote the corpus: every
such string passes :func:`visible` on its way to the terminal, and ``--json``
output goes through :func:`print_json`."""

from __future__ import annotations

import json
import sys

# exit codes of every `strata` command (README, `strata --help`)
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_LOCKED = 75  # another build of the index is running (EX_TEMPFAIL: try again later)


def _shown(code: int) -> str:
    if code < 0x100:
        return {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}.get(code, f"\\x{code:02x}")
    return f"\\u{code:04x}"


# what a terminal obeys instead of showing: C0 controls, DEL, C1 controls (0x9b is
# a one-byte CSI), the bidi overrides and isolates that reorder what follows them
# (so a line reads differently from what it holds), and the Unicode line breaks
_OBEYED = [*range(0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F),
           *range(0x2066, 0x206A), 0x2028, 0x2029]
_ONE_LINE = {c: _shown(c) for c in _OBEYED}
_MULTILINE = {c: v for c, v in _ONE_LINE.items() if c not in (0x09, 0x0A)}


def visible(text, *, multiline: bool = False) -> str:
    """``text`` as a terminal may be given it: every character the terminal would
    obey rather than show is written out as its escape (``\\x1b``, ``\\x9b``,
    ``\\u202e``), so that document text and file names, which anyone who can
    write into a corpus controls, cannot set the clipboard (OSC 52) or the window
    title, clear the screen, reorder a line or forge output lines.

    One-line fields (paths, breadcrumbs, titles) show newlines and tabs escaped
    too; ``multiline`` keeps them, for text that is printed as lines (an
    answer). One table for every printer, so none escapes less than another."""
    return ("" if text is None else str(text)).translate(_MULTILINE if multiline else _ONE_LINE)


def say(msg: str = "", *, err: bool = False) -> None:
    """One line to stdout (data) or stderr (progress, errors), flushed; whatever
    it holds that a terminal would obey is shown escaped (:func:`visible`)."""
    print(visible(msg, multiline=True), file=sys.stderr if err else sys.stdout, flush=True)


def print_json(obj, *, err: bool = False, indent: int | None = 2) -> None:
    """``--json`` output: every control character, C1 and DEL included, escaped as
    JSON escapes it (``\\u009b``), never raw; non-ASCII text escaped likewise,
    so the output is plain ASCII whatever the terminal or pipe makes of bytes."""
    print(json.dumps(obj, indent=indent, ensure_ascii=True), file=sys.stderr if err else sys.stdout,
          flush=True)


def kv_table(title: str, data: dict) -> str:
    if not data:
        return f"{title}: (none)"
    keys = {k: visible(k) for k in data}
    width = max(len(k) for k in keys.values())
    lines = [f"{title}:"] + [f"  {keys[k].ljust(width)}  {visible(v)}" for k, v in data.items()]
    return "\n".join(lines)


def _lines(r) -> str:
    if r.start_line is None:
        return ""
    return f":{r.start_line}" + (f"-{r.end_line}" if r.end_line and r.end_line != r.start_line else "")


def _rich_console(file):
    """A rich Console for ``file`` when it is a terminal, else None."""
    try:
        if not file.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    from rich.console import Console

    return Console(file=file, highlight=False, soft_wrap=False)


def _snippet(text: str, n: int = 240) -> str:
    """One line of at most ``n`` characters, whitespace collapsed, controls shown."""
    s = visible(" ".join((text or "").split()))
    return s if len(s) <= n else s[: n - 1] + "…"


def _relation(r) -> str:
    return visible(r.relation + (f" via {r.via}" if r.via else ""))


def _context_line(r) -> str:
    """Where a hit sits: 'in <parent> · next to <siblings>' (empty without context)."""
    ctx = r.context or []
    parent = [c["title"] for c in ctx if c["relation"] in ("parent", "container")][:2]
    near = [c["title"] for c in ctx if c["relation"] == "sibling"]
    parts = ([f"in {' / '.join(parent)}"] if parent else []) + \
        ([f"next to {'; '.join(near)}"] if near else [])
    return _snippet(" · ".join(parts), 200)


def _relevance(r) -> str:
    """A result's estimated relevance as printed ('0.83'; '-' when unknown)."""
    return "-" if r.relevance is None else f"{r.relevance:.2f}"


def _note(results) -> str | None:
    """What the relevance floor left out (``SearchResults.note``), one line;
    None for a plain list or when nothing was left out."""
    note = getattr(results, "note", None)
    return visible(note) if note else None


def print_results(results, file=None) -> None:
    """Ranked results, each with its score and estimated relevance, then the
    note on what fell below the relevance floor: when nothing reached it the
    note (the closest result and its relevance) stands instead of the list, so
    an empty answer still says why."""
    file = file or sys.stdout
    console = _rich_console(file)
    if console is not None:
        return _rich_results(console, results)
    note = _note(results)
    if not results and not note:
        print("no results", file=file)
    for i, r in enumerate(results, 1):
        rel = f"  {_relation(r)}" if r.relation != "seed" else ""
        print(f"{i}. [{visible(r.kind)}] {visible(r.breadcrumb)}  score {r.score:.3f}  "
              f"relevance {_relevance(r)}{rel}", file=file)
        print(f"   {visible(r.path)}{_lines(r)}  {visible(r.node_path)}", file=file)
        if _context_line(r):
            print(f"   {_context_line(r)}", file=file)
        print(f"   {_snippet(r.text)}", file=file)
    if note:
        print(note, file=file)


def _rich_results(console, results) -> None:
    from rich.markup import escape
    from rich.table import Table

    note = _note(results)
    if not results:
        console.print(escape(note) if note else "[dim]no results[/dim]")
        return
    table = Table(show_lines=True, expand=True)
    table.add_column("#", justify="right", style="bold", no_wrap=True)
    table.add_column("result", ratio=3)
    table.add_column("kind", style="cyan", no_wrap=True)
    table.add_column("relation", style="magenta")
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("relevance", justify="right", no_wrap=True)
    for i, r in enumerate(results, 1):
        where = _context_line(r)
        cell = (f"[bold]{escape(visible(r.breadcrumb))}[/bold]\n"
                f"[dim]{escape(visible(r.path) + _lines(r))}[/dim]\n"
                + (f"[dim italic]{escape(where)}[/dim italic]\n" if where else "")
                + f"{escape(_snippet(r.text, 300))}")
        rel = escape(_relation(r))
        rel = rel if r.relation == "seed" else f"[yellow]{rel}[/yellow]"
        table.add_row(str(i), cell, escape(visible(r.kind)), rel, f"{r.score:.3f}",
                      _relevance(r))
    console.print(table)
    if note:
        console.print(f"[dim]{escape(note)}[/dim]")


def tokens_used(results) -> int:
    """Estimated tokens of the blocks a budgeted search returned, as the search
    counted them (:func:`retrieval.modes.run_mode` keeps ``tokens_used`` in the
    trace of every search given a budget)."""
    return int(results.trace.counts["tokens_used"])


def budget_line(used: int, budget: int) -> str:
    """How much of a token budget the printed results take."""
    return f"about {used} tokens of a {budget}-token budget"


def format_trace(trace: dict) -> str:
    """A trace dict (``Trace.to_dict()`` plus the routed extras) as plain text."""
    lines = [f"trace ({trace.get('mode', '')}): {trace.get('total_ms', 0)} ms total"]
    for k, v in (trace.get("timings_ms") or {}).items():
        lines.append(f"  {k}: {v} ms")
    if trace.get("counts"):
        lines.append("  counts: " + ", ".join(f"{k}={v}" for k, v in trace["counts"].items()))
    for n in trace.get("notes") or []:
        lines.append(f"  note: {n}")
    return "\n".join(visible(line) for line in lines)


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
    return visible(f"[{s.get('n', '?')}] {loc} — {s['breadcrumb']}{via}")


def _answer_text(text: str, answer) -> str:
    """An answer's text (or reasoning) for the terminal. It is printed as lines,
    so its own newlines stay; but the paths it quotes are one-line fields, and a
    newline in a file name must not start a line of its own there either."""
    text = text or ""
    for s in [*(answer.sources or []), *(answer.connections or [])]:
        path = s.get("path") or ""
        if path and visible(path) != path:
            text = text.replace(path, visible(path))
    return visible(text, multiline=True)


def print_answer(answer, file=None) -> None:
    """An :class:`retrieval.answer.Answer`: text, sources, connections, reasoning."""
    file = file or sys.stdout
    console = _rich_console(file)
    if console is not None:
        from rich.markup import escape
        from rich.panel import Panel

        title = "answer (extractive)" if answer.extractive else "answer"
        console.print(Panel(escape(_answer_text(answer.text, answer)), title=title,
                            border_style="green"))
        console.print("[bold]Sources consulted:[/bold]")
        for s in answer.sources or []:
            console.print(f"  {escape(_source_line(s))}")
        if not answer.sources:
            console.print("  [dim](none)[/dim]")
        if answer.connections:
            console.print("[bold]Connected files read (single-hop):[/bold]")
            for s in answer.connections:
                console.print(f"  [yellow]{escape(_source_line(s))}[/yellow]")
        console.print(f"[bold]Reasoning:[/bold] "
                      f"[dim]{escape(_answer_text(answer.reasoning, answer))}[/dim]")
        return
    print(_answer_text(answer.text, answer), file=file)
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
    print(f"Reasoning: {_answer_text(answer.reasoning, answer)}", file=file)


def file_changes_line(changes: dict) -> str:
    """``2 added, 1 changed, 1 removed``: what a build did to the corpus's files
    (the parse step's record), as every build summary says it."""
    return (f"{changes.get('added', 0)} added, {changes.get('changed', 0)} changed, "
            f"{changes.get('removed', 0)} removed")


def print_stats(idx, stats: dict, stages: dict | None = None) -> None:
    """What `strata index` and `strata map` print about an index. ``stages``: what
    each stage of the build just run did (its build report), when that is not the
    version's own (a build that found nothing new keeps the version it built
    before, whose manifest tells of the build that made it)."""
    m = idx.manifest
    say(f"index {visible(idx.path)} — corpus '{visible(m['corpus'])}', version {idx.version}, "
        f"model {visible(m['model'])} (dim {m['dim']})")
    say(f"files: {stats['files']}   nodes: {stats['nodes']}   edges: {stats['edges']}   "
        f"max depth: {stats['max_depth']}")
    say(kv_table("files by format", stats["files_by_format"]))
    say(kv_table("nodes by kind", stats["nodes_by_kind"]))
    say(kv_table("edges by type", stats["edges_by_type"]))
    say(kv_table("depth distribution", stats["depth_distribution"]))
    stages = m.get("stages", {}) if stages is None else stages
    if stages:
        say(kv_table("stage seconds", {k: round(v.get("seconds", 0), 2) for k, v in stages.items()}))
        emb = stages.get("embed", {})
        parse = stages.get("parse", {})
        say(f"files: {file_changes_line(parse)}; parse: {parse.get('parsed', 0)} files parsed, "
            f"{parse.get('reused', 0)} reused; "
            f"embeddings: {emb.get('computed', 0)} computed, {emb.get('reused', 0)} reused")
    _listing("skipped", [visible(f"{s['path']}: {s['reason']}") for s in stats["skipped"]], 30)
    if stats["notes"]:
        say(f"\nparser notes ({len(stats['notes'])}):")
        for n in stats["notes"][:10]:
            say(f"  {visible(n['path'])}: {visible(n['note'])}")
    failures = stats.get("failures") or []
    _listing("not sent to the LLM", [_failure(f) for f in failures if f.get("cause") == "input"],
             10, "offline stand-ins used")
    _listing("LLM failures", [_failure(f) for f in failures if f.get("cause") != "input"],
             10, "offline stand-ins used, retried next build")


def _failure(f: dict) -> str:
    return f"{visible(f['stage'])} {visible(f['node_id'])}: {_snippet(f['error'], 160)}"


def _listing(title: str, rows: list[str], limit: int, about: str = "") -> None:
    """A titled list of at most ``limit`` lines, then how many more there are."""
    if not rows:
        return
    say(f"\n{title} ({len(rows)}{'; ' + about if about else ''}):")
    for row in rows[:limit]:
        say(f"  {row}")
    if len(rows) > limit:
        say(f"  … and {len(rows) - limit} more (strata map --stats --json)")
