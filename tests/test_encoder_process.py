"""The warm encoder process (strata/core/encoder_process.py): the encoder a run's
parse starts loading on another core gives the vectors the run's own process
would have, is only started where every step shares the process, falls back
when it cannot load, and never outlives the process that started it. The CLI
build that uses it is tests/test_unchanged_rebuild.py (torch never enters the
command's own process)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest

from strata.core import encoder_process
from strata.core.embedding import EncoderSpec, load_encoder, resolve_runtime
from tests.conftest import COUNT_ENCODER_PROCESSES, REPO, SAMPLE

SPEC = EncoderSpec(runtime=resolve_runtime("auto"))


def _texts() -> list[str]:
    texts = [p.read_text(errors="replace")[:1500] for p in sorted(SAMPLE.rglob("*.md"))]
    return texts + ["", "x", "Calibration " * 300]  # empty, one token, past the model's length


@pytest.fixture
def allowed():
    with encoder_process.warm_encoders_allowed():
        yield
    assert encoder_process._warm is None  # what the run did not take ends with it


def test_the_warm_encoder_gives_the_vectors_of_the_processs_own(allowed):
    encoder_process.start(SPEC, 8)
    warm = encoder_process.take(SPEC, 8)
    assert warm is not None and warm.pid != psutil.Process().pid
    assert warm.spec.runtime == SPEC.runtime and warm.dim == 384
    warm.set_threads(2)
    own = load_encoder(SPEC, batch_size=8)
    own.set_threads(2)
    texts = _texts()
    # counted as its own encoder counts them: the shard sorts by them into whole passes
    assert warm.token_counts(texts) == own.token_counts(texts)
    for part in (texts[:5], texts[5:], texts[:1]):
        a, b = warm.encode(part), own.encode(part)
        assert a.dtype == np.float32 and a.shape == (len(part), 384)
        assert np.array_equal(a, b)  # the same bytes, not only close
    # another batch size is another encoder: not this one
    assert encoder_process.take(SPEC, 16) is None


def test_texts_encoded_ahead_are_the_vectors_an_encode_would_give(allowed):
    """A prefetch hands texts over without waiting; the encode that asks for them
    later gets their vectors from what the child made ahead, the same bytes as
    the process's own encoder gives, in the order asked (a text asked twice, and
    texts never handed over, included). Only a torch runtime's vectors are the
    same whatever they are encoded with, so only those are handed over."""
    if SPEC.runtime not in ("torch", "torch-bf16"):
        pytest.skip("prefetch is for torch runtimes")
    encoder_process.start(SPEC, 8)
    texts = _texts()
    ahead, later = texts[:6], texts[6:]
    assert encoder_process.warming(SPEC)
    assert encoder_process.prefetch(SPEC, ahead)  # before the child has even loaded
    assert not encoder_process.prefetch(SPEC, [])
    assert not encoder_process.prefetch(EncoderSpec(runtime="onnx"), ahead)
    warm = encoder_process.take(SPEC, 8)
    assert warm is not None
    warm.set_threads(2)
    own = load_encoder(SPEC, batch_size=8)
    own.set_threads(2)
    asked = [ahead[2], later[0], ahead[0], ahead[2], later[1]]
    got = warm.encode(asked)
    assert warm.prefetched == 3  # ahead[2] twice and ahead[0]; not the two others
    assert np.array_equal(got, own.encode(asked))
    assert np.array_equal(warm.encode(ahead), own.encode(ahead))
    assert warm.prefetched == 3 + 4  # ahead[0] and ahead[2] went with their first use
    encoder_process.done_encoding()


def test_work_handed_to_take_runs_beside_the_wait_and_its_failure_stays_there(allowed):
    """What the caller would do next anyway (the embedding shard: import the table
    library) runs in a thread of its own while the child loads and encodes; take
    returns without waiting for it, and a failure there is not the caller's."""
    encoder_process.start(SPEC, 8)
    started, finish = threading.Event(), threading.Event()
    ran_in: list[str] = []

    def work() -> None:
        ran_in.append(threading.current_thread().name)
        started.set()
        finish.wait(60)  # still running when take returns

    warm = encoder_process.take(SPEC, 8, meanwhile=work)
    assert warm is not None and started.wait(60)
    assert ran_in and ran_in[0] != threading.main_thread().name and not finish.is_set()
    finish.set()

    def broken() -> None:
        raise ImportError("no such library")

    assert encoder_process.take(SPEC, 8, meanwhile=broken) is warm
    assert warm.encode(["still answers"]).shape == (1, 384)


