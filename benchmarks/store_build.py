"""What keeping the build on an object store costs (`shared: store`): a synthetic
corpus built by `strata index` with its build in a local folder, then with its build
on an S3 endpoint (moto's server on loopback, in this process), each followed by a
rebuild with nothing changed; and a rebuild from an empty folder, as a new pod or
worker does, which must find everything it needs on the store.

Every build is a child process under :mod:`benchmarks.measure`. Loopback moto is not
S3: requests cost microseconds instead of milliseconds, and the server shares the
cores with the build, so the figures say what the sync itself costs (listing,
hashing, copying), not a network's latency.

Usage: ``python -m benchmarks.store_build [--files 1000]``
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from benchmarks.common import SCRATCH, build_with_cli, machine, size, write_result
from benchmarks.synthetic_corpus import generate

BUCKET = "strata-bench"


def _store() -> tuple[object, str]:
    """A moto S3 server on loopback with one empty bucket; returns (server, host:port)."""
    from moto.server import ThreadedMotoServer
    from pyarrow import fs

    for var, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ[var] = value
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    fs.S3FileSystem(endpoint_override=f"{host}:{port}", scheme="http", region="us-east-1",
                    access_key="bench", secret_key="bench",
                    allow_bucket_creation=True).create_dir(BUCKET)
    return server, f"{host}:{port}"


def _declare(work: Path, corpus: Path, out: Path, mirror: str | None) -> None:
    import yaml

    entry: dict = {"root": str(corpus), "out": str(out)}
    if mirror:
        entry.update(mirror=mirror, shared="store")
    work.mkdir(parents=True, exist_ok=True)
    (work / "corpora.yaml").write_text(yaml.safe_dump({"corpora": {"bench": entry}}))


def _store_mb(endpoint: str, prefix: str) -> float:
    import obstore

    from strata.core.storage.object_store import open_store

    store, _ = open_store(f"s3://{BUCKET}?endpoint_override={endpoint}&scheme=http")
    return sum(m["size"] for chunk in obstore.list(store, prefix=prefix) for m in chunk) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=size(1000, 10))
    ap.add_argument("--work", type=Path, default=SCRATCH / "store_build")
    args = ap.parse_args()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    corpus = work / "corpus"
    n = len(generate(corpus, args.files))
    server, endpoint = _store()
    mirror = f"s3://{BUCKET}/bench?endpoint_override={endpoint}&scheme=http&region=us-east-1"
    builds: dict[str, dict] = {}
    try:
        for mode, uri in (("folder", None), ("store", mirror)):
            home = work / mode
            _declare(home, corpus, home / "index", uri)
            print(f"{mode}: first build of {n} files...", flush=True)
            builds[f"{mode}: first build"] = build_with_cli(corpus, home / "index", "bench", home)
            builds[f"{mode}: rebuild, nothing changed"] = build_with_cli(
                corpus, home / "index", "bench", home)
        pod = work / "new-pod"
        _declare(pod, corpus, pod / "index", mirror)
        print("store: rebuild from an empty folder...", flush=True)
        builds["store: rebuild from an empty folder"] = build_with_cli(
            corpus, pod / "index", "bench", pod)
        stored = {"build": _store_mb(endpoint, "bench/build/"),
                  "versions": _store_mb(endpoint, "bench/versions/")}
    finally:
        server.stop()
    first = {m: builds[f"{m}: first build"]["wall_s"] for m in ("folder", "store")}
    same = {m: builds[f"{m}: rebuild, nothing changed"]["wall_s"] for m in ("folder", "store")}
    rows = ["| build | wall s | peak RSS MB | files parsed | embeddings computed |",
            "|---|---|---|---|---|"]
    for name, b in builds.items():
        rows.append(f"| {name} | {b['wall_s']:.1f} | {b['peak_rss_mb']:.0f} | "
                    f"{b['files_parsed']} | {b['embeddings_computed']} |")
    table = "\n".join([
        *rows, "",
        f"Store against folder: first build {first['store'] / first['folder']:.2f}×, "
        f"no-change rebuild {same['store'] / same['folder']:.2f}×. "
        f"On the store: the build {stored['build']:.1f} MB, versions {stored['versions']:.1f} MB."])
    write_result("store_build", {"machine": machine(), "files": n, "builds": builds,
                                 "stored_mb": stored}, table)


if __name__ == "__main__":
    main()
