"""The answer without a language model: does it quote the passage that answers?

Without an LLM, ``ask`` answers by quoting whole prose sentences of the top
sources (:mod:`retrieval.extractive`), and code by its docstring or comments.

On the OpenHarmony dev set
(``benchmarks/data/openharmony_dev.yaml``), each question is asked offline
(default mode, ``k=8``, ``min_relevance=0`` so that the relevance floor does
not decline any) and scored on:

* key sentence — the answer contains at least one whole sentence of the gold
  section's own text (the section and its descendants, cut into sentences by
  the same splitter, compared with whitespace collapsed and case folded);
* top-1 quoted — the answer quotes the first-ranked source (also given over
  the questions whose first source has prose at all, since code and tables
  are pointed to rather than quoted);
* headings or code quoted — answers that quote, as a sentence, a section
  heading of the index or a line of a code node (the source itself or a code
  block inside it) that is not its docstring or comment: the failures the
  offline answer exists to avoid;
* gold retrieved — the gold section (or a node inside it) among the results:
  how often the answer could have held a key sentence at all.

On the stdlib code questions (``benchmarks/data/stdlib_code_questions.yaml``,
gold = 1-3 definitions of CPython's standard library), asked the same way:

* docstring sentence — over the questions where a gold unit has a docstring,
  the answer contains a whole sentence of one (cut by the same splitter);
* code quoted — answers holding a line of a retrieved unit's code (a line of
  12 characters or more that is neither a comment nor part of its docstring);
* gold retrieved — a gold unit among the results.

Reuses the index of :mod:`benchmarks.openharmony_dev` and the one of
:mod:`benchmarks.stdlib_code` (run those first; either part is skipped, and
its previous figures kept, when its index is missing).

Usage: ``python -m benchmarks.offline_answer [--index DIR] [--code-index DIR]``
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from benchmarks.common import (RESULTS, SCRATCH, machine, mean_pct, target, targets_md,
                               write_result)
from benchmarks.openharmony_dev import dev_questions, gold_sections, norm_heading, section_of

K = 8


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _unescaped(text: str) -> str:
    return _norm(re.sub(r"\\(?=[^\w\s])", "", text))


def _subtrees(idx):
    """node id -> the ids of its descendants (itself included)."""
    nodes = idx.nodes().select("node_id", "parent_id")
    children: dict[str, list[str]] = {}
    for nid, parent in nodes.iter_rows():
        if parent is not None:
            children.setdefault(parent, []).append(nid)

    def under(nid: str) -> list[str]:
        out, stack = [], [nid]
        while stack:
            cur = stack.pop()
            out.append(cur)
            stack.extend(children.get(cur, ()))
        return out

    return under


def evaluate(index_dir: Path, questions: list[dict]) -> dict:
    from strata.retrieval import Index
    from strata.retrieval.answer import ask
    from strata.retrieval.code_prose import code_prose
    from strata.retrieval.extractive import (extractive_quotes, prose_sentences,
                                             quotable_sentences)

    idx = Index.open(index_dir)
    gold = gold_sections(idx, questions)
    nodes = idx.nodes()
    info = {nid: (kind, title or "", crumb or "", text or "") for nid, kind, title, crumb, text
            in nodes.select("node_id", "kind", "title", "breadcrumb", "text").iter_rows()}
    headings = {norm_heading(t) for nid, (kind, t, _, _) in info.items() if kind == "section" and t}
    under = _subtrees(idx)
    sec = section_of(idx)

    def sentences_of(nid: str) -> set[str]:
        kind, title, crumb, text = info[nid]
        return {_norm(s) for s in prose_sentences(text, [title, *crumb.split(" > ")])}

    rows = []
    for q, g in zip(questions, gold):
        ans = ask(idx, q["question"], k=K, min_relevance=0)
        results = idx.search(q["question"], k=K, min_relevance=0)
        if [r.node_id for r in results if r.relation != "connection"] != \
                [s["node_id"] for s in ans.sources]:
            raise SystemExit(f"{q['id']}: a second search returned other results than ask's")
        text = _norm(ans.text)
        gold_sentences = set().union(*(sentences_of(n) for n in under(g)))
        quotes = extractive_quotes(q["question"], results)
        missing = [x.text for x in quotes if _norm(x.text) not in text]
        if missing:
            raise SystemExit(f"{q['id']}: quotes not in the answer text: {missing}")
        bad = []
        for x in quotes:
            r = results[x.n - 1]
            code = [_norm(info[n][3]) for n in under(r.node_id)
                    if n in info and info[n][0] == "code"]
            s = _norm(x.text)
            # a comment's Markdown escapes (``\\@Styles``) are quoted unescaped
            prose = _unescaped(code_prose(r.text, r.language)) if r.kind == "code" else ""
            if norm_heading(x.text).rstrip(".:") in headings \
                    or (r.kind == "code" and _unescaped(x.text) not in prose) \
                    or (r.kind != "code" and any(s in c for c in code)):
                bad.append(x.text)
        top = results[0] if results else None
        rows.append({
            "id": q["id"],
            "key_sentence": any(s in text for s in gold_sentences),
            "gold_has_sentences": bool(gold_sentences),
            "gold_retrieved": any(sec(r.node_id) == g or r.node_id == g for r in results),
            "top1_quoted": any(x.n == 1 for x in quotes),
            "top1_has_prose": bool(top is not None and quotable_sentences(top)),
            "sentences": len(quotes),
            "chars": len(ans.text),
            "bad_quotes": bad,
            "no_model_said": "no language model wrote" in ans.text,
        })
    with_prose = [r for r in rows if r["top1_has_prose"]]
    return {
        "questions": len(rows),
        "key sentence %": mean_pct([r["key_sentence"] for r in rows]),
        "top-1 quoted %": mean_pct([r["top1_quoted"] for r in rows]),
        "top-1 quoted, top-1 with prose %": mean_pct([r["top1_quoted"] for r in with_prose]),
        "top-1 with prose": len(with_prose),
        "answers quoting a heading or code": sum(bool(r["bad_quotes"]) for r in rows),
        "gold retrieved %": mean_pct([r["gold_retrieved"] for r in rows]),
        "key sentence, gold retrieved %": mean_pct([r["key_sentence"] for r in rows
                                                    if r["gold_retrieved"]]),
        "gold sections without prose": sum(not r["gold_has_sentences"] for r in rows),
        "answers saying no model wrote them %": mean_pct([r["no_model_said"] for r in rows]),
        "mean sentences": round(statistics.mean(r["sentences"] for r in rows), 2),
        "mean chars": round(statistics.mean(r["chars"] for r in rows)),
        "per question": rows,
    }


def code_lines(text: str, language: str | None) -> list[str]:
    """The lines of a unit's code, whitespace collapsed, case kept: neither
    comments nor lines of its docstring or comments, and 12 characters or more
    (shorter ones, ``return x``, may well occur in prose)."""
    from strata.retrieval.code_prose import code_prose

    prose = " ".join(code_prose(text, language).split())
    out = []
    for line in (text or "").splitlines():
        s = " ".join(line.split())
        if len(s) >= 12 and not s.startswith(("#", "//", "/*", "*")) and s not in prose:
            out.append(s)
    return out


def quoted_code(answer: str, lines) -> list[str]:
    """The code lines that occur in ``answer`` whole: as they are written (case
    kept) and not inside a longer name ("Return false if" quotes no
    ``return False``; "PathFinder.invalidate_caches()" no
    ``finder.invalidate_caches()``)."""
    text = " ".join(answer.split())
    return sorted(line for line in set(lines)
                  if re.search(r"(?<![\w.])" + re.escape(line) + r"(?!\w)", text))


def evaluate_code(index_dir: Path, questions: list[dict]) -> dict:
    """The stdlib code questions asked offline: does the answer quote the gold
    unit's docstring, and never a line of code?"""
    from strata.retrieval import Index
    from strata.retrieval.answer import ask
    from strata.retrieval.code_prose import python_docstring
    from strata.retrieval.extractive import extractive_quotes, prose_sentences

    idx = Index.open(index_dir)
    nodes = idx.nodes()
    unit = {p: (nid, text or "", title or "", crumb or "") for nid, p, text, title, crumb
            in nodes.select("node_id", "node_path", "text", "title", "breadcrumb").iter_rows()}
    rows = []
    for q in questions:
        ans = ask(idx, q["question"], k=K, min_relevance=0)
        results = idx.search(q["question"], k=K, min_relevance=0)
        text = _norm(ans.text)
        gold = [unit[g] for g in q["gold"] if g in unit]
        docs = [python_docstring(t) for _, t, _, _ in gold]
        sentences = {_norm(s) for (_, _, title, crumb), d in zip(gold, docs)
                     for s in prose_sentences(d, [title, *crumb.split(" > ")])}
        code = quoted_code(ans.text, [line for r in results
                                      for line in code_lines(r.text, r.language)])
        quotes = extractive_quotes(q["question"], results)
        gold_ids = {nid for nid, _, _, _ in gold}
        rows.append({
            "id": q["id"],
            "gold_has_docstring": any(d.strip() for d in docs),
            "gold_docstring_has_sentences": bool(sentences),
            "docstring_sentence": any(s in text for s in sentences),
            "gold_retrieved": any(r.node_id in gold_ids for r in results),
            "code_sources_quoted": len({x.n for x in quotes
                                        if results[x.n - 1].kind == "code"}),
            "sentences": len(quotes),
            "chars": len(ans.text),
            "code_quoted": code,
            "no_model_said": "no language model wrote" in ans.text,
        })
    with_doc = [r for r in rows if r["gold_has_docstring"]]
    retrieved = [r for r in with_doc if r["gold_retrieved"]]
    return {
        "questions": len(rows),
        "gold with a docstring": len(with_doc),
        "gold docstring with a whole sentence": sum(r["gold_docstring_has_sentences"]
                                                    for r in rows),
        "docstring sentence %": mean_pct([r["docstring_sentence"] for r in with_doc]),
        "gold retrieved, gold with a docstring %": mean_pct([r["gold_retrieved"]
                                                             for r in with_doc]),
        "docstring sentence, gold retrieved %": mean_pct([r["docstring_sentence"]
                                                          for r in retrieved]),
        "answers quoting no source %": mean_pct([r["sentences"] == 0 for r in rows]),
        "answers quoting a line of code": sum(bool(r["code_quoted"]) for r in rows),
        "answers saying no model wrote them %": mean_pct([r["no_model_said"] for r in rows]),
        "mean sentences": round(statistics.mean(r["sentences"] for r in rows), 2),
        "mean chars": round(statistics.mean(r["chars"] for r in rows)),
        "per question": rows,
    }


