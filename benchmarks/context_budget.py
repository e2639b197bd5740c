"""Context under a token budget: how much of the gold does the assembled context hold?

For budgets of 500, 1,500 and 4,000 estimated tokens (4 characters a token,
:func:`retrieval.context.estimate_tokens`), the default mode's
``budget_tokens`` context against flat top-k cut at the same budget: dense kNN
results taken in rank order while they fit (a unit that does not fit is
skipped and a later, shorter one may still be taken: the same greedy rule the
default uses). Both are scored on the same questions:

* OpenHarmony dev set: a gold section is held when a block is that section, one
  of its chunks (a long section's text lives in its chunks), or a merged
  ancestor whose whole text includes it.
* stdlib code questions: a gold definition is held when a block is that
  definition or a merged ancestor (a class taken whole with its methods).

Reuses the indexes of :mod:`benchmarks.openharmony_dev` and
:mod:`benchmarks.stdlib_code` (run those first).

Usage: ``python -m benchmarks.context_budget``
"""

from __future__ import annotations

import statistics
from pathlib import Path

from benchmarks.common import SCRATCH, machine, target, targets_md, write_result

BUDGETS = (500, 1500, 4000)


def _flat_context(idx, query: str, budget: int) -> list:
    from strata.core.tokens import estimate_tokens

    out, used = [], 0
    for r in idx.search(query, mode="flat", k=300):
        c = estimate_tokens(r.text)
        if used + c <= budget:
            out.append(r)
            used += c
    return out


def _held(idx, blocks, gold_id: str, chunked_by: dict[str, str]) -> bool:
    from strata.retrieval.context import ancestors

    g = idx.graph
    j = g.index[gold_id]
    above = set(ancestors(g, j))
    for b in blocks:
        i = g.index.get(b.node_id)
        if i == j or chunked_by.get(b.node_id) == gold_id:
            return True
        if b.relation == "merged" and i in above:
            return True
    return False


def coverage(idx, questions: list[tuple[str, list[str]]]) -> dict:
    import polars as pl

    n = idx.nodes()
    chunks = n.filter(pl.col("kind") == "chunk")
    chunked_by = dict(zip(chunks["node_id"].to_list(), chunks["parent_id"].to_list()))
    out = {}
    for budget in BUDGETS:
        row = {}
        for name, assemble in (("default", lambda q, b: idx.search(q, budget_tokens=b)),
                               ("flat", lambda q, b: _flat_context(idx, q, b))):
            shares, blocks = [], []
            for q, gold in questions:
                ctx = assemble(q, budget)
                blocks.append(len(ctx))
                shares.append(sum(_held(idx, ctx, g, chunked_by) for g in gold) / len(gold))
            row[name] = round(100 * statistics.mean(shares), 1)
            row[f"{name} blocks"] = round(statistics.mean(blocks), 1)
        out[str(budget)] = row
    return out


def oh_questions(idx) -> list[tuple[str, list[str]]]:
    from benchmarks.openharmony_dev import dev_questions, gold_sections

    qs = dev_questions()
    return [(q["question"], [g]) for q, g in zip(qs, gold_sections(idx, qs))]


def stdlib_questions(idx) -> list[tuple[str, list[str]]]:
    from benchmarks.hyprag_peer import load_questions

    n = idx.nodes()
    by_path = dict(zip(n["node_path"].to_list(), n["node_id"].to_list()))
    return [(q["question"], [by_path[g] for g in q["gold"]]) for q in load_questions()]


def main() -> None:
    from strata.retrieval import Index

    sets = {"OpenHarmony sections": (SCRATCH / "openharmony" / "index", oh_questions),
            "stdlib definitions": (SCRATCH / "stdlib_subset_index", stdlib_questions)}
    results, targets = {}, []
    for name, (folder, questions) in sets.items():
        if not (Path(folder) / "CURRENT").exists():
            raise SystemExit(f"{folder} not built: run benchmarks.openharmony_dev and "
                             "benchmarks.stdlib_code first")
        idx = Index.open(folder)
        results[name] = coverage(idx, questions(idx))
        for budget, row in results[name].items():
            targets.append(target(f"{name}, {budget} tokens: default > flat top-k",
                                  f"{row['default']} vs {row['flat']}",
                                  row["default"] > row["flat"]))
    lines = ["| gold held | budget (tokens) | default | flat top-k | default blocks | "
             "flat blocks |", "|---|---|---|---|---|---|"]
    for name, rows in results.items():
        for budget, r in rows.items():
            lines.append(f"| {name} | {budget} | {r['default']} | {r['flat']} | "
                         f"{r['default blocks']} | {r['flat blocks']} |")
    lines += targets_md(targets)
    write_result("context_budget", {"machine": machine(), "coverage": results,
                                    "targets": targets}, "\n".join(lines))


if __name__ == "__main__":
    main()
