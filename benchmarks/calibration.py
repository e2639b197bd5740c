"""Relevance calibration: fits the weights of :mod:`retrieval.relevance` on the
dev sets and reports how well the result means what it says.

For each dev index (OpenHarmony pages, stdlib code, MuSiQue passages) its own
questions are in-corpus and the other two sets' questions are out-of-corpus.
Every question's top 10 default-mode results (floor 0) give one labelled row
each: relevant when it is (or holds, or sits in) the gold definition or a
supporting passage, or lies on the page of the gold section (the dev set names
the section that answers best; the rest of that page is on the question's
topic); every result of an out-of-corpus question is
irrelevant. A logistic model over the four features is fitted on the pooled
rows (each dev set weighted equally), and a ``generic`` one without the raw
cosine for indexes of other embedding models; both are written to
``retrieval/calibration.json``.

Reported per dev set: the Brier score and the reliability curve of every
result's relevance; the AUROC of the *top* result's relevance between in-corpus
and out-of-corpus questions, in-sample and with the dev set itself left out of
the fit (the honest figure for a corpus the weights never saw); and, for a
sweep of floors, the share of out-of-corpus questions answered "nothing
relevant" against the share of in-corpus questions whose gold leaves the top 5.
The recommended default floor is the highest that keeps the in-corpus loss at
or under 5 % on every dev set.

Usage: ``python -m benchmarks.calibration [--no-write]`` (needs the dev
indexes of ``benchmarks.openharmony_dev``, ``benchmarks.stdlib_code`` and
``benchmarks.musique_recall`` in ``benchmarks/scratch``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS, SCRATCH, machine, smoke, write_result

TOP = 10
FLOORS = (0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)
MAX_LOSS = 5.0  # % of in-corpus questions allowed to lose their gold from the top 5
CAL_FILE = Path(__file__).resolve().parents[1] / "retrieval" / "calibration.json"


# --------------------------------------------------------------------------- dev sets

def _openharmony():
    from benchmarks.openharmony_dev import dev_questions, gold_sections, section_of
    from strata.retrieval import Index

    idx = Index.open(SCRATCH / "openharmony" / "index")
    qs = dev_questions()
    gold = gold_sections(idx, qs)
    sec = section_of(idx)
    parent = dict(zip(idx.nodes()["node_id"].to_list(), idx.nodes()["parent_id"].to_list()))

    def above(nid):
        out, cur = set(), parent.get(nid)
        while cur is not None and len(out) < 64:
            out.add(cur)
            cur = parent.get(cur)
        return out

    # graded: the gold section (or what holds it) is the answer; the rest of its page
    # is on the question's topic. Relevant here means on topic: the dev set names the
    # best section, not the only useful one. ``strict`` marks the answer itself.
    def answer(g):
        return lambda r: sec(r.node_id) == g or r.node_id in above(g)

    def on_topic(g, f):
        return lambda r: r.path == f or answer(g)(r)

    labels = [on_topic(g, q["file"]) for g, q in zip(gold, qs)]
    return idx, [q["question"] for q in qs], labels, [answer(g) for g in gold]


def _stdlib():
    from benchmarks.hyprag_peer import load_questions
    from strata.retrieval import Index

    idx = Index.open(SCRATCH / "stdlib_subset_index")
    qs = load_questions()

    def label(gold):
        def relevant(r):
            p = r.node_path or ""
            return any(p == g or p.startswith(g + ".") or g.startswith(p + ".") for g in gold)
        return relevant

    labels = [label(q["gold"]) for q in qs]
    return idx, [q["question"] for q in qs], labels, labels


def _musique():
    from benchmarks.musique_recall import gold_sets
    from strata.retrieval import Index

    idx = Index.open(SCRATCH / "musique" / "index")
    questions, gold = gold_sets()
    def supporting(g):
        return lambda r: r.path in g

    labels = [supporting(g) for g in gold]
    return idx, questions, labels, labels


DEV_SETS = {"OpenHarmony dev": _openharmony, "stdlib code": _stdlib, "MuSiQue": _musique}


# --------------------------------------------------------------------------- rows

def collect() -> dict:
    """Per dev set: feature rows and labels of every (question, result) pair,
    in-corpus and out-of-corpus, and each question's top-5 gold ranks."""
    from strata.retrieval.relevance import features

    loaded = {name: load() for name, load in DEV_SETS.items()}
    out = {}
    for name, (idx, questions, labels, strict) in loaded.items():
        rows = {"X": [], "y": [], "gold": [], "query": [], "ood": [], "rank": []}
        asked = [(q, lab, st, False) for q, lab, st in zip(questions, labels, strict)]
        for other, (_, oq, _, _) in loaded.items():
            if other != name:
                asked += [(q, None, None, True) for q in oq]
        for qi, (q, lab, st, ood) in enumerate(asked):
            res = list(idx.search(q, k=TOP, min_relevance=0))
            if not res:
                continue
            x = features(idx, q, res)
            for rank, (r, f) in enumerate(zip(res, x)):
                rows["X"].append(f)
                rows["y"].append(0 if ood else int(bool(lab(r))))
                rows["gold"].append(0 if ood else int(bool(st(r))))
                rows["query"].append(qi)
                rows["ood"].append(ood)
                rows["rank"].append(rank)
        out[name] = {k: np.asarray(v) for k, v in rows.items()}
        print(f"  {name}: {len(asked)} questions, {len(rows['y'])} results", flush=True)
    return out


