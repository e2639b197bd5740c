"""A querying process keeps numpy's BLAS off the cores torch needs."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("env, expected", [({}, 1), ({"STRATA_BLAS_THREADS": "0"}, None)])
def test_querying_runs_blas_on_one_thread(sample_index, env, expected):
    """OpenBLAS workers spin after a product and slow the next query embedding;
    a querying process pins BLAS to one thread unless told not to."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    code = ("import sys; from strata.retrieval import Index; from threadpoolctl import threadpool_info; "
            "i = Index.open(sys.argv[1]); i.dense([0.1] * 384, 3); "
            "print([p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'])")
    env = {**os.environ, "STRATA_BLAS_THREADS": "", **env}
    # a thread count another test's library left in this worker's environment (dask's
    # nanny sets OMP_NUM_THREADS=1) is not what this test is about
    leaked = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    env = {k: v for k, v in env.items() if v != "" and k not in leaked}
    out = subprocess.run([sys.executable, "-c", code, str(sample_index)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    threads = json.loads(out.stdout.strip().splitlines()[-1])
    assert threads, "numpy's BLAS was not found"
    if expected is None:  # left at OpenBLAS's default: one thread per core
        assert os.cpu_count() == 1 or max(threads) > 1
    else:
        assert all(t == expected for t in threads)
