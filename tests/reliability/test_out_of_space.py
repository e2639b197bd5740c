"""A build that runs out of space (a full disk, a quota, the file size limit)
stops at once with one line naming what happened, instead of retrying the step
(minutes of encoding again, to fail at the same write) and ending in
"Exceeded max_retries" or a page of SQLAlchemy traceback.

The real `strata index` runs as a subprocess under a file size limit
(``RLIMIT_FSIZE``, with SIGXFSZ ignored so that a write past it fails with
EFBIG, as one on a full disk fails with ENOSPC)."""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from strata.core.storage.space import out_of_space
from tests.conftest import SAMPLE

REPO = Path(__file__).resolve().parents[2]


def _build_under_limit(tmp_path: Path, limit_bytes: int) -> tuple[subprocess.CompletedProcess, Path]:
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE,
                           (limit_bytes, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home), "STRATA_CORPORA": str(tmp_path / "c.yaml"),
           "STRATA_SHARDS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "index", str(SAMPLE),
                           "--corpus", "full", "--out", str(tmp_path / "index")],
                          cwd=REPO, env=env, preexec_fn=limited, capture_output=True, text=True,
                          timeout=900)
    return proc, home


def _errors(proc) -> list[str]:
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


def test_a_step_out_of_space_fails_once_in_one_line(tmp_path):
    import dagster as dg

    # files of 400 kB at most: parsing fits, the embedding step's writes do not
    proc, home = _build_under_limit(tmp_path, 400_000)
    assert proc.returncode == 1, proc.stderr[-4000:]
    (line,) = _errors(proc)
    assert "File too large" in line and "ulimit -f" in line, line
    assert "nothing was published" in line
    assert "Exceeded max_retries" not in proc.stderr
    with dg.DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        kinds = [e.dagster_event.event_type_value for e in instance.all_logs(run.run_id)
                 if e.dagster_event is not None]
    assert kinds.count("STEP_FAILURE") == 1 and "STEP_UP_FOR_RETRY" not in kinds


def test_dagster_storage_out_of_space_is_one_line(tmp_path):
    # 150 kB: Dagster's own SQLite event log cannot grow past it during the run
    proc, _ = _build_under_limit(tmp_path, 150_000)
    assert proc.returncode == 1, proc.stderr[-4000:]
    (line,) = _errors(proc)
    assert "Dagster's run storage" in line and "ulimit -f" in line, line


@pytest.mark.parametrize("error,said", [
    (OSError(errno.ENOSPC, "No space left on device", "/data/x.parquet"),
     "No space left on device: /data/x.parquet"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "Disk quota exceeded: /index"),
    (OSError(errno.EFBIG, "File too large", "/data/v.npy"), "File too large: /data/v.npy"),
    (RuntimeError("LanceError(IO): write failed: No space left on device (os error 28)"),
     "No space left on device: /index"),
    (OSError("Error writing bytes to file. Detail: [errno 27] File too large"),
     "File too large: /index"),
    (RuntimeError("(sqlite3.OperationalError) database or disk is full"),
     "No space left on device: /index"),
])
def test_out_of_space_is_recognised_however_it_is_raised(error, said):
    try:
        try:
            raise error
        except Exception as inner:
            raise ValueError("a step failed") from inner  # wrapped, as libraries do
    except ValueError as outer:
        assert out_of_space(outer, "/index").startswith(said)
    assert out_of_space(OSError(errno.ENOENT, "No such file"), "/index") is None
    assert out_of_space(ValueError("File too large to index"), "/index") is None
