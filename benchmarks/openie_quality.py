"""OpenIE quality: an extractor's entities and triples scored against GPT-3.5's on
the MuSiQue passages.

The reference is HippoRAG's published GPT-3.5-turbo-1106 extraction of the 1,890
MuSiQue-100 passages (``../shared/data/musique_100/openie_gpt-3.5-turbo-1106.json``,
``docs[i]`` aligned with ``corpus.json``). Each passage is given to the extractor
as the pipeline's section unit holds it (``# {title}\\n\\n{text}``, with the title)
and what comes back goes through :func:`stages.enrich.openie.validate`, as in a
build, so the score is that of what an index would store.

**Matching rule.** Names are compared after :func:`normalize_name`: NFKC,
casefold, punctuation to spaces (``stages.enrich.openie.normalize``) and a
leading article ("the", "a", "an") dropped. Both sides are deduplicated by that
key, per passage.

- *exact*: an entity matches a reference entity with the same key; a triple
  matches when head, relation and tail keys are all equal.
- *lenient*: an entity matches when the token sets of the two keys share at
  least half of the longer one's tokens (``Jan Philip Solovej`` ~ ``Jan Philip
  Solovej from University``, ``Journal of Mathematical Physics`` ~
  ``Mathematical Physics``); a triple matches when head matches head and tail
  matches tail that way and the relations share at least half of the longer
  one's content words (function words such as "is", "in", "of", "by" are left
  out unless a relation has nothing else: ``published by`` ~ ``published
  monthly by``, ``is`` ~ ``is``, but ``born in`` ≁ ``located in``).
- *pair* (triples only): the two ends match leniently in either order and the
  relation is ignored — whether the extractor links the right two things, which
  is what the graph's entity edges use.

Lenient and pair matches are one-to-one (greedy by overlap, so ten fragments
cannot all match one reference name). Precision = matched / predicted, recall =
matched / reference, both summed over passages (micro-average), in percent.

The extractor is pluggable: any ``(text, title) -> OpenIEOut`` function
(``--extractor module:function`` or ``path/to/file.py:function``), or a
HippoRAG-format file of predictions (``--predictions FILE``), so a model's output
(SmolLM2 through a local server) is scored by the same code. Each run
replaces its own row (``--label``) in ``benchmarks/results/openie_quality.json``
and keeps the others, each stamped with the date and the git commit it was
measured at.

Usage: ``python -m benchmarks.openie_quality [--label L] [--extractor SPEC |
--predictions FILE] [--subsets 200,all]``
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import REPO, RESULTS, machine, size, write_result
from benchmarks.musique_corpus import CORPUS_FILE, OPENIE_FILE, passage_count
from strata.stages.enrich.openie import (OFFLINE_VERSION, OpenIEOut, normalize, offline_openie,
                                  unit_context, validate)

Extractor = Callable[[str, str], OpenIEOut]
NAME = "openie_quality"
DEFAULT_LABEL = f"offline heuristic v{OFFLINE_VERSION}"  # a new version gets a new row
SUBSETS = {"first 200": 200, "all 1,890": None}
MIN_OVERLAP = 0.5
_ARTICLES = ("the ", "a ", "an ")
# left out of a relation's words for the lenient match, unless nothing else is left
_FUNCTION_WORDS = frozenset(
    "a an the is are was were be been being has have had of in on at to by for from with as "
    "and or its it his her their that which who".split())


# --------------------------------------------------------------------------- matching

def normalize_name(s: object) -> str:
    """The comparison key: ``normalize`` (case, NFKC, punctuation) less a leading article."""
    n = normalize(str(s)) if s is not None else ""
    for a in _ARTICLES:
        if n.startswith(a) and len(n) > len(a):
            return n[len(a):]
    return n


def _overlap(a: frozenset, b: frozenset) -> float:
    return len(a & b) / max(len(a), len(b)) if a and b else 0.0


def _content(rel_key: str) -> frozenset:
    words = rel_key.split()
    content = frozenset(w for w in words if w not in _FUNCTION_WORDS)
    return content or frozenset(words)


def _one_to_one(n_pred: int, n_ref: int, score: Callable[[int, int], float]) -> int:
    """How many (pred, ref) pairs a greedy one-to-one matching by descending
    score makes among the pairs that score > 0."""
    cands = sorted(((s, i, j) for i in range(n_pred) for j in range(n_ref)
                    if (s := score(i, j)) > 0), key=lambda c: (-c[0], c[1], c[2]))
    used_p, used_r, n = set(), set(), 0
    for _, i, j in cands:
        if i not in used_p and j not in used_r:
            used_p.add(i)
            used_r.add(j)
            n += 1
    return n


def _entity_keys(entities: Iterable) -> list[str]:
    keys: dict[str, None] = {}
    for e in entities:
        name = e[0] if isinstance(e, (tuple, list)) else e
        k = normalize_name(name)
        if k:
            keys.setdefault(k, None)
    return list(keys)


def _triple_keys(triples: Iterable) -> list[tuple[str, str, str]]:
    keys: dict[tuple[str, str, str], None] = {}
    for t in triples:
        if isinstance(t, (tuple, list)) and len(t) == 3:
            k = tuple(normalize_name(x) for x in t)
            if all(k) and k[0] != k[2]:
                keys.setdefault(k, None)
    return list(keys)


@dataclass
class Counts:
    """Predicted, reference and matched counts of one passage or a sum of them."""

    pred: int = 0
    ref: int = 0
    exact: int = 0
    lenient: int = 0
    pair: int = 0

    def __iadd__(self, o: Counts) -> Counts:
        for f in ("pred", "ref", "exact", "lenient", "pair"):
            setattr(self, f, getattr(self, f) + getattr(o, f))
        return self


def score_entities(pred: Iterable, ref: Iterable) -> Counts:
    """Entities of one passage: names (or (name, description) pairs)."""
    p, r = _entity_keys(pred), _entity_keys(ref)
    exact = len(set(p) & set(r))
    pt, rt = [frozenset(k.split()) for k in p], [frozenset(k.split()) for k in r]

    def lenient(i: int, j: int) -> float:
        s = _overlap(pt[i], rt[j])
        return s + (p[i] == r[j]) if s >= MIN_OVERLAP else 0.0  # an exact match first

    return Counts(pred=len(p), ref=len(r), exact=exact,
                  lenient=_one_to_one(len(p), len(r), lenient))


def score_triples(pred: Iterable, ref: Iterable) -> Counts:
    """(head, relation, tail) triples of one passage."""
    p, r = _triple_keys(pred), _triple_keys(ref)
    exact = len(set(p) & set(r))
    tok = lambda ts: [(frozenset(h.split()), _content(rel), frozenset(t.split()))  # noqa: E731
                      for h, rel, t in ts]
    pt, rt = tok(p), tok(r)

    def lenient(i: int, j: int) -> float:
        (ph, pr, pt_), (rh, rr, rt_) = pt[i], rt[j]
        sh, sr, st = _overlap(ph, rh), _overlap(pr, rr), _overlap(pt_, rt_)
        return sh + sr + st if min(sh, sr, st) >= MIN_OVERLAP else 0.0

    def pair(i: int, j: int) -> float:
        (ph, _, pt_), (rh, _, rt_) = pt[i], rt[j]
        same = (_overlap(ph, rh), _overlap(pt_, rt_))
        swapped = (_overlap(ph, rt_), _overlap(pt_, rh))
        best = max((s for s in (same, swapped) if min(s) >= MIN_OVERLAP), key=sum, default=None)
        return sum(best) if best else 0.0

    return Counts(pred=len(p), ref=len(r), exact=exact,
                  lenient=_one_to_one(len(p), len(r), lenient),
                  pair=_one_to_one(len(p), len(r), pair))


def prf(matched: int, pred: int, ref: int) -> dict:
    p = matched / pred if pred else 0.0
    r = matched / ref if ref else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"P": round(100 * p, 1), "R": round(100 * r, 1), "F1": round(100 * f, 1)}


def summarize(ents: Counts, trips: Counts, passages: int) -> dict:
    return {
        "passages": passages,
        "entities_per_passage": round(ents.pred / max(passages, 1), 2),
        "reference_entities_per_passage": round(ents.ref / max(passages, 1), 2),
        "triples_per_passage": round(trips.pred / max(passages, 1), 2),
        "reference_triples_per_passage": round(trips.ref / max(passages, 1), 2),
        "entities": {"exact": prf(ents.exact, ents.pred, ents.ref),
                     "lenient": prf(ents.lenient, ents.pred, ents.ref)},
        "triples": {"exact": prf(trips.exact, trips.pred, trips.ref),
                    "lenient": prf(trips.lenient, trips.pred, trips.ref),
                    "pair": prf(trips.pair, trips.pred, trips.ref)},
    }


# --------------------------------------------------------------------------- data

@dataclass
class Passage:
    title: str
    text: str
    ref_entities: list[str]
    ref_triples: list[list]

    @property
    def unit_text(self) -> str:
        """The passage as the pipeline's section unit holds it."""
        return f"# {self.title}\n\n{self.text}"


