"""The facts step's three tables, rebuilt only when the OpenIE output moved.

``entities``, ``facts`` and the build-only semantic edges are a pure function of
the corpus name and the per-unit OpenIE output (:mod:`semantic_graph`). Merging
every unit's names into entities touches every fact of the corpus, so on an
unchanged rebuild it was most of the facts step, to write the same bytes again.

The OpenIE output is cheap to obtain on a rebuild (its cache answers), so it is
what the tables are keyed by: a digest of every unit's entities and triples,
written as a stamp beside the tables once all three are whole. The key is the
output, not the input, so a unit whose LLM call failed again (it has no output)
gives the same tables, and a unit that now succeeds gives new ones; nothing here
needs to know why the output is what it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from strata.core.storage.layout import write_parquet_atomic, write_text_atomic
from strata.stages.enrich.openie_text import OpenIEOut

# Bump when build_entities, passage_edges or semantic_edges would write other rows.
TABLES_VERSION = "semantic-tables/1"
STAMP_SUFFIX = ".stamp"


@dataclass(frozen=True)
class SemanticTables:
    entities: int  # rows of each table, for the step's metadata
    facts: int
    reused: bool


def output_digest(corpus: str, per_unit: Mapping[str, OpenIEOut]) -> str:
    """A digest of the corpus name and every unit's entities and triples."""
    h = hashlib.sha256(f"{TABLES_VERSION}\0{corpus}\0".encode())
    for unit_id in sorted(per_unit):
        out = per_unit[unit_id]
        h.update(json.dumps([unit_id, out.entities, out.triples], ensure_ascii=False)
                 .encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


def _reusable(stamp: Path, digest: str, entities: Path, facts: Path,
              semantic: Path) -> tuple[int, int] | None:
    """The rows of the entities and facts tables when the stamp names this digest
    and every table reads as Parquet (its footer), else None."""
    try:
        if stamp.read_text().strip() != digest:
            return None
        rows = [_rows(path) for path in (entities, facts, semantic)]
    except (OSError, ValueError, pa.ArrowException):
        return None
    return rows[0], rows[1]


def write_semantic_tables(corpus: str, per_unit: Mapping[str, OpenIEOut], entities: Path,
                          facts: Path, semantic: Path) -> SemanticTables:
    """Write the entities, facts and semantic-edge tables of ``per_unit``, or leave
    them as they are when the stamp beside ``facts`` says they already hold it.

    The stamp is removed before the tables are rewritten and written again after
    the last of them, so an interrupted write is never mistaken for a whole one."""
    from strata.stages.enrich.semantic_graph import build_entities, passage_edges, semantic_edges

    stamp = facts.with_name(facts.name + STAMP_SUFFIX)
    digest = output_digest(corpus, per_unit)
    kept = _reusable(stamp, digest, entities, facts, semantic)
    if kept is not None:
        return SemanticTables(entities=kept[0], facts=kept[1], reused=True)
    stamp.unlink(missing_ok=True)
    entity_table, fact_table = build_entities(corpus, per_unit)
    write_parquet_atomic(entity_table, entities)
    write_parquet_atomic(fact_table, facts)
    # chunk↔entity and entity↔entity edges need the per-chunk extractions, which
    # only this step holds; the graph step merges them in.
    write_parquet_atomic(pa.concat_tables([passage_edges(per_unit, entity_table),
                                           semantic_edges(fact_table)]), semantic)
    write_text_atomic(stamp, digest + "\n")
    return SemanticTables(entities=entity_table.num_rows, facts=fact_table.num_rows,
                          reused=False)
