"""The ``store`` build storage: workers share nothing but the corpus's object
store (Kubernetes pods, a Dask cluster without a common volume). Each worker
still works in its own folder; a step pulls the build from the store before it
runs and pushes what it wrote after it succeeds
(:class:`strata.core.storage.store_sync.StoreWorkspace`), and a published
version is uploaded to the store, which readers then open."""

from __future__ import annotations

from pathlib import Path

from strata.core.storage.object_store import clean_uri


class ObjectStoreStorage:
    def __init__(self, uri: str, root: Path):
        from strata.core.storage.store_sync import StoreWorkspace

        self.uri = uri
        self.workspace = StoreWorkspace(uri, root)

    def pull(self) -> str | None:
        return f"build on {clean_uri(self.uri)}: {self.workspace.pull().line('pulled')}"

    def push(self) -> str | None:
        return f"build on {clean_uri(self.uri)}: {self.workspace.push().line('pushed')}"

    def publish(self, version_dir: Path) -> str | None:
        from strata.core.storage.mirror import push_version

        return f"published to {push_version(version_dir, self.uri)}"
