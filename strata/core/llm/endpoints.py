"""What the LLM and the embedding backends share about a remote endpoint:
keeping its key out of every message, telling "the server is down" from "this
item failed", and saying so in one line that names the URL and what to check.

Why a module of its own: an endpoint that is down is not an item failure. An
LLM stage isolates per-item faults (a 429, a 5xx, a malformed answer) and
carries on; but when nothing answers at all, retrying every item with backoff
spends minutes telling the user nothing (98 "connection error" lines
in 3.5 minutes, then "done" with every item failed). So a stage probes the
endpoint once before it sends anything (:func:`probe`), and the LLM trips a
circuit breaker after a run of connection failures with no answer in between;
either raises :class:`EndpointError`, which the assets turn into a step failure
that is not retried and the CLI prints as one line.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import socket
import urllib.error
import urllib.parse
import urllib.request

from strata.core.config.urls import shown_url, shown_urls, without_userinfo

__all__ = ["EndpointError", "redact", "redact_key", "probe", "DEFAULT_OPENAI_URL"]

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\",}]+")


def redact_key(text: str, key_env: str | None) -> str:
    """``text`` without the value of the variable ``key_env`` (the API key), as
    written or in any of the encodings a server or a model echoes it in
    (:func:`_key_forms`)."""
    key = os.environ.get(key_env) if key_env else None
    if not text or not key or len(key) < 4:
        return text
    return _key_pattern(key).sub("***", text)


# the shortest piece of a key's base64 taken from inside a longer base64 string
# that is still redacted: shorter ones could match ordinary text by chance
_MIN_CORE = 8


def _key_forms(key: str) -> set[str]:
    """The key as text can carry it: as written; standard and URL-safe base64,
    with and without padding, encoded alone or as the run of characters it
    becomes at each of the three byte alignments inside a longer base64 string
    (``user:KEY`` in a Basic header, a JSON body echoed back encoded); hex in
    lower and upper case; percent-encoded, as a URL or a form would have it and
    byte by byte."""
    raw = key.encode()
    forms = {key}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        alone = encode(raw).decode()
        forms |= {alone, alone.rstrip("=")}
        for offset in (0, 1, 2):
            # the characters made of the key's bits only, whatever comes before or after
            stream = encode(b"\0" * offset + raw).decode()
            core = stream[-(-8 * offset // 6):8 * (offset + len(raw)) // 6]
            if len(core) >= _MIN_CORE:
                forms.add(core)
    forms |= {raw.hex(), raw.hex().upper(),
              urllib.parse.quote(key), urllib.parse.quote(key, safe=""),
              urllib.parse.quote_plus(key),
              "".join(f"%{b:02X}" for b in raw), "".join(f"%{b:02x}" for b in raw)}
    return {f for f in forms if len(f) >= 4}


@functools.lru_cache(maxsize=8)
def _key_pattern(key: str) -> re.Pattern[str]:
    """One pattern for all of :func:`_key_forms`, longest first, so that a whole
    padded encoding is redacted rather than the shorter run inside it."""
    forms = sorted(_key_forms(key), key=len, reverse=True)
    return re.compile("|".join(re.escape(f) for f in forms))


def redact(text: str, key_env: str | None) -> str:
    """For error and log text: the key's value (in any of its encodings), any
    bearer token, and the credentials of any URL in it become ``***``."""
    if not text:
        return text
    return shown_urls(_BEARER.sub(r"\1***", redact_key(text, key_env)))


class EndpointError(RuntimeError):
    """The endpoint cannot be used at all (unreachable, refusing the key, no such
    model): the stage stops instead of failing every item one by one.

    ``str(error)`` is one line: what, the URL, the problem, and what to check."""

    def __init__(self, what: str, url: str, problem: str, hint: str):
        self.what = what  # "LLM" or "embedding"
        self.url = url = shown_url(url)  # shown, logged and kept in run metadata
        self.problem = problem = shown_urls(problem)
        self.hint = hint
        super().__init__(f"the {what} endpoint {url} {problem}; {hint}")


def url_of(base_url: str | None) -> str:
    return (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL).rstrip("/")


def unreachable_hint(what: str, url: str) -> str:
    """What a user should check when nothing answers at ``url``."""
    flag, env = (("--llm-base-url", "$STRATA_LLM_BASE_URL") if what == "LLM"
                 else ("--embed-base-url", "the corpus's embedding.base_url"))
    host = urllib.parse.urlsplit(url).hostname or ""
    local = host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")
    first = ("is the server running on this machine (Ollama, vLLM, ...)?" if local
             else "is the host reachable from here (network, proxy, VPN)?")
    return f"{first} Check {flag} / {env}"


def describe_connection_error(exc: BaseException | None) -> str:
    """'connection refused', 'timed out', 'name not resolved', ... from the
    innermost cause of a connection failure."""
    seen = 0
    while exc is not None and seen < 8:
        text = f"{type(exc).__name__}: {exc}".lower()
        if isinstance(exc, ConnectionRefusedError) or "refused" in text:
            return "refuses connections (connection refused)"
        if isinstance(exc, (socket.timeout, TimeoutError)) or "timed out" in text \
                or "timeout" in text:
            return "does not answer (timed out)"
        if isinstance(exc, socket.gaierror) or "name or service" in text \
                or "nodename" in text or "name resolution" in text:
            return "has a host name that does not resolve"
        if "unreachable" in text:
            return "is unreachable (no route to host)"
        nxt = exc.__cause__ or exc.__context__
        if nxt is None and isinstance(exc, urllib.error.URLError) \
                and isinstance(exc.reason, BaseException):
            nxt = exc.reason
        exc, seen = nxt, seen + 1
    return "cannot be reached (connection error)"


def probe(what: str, base_url: str | None, timeout_s: float = 10.0,
          key_env: str | None = None) -> None:
    """One cheap request (``GET {base_url}/models``) before a stage sends its
    work: any HTTP answer, even a 401 or a 404, shows that a server is there;
    no answer raises :class:`EndpointError`. Costs one round trip."""
    url = url_of(base_url)
    req = urllib.request.Request(without_userinfo(url) + "/models", method="GET")
    key = os.environ.get(key_env) if key_env else None
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # the user's own URL
            resp.read(1024)
    except urllib.error.HTTPError:
        return  # an answer: the server is up (what it thinks of /models is not our concern)
    except (urllib.error.URLError, OSError, ValueError) as e:
        if isinstance(e, ValueError):  # a malformed URL
            raise EndpointError(what, url, f"is not a valid URL ({redact(str(e), key_env)})",
                                unreachable_hint(what, url)) from None
        raise EndpointError(what, url, describe_connection_error(e),
                            unreachable_hint(what, url)) from None