def test_nothing_is_warmed_outside_a_one_process_run_or_when_switched_off(monkeypatch):
    encoder_process.start(SPEC, 8)  # no executor said every step runs here
    assert encoder_process._warm is None and encoder_process.take(SPEC, 8) is None
    with encoder_process.warm_encoders_allowed():
        monkeypatch.setenv("STRATA_WARM_ENCODER", "0")
        encoder_process.start(SPEC, 8)
        assert encoder_process._warm is None
        monkeypatch.delenv("STRATA_WARM_ENCODER")
        encoder_process.start(EncoderSpec(backend="openai", model="m", runtime="torch"), 8)
        assert encoder_process._warm is None  # an endpoint has nothing to load


def test_a_kept_process_outlives_its_run_until_it_dies_or_the_command_ends():
    """`strata index --watch`: the process a run started serves the next run; one
    that died in between is not handed out (the shard loads its own encoder)."""
    with encoder_process.kept_between_runs():
        with encoder_process.warm_encoders_allowed():
            encoder_process.start(SPEC, 8)
            encoder_process.done_encoding()  # the run's embedding shards are done
        warm = encoder_process._warm
        assert warm is not None and warm.alive()  # both runs' ends left it
        with encoder_process.warm_encoders_allowed():
            assert encoder_process.take(SPEC, 8) is warm
            assert warm.encode(["the next run's text"]).shape == (1, 384)
        psutil.Process(warm.pid).kill()
        warm._proc.wait()
        with encoder_process.warm_encoders_allowed():
            assert encoder_process.take(SPEC, 8) is None
        assert encoder_process._warm is None
        with encoder_process.warm_encoders_allowed():
            encoder_process.start(SPEC, 8)
        kept = encoder_process._warm
    assert encoder_process._warm is None  # the command's end ends it
    assert not kept.alive()


