"""The Dagster UI as a user drives it, in headless Chromium (Debian's
chromium, driven by Playwright) against a real `dagster dev -w workspace.yaml`
on loopback, in the order a user meets it:

- the code location is `strata`, and the resource page names the environment
  variables the settings come from;
- a `strata index` build is a run of the `index_corpus` job, with its
  partition and tags, in the run list;
- the global lineage reads ingest → enrich → index without expanding anything;
- a rebuild launched from the UI with nothing changed runs every step in the
  run's own process (and so does one launched through the launchpad's GraphQL);
- a second run of a corpus launched while a build of it runs waits as *Queued*
  and starts only after that build has ended.

Screenshots go to ``$STRATA_SCREENSHOTS`` when set (``make e2e``: docs/images)."""

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

import pytest

from tests.browser import chromium
from tests.waiting import wait_until
from tests.conftest import REPO, SAMPLE, write_corpora
from tests.dagster_dev import (RUNS_QUERY, dagster_dev, gql, launch_index_run, run_status,
                               step_processes, tail, wait_run)

pytestmark = pytest.mark.e2e

VIEWPORT = {"width": 1600, "height": 1000}
RUN_TIMEOUT_S = float(os.environ.get("STRATA_E2E_RUN_TIMEOUT", "600"))  # a loaded 2-core machine
ASSETS = ("parsed_shards", "nodes", "summaries", "image_groups", "captions", "facts",
          "embedding_shards", "embeddings", "edges", "index_manifest", "mirrored_index")
GROUPS = {"ingest": 2, "enrich": 4, "index": 5}
SHOTS = ("asset-graph.png", "asset-graph-expanded.png", "launch.png", "run.png", "queued.png",
         "asset-details.png", "asset-charts.png")

RESOURCE_QUERY = """query($s: ResourceSelector!) { topLevelResourceDetailsOrError(
  resourceSelector: $s) { __typename ... on ResourceDetails { name
    configuredValues { key value type } } } }"""


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory):
    from strata.pipelines.instance_config import ensure_instance_config

    work = tmp_path_factory.mktemp("dagster_ui")
    home = work / "dagster_home"
    ensure_instance_config(home)  # what `make install` and `strata index` write
    corpus = work / "sample"
    shutil.copytree(SAMPLE, corpus)
    out = work / "index"
    corpora = write_corpora(work / "corpora.yaml", {"sample": {"root": str(corpus),
                                                              "out": str(out)}})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "STRATA_"))}
    env.update(DAGSTER_HOME=str(home), STRATA_CORPORA=str(corpora), STRATA_LLM_BACKEND="offline",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    from tests.dagster_dev import dagster_cmd

    # corpus_change_sensor runs by default: on its first tick it would see `sample`
    # registered but never published and request a build. Stopped here so that the
    # runs of this module are the ones it starts.
    subprocess.run([*dagster_cmd(), "sensor", "stop", "corpus_change_sensor", "-w",
                    "workspace.yaml"], cwd=REPO, env=env, check=True, timeout=300,
                   capture_output=True)
    log = work / "dagster_dev.log"
    with dagster_dev(env, log) as (base, proc):
        gql(base, "mutation { setNuxSeen }")  # the community dialog, once per instance
        yield {"base": base, "work": work, "home": home, "corpus": corpus, "out": out,
               "env": env, "log": log, "proc": proc, "shots": work / "shots"}


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser, dagster_ui, request):
    """A fresh browser context (fresh local storage: groups collapsed, navigation
    shown); a failed test leaves a screenshot and prints the dagster dev log."""
    p = browser.new_page(viewport=VIEWPORT)
    p.set_default_timeout(60_000)
    yield p
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        shot = dagster_ui["work"] / f"failure-{request.node.name}.png"
        p.screenshot(path=str(shot))
        print(f"\nscreenshot of the failure: {shot}\ndagster dev log: {dagster_ui['log']}\n"
              f"{tail(dagster_ui['log'], 2000)}")
    p.close()


def _shot(page, ui, name: str) -> None:
    ui["shots"].mkdir(exist_ok=True)
    page.screenshot(path=str(ui["shots"] / name))


def _strata_index(ui, *extra: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "strata.pipelines.cli", "index", str(ui["corpus"]),
                             "--corpus", "sample", "--out", str(ui["out"]), "-q", *extra],
                            cwd=REPO, env=ui["env"], **popen)


def _runs(ui) -> list[dict]:
    return gql(ui["base"], RUNS_QUERY)["runsOrError"]["results"]


def _tags(run: dict) -> dict:
    return {t["key"]: t["value"] for t in run["tags"]}


def _run_row(page, run_id: str):
    """The row of a run in the UI's run list (a virtualized table of divs)."""
    return page.locator("[data-key]").filter(
        has=page.locator(f"a[href='/runs/{run_id}']")).first


def _hide_navigation(page) -> None:
    skip = page.get_by_role("button", name="Skip")  # the community dialog, if shown
    if skip.count() and skip.first.is_visible():
        skip.first.click()
    page.get_by_role("button", name="Hide navigation").click()


