"""What a running service is configured with: the ``STRATA_*`` service variables
(:class:`strata.core.settings.ServeSettings`) with the flags of ``strata serve`` winning,
or the variables alone when the app is started by uvicorn directly."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from strata.core.settings import ServeSettings, SettingsError, check, default, load


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


def _d(name: str):
    return default(ServeSettings, name)


@dataclass
class ServiceSettings:
    """A running service's configuration: :class:`strata.core.settings.ServeSettings`
    (its defaults, variables and bounds are declared there) plus what only a
    caller gives (the LLM flags, ``warm_up``)."""

    # index folders or object-storage URIs; "NAME=LOCATION" names one explicitly
    # (default name: the corpus in its manifest)
    indexes: list[str] = field(default_factory=list)
    host: str = _d("host")
    port: int = _d("port")
    api_keys_file: str | None = _d("api_keys_file")  # lines NAME:sha256:HEX[:RATE] (service.auth)
    api_key_hashes: str | None = _d("api_key_hashes")  # the same entries, comma-separated
    rate_per_minute: float | None = _d("rate_per_minute")  # per key, unless its entry sets its own
    anonymous_rate_per_minute: float | None = _d("anonymous_rate_per_minute")  # per client address
    allow_unauthenticated: bool = _d("allow_unauthenticated")  # a non-loopback host without keys
    max_body_bytes: int = _d("max_body_bytes")
    max_query_chars: int = _d("max_query_chars")
    reload_interval_s: float = _d("reload_interval_s")  # how often CURRENT is looked at
    warm_up: bool = True  # run one query per mode on a new version before switching to it
    cross_encoder_path: str | None = _d("cross_encoder_path")  # for rerank="cross-encoder"
    llm_backend: str | None = None  # default: $STRATA_LLM_BACKEND or offline
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_callable: str | None = None
    # proxies whose X-Forwarded-For / Forwarded headers are believed (uvicorn's
    # forwarded_allow_ips: addresses, networks or "*"); None: none are. Believed
    # headers name the client that rate limits and the loopback rule apply to.
    forwarded_allow_ips: str | None = _d("forwarded_allow_ips")

    @classmethod
    def from_env(cls, **flags) -> ServiceSettings:
        """The environment's ``STRATA_*`` service variables; ``flags`` (the
        :class:`ServeSettings` fields a command line was given, None where not)
        win. A bad value is a :class:`ServiceConfigError` in one line."""
        try:
            serve = load(ServeSettings, **flags)
        except SettingsError as e:
            raise ServiceConfigError(str(e)) from None
        return cls(**serve.model_dump())

    def check(self) -> None:
        if not self.indexes:
            raise ServiceConfigError("no index to serve: pass --index DIR (repeatable) or set "
                                     "$STRATA_SERVE_INDEXES")
        try:
            check(ServeSettings, {f: getattr(self, f) for f in ServeSettings.model_fields})
        except SettingsError as e:
            raise ServiceConfigError(str(e)) from None

    def uvicorn_options(self) -> dict:
        """How uvicorn must treat proxy headers for these settings. uvicorn believes
        X-Forwarded-For from 127.0.0.1 by default, so any local client could
        claim to be 127.0.0.N and escape the anonymous rate limit: proxy headers
        are read only when ``forwarded_allow_ips`` names the proxies."""
        if not self.forwarded_allow_ips:
            return {"proxy_headers": False}
        return {"proxy_headers": True, "forwarded_allow_ips": self.forwarded_allow_ips}
