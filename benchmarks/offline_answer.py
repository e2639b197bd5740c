"""The answer without a language model: does it quote the passage that answers?

Without an LLM, ``ask`` answers by quoting whole prose sentences of the top
sources (:mod:`retrieval.extractive`). On the OpenHarmony dev set
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
  block inside it): the failures the offline answer exists to avoid;
* gold retrieved — the gold section (or a node inside it) among the results:
  how often the answer could have held a key sentence at all.

Reuses the index of :mod:`benchmarks.openharmony_dev` (run that first).

Usage: ``python -m benchmarks.offline_answer [--index DIR]``
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from benchmarks.common import SCRATCH, machine, mean_pct, target, targets_md, write_result
from benchmarks.openharmony_dev import dev_questions, gold_sections, norm_heading, section_of

K = 8


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


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
    from strata.retrieval.extractive import extractive_quotes, has_prose_text, prose_sentences

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
            if norm_heading(x.text).rstrip(".:") in headings or r.kind == "code" \
                    or any(s in c for c in code):
                bad.append(x.text)
        top = results[0] if results else None
        rows.append({
            "id": q["id"],
            "key_sentence": any(s in text for s in gold_sentences),
            "gold_has_sentences": bool(gold_sentences),
            "gold_retrieved": any(sec(r.node_id) == g or r.node_id == g for r in results),
            "top1_quoted": any(x.n == 1 for x in quotes),
            "top1_has_prose": bool(top is not None and has_prose_text(top)
                                   and prose_sentences(top.text, [top.title])),
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


def markdown(report: dict) -> str:
    r = report["offline answer"]
    keys = [k for k in r if k != "per question"]
    lines = [f"Offline answers on {report['benchmark']} (default mode, k={K}, min_relevance=0)",
             "", "| measure | value |", "|---|---|"]
    lines += [f"| {k} | {r[k]} |" for k in keys]
    bad = [(row["id"], s) for row in r["per question"] for s in row["bad_quotes"]]
    if bad:
        lines += ["", "Headings or code quoted as prose:", ""]
        lines += [f"- {qid}: {s}" for qid, s in bad]
    lines += targets_md(report["targets"])
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default=str(SCRATCH / "openharmony" / "index"))
    args = ap.parse_args()
    index_dir = Path(args.index).resolve()
    if not (index_dir / "CURRENT").exists():
        raise SystemExit(f"{index_dir} not built: run benchmarks.openharmony_dev first")
    questions = dev_questions()
    result = evaluate(index_dir, questions)
    targets = [
        target("key sentence ≥ 70 %", result["key sentence %"], result["key sentence %"] >= 70),
        target("no heading or code quoted as prose", result["answers quoting a heading or code"],
               result["answers quoting a heading or code"] == 0),
        target("every answer says no language model wrote it",
               result["answers saying no model wrote them %"],
               result["answers saying no model wrote them %"] == 100),
    ]
    report = {"benchmark": f"the OpenHarmony dev set ({len(questions)} questions)",
              "machine": machine(), "offline answer": result, "targets": targets}
    write_result("offline_answer", report, markdown(report))


if __name__ == "__main__":
    main()