def load_passages(corpus_file: Path = CORPUS_FILE, openie_file: Path = OPENIE_FILE) -> list[Passage]:
    """The MuSiQue passages with their GPT-3.5 reference, aligned by position
    (checked: title and text must agree)."""
    corpus = json.loads(Path(corpus_file).read_text(encoding="utf-8"))
    docs = json.loads(Path(openie_file).read_text(encoding="utf-8"))["docs"]
    if len(docs) != len(corpus):
        raise ValueError(f"{openie_file}: {len(docs)} docs for {len(corpus)} passages")
    out = []
    for i, (c, d) in enumerate(zip(corpus, docs)):
        if d.get("title", c["title"]) != c["title"] or d.get("text", c["text"]) != c["text"]:
            raise ValueError(f"{openie_file}: doc {i} is not passage {i} of {corpus_file}")
        out.append(Passage(c["title"], c["text"], list(d.get("extracted_entities") or []),
                           list(d.get("extracted_triples") or [])))
    return out


def run_extractor(extractor: Extractor, passages: Sequence[Passage]) -> tuple[list[OpenIEOut], float]:
    """The extractor on every passage, validated as a build would; seconds taken."""
    t0 = time.perf_counter()
    outs = []
    for p in passages:
        out = extractor(p.unit_text, p.title)
        clean, _ = validate(out, unit_context(p.unit_text, p.title))
        outs.append(clean)
    return outs, time.perf_counter() - t0


