"""Which folder and settings a corpus partition stands for."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from strata.stages.corpora import CorpusError, CorpusSpec, load_corpora
from strata.core.config.settings import corpora_file


class CorpusRegistry(dg.ConfigurableResource):
    """Reads the corpora file (and the CLI's local registry beside it).

    ``config_path`` defaults to ``$STRATA_CORPORA`` or the project folder's
    ``data/corpora.yaml`` (:func:`strata.core.config.settings.corpora_file`); ``index_dir`` is
    where indexes go when a corpus does not say (default ``indexes/`` beside the
    corpora file).
    """

    config_path: str = ""
    index_dir: str = ""

    def _path(self) -> Path:
        return Path(self.config_path) if self.config_path else corpora_file()

    def all(self) -> dict[str, CorpusSpec]:
        index_base = Path(self.index_dir) if self.index_dir else None
        return load_corpora(self._path(), index_base=index_base)

    def get(self, name: str) -> CorpusSpec:
        corpora = self.all()
        if name not in corpora:
            raise CorpusError(
                f"corpus {name!r} is not declared in {self._path()} "
                f"(known: {', '.join(sorted(corpora)) or 'none'}); add it there or run "
                f"`strata index <folder> --corpus {name}`")
        return corpora[name]