def test_the_code_location_is_strata_and_resources_name_their_variables(dagster_ui, page):
    base = dagster_ui["base"]
    (entry,) = gql(base, "{ workspaceOrError { ... on Workspace { locationEntries { name } } } }"
                   )["workspaceOrError"]["locationEntries"]
    assert entry["name"] == "strata"
    details = gql(base, RESOURCE_QUERY, {"s": {"repositoryLocationName": "strata",
                                               "repositoryName": "__repository__",
                                               "resourceName": "llm"}})
    values = {v["key"]: v for v in details["topLevelResourceDetailsOrError"]["configuredValues"]}
    assert values["backend"]["type"] == "ENV_VAR"
    assert values["backend"]["value"] == "STRATA_LLM_BACKEND"
    # the same, as a user sees it: the resource page of the `strata` location
    page.goto(base + "/locations/strata/resources/llm")
    page.get_by_text("STRATA_LLM_BACKEND").first.wait_for()
    # a variable nobody set is still named: the field's description says what it reads
    assert "STRATA_EMBED_BATCH_SIZE" not in os.environ
    page.goto(base + "/locations/strata/resources/embedder")
    page.get_by_text("STRATA_EMBED_BATCH_SIZE").first.wait_for()
    page.goto(base + "/locations")
    page.get_by_text("strata", exact=True).first.wait_for()


