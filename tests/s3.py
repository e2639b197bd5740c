"""An S3 endpoint on loopback for the tests that publish to or read from object
storage: moto's server (a real HTTP S3 API), one bucket, and test credentials in
the environment, so Strata's object-store client talks to it as it would to S3
(the bucket itself is made with pyarrow's S3 file system, a test's own tool)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
import urllib.request

import pytest


@contextmanager
def s3_endpoint(monkeypatch, cache: Path, bucket: str, region: str = "us-east-1") -> Iterator[str]:
    """Yield ``host:port`` of a fresh S3 server holding an empty ``bucket``; readers'
    copies go to ``cache`` (``STRATA_CACHE_DIR``)."""
    moto_server = pytest.importorskip("moto.server")
    from pyarrow import fs

    for var, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": region, "STRATA_CACHE_DIR": str(cache)}.items():
        monkeypatch.setenv(var, value)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"{host}:{port}"
        # moto keeps its buckets in the process, across servers: start from none
        urllib.request.urlopen(urllib.request.Request(f"http://{endpoint}/moto-api/reset",
                                                      method="POST"), timeout=30).close()
        fs.S3FileSystem(endpoint_override=endpoint, scheme="http", region=region,
                        access_key="testing", secret_key="testing",
                        allow_bucket_creation=True).create_dir(bucket)
        yield endpoint
    finally:
        server.stop()


def uri(endpoint: str, bucket_and_path: str, region: str = "us-east-1") -> str:
    """An ``s3://`` URI of the loopback store, as Strata takes one."""
    return f"s3://{bucket_and_path}?endpoint_override={endpoint}&scheme=http&region={region}"
