"""`strata index --watch` (strata/pipelines/watch_command.py): it builds, waits,
builds again when a file of the corpus changes and not when a file it leaves out
does, keeps one encoder process loaded from one build to the next, and ends on
Ctrl-C with nothing left running."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil

from tests.conftest import REPO

DEADLINE_S = 600  # a guard against a hang, not a measure: a build takes seconds


def test_the_fingerprint_sees_an_edit_that_keeps_size_and_mtime_not_what_is_left_out(tmp_path):
    """What decides a watched build (and the change sensor's): an edit that keeps a
    file's size and modification time still counts; a touched file, an excluded
    one and one in ``.git`` do not."""
    from strata.stages.fingerprint import fingerprint

    (tmp_path / "a.md").write_text("alpha\n")
    (tmp_path / "skip").mkdir()
    (tmp_path / "skip" / "b.md").write_text("beta\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref\n")
    before = fingerprint(tmp_path, ["**/*"], ["skip/"])
    assert before.files == 1

    st = os.stat(tmp_path / "a.md")
    (tmp_path / "a.md").write_text("alphb\n")  # same size
    os.utime(tmp_path / "a.md", ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime
    edited = fingerprint(tmp_path, ["**/*"], ["skip/"], previous=before.to_dict())
    assert edited.content != before.content

    (tmp_path / "skip" / "b.md").write_text("changed, but left out\n")
    (tmp_path / ".git" / "HEAD").write_text("another ref\n")
    os.utime(tmp_path / "a.md")  # touched
    again = fingerprint(tmp_path, ["**/*"], ["skip/"], previous=edited.to_dict())
    assert again.stat != edited.stat and again.content == edited.content


def test_a_watcher_that_ended_leaves_the_wait_to_look_at_the_folder_again(tmp_path):
    """No events to be had at all (the watcher's thread is gone): the wait returns
    anyway, so the caller looks at the folder's fingerprint each second instead of
    waiting forever for an event that cannot come."""
    from strata.pipelines.watch_command import _Events

    events = _Events(tmp_path)
    events.close()
    assert not events._thread.is_alive()
    events.wait()  # returns: the test would hang here otherwise
    assert not events.dirty.is_set()


def test_watch_with_dry_run_is_a_usage_error(tmp_path, capsys):
    from strata.pipelines.cli import main

    rc = main(["index", str(tmp_path), "--corpus", "w", "--watch", "--dry-run"])
    assert rc == 2
    assert "--dry-run" in capsys.readouterr().err


class _Lines:
    """The lines a process writes to a pipe, read by a thread, awaited one pattern at a time."""

    def __init__(self, stream):
        self.seen: list[str] = []
        self._q: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self._q.put(line)
        self._q.put(None)

    def until(self, text: str) -> str:
        while True:
            line = self._q.get(timeout=DEADLINE_S)
            assert line is not None, "the process ended:\n" + "".join(self.seen[-40:])
            self.seen.append(line)
            if text in line:
                return line


def _version(out: Path) -> str:
    return (out / "CURRENT").read_text().strip()


def test_watch_rebuilds_on_an_edit_keeps_its_encoder_and_stops_on_ctrl_c(sample_copy, tmp_path):
    from strata.retrieval import Index

    out = tmp_path / "index"
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dh"),
           "STRATA_CORPORA": str(tmp_path / "corpora.yaml")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "strata.pipelines.cli", "index", str(sample_copy), "--corpus",
         "watched", "--out", str(out), "--watch", "--exclude", "drafts/"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        # as a shell's background job: Ctrl-C must end the watch whatever it inherited
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        err = _Lines(proc.stderr)
        err.until("watching")
        first = _version(out)
        report = json.loads((out / "build" / "build_report.json").read_text())
        assert report["embedding_shards"]["encoder_kept"] is False  # the first build loads it

        # a file the corpus leaves out and one touched, then an edit: one build, for the edit
        (sample_copy / "drafts").mkdir()
        (sample_copy / "drafts" / "idea.md").write_text("# Idea\n\nnot indexed\n")
        page = sorted(sample_copy.rglob("*.md"))[0]
        os.utime(page)
        page.write_text(page.read_text() + "\n\n## Drift log\n\nThe quoxel gauge drifted by "
                        "two hectopascals after the storm.\n")
        err.until("files changed")
        err.until("watching")
        second = _version(out)
        assert second != first
        hits = Index.open(out).search("quoxel gauge drift", k=3)
        assert hits and hits[0].path == page.relative_to(sample_copy).as_posix()
        report = json.loads((out / "build" / "build_report.json").read_text())
        # the edit's texts were encoded by the encoder the first build loaded, kept
        assert report["embedding_shards"]["encoder_kept"] is True

        page.write_text(page.read_text() + "\nCorrected against the reference barometer.\n")
        err.until("files changed")
        err.until("watching")
        assert _version(out) != second
        report = json.loads((out / "build" / "build_report.json").read_text())
        assert report["embedding_shards"]["encoder_kept"] is True  # and the second edit's
        assert not [c for c in psutil.Process(proc.pid).children()
                    if "python" in c.name()]  # no process of its own holds it
        assert sum("indexing " in line for line in err.seen) == 3  # first build and two edits

        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
        assert err.until("stopped watching") and rc == 0, "".join(err.seen[-30:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

