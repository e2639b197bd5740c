"""The `strata` command line, run as a user would: a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO


def strata(*args, env_extra=None, check=True):
    env = {**os.environ, **(env_extra or {})}
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="module")
def oh_index(oh_build):
    base, env, stats = oh_build
    return base, env, dict(stats)


def test_index_openharmony_structure(oh_index):
    base, env, stats = oh_index
    assert stats["files"] == 51
    kinds = stats["nodes_by_kind"]
    assert kinds["file"] == 51 and kinds["section"] > 300 and kinds["code"] > 100
    assert kinds["table"] > 10
    assert stats["edges_by_type"]["jump"] > 50
    # file → h1 → h2 → h3 (→ h4) plus code/table children below them
    assert max(int(d) for d in stats["depth_distribution"]) >= 4
    assert all(s["reason"] for s in stats["skipped"])


def test_map_stats_json(oh_index):
    base, env, _ = oh_index
    out = json.loads(strata("map", "--index", str(base / "index"), "--stats", "--json",
                            env_extra=env).stdout)
    for key in ("files", "nodes_by_kind", "edges_by_type", "depth_distribution", "skipped",
                "build_seconds"):
        assert key in out, key
    assert out["build_seconds"] > 0
    text = strata("map", "--index", str(base / "index"), "--stats", env_extra=env).stdout
    assert "nodes by kind" in text and "jump" in text


def test_cli_runs_are_recorded_in_the_dagster_instance(oh_index):
    import dagster as dg

    base, env, stats = oh_index
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        runs = instance.get_runs()
        assert len(runs) == 1 and runs[0].is_success
        assert instance.get_dynamic_partitions("corpora") == ["oh"]
        assert stats["run_id"] == runs[0].run_id
        # the code location's job, not an ephemeral one, with the labels the run list shows
        run = runs[0]
        assert run.job_name == "index_corpus"
        tags = run.tags
        assert tags["dagster/partition"] == tags["strata/corpus"] == "oh"
        assert tags["strata/launched_by"] == "strata index" and tags["user"]
        assert tags["strata/llm"] == "offline"
        from strata.core.encoders.embedding import AUTO, resolve_runtime

        runtime = resolve_runtime(AUTO)  # the default: bfloat16 where the CPU computes it
        assert tags["strata/embedding"] == \
            "sentence-transformers:sentence-transformers/all-MiniLM-L6-v2" + \
            ("" if runtime == "torch" else f" ({runtime})")


def test_index_shows_progress_per_step(oh_index):
    """Off a terminal (here: a pipe) `strata index` prints one line per finished
    step, numbered against the plan; stdout keeps only the --json document."""
    base, _, stats = oh_index
    lines = (base / "index.stderr").read_text().splitlines()
    steps = [ln for ln in lines if ln.lstrip().startswith("[")]
    total = int(steps[-1].split("/")[1].split("]")[0])
    assert len(steps) == total >= 10
    assert steps[-1].split()[1:3] == ["done", "mirrored_index"]
    assert any("index_manifest" in ln for ln in steps)
    assert "dagster - DEBUG" not in "\n".join(lines), "Dagster's log lines only with --verbose"
    assert stats["version"] == 1


def test_help_documents_exit_codes():
    out = strata("--help").stdout
    assert "exit codes: 0 success; 1" in " ".join(out.split())


def test_search_cli_json(oh_index):
    base, env, _ = oh_index
    body = json.loads(strata("search", "--index", str(base / "index"), "-k", "3", "--json",
                             "how do I share state between a parent and child component?",
                             env_extra=env).stdout)
    assert body["mode"] == "auto", "no --mode: the default mode, named in the output"
    assert body["version"] == 1
    out = body["results"]
    assert len(out) == 3
    assert {"node_id", "kind", "path", "node_path", "breadcrumb", "score", "text",
            "start_line", "end_line"} <= set(out[0])


NONSENSE = "zzqx kubernetes helm chart qwertyuiop"


def _printable(text: str) -> bool:
    """Nothing a terminal would obey: only printable characters and line breaks."""
    return all(c == "\n" or c.isprintable() for c in text)


def test_search_says_when_nothing_reaches_the_relevance_floor(sample_index):
    """A floor nothing reaches: the JSON says so (``nothing_relevant``, the note,
    the closest results in ``below``), and a person sees the note, not an
    empty list; either way the search succeeded (exit 0)."""
    body = json.loads(strata("search", "--index", str(sample_index), "--json",
                             "--min-relevance", "0.99", NONSENSE).stdout)
    assert body["results"] == [] and body["nothing_relevant"] is True
    assert body["min_relevance"] == 0.99
    below = body["below"]
    assert below and all(0.0 <= r["relevance"] < 0.99 for r in below)
    assert {"node_id", "path", "score", "relevance", "text"} <= set(below[0])
    assert body["note"].startswith("no result above relevance 0.99; closest: ")
    assert f"(relevance {below[0]['relevance']:.2f})" in body["note"]

    proc = strata("search", "--index", str(sample_index), "--min-relevance", "0.99", NONSENSE)
    assert proc.returncode == 0
    assert body["note"] in proc.stdout and "no results" not in proc.stdout
    assert _printable(proc.stdout)

    bad = strata("search", "--index", str(sample_index), "--min-relevance", "1.5", NONSENSE,
                 check=False)
    assert bad.returncode == 2 and "--min-relevance: must be within 0..1" in bad.stderr


def test_search_shows_relevance_and_the_budget_it_used(sample_index):
    """Every result carries its relevance, in JSON and on the terminal; with a
    token budget the output says how much of it the results take. The floor is
    0, so what is shown does not hang on the calibration."""
    query = "how do I correct pressure readings for barometric drift?"
    body = json.loads(strata("search", "--index", str(sample_index), "--json", "-k", "3",
                             "--budget-tokens", "300", "--min-relevance", "0", query).stdout)
    assert 1 <= len(body["results"]) <= 3
    assert all(0.0 <= r["relevance"] <= 1.0 for r in body["results"])
    assert body["min_relevance"] == 0 and body["nothing_relevant"] is False
    assert body["note"] is None and body["below"] == []
    assert body["budget_tokens"] == 300
    assert isinstance(body["tokens_used"], int) and body["tokens_used"] > 0

    out = strata("search", "--index", str(sample_index), "-k", "3", "--budget-tokens", "300",
                 "--min-relevance", "0", query).stdout
    shown = re.findall(r"^\d+\. .*  score \d\.\d{3}  relevance (\d\.\d\d)", out, re.M)
    assert len(shown) == len(body["results"]), out
    assert re.search(r"^about \d+ tokens of a 300-token budget$", out, re.M), out
    assert _printable(out)


def test_errors_say_what_to_do(tmp_path):
    proc = strata("index", str(tmp_path / "nope"), "--corpus", "x", check=False)
    assert proc.returncode == 2 and "is not a folder" in proc.stderr
    proc = strata("map", "--index", str(tmp_path), "--stats", check=False)
    assert proc.returncode == 2 and "strata index" in proc.stderr
    proc = strata("index", str(tmp_path), "--corpus", "bad name!", check=False)
    assert proc.returncode == 2 and "invalid corpus name" in proc.stderr
    # a pattern that is not a gitignore line: refused before anything is written
    # (not a parse step failing after its retry)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# a\n")
    proc = strata("index", str(tmp_path / "notes"), "--corpus", "x", "--out",
                  str(tmp_path / "out"), "--exclude", "!", check=False,
                  env_extra={"DAGSTER_HOME": str(tmp_path / "dh"),
                             "STRATA_CORPORA": str(tmp_path / "corpora.yaml")})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "invalid exclude pattern" in proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "corpora.yaml").exists()
    # lines that match no file: the build succeeds, and says the index is empty
    proc = strata("index", str(tmp_path / "notes"), "--corpus", "x", "--out",
                  str(tmp_path / "out"), "--include", "*.rst", "-q",
                  env_extra={"DAGSTER_HOME": str(tmp_path / "dh"),
                             "STRATA_CORPORA": str(tmp_path / "corpora.yaml")})
    assert proc.stderr.strip().splitlines() == [
        f"warning: no file under {tmp_path / 'notes'} matches the include and exclude lines "
        "(*.rst; no exclude); the index is empty"], proc.stderr


def test_a_missing_image_is_reported_as_the_files_problem_not_the_llms(tmp_path):
    """An image a page links to that is not there is listed once, with its path,
    as never sent to the LLM; the build does not call it an LLM failure (offline,
    no LLM was asked anything)."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "page.md").write_text("# Pumps\n\nThe intake pump is flushed monthly.\n\n"
                                  "![Wiring of the pump](images/wiring.png)\n")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dh"),
           "STRATA_CORPORA": str(tmp_path / "corpora.yaml")}
    (tmp_path / "dh").mkdir()
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "index", str(root),
                           "--corpus", "pumps", "--out", str(tmp_path / "index")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "not sent to the LLM (1;" in out and "images/wiring.png" in out, out[-3000:]
    assert "LLM failure" not in out, out[-3000:]


def test_the_command_ends_without_teardown_but_after_threads_and_exit_handlers(tmp_path):
    """``strata`` (:func:`run`) skips the interpreter's teardown, not what comes
    before it: a worker thread still finishes, the exit handlers still run, and
    everything printed reaches the pipe, with the command's exit code."""
    done = tmp_path / "thread-finished"
    code = (
        "import atexit, sys, threading, time\n"
        f"def work():\n    time.sleep(0.5)\n    open({str(done)!r}, 'w').write('yes')\n"
        "threading.Thread(target=work).start()\n"
        "atexit.register(lambda: print('exit handler ran', flush=True))\n"
        f"sys.argv = ['strata', 'map', '--index', {str(tmp_path / 'no-index')!r}]\n"
        "from strata.pipelines.cli import run\n"
        "run()\n"
        "print('not reached')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr  # no index there: bad usage
    assert proc.stderr.startswith("error: ") and "no-index" in proc.stderr
    assert proc.stdout.splitlines() == ["exit handler ran"]
    assert done.read_text() == "yes"