# --------------------------------------------------------------------------- the fit

def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float = 1e-2) -> tuple[np.ndarray, float]:
    """Weighted L2-regularised logistic regression by Newton's method, on
    standardised features; returns (weights, bias) on the raw features."""
    mu, sd = x.mean(0), x.std(0)
    sd[sd == 0] = 1.0
    z = np.column_stack([np.ones(len(x)), (x - mu) / sd])
    beta = np.zeros(z.shape[1])
    pen = np.full(z.shape[1], lam)
    pen[0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-z @ beta))
        g = z.T @ (w * (y - p)) - pen * beta
        hess = (z * (w * p * (1 - p))[:, None]).T @ z + np.diag(pen)
        step = np.linalg.solve(hess, g)
        beta += step
        if np.abs(step).max() < 1e-8:
            break
    weights = beta[1:] / sd
    return weights, float(beta[0] - (weights * mu).sum())


def weights_for(data: dict, names: list[str], cols: list[int]):
    x = np.concatenate([data[n]["X"][:, cols] for n in names])
    y = np.concatenate([data[n]["y"] for n in names]).astype(float)
    w = np.concatenate([np.full(len(data[n]["y"]), 1.0 / len(data[n]["y"])) for n in names])
    return fit(x, y, w * len(y) / len(names))


def predict(x, cols, weights, bias):
    return 1.0 / (1.0 + np.exp(-(bias + x[:, cols] @ weights)))


# --------------------------------------------------------------------------- figures

def auroc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Probability that a random positive outscores a random negative (ties half)."""
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def top_scores(d: dict, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Top result's relevance per question: (in-corpus, out-of-corpus)."""
    first = d["rank"] == 0
    return p[first & ~d["ood"]], p[first & d["ood"]]


def reliability(p: np.ndarray, y: np.ndarray, bins: int = 10) -> list[dict]:
    edges = np.linspace(0, 1, bins + 1)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (p >= lo) & ((p < hi) if hi < 1 else (p <= hi))
        if m.any():
            out.append({"bin": f"{lo:.1f}–{hi:.1f}", "n": int(m.sum()),
                        "predicted": round(float(p[m].mean()), 3),
                        "observed": round(float(y[m].mean()), 3)})
    return out


def floor_effect(d: dict, p: np.ndarray, floor: float) -> tuple[float, float]:
    """(% out-of-corpus questions with nothing above ``floor``, % in-corpus
    questions with gold in the top 5 at floor 0 that lose it at ``floor``)."""
    ood_q = np.unique(d["query"][d["ood"]])
    empty = sum(1 for q in ood_q if not (p[d["query"] == q] >= floor).any())
    lost = had = 0
    for q in np.unique(d["query"][~d["ood"]]):
        m = (d["query"] == q) & (d["rank"] < 5) & (d["gold"] == 1)
        if m.any():
            had += 1
            lost += int(not (p[m] >= floor).any())
    return 100.0 * empty / max(len(ood_q), 1), 100.0 * lost / max(had, 1)


