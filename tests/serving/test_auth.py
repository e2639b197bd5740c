"""API keys (hashed at rest), per-key rate limits, and the loopback-only
default when no keys are configured."""

from __future__ import annotations

import logging

import pytest

from strata.service.auth import (KeyEntry, KeyFileError, RateLimiter, hash_key, load_entries,
                          new_key)
from tests.serving.helpers import make_client, settings_for

Q = {"query": "barometric drift", "mode": "flat", "k": 2}


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two keys: ``alice`` at the default rate, ``bob`` limited to 3 a minute."""
    alice, bob = new_key(), new_key()
    path = tmp_path_factory.mktemp("keys") / "keys.txt"
    path.write_text("# service keys\n"
                    f"{KeyEntry('alice', hash_key(alice)).line()}\n"
                    f"{KeyEntry('bob', hash_key(bob), 3).line()}  # a tight tier\n")
    return {"alice": alice, "bob": bob, "file": path}


@pytest.fixture(scope="module")
def secured(sample_index, keys):
    with make_client(settings_for(sample_index, api_keys_file=str(keys["file"]))) as client:
        yield client


def test_the_key_file_holds_hashes_only(keys):
    text = keys["file"].read_text()
    assert keys["alice"] not in text and keys["bob"] not in text
    assert hash_key(keys["alice"]) in text
    entries = load_entries(keys["file"])
    assert [(e.name, e.rate_per_minute) for e in entries] == [("alice", None), ("bob", 3.0)]


@pytest.mark.parametrize("line, says", [
    (f"carol:{new_key()}", "clear-text key is never accepted"),
    ("carol:sha256:1234", "not 64 hex digits"),
    ("carol:sha256:" + "a" * 64 + ":fast", "not a number"),
    ("carol:sha256:" + "a" * 64 + ":-1", "positive"),
    ("car ol:sha256:" + "a" * 64, "invalid key name"),
], ids=lambda v: "carol:<a new key>" if v.startswith("carol:strata_") else None)
# (the new key is random; pytest-xdist's workers must collect the same test ids)
def test_bad_key_entries_are_refused_with_the_line(tmp_path, line, says):
    path = tmp_path / "keys.txt"
    path.write_text("\n" + line + "\n")
    with pytest.raises(KeyFileError, match=says) as e:
        load_entries(path)
    assert f"{path}:2:" in str(e.value)


def test_requests_without_a_valid_key_get_401(secured, keys):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"X-API-Key": keys["alice"] + "x"},
                    {"Authorization": keys["alice"]}):  # not "Bearer KEY"
        r = secured.post("/search", json=Q, headers=headers)
        assert r.status_code == 401, headers
        assert r.headers["www-authenticate"] == "Bearer"
        assert "Authorization: Bearer KEY" in r.json()["detail"]
    assert secured.get("/indexes").status_code == 401
    assert secured.get("/indexes/sample/images/x").status_code == 401


def test_a_valid_key_in_either_header_is_accepted(secured, keys):
    assert secured.post("/search", json=Q,
                        headers={"Authorization": f"Bearer {keys['alice']}"}).status_code == 200
    assert secured.post("/ask", json={"question": "what is drift?"},
                        headers={"X-API-Key": keys["alice"]}).status_code == 200
    assert secured.get("/indexes", headers={"X-API-Key": keys["alice"]}).status_code == 200
    health = secured.get("/health")  # for load balancers: no key needed
    assert health.status_code == 200 and health.json()["auth"] is True


def test_per_key_rate_limits(secured, keys):
    bob = {"X-API-Key": keys["bob"]}
    codes = [secured.post("/search", json=Q, headers=bob).status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    r = secured.post("/search", json=Q, headers=bob)
    assert r.status_code == 429 and "3 requests per minute" in r.json()["detail"]
    assert 1 <= int(r.headers["retry-after"]) <= 21
    # another key has its own bucket
    assert secured.post("/search", json=Q, headers={"X-API-Key": keys["alice"]}).status_code == 200


def test_the_rate_limiter_refills_over_time():
    now = [0.0]
    rl = RateLimiter(clock=lambda: now[0])
    assert [rl.acquire("k", 60, burst=2) for _ in range(3)] == [0.0, 0.0, pytest.approx(1.0)]
    now[0] = 0.5
    assert rl.acquire("k", 60, burst=2) == pytest.approx(0.5)
    now[0] = 1.5
    assert rl.acquire("k", 60, burst=2) == 0.0
    assert rl.acquire("other", 60, burst=2) == 0.0
    assert rl.acquire("k", None) == 0.0  # no limit


def test_keys_never_reach_the_logs(sample_index, keys, caplog):
    caplog.set_level(logging.DEBUG)
    with make_client(settings_for(sample_index, api_keys_file=str(keys["file"]))) as client:
        client.post("/search", json=Q, headers={"Authorization": f"Bearer {keys['alice']}"})
        client.post("/search", json=Q, headers={"X-API-Key": "wrong-" + keys["alice"]})
        client.get(f"/indexes?key={keys['alice']}", headers={"X-API-Key": keys["alice"]})
    server = [r for r in caplog.records if not r.name.startswith("httpx")]  # not the client's
    text = "\n".join(r.getMessage() + str(r.args) for r in server)
    assert keys["alice"] not in text
    access = [r.getMessage() for r in caplog.records if r.name == "strata.service.access"]
    assert any(m.startswith("alice POST /search 200") for m in access), access
    assert any(m.startswith("- POST /search 401") for m in access), access
    assert any(m.startswith("alice GET /indexes 200") for m in access), access


def test_without_keys_only_loopback_clients_are_answered(sample_index):
    settings = settings_for(sample_index)
    with make_client(settings, client=("203.0.113.9", 4000)) as remote:
        r = remote.post("/search", json=Q)
        assert r.status_code == 403 and "loopback clients only" in r.json()["detail"]
        assert remote.get("/health").status_code == 200
    with make_client(settings_for(sample_index, allow_unauthenticated=True,
                                  anonymous_rate_per_minute=2),
                     client=("203.0.113.9", 4000)) as remote:
        codes = [remote.post("/search", json=Q).status_code for _ in range(3)]
        assert codes == [200, 200, 429]


def test_serve_refuses_a_public_address_without_keys(sample_index, capsys):
    from strata.pipelines.cli import main

    assert main(["serve", "--index", str(sample_index), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0 without API keys" in err
    assert "strata keys new" in err


def test_keys_new_prints_the_key_once_and_stores_its_hash(tmp_path, capsys, sample_index):
    from strata.pipelines.cli import main

    path = tmp_path / "keys.txt"
    assert main(["keys", "new", "ci-bot", "--file", str(path), "--rate-per-minute", "30"]) == 0
    out = capsys.readouterr()
    key = out.out.strip()
    assert key.startswith("strata_") and len(key) > 40
    assert key not in path.read_text() and "shown once" in out.err
    assert path.stat().st_mode & 0o077 == 0, "the key file is private"
    (entry,) = load_entries(path)
    assert entry.name == "ci-bot" and entry.rate_per_minute == 30
    assert main(["keys", "new", "ci-bot", "--file", str(path)]) == 2  # names are unique
    assert main(["keys", "list", "--file", str(path)]) == 0
    assert "ci-bot\t30/min" in capsys.readouterr().out
    with make_client(settings_for(sample_index, api_keys_file=str(path))) as client:
        assert client.post("/search", json=Q, headers={"X-API-Key": key}).status_code == 200


def test_key_hashes_from_the_environment(sample_index, monkeypatch):
    from strata.service.settings import ServiceSettings

    key = new_key()
    monkeypatch.setenv("STRATA_API_KEY_HASHES", f"env-key:{hash_key(key)}:10")
    monkeypatch.setenv("STRATA_SERVE_INDEXES", str(sample_index))
    settings = ServiceSettings.from_env()
    settings.warm_up = False
    with make_client(settings) as client:
        assert client.post("/search", json=Q).status_code == 401
        assert client.post("/search", json=Q, headers={"X-API-Key": key}).status_code == 200


def _through_uvicorn(app, settings):
    """The app as uvicorn serves it with these settings' proxy options (uvicorn's
    own Config wraps it in its proxy-headers middleware, or not)."""
    import uvicorn

    config = uvicorn.Config(app, **settings.uvicorn_options())
    config.load()
    return config.loaded_app


def test_x_forwarded_for_is_believed_only_from_configured_proxies(sample_index):
    """uvicorn believes X-Forwarded-For from 127.0.0.1 by default: a local client
    rotating 127.0.0.N escaped the anonymous rate limit. Now a claim is
    believed only from proxies named in the settings; otherwise every request that
    makes one counts as one client, which the loopback rule does not trust."""
    import uvicorn
    from fastapi.testclient import TestClient

    from strata.service.app import create_app
    from tests.serving.helpers import LOCAL, LOOPBACK

    def codes(app, n=4):
        with TestClient(app, client=LOOPBACK, raise_server_exceptions=False,
                        base_url=LOCAL) as client:
            return [client.post("/search", json=Q, headers={"X-Forwarded-For": f"127.0.0.{i}"})
                    .status_code for i in range(2, 2 + n)]

    def limited(**kw):
        return settings_for(sample_index, allow_unauthenticated=True,
                            anonymous_rate_per_minute=2, **kw)

    # `strata serve`: uvicorn does not read the header; the claim changes nothing
    plain = limited()
    assert plain.uvicorn_options() == {"proxy_headers": False}
    assert codes(_through_uvicorn(create_app(plain), plain)) == [200, 200, 429, 429]
    # `uvicorn --factory` with uvicorn's defaults (it believes loopback proxies): the
    # rotated addresses still share one bucket
    config = uvicorn.Config(create_app(plain))
    config.load()
    assert codes(config.loaded_app) == [200, 200, 429, 429]
    # proxies named: the address each request names is the client (its own bucket)
    trusted = limited(forwarded_allow_ips="127.0.0.1")
    assert codes(_through_uvicorn(create_app(trusted), trusted)) == [200, 200, 200, 200]
    # without keys or --allow-unauthenticated, a request relayed by an unnamed proxy is
    # not taken for a loopback client
    with make_client(settings_for(sample_index)) as local:
        assert local.post("/search", json=Q).status_code == 200
        relayed = local.post("/search", json=Q, headers={"X-Forwarded-For": "203.0.113.9"})
        assert relayed.status_code == 403


def test_a_forwarded_header_opens_no_second_bucket(sample_index):
    """Without proxies named, a client that alternates plain requests with ones
    carrying X-Forwarded-For (or Forwarded) is limited in one bucket, its
    connecting address's: a header claiming another address, or its own, does
    not double its anonymous rate, and does not spend another client's."""
    from fastapi.testclient import TestClient

    from strata.service.app import create_app
    from tests.serving.helpers import LOCAL

    plain = settings_for(sample_index, allow_unauthenticated=True, anonymous_rate_per_minute=3)
    app = _through_uvicorn(create_app(plain), plain)  # as `strata serve` runs it
    headers = [{}, {"X-Forwarded-For": "198.51.100.7"}, {"X-Forwarded-For": "203.0.113.9"},
               {"Forwarded": "for=198.51.100.8"}, {"X-Forwarded-For": "198.51.100.9"}, {}]
    with TestClient(app, client=("203.0.113.9", 4000), raise_server_exceptions=False,
                    base_url=LOCAL) as peer:
        codes = [peer.post("/search", json=Q, headers=h).status_code for h in headers]
        assert codes == [200, 200, 200, 429, 429, 429]
        refused = peer.post("/search", json=Q, headers={"X-Forwarded-For": "198.51.100.10"})
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    with TestClient(app, client=("203.0.113.10", 4001), raise_server_exceptions=False,
                    base_url=LOCAL) as other:
        assert other.post("/search", json=Q).status_code == 200  # a bucket of its own
        assert other.post("/search", json=Q, headers={"X-Forwarded-For": "203.0.113.10"}
                          ).status_code == 200