def load_predictions(path: Path, passages: Sequence[Passage]) -> list[OpenIEOut]:
    """A HippoRAG-format file (``docs[i]`` with ``extracted_entities`` and
    ``extracted_triples``) aligned with the passages by ``idx`` (else by
    position); passages it lacks get an empty output. Not validated: the file is
    scored as it stands."""
    docs = json.loads(Path(path).read_text(encoding="utf-8"))
    docs = docs.get("docs", []) if isinstance(docs, dict) else docs
    by_idx = {}
    for i, d in enumerate(docs):
        if isinstance(d, dict):
            by_idx[int(d.get("idx", i))] = d
    return [OpenIEOut(entities=[(e, "") for e in by_idx.get(i, {}).get("extracted_entities") or []],
                      triples=[tuple(t) for t in by_idx.get(i, {}).get("extracted_triples") or []
                               if isinstance(t, (list, tuple))])
            for i in range(len(passages))]


def save_predictions(outs: Sequence[OpenIEOut], passages: Sequence[Passage], path: Path) -> None:
    """Outputs as a HippoRAG-format file (what ``--predictions`` and ``strata index
    --openie-import`` read), so an extraction can be kept, diffed or imported."""
    docs = [{"idx": i, "passage": f"{p.title}\n{p.text}", "title": p.title, "text": p.text,
             "extracted_entities": [e[0] for e in o.entities],
             "extracted_triples": [list(t) for t in o.triples]}
            for i, (o, p) in enumerate(zip(outs, passages))]
    Path(path).write_text(json.dumps({"docs": docs}, ensure_ascii=False, indent=1) + "\n",
                          encoding="utf-8")


