"""Strata's HTTP service: the query module (:mod:`retrieval`) over HTTP.

Layering: this package imports :mod:`retrieval` and :mod:`strata` only, never
the pipeline (assets, stages, pipelines) nor dagster, so it runs wherever an
index can be opened. Start it with ``strata serve --index DIR`` or under
uvicorn: ``uvicorn --factory service.app:create_app_from_env``.
"""

from service.app import create_app, create_app_from_env
from service.settings import ServiceSettings

__all__ = ["ServiceSettings", "create_app", "create_app_from_env"]
