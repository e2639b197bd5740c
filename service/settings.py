"""What a running service is configured with: the ``STRATA_*`` service variables
(:class:`strata.core.config.settings.ServeSettings`) with the flags of ``strata serve`` winning,
or the variables alone when the app is started by uvicorn directly."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from strata.core.config.settings import ServeSettings, SettingsError, check, load


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


@dataclass(init=False)
class ServiceSettings:
    """A running service's configuration: the :class:`ServeSettings` it runs with
    (fields, defaults, variables and bounds declared there; each is also readable
    here, ``settings.port``) plus what only a caller gives: the LLM flags of
    ``strata serve`` (None: ``$STRATA_LLM_*``) and ``warm_up`` (one query per mode
    on a new version before switching to it).

    ``ServiceSettings(serve)`` takes a loaded :class:`ServeSettings`;
    ``ServiceSettings(port=..., ...)`` takes its fields by name over the defaults,
    without reading the environment (checked by :meth:`check` when the app starts)."""

    serve: ServeSettings
    warm_up: bool = True
    llm_backend: str | None = None
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_callable: str | None = None

    def __init__(self, serve: ServeSettings | None = None, *, warm_up: bool = True,
                 llm_backend: str | None = None, llm_model: str | None = None,
                 llm_base_url: str | None = None, llm_callable: str | None = None,
                 **fields: Any) -> None:
        unknown = set(fields) - set(ServeSettings.model_fields)
        if unknown:
            raise TypeError(f"ServiceSettings: no setting named {', '.join(sorted(unknown))}")
        if serve is None:
            serve = ServeSettings.model_construct(**fields)  # the defaults; nothing read
        elif fields:
            serve = serve.model_copy(update=fields)
        object.__setattr__(self, "serve", serve)
        self.warm_up, self.llm_backend, self.llm_model = warm_up, llm_backend, llm_model
        self.llm_base_url, self.llm_callable = llm_base_url, llm_callable

    def __getattr__(self, name: str) -> Any:  # a ServeSettings field: settings.port
        if name in ServeSettings.model_fields:
            return getattr(self.__dict__["serve"], name)
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ServeSettings.model_fields:  # the model is frozen: a changed copy
            object.__setattr__(self, "serve", self.serve.model_copy(update={name: value}))
        else:
            object.__setattr__(self, name, value)

    @classmethod
    def from_env(cls, **flags: Any) -> ServiceSettings:
        """The environment's ``STRATA_*`` service variables; ``flags`` (the
        :class:`ServeSettings` fields a command line was given, None where not)
        win. A bad value is a :class:`ServiceConfigError` in one line."""
        try:
            return cls(load(ServeSettings, **flags))
        except SettingsError as e:
            raise ServiceConfigError(str(e)) from None

    def check(self) -> None:
        if not self.indexes:
            raise ServiceConfigError("no index to serve: pass --index DIR (repeatable) or set "
                                     "$STRATA_SERVE_INDEXES")
        try:
            check(ServeSettings, self.serve.model_dump())
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