def test_an_encoder_that_cannot_load_is_not_used_and_its_process_ends(allowed, tmp_path):
    broken = EncoderSpec(model=str(tmp_path / "no-such-model"), runtime=SPEC.runtime)
    encoder_process.start(broken, 8)
    child = psutil.Process(encoder_process._warm.pid)
    assert encoder_process.take(broken, 8) is None  # the caller loads (and reports) itself
    assert encoder_process._warm is None
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_the_process_ends_when_the_one_that_started_it_is_gone():
    """Killed parents leave no encoder behind: its pipe closes and it exits."""
    code = ("import os, sys\n"
            "from strata.core import encoder_process as ep\n"
            "from strata.core.embedding import EncoderSpec\n"
            f"spec = EncoderSpec(runtime={SPEC.runtime!r})\n"
            "with ep.warm_encoders_allowed():\n"
            "    ep.start(spec, 8)\n"
            "    print(ep._warm.pid, flush=True)\n"
            "    os._exit(0)  # no cleanup at all, as after SIGKILL\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    pid = int(run.stdout.split()[0])
    deadline = time.monotonic() + 120  # a wait for the exit, not a figure: it may be loading
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_an_edit_rebuilt_by_the_cli_encodes_in_the_warm_process_and_equals_a_fresh_build(
        sample_copy, builder, tmp_path):
    """`strata index` after an edit: the parse finds the changed file, the encoder loads
    in its own process, torch never enters the command's process, and the index is
    table by table (vectors bit for bit) a fresh in-process build of the edited folder."""
    import json

    from strata.core.layout import IndexLayout
    from tests.conftest import write_corpora
    from tests.index_equality import index_differences

    out = tmp_path / "index"
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dh"),
           "STRATA_CORPORA": str(tmp_path / "cli.yaml")}
    code = ("import sys; from strata.pipelines.cli import main; "
            f"{COUNT_ENCODER_PROCESSES}; rc = main(sys.argv[1:]); "
            "print('imported:', sorted(m for m in ('lancedb', 'torch') if m in sys.modules)); "
            "print('encoder processes:', len(started), 'before the run:', early); "
            "sys.exit(rc)")
    argv = ["index", str(sample_copy), "--corpus", "warm", "--out", str(out), "-q"]

    def cli() -> subprocess.CompletedProcess:
        run = subprocess.run([sys.executable, "-c", code, *argv], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        return run

    first = cli()
    assert "encoder processes: 0" in first.stdout  # a first build parses everything
    edited = sorted(sample_copy.rglob("*.md"))[0]
    edited.write_text(edited.read_text() + "\n\n## Drift log\n\nThe gauge drifted by two "
                      "hectopascals after the storm and was corrected against the reference.\n")
    again = cli()
    assert "imported: ['lancedb']" in again.stdout  # no torch here: the encoder process had it
    # the command saw the edited file's new modification time and started the encoder
    # before the run; the run's parse shard kept that process (no second one)
    assert "encoder processes: 1 before the run: [1]" in again.stdout
    report = json.loads((out / "build" / "build_report.json").read_text())
    assert report["embedding_shards"]["warm_encoder"] is True
    assert report["embed"]["computed"] > 0
    # the edited file's new texts were handed over as the parse made them: encoded
    # ahead, and still the bytes a fresh build gives them (below)
    assert 0 < report["embedding_shards"]["encoded_ahead"] <= report["embed"]["computed"]

    # the same corpus name: node ids carry it
    write_corpora(builder.config_path, {"warm": {"root": str(sample_copy),
                                                 "out": str(tmp_path / "fresh")}})
    builder.build("warm")
    diffs = index_differences(IndexLayout(out).resolve(), IndexLayout(tmp_path / "fresh").resolve())
    assert diffs == []


def test_the_command_starts_the_encoder_before_its_run_only_for_a_few_changed_files_in_process(
        tmp_path, monkeypatch):
    """`strata index` starts the encoder before its run when the index's last build
    listed the files and a few were modified since, and the run will run every
    step in this process; not for a first build, an unchanged or mostly changed
    corpus, step processes, or another executor. Times are set, not waited for."""
    import argparse

    import pyarrow as pa
    import pyarrow.parquet as pq

    from strata.pipelines.build_command import _start_encoder_early
    from strata.core.layout import IndexLayout
    from strata.stages.corpora import CorpusSpec

    root, out = tmp_path / "corpus", tmp_path / "index"
    root.mkdir()
    names = [f"{i}.md" for i in range(4)]
    for name in names:
        (root / name).write_text(f"# {name}\n")
    spec = CorpusSpec(name="early", root=root, out=out)
    args = argparse.Namespace(workers=None)
    built = 1_000_000_000_000_000_000

    def started(**changed) -> bool:
        for name in names:
            os.utime(root / name, ns=(built - 1, built - 1))
        for name, ns in changed.items():
            os.utime(root / f"{name}.md", ns=(ns, ns))
        os.utime(root, ns=(built - 1, built - 1))
        try:
            _start_encoder_early(args, spec)
            return encoder_process._warm is not None
        finally:
            encoder_process.release()

    assert not started(**{"0": built + 1})  # no build yet: nothing to compare with
    documents = IndexLayout(out).build_table("documents")
    documents.parent.mkdir(parents=True)
    pq.write_table(pa.table({"path": names}), documents)
    os.utime(documents, ns=(built, built))
    assert not started()  # nothing modified since
    assert started(**{"0": built + 1})  # one of four
    assert not started(**dict.fromkeys("012", built + 1))  # most of the corpus: the run decides
    args.workers = 2
    assert not started(**{"0": built + 1})  # step processes: none would use it
    args.workers = None
    monkeypatch.setenv("STRATA_EXECUTOR", "multiprocess")
    assert not started(**{"0": built + 1})
    monkeypatch.setenv("STRATA_EXECUTOR", "auto")
    monkeypatch.setenv("STRATA_WARM_ENCODER", "0")
    assert not started(**{"0": built + 1})
