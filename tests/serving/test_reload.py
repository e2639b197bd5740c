"""Hot reload: a newly published version is switched to between requests, with
no failed request, and every request answers from one version."""

from __future__ import annotations

import json
import threading
import time

from strata.core.storage.layout import IndexLayout
from tests.serving.helpers import copy_index, make_client, settings_for
from tests.waiting import wait_until

QUERIES = ["barometric drift", "calibrate against a reference gauge", "export to parquet",
           "vented and non-vented sensors", "firmware sampler"]


def publish_again(index_dir, like: int | None = None, **changes) -> int:
    """What the index_manifest asset does: freeze build/ as the next version
    (with the manifest of version ``like``, default the current one)."""
    layout = IndexLayout(index_dir)
    manifest = json.loads((layout.version_dir(like or layout.current_version())
                           / "manifest.json").read_text())
    return layout.publish({**manifest, **changes}, keep=5)


def wait_for_version(client, version: int) -> dict:
    def there() -> dict | None:
        client.post("/search", json={"query": "tide", "mode": "flat", "k": 1})  # a look at CURRENT
        health = client.get("/health").json()
        return health if health["indexes"][0]["version"] == version else None

    return wait_until(there, f"the service never moved to version {version}")


def test_publish_during_a_request_stream_drops_nothing(sample_index, tmp_path):
    index_dir = copy_index(sample_index, tmp_path / "index")
    v1 = IndexLayout(index_dir).current_version()
    settings = settings_for(index_dir, reload_interval_s=0.0, warm_up=True)
    seen: list[list[tuple[int, int]]] = [[] for _ in range(4)]
    failures: list[str] = []
    stop = threading.Event()

    with make_client(settings) as client:
        def stream(n: int) -> None:
            i = 0
            while not stop.is_set():
                mode = ("hierarchical", "diffusion", "flat", "routed")[n]
                r = client.post("/search", json={"query": QUERIES[i % len(QUERIES)],
                                                 "mode": mode, "k": 5})
                if r.status_code != 200:
                    failures.append(f"{mode}: {r.status_code} {r.text[:200]}")
                else:
                    body = r.json()
                    seen[n].append((body["version"], len(body["results"])))
                i += 1

        threads = [threading.Thread(target=stream, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        v2 = publish_again(index_dir)
        wait_for_version(client, v2)
        time.sleep(0.5)
        v3 = publish_again(index_dir)
        health = wait_for_version(client, v3)
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join()
        info = client.get("/indexes").json()["indexes"][0]

    assert not failures, failures[:5]
    for versions in seen:
        order = [v for v, _ in versions]
        assert order == sorted(order), "a stream never goes back to an older version"
        assert order[0] == v1 and order[-1] == v3
        assert all(n > 0 for _, n in versions)
    assert health["indexes"][0]["reload_error"] is None
    assert info["version"] == info["latest_version"] == v3
    assert {v1, v2, v3} <= set(info["versions"])


def test_a_broken_new_version_keeps_the_old_one_serving(sample_index, tmp_path):
    index_dir = copy_index(sample_index, tmp_path / "index")
    v1 = IndexLayout(index_dir).current_version()
    with make_client(settings_for(index_dir, reload_interval_s=0.0)) as client:
        bad = publish_again(index_dir, format_version=99)
        def refused() -> dict | None:
            client.post("/search", json={"query": "tide", "mode": "flat", "k": 1})
            health = client.get("/health").json()
            return health if health["indexes"][0]["reload_error"] is not None else None

        health = wait_until(refused, "the broken version was never looked at")
        r = client.post("/search", json={"query": "barometric drift"})
        assert r.status_code == 200 and r.json()["version"] == v1
        (entry,) = health["indexes"]
        assert entry["version"] == v1
        assert f"version {bad}" in entry["reload_error"] and "format 99" in entry["reload_error"]
        assert health["indexes"][0]["reload_error"] and client.app.state.service.registry \
            .slots["sample"]._failed == bad  # tried once, not on every request
        # a good version after it is picked up again
        good = publish_again(index_dir, like=v1)
        assert wait_for_version(client, good)["indexes"][0]["reload_error"] is None


def test_a_new_version_reuses_the_loaded_encoder(sample_index, tmp_path):
    index_dir = copy_index(sample_index, tmp_path / "index")
    with make_client(settings_for(index_dir, reload_interval_s=0.0)) as client:
        svc = client.app.state.service
        client.post("/search", json={"query": "tide", "mode": "flat"})
        before = svc.registry.slots["sample"].current.index
        v2 = publish_again(index_dir)
        wait_for_version(client, v2)
        after = svc.registry.slots["sample"].current.index
    assert after is not before and after.version == v2
    assert after.encoder is before.encoder, "no second model load on a reload"
