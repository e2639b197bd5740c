"""A real `dagster dev` (webserver, daemon, code server) on loopback, and the
GraphQL calls the UI makes, for the Dagster UI tests (`make e2e`) and the
UI-path benchmark (`benchmarks.ui_launch`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
LOCATION = "strata"
REPOSITORY = "__repository__"

WORKSPACE_QUERY = """{ workspaceOrError { __typename
  ... on Workspace { locationEntries { name loadStatus locationOrLoadError { __typename
    ... on PythonError { message } } } }
  ... on PythonError { message } } }"""
RUN_QUERY = """query($id: ID!) { runOrError(runId: $id) { __typename
  ... on Run { runId jobName status creationTime startTime endTime tags { key value } } } }"""
RUNS_QUERY = """{ runsOrError { ... on Runs { results { runId jobName status
  tags { key value } } } } }"""
LAUNCH_MUTATION = """mutation($params: ExecutionParams!) {
  launchPipelineExecution(executionParams: $params) { __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message } } }"""
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gql(base: str, query: str, variables: dict | None = None) -> dict:
    r = httpx.post(base + "/graphql", json={"query": query, "variables": variables or {}},
                   timeout=60)
    r.raise_for_status()
    body = r.json()
    if "errors" in body:
        raise AssertionError(body["errors"])
    return body["data"]


def tail(path: Path, n: int = 4000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else ""


def dagster_cmd() -> list[str]:
    dagster = Path(sys.executable).with_name("dagster")
    return [str(dagster)] if dagster.exists() else [sys.executable, "-m", "dagster"]


def stop_group(proc: subprocess.Popen, timeout: float = 40) -> None:
    """dagster dev spawns the webserver, the daemon, a code server and run workers,
    all in the session it leads (start_new_session): stop the whole group."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    try:  # anything left in the group (a run worker that ignored SIGTERM)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@contextmanager
def dagster_dev(env: dict, log_path: Path, load_timeout_s: float = 180):
    """`dagster dev -w workspace.yaml` until its code location has loaded; yields
    (base URL, the process)."""
    port = free_port()
    with log_path.open("w") as log:
        proc = subprocess.Popen([*dagster_cmd(), "dev", "-w", "workspace.yaml", "-h",
                                 "127.0.0.1", "-p", str(port)], cwd=REPO, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + load_timeout_s
            while True:
                if proc.poll() is not None:
                    raise AssertionError(f"dagster dev exited {proc.returncode}:\n"
                                         f"{tail(log_path)}")
                try:
                    entries = gql(base, WORKSPACE_QUERY)["workspaceOrError"]["locationEntries"]
                except (httpx.HTTPError, ValueError, KeyError, TypeError, AssertionError):
                    entries = []
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    errors = [e["locationOrLoadError"] for e in entries
                              if e["locationOrLoadError"]["__typename"] != "RepositoryLocation"]
                    assert not errors, errors
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"the code location did not load in {load_timeout_s} s:"
                                         f"\n{tail(log_path)}")
                time.sleep(1)
            yield base, proc
        finally:
            stop_group(proc)


def launch_index_run(base: str, corpus: str, tags: dict | None = None,
                     run_config: dict | None = None) -> str:
    """Launch a run of the index_corpus job for one corpus partition, as the UI's
    launchpad does (GraphQL `launchPipelineExecution`); the run id."""
    params = {"selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY,
                           "jobName": "index_corpus"},
              "runConfigData": run_config or {},
              "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in
                                             {"dagster/partition": corpus,
                                              **(tags or {})}.items()]},
              "mode": "default"}
    out = gql(base, LAUNCH_MUTATION, {"params": params})["launchPipelineExecution"]
    assert out["__typename"] == "LaunchRunSuccess", out
    return out["run"]["runId"]


def run_status(base: str, run_id: str) -> dict:
    run = gql(base, RUN_QUERY, {"id": run_id})["runOrError"]
    assert run["__typename"] == "Run", run
    return run


def wait_run(base: str, run_id: str, timeout_s: float, poll_s: float = 0.2) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        run = run_status(base, run_id)
        if run["status"] in FINISHED:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {run['status']} after {timeout_s} s")
        time.sleep(poll_s)


def step_processes(home: Path, run_id: str) -> tuple[set[int], list[str]]:
    """(the pids the run's steps started in, its engine messages and the strata
    executor's own log lines), from the instance's event log."""
    import dagster as dg
    pids: set[int] = set()
    engine: list[str] = []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for record in instance.get_records_for_run(run_id, limit=10_000).records:
            event = record.event_log_entry.dagster_event
            if event is None:
                if "strata executor" in (record.event_log_entry.user_message or ""):
                    engine.append(record.event_log_entry.user_message)
                continue
            if event.event_type_value == "STEP_START":
                pids.add(event.pid)
            elif event.event_type_value == "ENGINE_EVENT":
                engine.append(record.event_log_entry.user_message or event.message or "")
    return pids, engine
