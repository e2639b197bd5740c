"""Strata's HTTP service and MCP server: the query module (:mod:`retrieval`)
over HTTP and over the Model Context Protocol.

Layering: this package imports :mod:`retrieval` and :mod:`strata` only, never
the pipeline (assets, stages, pipelines) nor dagster, so it runs wherever an
index can be opened. Start it with ``strata serve --index DIR`` or under
uvicorn: ``uvicorn --factory service.app:create_app_from_env``; the MCP server
with ``strata mcp --index DIR``.

The names below load on first use, so ``strata mcp`` does not import FastAPI
and ``strata serve`` does not import the MCP SDK.
"""

__all__ = ["ServiceSettings", "create_app", "create_app_from_env"]


def __getattr__(name: str):
    if name in ("create_app", "create_app_from_env"):
        from strata.service import app

        return getattr(app, name)
    if name == "ServiceSettings":
        from strata.service.settings import ServiceSettings

        return ServiceSettings
    raise AttributeError(f"module 'service' has no attribute {name!r}")
