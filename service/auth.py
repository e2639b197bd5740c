"""API keys (stored as SHA-256 digests, never in clear) and per-key rate limits.

A key is a random 256-bit token (``strata keys new``), so a plain SHA-256 digest
is enough at rest: there is nothing to brute-force, and hashing stays cheap on
every request (a slow password hash would cost more than the search). Keys
arrive in the ``Authorization: Bearer`` or ``X-API-Key`` header, never in the
URL, where access logs and proxies would keep them.

Key file format, one key per line (``#`` starts a comment)::

    NAME:sha256:HEXDIGEST[:REQUESTS_PER_MINUTE]

``STRATA_API_KEY_HASHES`` holds the same entries separated by commas.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from strata.core.config.files import ConfigFileError, read_config_file

KEY_PREFIX = "strata_"
_HEX = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


class KeyFileError(ValueError):
    pass


def hash_key(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class KeyEntry:
    name: str
    digest: str  # "sha256:<hex>"
    rate_per_minute: float | None = None  # None: the service default

    def line(self) -> str:
        rate = "" if self.rate_per_minute is None else f":{self.rate_per_minute:g}"
        return f"{self.name}:{self.digest}{rate}"


def parse_entry(text: str, where: str = "") -> KeyEntry:
    parts = text.strip().split(":")
    if len(parts) not in (3, 4) or parts[1] != "sha256":
        raise KeyFileError(f"{where}expected NAME:sha256:HEXDIGEST[:RATE_PER_MINUTE] "
                           "(a clear-text key is never accepted here; hash it with "
                           "`strata keys new` or `strata keys hash`)")
    name, _, digest = parts[:3]
    if not _NAME.match(name):
        raise KeyFileError(f"{where}invalid key name {name!r}")
    if not _HEX.match(digest.lower()):
        raise KeyFileError(f"{where}the digest of {name!r} is not 64 hex digits")
    rate = None
    if len(parts) == 4:
        try:
            rate = float(parts[3])
        except ValueError:
            raise KeyFileError(f"{where}rate of {name!r} is not a number: {parts[3]!r}") from None
        if not math.isfinite(rate) or rate <= 0:
            raise KeyFileError(f"{where}rate of {name!r} must be a positive number")
    return KeyEntry(name, "sha256:" + digest.lower(), rate)


def load_entries(file: str | Path | None = None, env_value: str | None = None,
                 named: str | None = None) -> list[KeyEntry]:
    """The entries of the key ``file`` and of ``env_value``; :class:`KeyFileError`
    in one line for anything that cannot be used. The file must be a regular file
    of at most 4 MiB (a FIFO or a device is refused unread:
    :func:`strata.core.config.files.read_config_file`); ``named`` is how errors
    name it (default: by the flag and the variable serve and mcp take it from)."""
    entries: list[KeyEntry] = []
    if file:
        path = Path(file)
        named = named or f"the API key file {path} (--api-keys, $STRATA_API_KEYS_FILE)"
        try:
            text = read_config_file(path, named).decode("utf-8")
        except ConfigFileError as e:
            raise KeyFileError(str(e)) from None
        except UnicodeDecodeError:
            raise KeyFileError(f"{named} is not UTF-8 text") from None
        for n, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if line:
                entries.append(parse_entry(line, f"{path}:{n}: "))
    for i, item in enumerate((env_value or "").split(","), 1):
        if item.strip():
            entries.append(parse_entry(item, f"STRATA_API_KEY_HASHES entry {i}: "))
    names = [e.name for e in entries]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise KeyFileError(f"duplicate key name(s): {', '.join(dupes)}")
    return entries


def append_entry(file: str | Path, entry: KeyEntry) -> None:
    path = Path(file)
    existing = load_entries(path, named=f"--file {path}") if path.exists() else []
    if any(e.name == entry.name for e in existing):
        raise KeyFileError(f"{path} already has a key named {entry.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(entry.line() + "\n")
    path.chmod(0o600)


class KeyStore:
    """Digest → entry. ``lookup`` compares digests in constant time."""

    def __init__(self, entries: list[KeyEntry]):
        self.entries = list(entries)

    @property
    def enabled(self) -> bool:
        return bool(self.entries)

    def lookup(self, key: str | None) -> KeyEntry | None:
        if not key:
            return None
        digest = hash_key(key)
        found = None
        for e in self.entries:  # no early exit: the time does not tell which entry matched
            if hmac.compare_digest(e.digest, digest):
                found = e
        return found


class Refused(Exception):
    """A request the gate turns away: the HTTP status, what to tell the client,
    and the headers to send (``WWW-Authenticate``, ``Retry-After``)."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None,
                 client: str | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers
        self.client = client  # who was refused, when known (a rate-limited key)