def score(outs: Sequence[OpenIEOut], passages: Sequence[Passage], limit: int | None = None) -> dict:
    """P/R/F1 of the outputs against the passages' reference (the first ``limit``)."""
    ents, trips = Counts(), Counts()
    n = len(passages) if limit is None else min(limit, len(passages))
    for out, p in zip(outs[:n], passages[:n]):
        ents += score_entities(out.entities, p.ref_entities)
        trips += score_triples(out.triples, p.ref_triples)
    return summarize(ents, trips, n)


def grounded_share(passages: Sequence[Passage]) -> dict:
    """How much of the reference an extractive system could reach at all: the
    share of reference entities and triples whose ends occur in the passage
    (what :func:`validate` would keep of GPT-3.5's own output)."""
    ents = trips = kept_e = kept_t = 0
    for p in passages:
        ctx = unit_context(p.unit_text, p.title)
        ref = OpenIEOut(entities=[(e, "") for e in p.ref_entities],
                        triples=[tuple(t) for t in p.ref_triples if isinstance(t, (list, tuple))])
        clean, _ = validate(ref, ctx)
        hay = f" {normalize(ctx)} "
        keys = _entity_keys(p.ref_entities)
        ents += len(keys)
        kept_e += sum(f" {k} " in hay for k in keys)
        trips += len(_triple_keys(p.ref_triples))
        kept_t += len(_triple_keys(clean.triples))
    return {"entities_in_text_pct": round(100 * kept_e / max(ents, 1), 1),
            "triples_grounded_pct": round(100 * kept_t / max(trips, 1), 1)}


@functools.lru_cache(maxsize=1)
def reference_stats() -> dict:
    """Size of the reference and how much of it keeps to the text (all passages, or
    those of a smoke run)."""
    passages = load_passages()[:passage_count()]
    n = max(len(passages), 1)
    return {"entities_per_passage": round(sum(len(_entity_keys(p.ref_entities))
                                              for p in passages) / n, 2),
            "triples_per_passage": round(sum(len(_triple_keys(p.ref_triples))
                                             for p in passages) / n, 2),
            **grounded_share(passages)}


# --------------------------------------------------------------------------- extractors

def load_extractor(spec: str) -> Extractor:
    """``module:function`` or ``path/to/file.py:function``."""
    target, _, func = spec.rpartition(":")
    if not target or not func:
        raise SystemExit(f"--extractor wants module:function or file.py:function, got {spec!r}")
    if target.endswith(".py"):
        s = importlib.util.spec_from_file_location(Path(target).stem + "_extractor", target)
        if s is None or s.loader is None:
            raise SystemExit(f"cannot load {target}")
        mod = importlib.util.module_from_spec(s)
        sys.modules[s.name] = mod  # dataclasses look their module up there
        s.loader.exec_module(mod)
    else:
        mod = importlib.import_module(target)
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise SystemExit(f"{spec}: no callable {func!r}")
    return fn


def _git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True,
                              capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               text=True, capture_output=True, timeout=10).stdout.strip()
        return head + ("+edits" if dirty and head else "") or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# --------------------------------------------------------------------------- report

