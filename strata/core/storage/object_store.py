"""The one way Strata reaches an object store: the published mirror and
``Index.open("s3://…")`` (:mod:`strata.core.storage.mirror`), the build's lease, which needs
conditional writes (:mod:`strata.core.storage.store_lease`), and the build folder kept on
the store, which needs entity tags (:mod:`strata.core.storage.store_sync`). obstore speaks
S3, MinIO, GCS and Azure alike and honours ``If-None-Match``/``If-Match`` on each.

URIs are the ones Strata takes everywhere: ``s3://bucket/prefix``
with ``?region=…&endpoint_override=host:port&scheme=http`` for MinIO or another
S3-compatible store, ``gs://…``, ``az://…``, ``file:///…``. Credentials come from
the environment (``AWS_ACCESS_KEY_ID`` …), never from the URI.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

from strata.core.config.urls import shown_url


class StoreError(RuntimeError):
    """The store could not be read or written (after obstore's own retries); one line."""


@contextmanager
def store_errors(uri: str, what: str) -> Iterator[None]:
    """A store that cannot be reached or refuses a request becomes a
    :class:`StoreError` of one line, ``"<what> <uri> failed: <why>"`` (obstore's own
    message runs to dozens, with its retry history); the URI's options stay out."""
    from obstore.exceptions import BaseError

    from strata.core.storage.layout import short_error

    try:
        yield
    except (BaseError, OSError) as e:
        raise StoreError(f"{what} {clean_uri(uri)} failed: {short_error(e, 300)}") from None


def open_store(uri: str):
    """``(store, prefix)``: an obstore store for the URI's bucket (or folder) and
    the key prefix of the URI's path inside it ('' at the bucket's root)."""
    from obstore.store import from_url

    parts = urlsplit(uri)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    prefix = parts.path.strip("/")
    if parts.scheme == "s3":
        from obstore.store import S3Store

        config: dict = {"conditional_put": "etag"}
        client: dict = {}
        if "region" in query:
            config["region"] = query["region"]
        if "endpoint_override" in query:
            scheme = query.get("scheme", "https")
            config["endpoint"] = f"{scheme}://{query['endpoint_override']}"
            config["virtual_hosted_style_request"] = False
            client["allow_http"] = scheme == "http"
        return S3Store.from_url(f"s3://{parts.netloc}", config=config,
                                client_options=client or None), prefix
    if parts.scheme == "file":
        from obstore.store import LocalStore

        return LocalStore(parts.path), ""
    return from_url(f"{parts.scheme}://{parts.netloc}"), prefix


def key(prefix: str, rel: str) -> str:
    """The object key of ``rel`` (a ``/``-separated path) under ``prefix``."""
    return f"{prefix}/{rel}" if prefix else rel


def clean_uri(uri: str) -> str:
    """The URI without its options and without any user information: what names
    the same place for every reader, and what messages and run metadata show."""
    return shown_url(uri.split("?")[0]).rstrip("/")


def list_files(store, prefix: str) -> dict[str, dict]:
    """The objects below ``prefix`` (a key ending in ``/``), by their path relative
    to it, each with obstore's metadata, without folder markers: an empty object
    named like a folder (which other tools, and stores an earlier Strata wrote with
    pyarrow, leave), told from a file by what lies below it."""
    import obstore

    found = {m["path"][len(prefix):]: m
             for chunk in obstore.list(store, prefix=prefix, chunk_size=1000) for m in chunk}
    folders = {rel.rsplit("/", 1)[0] for rel in found if "/" in rel}
    folders |= {f.rsplit("/", i)[0] for f in list(folders) for i in range(1, f.count("/") + 1)}
    return {rel: m for rel, m in found.items() if rel not in folders}


def read_bytes(store, path: str) -> bytes | None:
    """The object at ``path`` whole, or None where there is none."""
    import obstore
    from obstore.exceptions import NotFoundError

    try:
        return bytes(obstore.get(store, path).bytes())
    except (NotFoundError, FileNotFoundError):
        return None


def download(store, path: str, target) -> tuple[dict, int]:
    """Stream the object at ``path`` into the file ``target`` (its folder made);
    returns the object's metadata and the bytes written."""
    import obstore

    got = obstore.get(store, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    size = 0
    with open(target, "wb") as f:
        for chunk in got:
            f.write(chunk)
            size += len(chunk)
    return got.meta, size