class Gate:
    """Who may call, shared by the HTTP service and the MCP server's HTTP
    transport: with keys, a known key (``Authorization: Bearer`` or
    ``X-API-Key``) and its rate limit; without keys, loopback clients only
    (unless ``allow_unauthenticated``), limited per address."""

    def __init__(self, keys: KeyStore, rate_per_minute: float | None = 120.0,
                 anonymous_rate_per_minute: float | None = None,
                 allow_unauthenticated: bool = False, limiter: RateLimiter | None = None):
        self.keys = keys
        self.rate_per_minute = rate_per_minute
        self.anonymous_rate_per_minute = anonymous_rate_per_minute
        self.allow_unauthenticated = allow_unauthenticated
        self.limiter = limiter or RateLimiter()

    def admit(self, headers, client_host: str | None, *, relayed: bool = False,
              also_limit: tuple[str, ...] = ()) -> str:
        """The client's name (a key's name, or ``anonymous@ADDRESS``) once its key
        and rate limit are checked; raises :class:`Refused`. ``headers``: a
        mapping with lower-case names; ``client_host``: the connecting address
        as the caller decided to believe it, whose bucket an anonymous request
        is charged to.

        ``relayed``: the request says it was forwarded for someone else by a
        proxy nobody named, so the loopback rule does not trust it (a proxy on
        this machine would otherwise make every client it relays loopback), yet
        it is limited as the connecting address, the same bucket as that
        address's plain requests: forwarding must not buy a second one.
        ``also_limit``: more anonymous buckets the request is charged to at the
        same time, when the caller cannot tell which of them is the client's."""
        from strata.service.settings import is_loopback

        if self.keys.enabled:
            key = headers.get("x-api-key")
            auth = headers.get("authorization", "")
            if not key and auth.lower().startswith("bearer "):
                key = auth[7:].strip()
            entry = self.keys.lookup(key)
            if entry is None:
                raise Refused(401, "missing or unknown API key: send it as "
                                   "'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                              {"WWW-Authenticate": "Bearer"})
            client, rate = entry.name, entry.rate_per_minute or self.rate_per_minute
            buckets: tuple[str, ...] = (client,)
        else:
            if not (self.allow_unauthenticated or (is_loopback(client_host) and not relayed)):
                raise Refused(403, "this service has no API keys configured, so it answers "
                                   "loopback clients only")
            client, rate = f"anonymous@{client_host}", self.anonymous_rate_per_minute
            buckets = (client, *(f"anonymous@{b}" for b in also_limit if b != client_host))
        wait = (self.limiter.acquire(client, rate) if len(buckets) == 1
                else self.limiter.acquire_all(buckets, rate))
        if wait > 0:
            raise Refused(429, f"rate limit of {rate:g} requests per minute reached",
                          {"Retry-After": str(max(1, round(wait + 0.5)))}, client)
        return client


class RateLimiter:
    """A token bucket per client: ``rate`` requests per minute, bursts up to
    ``burst`` (default: a minute's worth, at least 1)."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # client → (tokens, last time)

    def acquire(self, client: str, rate_per_minute: float | None,
                burst: float | None = None) -> float:
        """0.0 when the request may go ahead, else the seconds until it could."""
        return self.acquire_all((client,), rate_per_minute, burst)

    def acquire_all(self, clients: tuple[str, ...], rate_per_minute: float | None,
                    burst: float | None = None) -> float:
        """:meth:`acquire` for a request charged to several buckets at once: it
        goes ahead only when every one has a token, and then takes one from
        each; else it takes none, and the answer is the longest wait."""
        if not rate_per_minute:
            return 0.0
        per_s = rate_per_minute / 60.0
        cap = max(1.0, burst if burst is not None else rate_per_minute)
        now = self._clock()
        with self._lock:
            full = {c: min(cap, t + (now - last) * per_s)
                    for c in clients for t, last in [self._buckets.get(c, (cap, now))]}
            wait = max(((1.0 - t) / per_s for t in full.values() if t < 1.0), default=0.0)
            for c, t in full.items():
                self._buckets[c] = (t - 1.0 if wait == 0.0 else t, now)
            return wait
