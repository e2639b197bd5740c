"""Put the latest benchmark tables into the README.

Reads ``benchmarks/results/*.json|md`` (written by the benchmarks ``make bench``
runs) and replaces the README's block between ``<!-- bench:start -->`` and
``<!-- bench:end -->``, so the numbers a reader sees are the ones the last
``make bench`` produced — never typed by hand.

Usage: ``python -m benchmarks.report [--readme README.md]``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import REPO, RESULTS
from strata.schema_doc import splice as splice_block

START, END = "<!-- bench:start -->", "<!-- bench:end -->"
SECTIONS = (
    ("musique", "MuSiQue-100 multi-hop passage recall (HippoRAG's protocol)",
     "Gold = the supporting passages; Recall@k = |gold ∩ top-k passages| / |gold|, in percent. "
     "Latency is warm and includes the query embedding. Diffusion uses the GPT-3.5 triples "
     "shipped with the data (`--openie-import`)."),
    ("musique_sweep", "MuSiQue-100: the entity-walk parameters, one at a time",
     "Each row changes one diffusion parameter from its default (`benchmarks.musique_sweep`); "
     "reported so the choice is visible, see `docs/benchmarks.md`."),
    ("openharmony", "OpenHarmony dev set: the right page and the right section",
     "Labeled developer questions (`benchmarks/data/openharmony_dev.yaml`, written from the pages "
     "before any retrieval ran). File Hit@k: the gold page among the first k distinct pages; "
     "section R@k: the gold section among the first k distinct sections holding a result. "
     "Facts here come from the offline heuristic, so diffusion runs without the entity walk."),
    ("scale_out", "Build throughput and incremental cost: a generated 2,000-file corpus",
     "`benchmarks.scale_out`: Markdown pages and Python modules from `benchmarks.synthetic_corpus` "
     "(fixed seed). Every build is `strata index` in a child process; 2 workers = "
     "`--workers 2` (Dagster's multiprocess executor, one process per step, forkserver; the peak "
     "RSS of forked step processes is not visible to the parent and is not shown). The edit "
     "appends a section or a function to 1% of the files."),
    ("service_load", "HTTP service under load: N concurrent clients on loopback",
     "`benchmarks.service_load`: `strata serve` on the sample index in a child process; per mode, "
     "N client threads (each its own `httpx.Client`) send distinct questions (12 about the "
     "sample, numbered per request, so every query is embedded) for a fixed time after a short "
     "warm-up; clients and server share the machine's cores. Latency is client-side wall time; "
     "server ms is the service's own `took_ms`. An error is a non-200 answer or a failed "
     "request; there must be none."),
    ("hardening", "Stopping a build, endpoints that are down, hostile files",
     "`benchmarks.hardening`: every figure is a `strata index` child process measured from "
     "outside. Stop time: from the signal to the process's exit, on a 12-page corpus, while the "
     "LLM server holds a request open or while the encoder runs; Ctrl-C is typed on a "
     "pseudo-terminal (the kernel signals the whole process group). Endpoint down: the whole "
     "command, interpreter start-up included, against a port where nothing listens. Hostile "
     "corpus: `tests/reliability/hostile.py` (a 2 GiB sparse image, a 200 MiB text file, a DOCX "
     "whose XML part inflates to 64 MiB, a FIFO, a character device, ...); peak RSS of the "
     "process."),
    ("hyprag", "Code: Strata hierarchical vs HypRAG 0.7.2 on the same stdlib subset",
     "Same chunks, same hierarchy, same MiniLM encoder; HypRAG runs from PyPI in its own venv. "
     "Gold = dotted node paths (`benchmarks/data/stdlib_code_questions.yaml`)."),
)


def block() -> str:
    parts = [START, "", "Produced by `make bench` (the tables below are copied from "
             "`benchmarks/results/`; do not edit by hand)."]
    for name, title, about in SECTIONS:
        md, js = RESULTS / f"{name}.md", RESULTS / f"{name}.json"
        if not md.exists():
            parts += ["", f"#### {title}", "", f"_not run yet: `make bench` writes "
                      f"`benchmarks/results/{name}.md`_"]
            continue
        meta = json.loads(js.read_text()) if js.exists() else {}
        m = meta.get("machine", {})
        when = f" — {m.get('date')}, {m.get('cpus')} CPUs" if m else ""
        parts += ["", f"#### {title}{when}", "", about, "", md.read_text().strip()]
    parts += ["", END]
    return "\n".join(parts)


def splice(readme: str, new_block: str) -> str:
    """The README with its benchmark block replaced (the README's one splicer)."""
    return splice_block(readme, START, END, new_block)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", default=str(REPO / "README.md"))
    args = ap.parse_args()
    path = Path(args.readme)
    path.write_text(splice(path.read_text(), block()))
    print(f"benchmark tables written into {path}")


if __name__ == "__main__":
    main()
