"""An incrementally rebuilt index equals a fresh build of the same folder:
same node ids, edges, facts, entities, image groups and vectors,
whatever sequence of edits, deletes, renames and additions came before.

The sequences come from hypothesis. Each example starts from one shared build
of the sample corpus (copied, so examples are independent), applies its
batches of file operations with an incremental build after each batch, then
compares the result with a fresh build of the final folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from strata.core.storage.layout import IndexLayout
from tests.conftest import SAMPLE, Builder, write_corpora
from tests.index_equality import index_differences

settings.register_profile("ci", max_examples=1, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("bench", max_examples=25, deadline=None,
                          suppress_health_check=list(HealthCheck))
PROFILE = os.environ.get("STRATA_HYPOTHESIS_PROFILE", "ci")

CORPUS = "eq"
TEXT_SUFFIXES = (".md", ".py", ".ts", ".rs", ".go", ".html", ".rst", ".yaml", ".toml", ".json")
NEW_FILES = {
    "md": ("# Gauge maintenance\n\nClean the tide gauge intake every month. Barometric drift "
           "must be corrected after maintenance.\n\n## Steps\n\n| step | tool |\n|---|---|\n"
           "| flush | pump |\n\n```python\nfrom tidewater.calibration import Calibrator\n```\n"),
    "py": ("\"\"\"Maintenance helpers.\"\"\"\n\nfrom tidewater.units import feet_to_metres\n\n\n"
           "class Intake:\n    def flush(self, litres: float) -> float:\n        return "
           "feet_to_metres(litres)\n"),
    "image": None,  # a copy of an existing image: joins (or forms) a duplicate group
}


def _files(root: Path, suffixes=None) -> list[Path]:
    out = sorted(p for p in root.rglob("*") if p.is_file())
    return [p for p in out if suffixes is None or p.suffix in suffixes]


def _apply(root: Path, op: tuple[str, int, str]) -> str:
    kind, pick, word = op
    texts = _files(root, TEXT_SUFFIXES)
    everything = _files(root)
    if kind == "edit" and texts:
        p = texts[pick % len(texts)]
        body = p.read_text(errors="replace")
        if p.suffix == ".md":
            body += f"\n## Notes on {word}\n\nThe {word} reading is checked daily.\n"
        elif p.suffix == ".py":
            body += f"\n\ndef check_{word}() -> str:\n    return \"{word}\"\n"
        else:
            cut = len(body) // 2  # drop the second half: sections and symbols disappear
            body = body[:cut]
        p.write_text(body)
        return f"edit {p.relative_to(root)}"
    if kind == "delete" and everything:
        p = everything[pick % len(everything)]
        p.unlink()
        return f"delete {p.relative_to(root)}"
    if kind == "rename" and everything:
        p = everything[pick % len(everything)]
        target = p.with_name(f"{p.stem}-{word}{p.suffix}")
        p.rename(target)
        return f"rename {p.relative_to(root)} -> {target.name}"
    if kind.startswith("add"):
        what = kind.split(":")[1]
        if what == "image":
            target = root / "docs" / "images" / f"copy-{word}.png"
            images = [p for p in _files(root, (".png",)) if p != target]
            if not images:
                return "add image: none left"
            src = images[pick % len(images)]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
            page = root / "docs" / f"gallery-{word}.md"
            page.write_text(f"# Gallery {word}\n\n![{word} chart](images/{target.name})\n")
            return f"add image copy of {src.name}"
        ext = what
        target = root / ("docs" if ext == "md" else "tidewater") / f"added_{word}.{ext}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(NEW_FILES[ext])
        return f"add {target.relative_to(root)}"
    return f"{kind}: nothing to do"


ops = st.tuples(
    st.sampled_from(["edit", "delete", "rename", "add:md", "add:py", "add:image"]),
    st.integers(min_value=0, max_value=10_000),
    st.sampled_from(["alpha", "bravo", "salinity", "harbour", "drift"]),
)
batches = st.lists(st.lists(ops, min_size=1, max_size=3), min_size=1, max_size=3)


@pytest.fixture(scope="module")
def base_build(tmp_path_factory):
    """The sample corpus and its first build, copied by every example."""
    base = tmp_path_factory.mktemp("eq_base")
    shutil.copytree(SAMPLE, base / "root")
    cfg = write_corpora(base / "corpora.yaml",
                        {CORPUS: {"root": str(base / "root"), "out": str(base / "index")}})
    with dg.instance_for_test() as instance:
        Builder(instance, cfg).build(CORPUS)
    return base


def _workspace(base: Path, tmp: Path) -> tuple[Path, Path]:
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(base / "root", tmp / "root")
    shutil.copytree(base / "index", tmp / "inc", symlinks=True)
    return tmp / "root", tmp / "inc"


@settings(settings.get_profile(PROFILE))
@given(sequence=batches)
@example(sequence=[[("edit", 1, "drift"), ("delete", 5, "alpha"), ("rename", 30, "bravo"),
                    ("add:md", 0, "harbour"), ("add:image", 2, "salinity")],
                   [("add:image", 120, "alpha"), ("edit", 83, "alpha"),
                    ("add:image", 120, "alpha")]])  # found by hypothesis: re-adding a copy
def test_incremental_build_equals_fresh_build(base_build, tmp_path_factory, sequence):
    work = tmp_path_factory.mktemp("eq_case")
    root, inc = _workspace(base_build, work)
    cfg_inc = write_corpora(work / "inc.yaml", {CORPUS: {"root": str(root), "out": str(inc)}})
    cfg_fresh = write_corpora(work / "fresh.yaml",
                              {CORPUS: {"root": str(root), "out": str(work / "fresh")}})
    log = []
    with dg.instance_for_test() as instance:
        builder = Builder(instance, cfg_inc)
        for batch in sequence:
            log += [_apply(root, op) for op in batch]
            builder.build(CORPUS)
    with dg.instance_for_test() as instance:
        Builder(instance, cfg_fresh).build(CORPUS)
    diffs = index_differences(IndexLayout(inc).resolve(), IndexLayout(work / "fresh").resolve())
    shutil.rmtree(work, ignore_errors=True)
    assert not diffs, "after " + "; ".join(log) + ":\n" + "\n".join(d[:400] for d in diffs)


def test_deleting_a_file_drops_only_the_entities_it_alone_supported(base_build, tmp_path):
    import polars as pl

    root, inc = _workspace(base_build, tmp_path)
    before = IndexLayout(inc).resolve()
    facts = pl.read_parquet(before / "facts.parquet")
    nodes = pl.read_parquet(before / "nodes.parquet").select("node_id", "path")
    by_path = facts.join(nodes, left_on="chunk_id", right_on="node_id")
    victim = "docs/exporting.md"
    mine = by_path.filter(pl.col("path") == victim)
    others = by_path.filter(pl.col("path") != victim)
    ents = lambda df: set(df["head_id"]) | set(df["tail_id"])  # noqa: E731
    shared = ents(mine) & ents(others)
    alone = ents(mine) - ents(others)
    assert mine.height and shared and alone, "the sample should have both kinds of entity"

    (root / victim).unlink()
    cfg = write_corpora(tmp_path / "c.yaml", {CORPUS: {"root": str(root), "out": str(inc)}})
    with dg.instance_for_test() as instance:
        Builder(instance, cfg).build(CORPUS)
    after = IndexLayout(inc).resolve()
    entities = set(pl.read_parquet(after / "entities.parquet")["node_id"])
    facts_after = pl.read_parquet(after / "facts.parquet")
    assert shared <= entities
    assert not (alone & entities)
    # a fact id names a triple; it survives only where another file states it too
    only_mine = set(mine["fact_id"]) - set(others["fact_id"])
    assert only_mine and not only_mine & set(facts_after["fact_id"])
    assert not set(mine["chunk_id"]) & set(facts_after["chunk_id"])
    import lancedb

    vec_ids = set(lancedb.connect(str(after / "lance")).open_table("entity_vectors")
                  .to_arrow().column("node_id").to_pylist())
    assert not (alone & vec_ids) and shared <= vec_ids
