"""Shared fixtures: the bundled sample corpus, the shared public data, and
real Dagster builds of them into temporary folders."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not beside this checkout")
    return SHARED_DATA


@pytest.fixture(scope="session")
def openharmony(shared_data) -> Path:
    return shared_data / "openharmony_quickstart"


def write_corpora(path: Path, corpora: dict) -> Path:
    path.write_text(yaml.safe_dump({"corpora": corpora}))
    return path


class Builder:
    """Runs the real assets with ``dg.materialize`` against a test instance."""

    def __init__(self, instance, config_path: Path):
        self.instance = instance
        self.config_path = config_path

    def build(self, corpus: str, run_config: dict | None = None, llm=None,
              raise_on_error: bool = True, assets=None, selection=None):
        import dagster as dg

        from strata.assets import all_assets, corpora_partitions
        from strata.resources import CorpusRegistry, EmbedderResource, LLMResource

        if not self.instance.has_dynamic_partition(corpora_partitions.name, corpus):
            self.instance.add_dynamic_partitions(corpora_partitions.name, [corpus])
        return dg.materialize(
            assets or all_assets, partition_key=corpus, instance=self.instance,
            resources={"corpora": CorpusRegistry(config_path=str(self.config_path)),
                       "embedder": EmbedderResource(), "llm": llm or LLMResource()},
            run_config=run_config or {}, raise_on_error=raise_on_error, selection=selection)


@pytest.fixture
def builder(tmp_path):
    import dagster as dg

    with dg.instance_for_test() as instance:
        yield Builder(instance, tmp_path / "corpora.yaml")


@pytest.fixture
def sample_copy(tmp_path) -> Path:
    dst = tmp_path / "sample"
    shutil.copytree(SAMPLE, dst)
    return dst


def _built_once(tmp_path_factory, name: str, build):
    """`build(base)` run once per test session, also when pytest-xdist spreads the
    tests over workers (`make test` runs two): the workers share one folder beside
    their own temporary roots, the first to take the lock builds, the others wait
    and read what it returned (pickled next to it). Only for read-only fixtures."""
    import pickle

    from filelock import FileLock

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(tmp_path_factory.mktemp(name))
    root = tmp_path_factory.getbasetemp().parent  # shared by the session's workers
    base, done = root / f"shared-{name}", root / f"shared-{name}.pickle"
    with FileLock(str(root / f"shared-{name}.lock")):
        if not done.is_file():
            shutil.rmtree(base, ignore_errors=True)  # a worker that failed half-way
            base.mkdir()
            done.write_bytes(pickle.dumps(build(base)))
        return pickle.loads(done.read_bytes())


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory) -> Path:
    """One real build of the bundled sample corpus, shared by read-only tests."""
    def build(base: Path) -> Path:
        import dagster as dg

        cfg = write_corpora(base / "corpora.yaml",
                            {"sample": {"root": str(SAMPLE), "out": str(base / "index")}})
        with dg.instance_for_test() as instance:
            Builder(instance, cfg).build("sample")
        return base / "index"

    return _built_once(tmp_path_factory, "sample_index", build)


@pytest.fixture(scope="session")
def oh_build(tmp_path_factory, openharmony):
    """The 51 OpenHarmony pages indexed once through the CLI (a subprocess, as a
    user runs it), shared by every test that needs a real documentation corpus.
    Returns (base folder, env used, the JSON stats `strata index --json` printed)."""
    def build(base: Path):
        import json
        import subprocess
        import sys

        env = {**os.environ, "DAGSTER_HOME": str(base / "dagster_home"),
               "STRATA_CORPORA": str(base / "corpora.yaml")}
        proc = subprocess.run([sys.executable, "-m", "strata.pipelines.cli", "index", str(openharmony),
                               "--corpus", "oh", "--out", str(base / "index"), "--json"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (base / "index.stderr").write_text(proc.stderr)  # the progress lines, for the CLI tests
        return base, env, json.loads(proc.stdout)

    return _built_once(tmp_path_factory, "oh", build)
