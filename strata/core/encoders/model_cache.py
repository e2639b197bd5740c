"""Where files derived from a local model are kept: its exported ONNX graphs and
the recorded query-runtime agreements.

Each derived file is made once per machine, not per process, into
``STRATA_MODEL_CACHE`` (default ``~/.cache/strata/models``), in a folder named
after the model's folder and a key of its files, so new weights get new files.
Writers write to a temporary name and rename, so processes making the same
file at once never read half of one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def model_cache() -> Path:
    from strata.core.config.settings import EmbedSettings, load

    raw = (load(EmbedSettings).model_cache or "").strip()  # $STRATA_MODEL_CACHE
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "strata" / "models"


def weights_key(location: Path, salt: str) -> str:
    """Changes when the model's files do (their names, sizes and times) or ``salt``
    does (the version of what is derived from them)."""
    h = hashlib.sha256(f"{salt}:{location.resolve()}".encode())
    for f in sorted(location.rglob("*")):
        if f.is_file():
            st = f.stat()
            h.update(f"{f.relative_to(location)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def derived_folder(location: Path, salt: str) -> Path:
    """The cache folder of what is derived from the model in ``location``."""
    return model_cache() / f"{location.name}-{weights_key(location, salt)}"
