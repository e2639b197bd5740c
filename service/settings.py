"""What a running service is configured with: flags of ``strata serve``, or the
``STRATA_SERVE_*`` environment when the app is started by uvicorn directly."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field


class ServiceConfigError(ValueError):
    """A configuration the service refuses to start with (the message says why)."""


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _float(name: str, default: float | None) -> float | None:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ServiceConfigError(f"${name} must be a number, not {raw!r}") from None


@dataclass
class ServiceSettings:
    # index folders or object-storage URIs; "NAME=LOCATION" names one explicitly
    # (default name: the corpus in its manifest)
    indexes: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 8001
    api_keys_file: str | None = None  # lines NAME:sha256:HEX[:RATE] (see service.auth)
    api_key_hashes: str | None = None  # the same entries, comma-separated (an env var)
    rate_per_minute: float | None = 120.0  # per key, unless its entry sets its own
    anonymous_rate_per_minute: float | None = None  # per client address when no keys are set
    allow_unauthenticated: bool = False  # serve a non-loopback host without keys
    max_body_bytes: int = 64 * 1024
    max_query_chars: int = 2000
    reload_interval_s: float = 1.0  # how often CURRENT is looked at (object storage: ≥ 30 s)
    warm_up: bool = True  # run one query per mode on a new version before switching to it
    cross_encoder_path: str | None = None  # a local CrossEncoder for rerank="cross-encoder"
    llm_backend: str | None = None  # default: $STRATA_LLM_BACKEND or offline
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_callable: str | None = None
    # proxies whose X-Forwarded-For / Forwarded headers are believed (uvicorn's
    # forwarded_allow_ips: addresses, networks or "*"); None: none are. Believed
    # headers name the client that rate limits and the loopback rule apply to.
    forwarded_allow_ips: str | None = None

    @classmethod
    def from_env(cls) -> ServiceSettings:
        env = os.environ
        indexes = [p for p in (env.get("STRATA_SERVE_INDEXES") or "").split(os.pathsep) if p]
        return cls(
            indexes=indexes,
            api_keys_file=env.get("STRATA_API_KEYS_FILE") or None,
            api_key_hashes=env.get("STRATA_API_KEY_HASHES") or None,
            rate_per_minute=_float("STRATA_RATE_PER_MINUTE", 120.0),
            anonymous_rate_per_minute=_float("STRATA_ANONYMOUS_RATE_PER_MINUTE", None),
            allow_unauthenticated=env.get("STRATA_ALLOW_UNAUTHENTICATED", "") in ("1", "true"),
            max_body_bytes=int(_float("STRATA_MAX_BODY_BYTES", 64 * 1024)),
            max_query_chars=int(_float("STRATA_MAX_QUERY_CHARS", 2000)),
            reload_interval_s=float(_float("STRATA_RELOAD_INTERVAL_S", 1.0)),
            cross_encoder_path=env.get("STRATA_CROSS_ENCODER") or None,
            forwarded_allow_ips=env.get("STRATA_FORWARDED_ALLOW_IPS") or None,
        )

    def check(self) -> None:
        if not self.indexes:
            raise ServiceConfigError("no index to serve: pass --index DIR (repeatable) or set "
                                     "$STRATA_SERVE_INDEXES")
        if self.max_body_bytes < 1024:
            raise ServiceConfigError("max_body_bytes must be at least 1024")
        if self.max_query_chars < 1:
            raise ServiceConfigError("max_query_chars must be at least 1")

    def uvicorn_options(self) -> dict:
        """How uvicorn must treat proxy headers for these settings. uvicorn believes
        X-Forwarded-For from 127.0.0.1 by default, so any local client could
        claim to be 127.0.0.N and escape the anonymous rate limit: proxy headers
        are read only when ``forwarded_allow_ips`` names the proxies."""
        if not self.forwarded_allow_ips:
            return {"proxy_headers": False}
        return {"proxy_headers": True, "forwarded_allow_ips": self.forwarded_allow_ips}