def evaluate(data: dict, cols: list[int]) -> tuple[dict, tuple]:
    names = list(data)
    w, b = weights_for(data, names, cols)
    report = {}
    for n in names:
        d = data[n]
        p = predict(d["X"], cols, w, b)
        lw, lb = weights_for(data, [m for m in names if m != n], cols)
        p_out = predict(d["X"], cols, lw, lb)
        report[n] = {
            "questions in / out": f"{int((~d['ood'] & (d['rank'] == 0)).sum())} / "
                                  f"{int((d['ood'] & (d['rank'] == 0)).sum())}",
            "AUROC top result": round(auroc(*top_scores(d, p)), 3),
            "AUROC, this set left out of the fit": round(auroc(*top_scores(d, p_out)), 3),
            "Brier": round(float(np.mean((p - d["y"]) ** 2)), 4),
            "relevant share": round(float(d["y"].mean()), 3),
            "mean relevance": round(float(p.mean()), 3),
            "reliability": reliability(p, d["y"]),
            "gold hits in the top 5 kept at the default floor, %": kept_share(d, p),
            "floors": {f"{f:g}": [round(v, 1) for v in floor_effect(d, p, f)] for f in FLOORS},
            # the same with the weights fitted on the other two sets only
            "floors, set left out": {f"{f:g}": [round(v, 1) for v in floor_effect(d, p_out, f)]
                                     for f in FLOORS},
        }
    return report, (w, b)


def kept_share(d: dict, p: np.ndarray) -> float:
    """Of the gold results in the in-corpus questions' top 5, the share at or
    above the default floor (a multi-hop question's second passage resembles
    the question least: this is where the floor costs recall)."""
    m = ~d["ood"] & (d["rank"] < 5) & (d["gold"] == 1)
    return round(100.0 * float((p[m] >= default_floor()).mean()), 1) if m.any() else 0.0


def recommended_floor(report: dict, key: str = "floors") -> float:
    """The highest floor at which no dev set loses more than ``MAX_LOSS`` % of
    its in-corpus golds from the top 5 (``key``: in-sample ``"floors"`` or
    ``"floors, set left out"``)."""
    ok = [f for f in FLOORS if all(r[key][f"{f:g}"][1] <= MAX_LOSS for r in report.values())]
    return max(ok) if ok else min(FLOORS)


def default_floor() -> float:
    """The floor users get (``STRATA_MIN_RELEVANCE``'s default): the targets are
    judged at it, whatever this run would recommend."""
    from strata.core.config.settings import QuerySettings, default

    return float(default(QuerySettings, "min_relevance"))


def markdown(report: dict) -> str:
    lines = ["| dev set | questions (in / out) | AUROC, top result | AUROC, set left out of "
             "the fit | Brier | relevant share | mean relevance | gold hits in the top 5 kept "
             "at the default floor |", "|---|---|---|---|---|---|---|---|"]
    for n, r in report["sets"].items():
        lines.append(f"| {n} | {r['questions in / out']} | {r['AUROC top result']} | "
                     f"{r['AUROC, this set left out of the fit']} | {r['Brier']} | "
                     f"{r['relevant share']} | {r['mean relevance']} | "
                     f"{r['gold hits in the top 5 kept at the default floor, %']} % |")
    lines += ["", "Out-of-corpus questions answered \"nothing relevant\" / in-corpus questions "
              "losing their gold from the top 5, by floor (%):", "",
              "| min_relevance | " + " | ".join(report["sets"]) + " |",
              "|---|" + "---|" * len(report["sets"])]
    for f in FLOORS:
        key = f"{f:g}"
        mark = " (default)" if abs(f - report["default_floor"]) < 1e-9 else ""
        lines.append(f"| {key}{mark} | " + " | ".join(
            f"{r['floors'][key][0]} / {r['floors'][key][1]}" for r in report["sets"].values()) + " |")
    lines += ["", "The same, each set scored by weights fitted on the other two only:", "",
              "| min_relevance | " + " | ".join(report["sets"]) + " |",
              "|---|" + "---|" * len(report["sets"])]
    for f in FLOORS:
        key = f"{f:g}"
        lines.append(f"| {key} | " + " | ".join(
            f"{r['floors, set left out'][key][0]} / {r['floors, set left out'][key][1]}"
            for r in report["sets"].values()) + " |")
    lines += ["", "Reliability (every top-10 result; predicted relevance vs observed share "
              "relevant, per bin):", "", "| bin | " + " | ".join(
                  f"{n} (n, pred, obs)" for n in report["sets"]) + " |",
              "|---|" + "---|" * len(report["sets"])]
    bins = sorted({b["bin"] for r in report["sets"].values() for b in r["reliability"]})
    for b in bins:
        cells = []
        for r in report["sets"].values():
            hit = next((x for x in r["reliability"] if x["bin"] == b), None)
            cells.append(f"{hit['n']}, {hit['predicted']}, {hit['observed']}" if hit else "–")
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines += ["", "| target | measured | met |", "|---|---|---|"]
    for t in report["targets"]:
        lines.append(f"| {t['target']} | {t['measured']} | {'yes' if t['met'] else '**no**'} |")
    return "\n".join(lines)