def _table(title: str, r: dict) -> list[str]:
    lines = [title, "", "| measure | value |", "|---|---|"]
    return lines + [f"| {k} | {v} |" for k, v in r.items() if k != "per question"]


def markdown(report: dict) -> str:
    lines = []
    r = report.get("offline answer")
    if r:
        lines += _table(f"Offline answers on {report['benchmark']} (default mode, k={K}, "
                        "min_relevance=0)", r)
        bad = [(row["id"], s) for row in r["per question"] for s in row["bad_quotes"]]
        if bad:
            lines += ["", "Headings or code quoted as prose:", ""]
            lines += [f"- {qid}: {s}" for qid, s in bad]
    c = report.get("offline answer, code")
    if c:
        lines += ([""] if lines else []) + _table(
            f"Offline answers on {report['code benchmark']} (default mode, k={K}, "
            "min_relevance=0)", c)
        bad = [(row["id"], s) for row in c["per question"] for s in row["code_quoted"]]
        if bad:
            lines += ["", "Lines of code in the answer:", ""]
            lines += [f"- {qid}: `{s}`" for qid, s in bad]
    lines += targets_md(report["targets"])
    return "\n".join(lines)


def _targets(result: dict) -> list[dict]:
    return [
        target("key sentence ≥ 70 %", result["key sentence %"], result["key sentence %"] >= 70),
        target("no heading or code quoted as prose", result["answers quoting a heading or code"],
               result["answers quoting a heading or code"] == 0),
        target("every answer says no language model wrote it",
               result["answers saying no model wrote them %"],
               result["answers saying no model wrote them %"] == 100),
    ]


