"""The Dagster UI as a user drives it: `dagster dev -w workspace.yaml` on loopback,
the global asset graph, a materialization of the sample corpus launched from the
graph's *Materialize all…* dialog, the run page, and an asset page, in headless
Chromium (Debian's chromium, driven by Playwright). Screenshots go to
``$STRATA_SCREENSHOTS`` when set (``make e2e``: docs/images)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, SAMPLE, write_corpora
from tests.browser import chromium
from tests.serving.helpers import free_port

pytestmark = pytest.mark.e2e

VIEWPORT = {"width": 1600, "height": 1000}
LOAD_TIMEOUT_S = 180  # dagster dev up and the code location loaded
RUN_TIMEOUT_S = float(os.environ.get("STRATA_E2E_RUN_TIMEOUT", "480"))  # ~100 s idle, 2 cores
ASSETS = ("parsed_shards", "nodes", "summaries", "image_groups", "captions", "facts",
          "embedding_shards", "embeddings", "edges", "index_manifest", "mirrored_index")
SHOTS = ("asset-graph.png", "launch.png", "run.png", "asset-details.png", "asset-charts.png")

WORKSPACE_QUERY = """{ workspaceOrError { __typename
  ... on Workspace { locationEntries { name loadStatus locationOrLoadError { __typename
    ... on PythonError { message } } } }
  ... on PythonError { message } } }"""
RUN_QUERY = """query($id: ID!) { runOrError(runId: $id) { __typename
  ... on Run { status tags { key value } } } }"""
RUNS_QUERY = "{ runsOrError { ... on Runs { results { runId status tags { key value } } } } }"


def _gql(base: str, query: str, variables: dict | None = None) -> dict:
    r = httpx.post(base + "/graphql", json={"query": query, "variables": variables or {}},
                   timeout=30)
    r.raise_for_status()
    body = r.json()
    assert "errors" not in body, body["errors"]
    return body["data"]


def _tail(path: Path, n: int = 4000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else ""


def _stop(proc: subprocess.Popen) -> None:
    """dagster dev spawns the webserver, the daemon, a code server and run workers,
    all in the session it leads (start_new_session): stop the whole group."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            pass
    try:  # anything left in the group (a run worker that ignored SIGTERM)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory):
    work = tmp_path_factory.mktemp("dagster_ui")
    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    out = work / "index"
    corpora = write_corpora(work / "corpora.yaml", {"sample": {"root": str(SAMPLE),
                                                              "out": str(out)}})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "STRATA_"))}
    env.update(DAGSTER_HOME=str(home), STRATA_CORPORA=str(corpora), STRATA_LLM_BACKEND="offline",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    dagster = Path(sys.executable).with_name("dagster")
    dagster_cmd = [str(dagster)] if dagster.exists() else [sys.executable, "-m", "dagster"]

    # The partition the UI will offer (the corpora sensor would add it on its first tick).
    subprocess.run([sys.executable, "-c",
                    "import dagster as dg; dg.DagsterInstance.get()"
                    ".add_dynamic_partitions('corpora', ['sample'])"],
                   cwd=REPO, env=env, check=True, timeout=120)
    # corpus_change_sensor runs by default: on its first tick it sees `sample`
    # registered but never published and requests a build of it. Stopped here so
    # the one run of this test is the one the UI launches.
    subprocess.run([*dagster_cmd, "sensor", "stop", "corpus_change_sensor", "-w",
                    "workspace.yaml"], cwd=REPO, env=env, check=True, timeout=180,
                   capture_output=True)

    port = free_port()
    log_path = work / "dagster_dev.log"
    log = log_path.open("w")
    proc = subprocess.Popen([*dagster_cmd, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1",
                             "-p", str(port)], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"dagster dev exited {proc.returncode}:\n{_tail(log_path)}")
            try:
                entries = _gql(base, WORKSPACE_QUERY)["workspaceOrError"]["locationEntries"]
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                entries = []
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                errors = [e["locationOrLoadError"] for e in entries
                          if e["locationOrLoadError"]["__typename"] != "RepositoryLocation"]
                assert not errors, errors
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the code location did not load in {LOAD_TIMEOUT_S} s:\n"
                                     f"{_tail(log_path)}")
            time.sleep(1)
        # The "Join the Dagster community" dialog covers the UI on loopback once per instance.
        _gql(base, "mutation { setNuxSeen }")
        yield {"base": base, "work": work, "out": out, "log": log_path, "proc": proc}
    finally:
        _stop(proc)
        log.close()


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def _show_graph(page, base: str) -> None:
    """The global asset graph with every group expanded, fitted to the window."""
    page.goto(base + "/asset-groups")
    page.get_by_role("button", name=re.compile(r"Materialize all")).wait_for(timeout=60_000)
    # Groups start collapsed; the graph's settings menu expands them (the choice is
    # kept in local storage, so the menu then offers "Collapse all groups"), and a
    # reload lays the expanded graph out to fit the window.
    page.locator("#zoom-slider-container").get_by_role("button", name="settings").click()
    toggle = page.locator("[role=menuitem]:visible", has_text=re.compile(r"(Expand|Collapse) all"))
    toggle.wait_for()
    if "Expand all groups" in toggle.inner_text():
        toggle.click()
        page.reload()
    else:
        page.keyboard.press("Escape")
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.mouse.move(VIEWPORT["width"] // 2, 10)  # off the button: no hover highlight
    for asset in ASSETS:
        page.get_by_text(asset, exact=True).first.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)  # edges and live status settle