def markdown(report: dict) -> str:
    lines = ["| extractor | passages | ents/passage | entity P / R / F1 exact | "
             "entity P / R / F1 lenient | triples/passage | triple P / R / F1 exact | "
             "triple P / R / F1 lenient | pair P / R / F1 |",
             "|---|---|---|---|---|---|---|---|---|"]

    def cell(d: dict) -> str:
        return f"{d['P']} / {d['R']} / {d['F1']}"

    for label, row in report["rows"].items():
        for subset, s in row["subsets"].items():
            lines.append(
                f"| {label} | {subset} | {s['entities_per_passage']} | "
                f"{cell(s['entities']['exact'])} | {cell(s['entities']['lenient'])} | "
                f"{s['triples_per_passage']} | {cell(s['triples']['exact'])} | "
                f"{cell(s['triples']['lenient'])} | {cell(s['triples']['pair'])} |")
    g = report.get("reference", {})
    if g:
        lines += ["", f"Reference (GPT-3.5): {g['entities_per_passage']} entities and "
                      f"{g['triples_per_passage']} triples per passage; "
                      f"{g['entities_in_text_pct']}% of its entities occur verbatim in the passage "
                      f"and {g['triples_grounded_pct']}% of its triples have both ends in it "
                      f"(what any extractor that keeps to the text can reach)."]
    lines += ["", "| extractor | measured at | passages run | seconds |", "|---|---|---|---|"]
    for label, row in report["rows"].items():
        lines.append(f"| {label} | {row['commit']}, {row['date']} | {row.get('passages_run', '')} "
                     f"| {row['seconds'] if row['seconds'] is not None else '—'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default=DEFAULT_LABEL, help="the row this run writes")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--extractor", help="module:function or file.py:function, "
                                         "(text, title) -> OpenIEOut (default: offline_openie)")
    src.add_argument("--predictions", help="a HippoRAG-format openie_results file to score")
    ap.add_argument("--subsets", default=size("200,all", "5"),
                    help="comma-separated: a number of first passages, or 'all'")
    ap.add_argument("--fresh", action="store_true", help="drop the other rows of the results file")
    ap.add_argument("--save-predictions", metavar="FILE",
                    help="also write the extractor's output as a HippoRAG-format file")
    ap.add_argument("--out", default=str(RESULTS), help="the results folder")
    args = ap.parse_args(argv)

    passages = load_passages()
    limits = [None if x.strip() == "all" else int(x) for x in args.subsets.split(",")]
    if None not in limits:  # only the passages some subset scores (a model on 200 of them)
        passages = passages[:max(limits)]
    if args.predictions:
        outs, seconds = load_predictions(Path(args.predictions), passages), None
    else:
        fn = load_extractor(args.extractor) if args.extractor else offline_openie
        outs, seconds = run_extractor(fn, passages)
        if args.save_predictions:
            save_predictions(outs, passages, Path(args.save_predictions))
    subsets: dict[str, dict] = {}
    for limit in limits:
        name = f"all {len(passages):,}" if limit is None else f"first {limit}"
        subsets[name] = score(outs, passages, limit)
    out_dir = Path(args.out)
    previous = out_dir / f"{NAME}.json"
    old = {} if args.fresh or not previous.exists() else json.loads(previous.read_text())
    rows = dict(old.get("rows", {}))
    rows[args.label] = {"source": args.predictions or args.extractor or
                        "strata.stages.enrich.openie:offline_openie",
                        "commit": _git_commit(), "date": machine()["date"],
                        "seconds": None if seconds is None else round(seconds, 1),
                        "passages_run": len(passages),
                        "subsets": subsets}
    report = {"benchmark": "OpenIE quality on the MuSiQue-100 passages against GPT-3.5-turbo-1106",
              "machine": machine(), "matching": "see benchmarks/openie_quality.py",
              "reference": reference_stats(),
              "rows": rows}
    write_result(NAME, report, markdown(report), results=out_dir)


if __name__ == "__main__":
    main()