def targets(report: dict) -> list[dict]:
    out = []
    floor = f"{report['default_floor']:g}"
    for n, r in report["sets"].items():
        a = r["AUROC top result"]
        out.append({"target": f"{n}: AUROC of the top result's relevance ≥ 0.95",
                    "measured": a, "met": a >= 0.95})
        ood, lost = r["floors"][floor]
        out.append({"target": f"{n}: at the default floor, ≥ 90 % out-of-corpus get "
                              "\"nothing relevant\" and ≤ 5 % in-corpus lose their gold",
                    "measured": f"{ood} % / {lost} %", "met": ood >= 90 and lost <= 5})
    return out


def main() -> None:
    from strata.retrieval.relevance import FEATURES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-write", action="store_true",
                    help="report only; leave retrieval/calibration.json as it is")
    ap.add_argument("--reuse-rows", action="store_true",
                    help="fit again on the rows the last run collected (benchmarks/scratch)")
    args = ap.parse_args()
    import pickle

    saved = SCRATCH / "calibration_rows.pkl"
    saved.parent.mkdir(parents=True, exist_ok=True)
    if args.reuse_rows and saved.exists():
        data = pickle.loads(saved.read_bytes())
    else:
        print("collecting results of in-corpus and out-of-corpus questions...", flush=True)
        data = collect()
        saved.write_bytes(pickle.dumps(data))
    full = list(range(len(FEATURES)))
    generic = [FEATURES.index(f) for f in ("margin", "coverage", "gap")]
    report_full, (w, b) = evaluate(data, full)
    report_gen, (gw, gb) = evaluate(data, generic)
    model = "sentence-transformers/all-MiniLM-L6-v2"
    entries = {"about": "Weights of retrieval.relevance, fitted by python -m benchmarks.calibration "
                        "on the dev sets; see benchmarks/results/calibration.md",
               "models": {model: {"features": list(FEATURES),
                                  "weights": [round(float(v), 5) for v in w],
                                  "bias": round(b, 5)}},
               "generic": {"features": [FEATURES[c] for c in generic],
                           "weights": [round(float(v), 5) for v in gw], "bias": round(gb, 5)}}
    if not args.no_write:  # a smoke run's weights stay beside its results
        cal_file = RESULTS / "retrieval_calibration.json" if smoke() else CAL_FILE
        cal_file.parent.mkdir(parents=True, exist_ok=True)
        cal_file.write_text(json.dumps(entries, indent=2) + "\n")
    report = {"benchmark": "relevance calibration (dev sets; each set's out-of-corpus questions "
                           "are the other sets' questions)", "machine": machine(),
              "model": model, "sets": report_full, "generic_sets": report_gen,
              "calibration": entries}
    report["default_floor"] = default_floor()
    report["recommended_floor"] = {"in-sample": recommended_floor(report_full),
                                   "set left out": recommended_floor(report_full,
                                                                     "floors, set left out")}
    report["targets"] = targets(report)
    rec = report["recommended_floor"]
    md = markdown(report) + (
        f"\n\nHighest floor losing ≤ {MAX_LOSS:g} % of in-corpus golds on every set: "
        f"{rec['in-sample']:g} in-sample, {rec['set left out']:g} with each set left out of the "
        f"fit; the default is {report['default_floor']:g}.") \
        + "\n\nWith the generic weights (no raw cosine; other embedding models):\n\n" \
        + markdown({**report, "sets": report_gen,
                    "targets": targets({**report, "sets": report_gen})})
    write_result("calibration", report, md)
    print(f"highest floor within the loss budget: {rec}; default {report['default_floor']}")


if __name__ == "__main__":
    main()
