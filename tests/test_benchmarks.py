"""The benchmark harness's own parts: metrics, the build measurer, the
baselines on a real index, the dev-set labels against the real OpenHarmony
build, and the README splice. (The benchmarks themselves run in `make bench`.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from benchmarks.common import Baselines, first_occurrence, latency, recall_at
from benchmarks.report import END, START, splice
from tests.conftest import REPO


def test_metrics_follow_hipporag_protocol():
    ranked = first_occurrence(["a.md", None, "a.md", "b.md", "c.md", "b.md"])
    assert ranked == ["a.md", "b.md", "c.md"]
    assert recall_at(ranked, {"b.md", "z.md"}, 1) == 0.0
    assert recall_at(ranked, {"b.md", "z.md"}, 2) == 0.5
    assert recall_at(ranked, set(), 5) == 0.0
    lat = latency([float(i) for i in range(1, 101)])
    assert lat["p50_ms"] == 50.5 and lat["p95_ms"] == 95.0 and lat["max_ms"] == 100.0


def test_measure_reports_the_child_peak_rss_and_exit_code():
    code = "b = bytearray(150 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); print('hi')"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.measure", "--", sys.executable, "-c",
                           code], cwd=REPO, capture_output=True, text=True, timeout=120)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0 and out["returncode"] == 0
    assert out["peak_rss_mb"] >= 150 and out["wall_s"] > 0
    assert "hi" in proc.stderr  # the command's output never mixes with the JSON line
    bad = subprocess.run([sys.executable, "-m", "benchmarks.measure", "--", sys.executable, "-c",
                          "raise SystemExit(3)"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 3 and json.loads(bad.stdout)["returncode"] == 3


def test_baselines_on_a_real_index(sample_index):
    from strata.retrieval import Index

    idx = Index.open(sample_index)
    base = Baselines(idx)
    assert "entity" not in set(idx.nodes().filter(
        idx.nodes()["node_id"].is_in(base.units))["kind"].to_list())
    q = "barometric drift correction"
    bm25 = base.bm25(q, 5)
    assert bm25 and all(n in base.units for n in bm25)
    for nid in bm25:  # BM25 scores only units that contain a query term (breadcrumb or text)
        n = idx.node(nid)
        assert {"barometric", "drift", "correction"} & set(
            re.findall(r"[a-z]+", f"{n['breadcrumb']} {n['text']}".lower()))
    dense = base.dense(q, 5)
    fused = base.rrf(q, 10)
    assert len(fused) == len(set(fused)) and set(fused) <= set(base.dense(q, 100)) | set(
        base.bm25(q, 100))
    both = set(bm25) & set(dense)
    if both:  # a node both lists rank high beats one only a single list has at the same rank
        assert fused.index(sorted(both, key=fused.index)[0]) <= 2


def test_dev_set_labels_resolve_on_the_real_build(oh_build):
    from benchmarks.openharmony_dev import DEV_SET, gold_sections
    from strata.retrieval import Index

    base, _, _ = oh_build
    questions = yaml.safe_load(DEV_SET.read_text())
    assert len(questions) >= 30 and len({q["file"] for q in questions}) >= 25
    gold = gold_sections(Index.open(base / "index"), questions)  # exits when one fails
    assert len(gold) == len(questions) and all(gold)


def test_dev_set_checker_passes(openharmony):
    proc = subprocess.run([sys.executable, "benchmarks/data/check_openharmony_dev.py", "--root",
                           str(openharmony)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "questions over" in proc.stdout


def test_report_splices_only_between_the_markers():
    readme = f"intro\n{START}\nold table\n{END}\noutro\n"
    out = splice(readme, f"{START}\nnew\n{END}")
    assert out == f"intro\n{START}\nnew\n{END}\noutro\n"
    with pytest.raises(SystemExit):
        splice("no markers here", "x")


def test_the_bare_model_is_timed_with_the_wait_policy_the_build_runs_with(tmp_path, monkeypatch):
    """The throughput benchmark compares a build with the bare model: the compared
    child gets the OpenMP wait policy a build process gets (PASSIVE, unless the
    operator set one), the reference child libgomp's default even then."""
    from benchmarks.throughput import bare_model
    from strata.core.encoders.embedding import resolve_runtime

    texts = ["a gauge", "the pressure sensor drifted after the storm"] * 40
    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps(texts))
    runtime = resolve_runtime("auto")
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # an operator's own choice
    chosen, ignored = (bare_model(texts_file, runtime, p) for p in ("build", "default"))
    monkeypatch.delenv("OMP_WAIT_POLICY")
    compared, spinning = bare_model(texts_file, runtime), bare_model(texts_file, runtime,
                                                                     "default")
    assert chosen["omp_wait_policy"] == "ACTIVE"  # the build keeps an operator's choice too
    assert ignored["omp_wait_policy"] == "default"
    assert compared["omp_wait_policy"] == "PASSIVE"
    assert spinning["omp_wait_policy"] == "default"
    assert compared["texts"] == spinning["texts"] == len(texts)