def test_a_cli_build_is_listed_under_index_corpus(dagster_ui, page):
    proc = _strata_index(dagster_ui, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, err[-3000:]
    (run,) = _runs(dagster_ui)
    tags = _tags(run)
    assert run["jobName"] == "index_corpus" and run["status"] == "SUCCESS"
    assert tags["dagster/partition"] == "sample" and tags["strata/launched_by"] == "strata index"
    assert tags["strata/llm"] == "offline" and tags["strata/embedding"].startswith(
        "sentence-transformers:")
    dagster_ui["cli_run"] = run["runId"]

    page.goto(dagster_ui["base"] + "/runs")
    _hide_navigation(page)
    row = _run_row(page, run["runId"])
    row.wait_for()
    text = row.inner_text()
    assert "index_corpus" in text and "sample" in text, text


def test_the_lineage_shows_the_stages_without_expanding_anything(dagster_ui, page):
    page.goto(dagster_ui["base"] + "/asset-groups")
    _hide_navigation(page)
    page.get_by_role("button", name=re.compile(r"Materialize all")).wait_for()
    for name in GROUPS:
        page.get_by_text(name, exact=True).first.wait_for()
    page.wait_for_timeout(2000)  # edges and live status settle
    # the graph draws three tiles, one per stage, and no asset of them: nothing expanded
    tiles = page.locator("svg foreignObject")
    names = [re.match(r"\s*([a-z]+)", t.text_content()).group(1) for t in tiles.all()]
    assert sorted(names) == sorted(GROUPS), names
    for asset in ASSETS:
        assert not page.get_by_text(asset, exact=True).count(), asset
    _shot(page, dagster_ui, "asset-graph.png")

    # one click opens everything (the graph's settings menu), for the detail view
    page.locator("#zoom-slider-container").get_by_role("button", name="settings").click()
    page.locator("[role=menuitem]:visible", has_text="Expand all groups").click()
    page.reload()
    for asset in ASSETS:
        page.get_by_text(asset, exact=True).first.wait_for()
    page.mouse.move(VIEWPORT["width"] // 2, 10)
    page.wait_for_timeout(2000)
    _shot(page, dagster_ui, "asset-graph-expanded.png")


def test_a_no_change_rebuild_from_the_ui_runs_in_one_process(dagster_ui, page):
    base, home = dagster_ui["base"], dagster_ui["home"]
    # The link the docs, `make ui` and `strata corpus add` give: the launch dialog opens
    # with the corpus picked (without it, dynamic partitions open on "Custom, 0 partitions").
    page.goto(base + "/asset-groups?partition=sample")
    _hide_navigation(page)
    page.get_by_role("button", name=re.compile(r"Materialize all")).click()
    dialog = page.locator(".bp5-dialog", has_text="Launch runs to materialize")
    dialog.wait_for()
    assert f"materialize {len(ASSETS)} assets" in dialog.inner_text()
    dialog.get_by_text("1 partition", exact=True).wait_for()
    assert dialog.get_by_role("button", name="Launch 1 run").is_enabled()
    page.wait_for_timeout(500)
    _shot(page, dagster_ui, "launch.png")
    dialog.get_by_role("button", name="Launch 1 run").click()
    view = page.locator("a[href*='/runs/']", has_text="View").first
    view.wait_for()
    run_id = view.get_attribute("href").rsplit("/runs/", 1)[1].split("?")[0]
    run = wait_run(base, run_id, RUN_TIMEOUT_S)
    assert run["status"] == "SUCCESS", tail(dagster_ui["log"])
    tags = _tags(run)
    assert tags.get("dagster/from_ui") == "true" and tags["dagster/partition"] == "sample"
    # tags the UI cannot set, added by the run's steps
    assert tags["strata/launched_by"] == "the UI" and tags["strata/llm"] == "offline"
    # one filter finds every build of the corpus, however it was launched ("Materialize
    # all" runs as __ASSET_JOB, the CLI as index_corpus: the partition tag is on both), and
    # the unchanged rebuild kept its version, said so in the asset's history
    import dagster as dg
    with dg.DagsterInstance.from_config(str(home)) as instance:
        found = {r.run_id for r in instance.get_runs(
            filters=dg.RunsFilter(tags={"dagster/partition": "sample"}))}
        event = instance.get_latest_materialization_event(dg.AssetKey("index_manifest"))
    assert run_id in found and (dagster_ui.get("cli_run") or run_id) in found, found
    meta = event.asset_materialization.metadata
    assert meta["unchanged"].value is True and meta["version"].value == 1, meta
    pids, engine = step_processes(home, run_id)
    assert len(pids) == 1, pids  # every step in the run worker's own process
    assert any("every step in this process" in m for m in engine), engine
    report = _report(dagster_ui)
    assert report["parse"]["parsed"] == 0 and report["embed"]["computed"] == 0  # no change

    # the launchpad's path (GraphQL launchPipelineExecution of index_corpus): the same
    launched = launch_index_run(base, "sample")
    assert wait_run(base, launched, RUN_TIMEOUT_S)["status"] == "SUCCESS"
    pids, engine = step_processes(home, launched)
    assert len(pids) == 1 and any("every step in this process" in m for m in engine)

    page.goto(f"{base}/runs/{run_id}")
    page.get_by_text("Success", exact=True).first.wait_for()
    page.get_by_text("partition: sample").first.wait_for()
    expand = page.locator('button:has([aria-label="expand_arrows"])').first
    if expand.count():
        expand.click()
    page.wait_for_timeout(1500)
    _shot(page, dagster_ui, "run.png")

    # the nodes asset's latest materialization: metadata, a chart
    page.goto(base + "/assets/nodes")
    page.get_by_text("files_parsed", exact=True).first.wait_for()
    page.get_by_text("nodes_by_kind", exact=True).first.wait_for()
    page.wait_for_timeout(1000)
    _shot(page, dagster_ui, "asset-details.png")
    row = page.locator("tr", has=page.get_by_text("depth_chart", exact=True)).first
    row.scroll_into_view_if_needed()
    row.get_by_text("[Show Markdown]").click()
    chart = page.locator('[role=dialog] img[src^="data:image/png"]').first
    chart.wait_for()
    page.wait_for_timeout(500)
    assert chart.evaluate("img => img.complete && img.naturalWidth > 100")
    _shot(page, dagster_ui, "asset-charts.png")


def _report(ui) -> dict:
    import json

    return json.loads((ui["out"] / "build" / "build_report.json").read_text())


def test_a_second_run_of_a_corpus_waits_as_queued(dagster_ui, page):
    """While `strata index` builds the corpus (its run held Started: the process is
    paused with SIGSTOP), a run of the same partition launched from the UI's path
    waits in Dagster's queue, shown as Queued, and starts after the build ended."""
    base = dagster_ui["base"]
    (dagster_ui["corpus"] / "late.md").write_text("# Late\n\nAdded while the UI was open.\n")
    before = {r["runId"] for r in _runs(dagster_ui)}
    proc = _strata_index(dagster_ui, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def started() -> str | None:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            new = [r for r in _runs(dagster_ui) if r["runId"] not in before]
            return new[0]["runId"] if new and new[0]["status"] == "STARTED" else None

        cli_run = wait_until(started, "the CLI build's run never started",
                             limit_s=RUN_TIMEOUT_S, poll_s=0.2)
        os.kill(proc.pid, signal.SIGSTOP)  # the build holds its run Started
        queued = launch_index_run(base, "sample")
        time.sleep(6)  # the daemon looks at the queue every second
        assert run_status(base, queued)["status"] == "QUEUED"
        assert run_status(base, cli_run)["status"] == "STARTED"

        page.goto(base + "/runs")
        _hide_navigation(page)
        row = _run_row(page, queued)
        row.wait_for()
        assert "Queued" in row.inner_text()
        page.wait_for_timeout(1000)
        _shot(page, dagster_ui, "queued.png")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, err.decode()[-3000:]
    run = wait_run(base, queued, RUN_TIMEOUT_S)
    assert run["status"] == "SUCCESS", tail(dagster_ui["log"])
    cli = run_status(base, cli_run)
    assert cli["status"] == "SUCCESS" and run["startTime"] >= cli["endTime"]


def test_screenshots(dagster_ui):
    """Every screenshot was taken, at the window's size; copied into docs/images
    when STRATA_SCREENSHOTS is set."""
    shots = dagster_ui["shots"]
    for name in SHOTS:
        path = shots / name
        assert _png_size(path) == (VIEWPORT["width"], VIEWPORT["height"]), name
        assert 20_000 < path.stat().st_size < 1_000_000, (name, path.stat().st_size)
    target = os.environ.get("STRATA_SCREENSHOTS")
    if target:
        os.makedirs(target, exist_ok=True)
        for name in SHOTS:
            shutil.copy(shots / name, os.path.join(target, name))


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])