def test_materialize_the_sample_corpus_from_the_dagster_ui(browser, dagster_ui, tmp_path):
    base = dagster_ui["base"]
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(30_000)
    try:
        # -- the asset graph --------------------------------------------------------
        page.goto(base + "/asset-groups")
        skip = page.get_by_role("button", name="Skip")  # the community dialog, if shown
        if skip.count() and skip.first.is_visible():
            skip.first.click()
        page.get_by_role("button", name="Hide navigation").click()  # kept in local storage
        _show_graph(page, base)

        # -- Materialize all… → partition `sample` → Launch 1 run ----------------------
        page.get_by_role("button", name=re.compile(r"Materialize all")).click()
        dialog = page.locator(".bp5-dialog", has_text="Launch runs to materialize")
        dialog.wait_for()
        assert f"materialize {len(ASSETS)} assets" in dialog.inner_text()
        # Dynamic partitions: "Custom" is preselected with an empty partition picker.
        dialog.get_by_text("Select a partition or create one").click()
        page.get_by_role("menuitem", name="sample").click()
        dialog.get_by_text("Launch runs to materialize").click()  # closes the picker
        page.get_by_placeholder("Filter partitions").wait_for(state="hidden")
        dialog.get_by_text("1 partition", exact=True).wait_for()
        page.wait_for_timeout(500)  # the picker's fade-out
        page.screenshot(path=str(tmp_path / "launch.png"))
        dialog.get_by_role("button", name="Launch 1 run").click()

        # The toast links to the new run.
        view = page.locator("a[href*='/runs/']", has_text="View").first
        view.wait_for(timeout=60_000)
        run_id = view.get_attribute("href").rsplit("/runs/", 1)[1].split("?")[0]
        view.click()
        page.wait_for_url(f"**/runs/{run_id}**")

        # -- wait for the run (GraphQL for the status; the UI launched it) ------------
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while True:
            run = _gql(base, RUN_QUERY, {"id": run_id})["runOrError"]
            assert run["__typename"] == "Run", run
            if run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
                break
            assert time.monotonic() < deadline, \
                f"run {run_id} still {run['status']} after {RUN_TIMEOUT_S} s"
            time.sleep(3)
        assert run["status"] == "SUCCESS", f"run {run_id}: {run['status']}\n" \
                                           f"{_tail(dagster_ui['log'])}"
        tags = {t["key"]: t["value"] for t in run["tags"]}
        assert tags.get("dagster/from_ui") == "true", tags
        assert tags.get("dagster/partition") == "sample", tags
        runs = _gql(base, RUNS_QUERY)["runsOrError"]["results"]
        assert [r["runId"] for r in runs] == [run_id], "only the run the UI launched"

        # -- the run page: Success, the Gantt chart enlarged ------------------------
        page.reload()  # the final state, without the "Launched run" toast
        page.get_by_text("Success", exact=True).first.wait_for(timeout=60_000)
        page.get_by_text("partition: sample").first.wait_for()
        expand = page.locator('button:has([aria-label="expand_arrows"])').first
        if expand.count():
            expand.click()
        page.wait_for_timeout(1500)
        page.screenshot(path=str(tmp_path / "run.png"))

        # -- the nodes asset: its latest materialization's metadata --------------------
        page.goto(base + "/assets/nodes")
        page.get_by_text("files_parsed", exact=True).first.wait_for(timeout=60_000)
        page.get_by_text("nodes_by_kind", exact=True).first.wait_for()
        page.wait_for_timeout(1000)
        page.screenshot(path=str(tmp_path / "asset-details.png"))
        # the PNG charts in the metadata render as pictures (data URIs in Markdown; the
        # UI folds long Markdown behind "[Show Markdown]", which opens it in a dialog)
        row = page.locator("tr", has=page.get_by_text("depth_chart", exact=True)).first
        row.scroll_into_view_if_needed()
        row.get_by_text("[Show Markdown]").click()
        chart = page.locator('[role=dialog] img[src^="data:image/png"]').first
        chart.wait_for(timeout=30_000)
        page.wait_for_timeout(500)
        assert chart.evaluate("img => img.complete && img.naturalWidth > 100")
        page.screenshot(path=str(tmp_path / "asset-charts.png"))
        page.keyboard.press("Escape")

        # -- the graph again, every asset now materialized ---------------------------
        _show_graph(page, base)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(tmp_path / "asset-graph.png"))
    except Exception:
        page.screenshot(path=str(tmp_path / "failure.png"))
        print(f"\nscreenshot of the failure: {tmp_path / 'failure.png'}\n"
              f"dagster dev log: {dagster_ui['log']}\n{_tail(dagster_ui['log'], 2000)}")
        raise
    finally:
        page.close()

    # -- the index was published --------------------------------------------------------
    from retrieval import Index

    out = dagster_ui["out"]
    assert (out / "CURRENT").exists()
    idx = Index.open(out)
    assert idx.corpus == "sample"
    assert idx.stats()["files"] > 10

    for name in SHOTS:
        path = tmp_path / name
        assert _png_size(path) == (VIEWPORT["width"], VIEWPORT["height"]), name
        assert 20_000 < path.stat().st_size < 1_000_000, (name, path.stat().st_size)
    shots = os.environ.get("STRATA_SCREENSHOTS")
    if shots:
        os.makedirs(shots, exist_ok=True)
        for name in SHOTS:
            shutil.copy(tmp_path / name, os.path.join(shots, name))