def _code_targets(c: dict) -> list[dict]:
    return [
        target("code: a sentence of the gold unit's docstring ≥ 70 % (gold with a docstring)",
               c["docstring sentence %"], c["docstring sentence %"] >= 70),
        target("code: no line of code quoted", c["answers quoting a line of code"],
               c["answers quoting a line of code"] == 0),
        target("code: every answer says no language model wrote it",
               c["answers saying no model wrote them %"],
               c["answers saying no model wrote them %"] == 100),
    ]


def main() -> None:
    from benchmarks.hyprag_peer import load_questions

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default=str(SCRATCH / "openharmony" / "index"))
    ap.add_argument("--code-index", default=str(SCRATCH / "stdlib_subset_index"))
    args = ap.parse_args()
    index_dir, code_dir = Path(args.index).resolve(), Path(args.code_index).resolve()
    have = {"docs": (index_dir / "CURRENT").exists(), "code": (code_dir / "CURRENT").exists()}
    if not any(have.values()):
        raise SystemExit(f"neither {index_dir} nor {code_dir} is built: run "
                         "benchmarks.openharmony_dev or benchmarks.stdlib_code first")
    previous = RESULTS / "offline_answer.json"
    report = json.loads(previous.read_text()) if previous.exists() else {}
    report["machine"] = machine()
    if have["docs"]:
        questions = dev_questions()
        report["benchmark"] = f"the OpenHarmony dev set ({len(questions)} questions)"
        report["offline answer"] = evaluate(index_dir, questions)
    else:
        print(f"{index_dir} not built: the OpenHarmony figures are the previous run's")
    if have["code"]:
        questions = load_questions()
        report["code benchmark"] = f"the stdlib code questions ({len(questions)} questions)"
        report["offline answer, code"] = evaluate_code(code_dir, questions)
    else:
        print(f"{code_dir} not built: the code figures are the previous run's")
    report["targets"] = (_targets(report["offline answer"]) if "offline answer" in report
                         else []) + (_code_targets(report["offline answer, code"])
                                     if "offline answer, code" in report else [])
    write_result("offline_answer", report, markdown(report))


if __name__ == "__main__":
    main()
