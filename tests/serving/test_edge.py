"""Hostile clients at the edge of a real `strata serve` (a uvicorn process on
loopback, with API keys, a small connection cap and a short request deadline),
called over raw sockets where a well-behaved HTTP client cannot misbehave
enough: a foreign Host (DNS rebinding), slow and endless requests, clients that
hang up mid-body, control characters in a path, and a malformed body without a
key. Nothing here measures time: each wait is for an event, with a generous
limit that only a hang reaches."""

from __future__ import annotations

import select
import socket
import struct

import httpx
import pytest

from tests.serving.helpers import key_file, serve_process
from tests.waiting import wait_until

CAP = 6  # --max-connections
DEADLINE_S = 4  # --request-timeout
EVENT_S = 120  # the limit on any wait for an event: reached only by a hang


@pytest.fixture(scope="module")
def server(sample_index, tmp_path_factory):
    work = tmp_path_factory.mktemp("edge")
    key, keys = key_file(work, 6000)
    log_path = work / "server.log"
    with serve_process(sample_index, log_path, "--api-keys", str(keys),
                       "--max-connections", str(CAP), "--request-timeout", str(DEADLINE_S),
                       "--keep-alive", "2", "--log-level", "info") as (base, port, _proc):
        yield {"base": base, "port": port, "key": key, "log": log_path}


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=EVENT_S)
    s.settimeout(EVENT_S)
    return s


def _head(port: int, path: str = "/search", length: int = 64, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n{extra}\r\n").encode()


def _answer(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset,
    when it closes with bytes of ours unread, ends it too)."""
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def _status(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else 0


def _log(server) -> bytes:
    return server["log"].read_bytes()


def test_a_foreign_host_gets_421_and_the_services_own_names_work(server):
    port, auth = server["port"], {"Authorization": f"Bearer {server['key']}"}
    query = {"query": "barometric drift"}
    with httpx.Client(base_url=server["base"], timeout=EVENT_S) as c:
        for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.nip.io:{port}"):
            assert c.get("/health", headers={"Host": host}).status_code == 421
            refused = c.post("/search", json=query, headers={**auth, "Host": host})
            assert refused.status_code == 421 and "results" not in refused.json()
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost", f"[::1]:{port}"):
            assert c.get("/health", headers={"Host": host}).status_code == 200
            assert c.post("/search", json=query, headers={**auth, "Host": host}).status_code == 200
        # a page of another origin calling the loopback name is refused too
        foreign = c.post("/search", json=query,
                         headers={**auth, "Origin": f"http://attacker.example:{port}"})
        assert foreign.status_code == 403
        assert c.post("/search", json=query, headers={**auth, "Origin": "null"}).status_code == 403
        own = c.post("/search", json=query, headers={**auth, "Origin": f"http://localhost:{port}"})
        assert own.status_code == 200 and own.json()["results"]


def test_connections_beyond_the_cap_get_503_and_slow_bodies_408(server):
    """CAP + 3 clients that send their headers and one byte of a 64-byte body,
    each one connected while the others are held: the server holds fewer than
    CAP of them and answers the rest 503 at once; those it holds get 408 at
    the deadline, their connections closed. Then it serves normally again."""
    port = server["port"]
    socks = []
    try:
        for _ in range(CAP + 3):
            s = _connect(port)
            s.sendall(_head(port) + b"{")
            socks.append(s)
        answers = [_answer(s) for s in socks]
    finally:
        for s in socks:
            s.close()
    codes = [_status(a) for a in answers]
    assert set(codes) <= {503, 408}, codes
    assert codes.count(503) >= 3 and codes.count(408) >= 1, codes
    assert all(b"connection: close" in a.lower() for a in answers)
    assert httpx.get(server["base"] + "/health", timeout=EVENT_S).status_code == 200


def test_a_body_sent_a_byte_at_a_time_gets_408_and_the_connection_is_closed(server):
    """Bytes that keep coming do not extend the deadline: it bounds the whole
    request, not the pause between two bytes."""
    port = server["port"]
    with _connect(port) as s:
        s.sendall(_head(port, length=10_000))
        sent = 0
        while not select.select([s], [], [], 0.25)[0]:
            try:
                s.sendall(b" ")
            except OSError:  # closed under our feet: its answer is read below
                break
            sent += 1
            assert sent < EVENT_S * 4, "the server never answered a trickled body"
        raw = _answer(s)
    assert _status(raw) == 408 and b"not received in time" in raw


@pytest.mark.parametrize("sent", [b"", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "],
                         ids=["nothing", "half-headers"])
def test_headers_that_never_end_get_408_and_the_connection_is_closed(server, sent):
    with _connect(server["port"]) as s:
        s.sendall(sent)
        raw = _answer(s)
    assert _status(raw) == 408


def test_a_client_that_hangs_up_mid_body_leaves_one_quiet_line(server):
    port, before = server["port"], len(_log(server))
    for reset in (False, False, True, True):
        s = _connect(port)
        s.sendall(_head(port, length=1000) + b'{"query": "tide')
        if reset:  # an abortive close: RST instead of FIN
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    quiet = b"POST /search - "

    wait_until(lambda: _log(server)[before:].count(quiet) >= 4 or b" 500 " in _log(server),
               "the hang-ups were never logged", limit_s=EVENT_S, poll_s=0.1)
    log = _log(server)[before:]
    assert log.count(quiet) == 4, log.decode(errors="replace")
    for bad in (b"Traceback", b" 500 ", b"No response returned", b"ERROR"):
        assert bad not in log, log.decode(errors="replace")


def test_control_characters_in_a_path_are_escaped_in_the_log(server):
    """An OSC 52 clipboard write, a clear-screen and a NUL, percent-encoded in
    the path: the access log shows them escaped, never as the raw bytes a
    terminal would obey."""
    port, key = server["port"], server["key"]
    evil = "%1b]52;c;aGVsbG8=%07%1b[2J%00%c2%9b31m"
    for path, auth in ((f"/indexes/sample/nodes/{evil}", f"Authorization: Bearer {key}\r\n"),
                       (f"/indexes/sample/outline{evil}", ""), (f"/{evil}", "")):
        with _connect(port) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\n{auth}"
                      "Connection: close\r\n\r\n".encode())
            assert _status(_answer(s)) in (401, 404)
    wait_until(lambda: _log(server).count(b"\\x1b]52;c;aGVsbG8=\\x07") >= 3,
               "the requests were never logged", limit_s=EVENT_S, poll_s=0.1)
    log = _log(server)
    for raw in (b"\x1b", b"\x07", b"\x00", "\u009b".encode()):
        assert raw not in log
    assert b"\\x1b[2J\\x00\\x9b31m" in log


def test_a_malformed_body_without_a_key_gets_401_not_422(server):
    key = server["key"]
    with httpx.Client(base_url=server["base"], timeout=EVENT_S) as c:
        for path in ("/search", "/ask"):
            for body in (b"{", b"not json", b'{"query": 42, "k": "many"}', b"[]"):
                r = c.post(path, content=body, headers={"Content-Type": "application/json"})
                assert r.status_code == 401, (path, body, r.status_code, r.text)
                assert r.headers["www-authenticate"] == "Bearer"
            bad = c.post(path, content=b"{", headers={"Content-Type": "application/json",
                                                     "Authorization": f"Bearer {key}"})
            assert bad.status_code in (400, 422)
        # a key does not have to come before the body is sized: an oversized body is
        # still refused unread
        assert c.post("/search", content=b"{" + b" " * 70_000 + b"}",
                      headers={"Content-Type": "application/json"}).status_code == 413
