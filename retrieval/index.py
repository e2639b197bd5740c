"""Opening a published index version and reading its artifacts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import logging
import threading
from functools import cached_property
from pathlib import Path

from strata.retrieval.results import Result, SearchResults
from strata.core.encoders.embedding import Encoder, EmbeddingModelMismatch, EncoderSpec
from strata.core.storage.layout import IndexDamaged, IndexLayout, damaged_lance_file, read_manifest, short_error
from strata.core.query_arrays import NODE_FIELDS, QueryArrays
from strata.retrieval.node_rows import NodeColumns, RowOf
from strata.core.config.schema import (EMBEDDED_KINDS, FACT, FORMAT_VERSION, LANCE_DIR, LEXICAL_DIR,
                           LEXICAL_GRAPH, LEXICAL_UNITS, MANIFEST, TABLE_FILES, VECTOR_KINDS,
                           vector_table_name)
from strata.core.config.settings import QuerySettings, value_or_default
from strata.core.untrusted import clean_query

if TYPE_CHECKING:
    import polars as pl

log = logging.getLogger(__name__)


class Index:
    """A read-only view of one published version of an index.

    Opening reads only the manifest; tables load on first use and are kept, so
    one ``Index`` serves many queries. A reader pins the version it opened:
    later publishes do not change what it sees.
    """

    def __init__(self, path: Path, version: int, manifest: dict, encoder: Encoder | None = None):
        self.path = path
        self.version = version
        self.manifest = manifest
        self._encoder = encoder
        self._encoder_lock = threading.RLock()
        self._vdir = IndexLayout(path).version_dir(version)
        self.source = str(path)  # where it was opened from (a URI for a mirrored index)
        self._query_cache: dict[str, object] = {}
        self._token_sets: dict = {}  # result → its BM25 tokens (retrieval.relevance)
        self._kind_rows: dict = {}  # kind codes → rows of those kinds with a vector (dense)
        self.runtime_agreement: float | None = None  # mean cosine, when another runtime queries

    @classmethod
    def open(cls, path: str | Path, version: int | None = None,
             encoder: Encoder | None = None) -> Index:
        """``path``: an index folder, or the URI of one mirrored to object storage
        (``s3://bucket/indexes/docs``), whose pinned version is copied to a local
        cache once (see :mod:`strata.core.storage.mirror`)."""
        from strata.core.storage.mirror import is_remote

        if is_remote(path):
            from strata.core.storage.mirror import pull_version

            local, version = pull_version(str(path), version)
            idx = cls.open(local, version, encoder)
            idx.source = str(path)
            return idx
        path = Path(path)
        layout = IndexLayout(path)
        vdir = layout.resolve(version)
        number = int(vdir.name[1:])
        try:
            manifest = read_manifest(vdir)
            if not isinstance(manifest, dict) or "version" not in manifest:
                raise ValueError("not a Strata manifest")
            # what every query reads from it without looking again: checked here, so
            # a wrong type is this one-line damage, not an error deep in a query
            v, dim = manifest["version"], manifest.get("dim")
            if isinstance(v, bool) or not isinstance(v, int) or v != number:
                raise ValueError(f"its 'version' is {v!r}, not {number} as its folder says")
            if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
                raise ValueError(f"its 'dim' is {dim!r}, not a positive whole number")
            if not isinstance(manifest.get("embedding"), dict):
                raise ValueError(f"its 'embedding' is {manifest.get('embedding')!r}, "
                                 "not a mapping of the encoder's settings")
        except (OSError, ValueError) as e:
            raise IndexDamaged(path, f"{vdir.relative_to(path)}/manifest.json", short_error(e),
                               version=number) from None
        fmt = manifest.get("format_version")
        if fmt != FORMAT_VERSION:
            raise ValueError(f"{vdir} has index format {fmt}; this Strata reads format "
                             f"{FORMAT_VERSION}. Rebuild the index with `strata index`.")
        idx = cls(path, int(manifest["version"]), manifest)
        if encoder is not None:
            idx.use_encoder(encoder)
        return idx

    def use_encoder(self, encoder: Encoder) -> None:
        """Embed this index's queries with ``encoder`` (a service shares one
        between versions, wrapped to batch concurrent queries): it must run the
        index's model (:class:`EmbeddingModelMismatch` otherwise), on the
        index's runtime or one that agrees with it (:meth:`check_runtime`)."""
        built = EncoderSpec.from_manifest(self.manifest["embedding"])
        if not built.same_model(encoder.spec) or encoder.dim != self.manifest["dim"]:
            raise EmbeddingModelMismatch(
                f"index {self.path} was built with {built.backend}:{built.model} (dim "
                f"{self.manifest['dim']}); the given encoder is {encoder.spec.backend}:"
                f"{encoder.spec.model} (dim {encoder.dim}). Query with the same model or "
                f"rebuild the index with the new one.")
        self.check_runtime(encoder)
        self._encoder = encoder

    @property
    def corpus(self) -> str:
        return self.manifest["corpus"]

    # -- tables -----------------------------------------------------------------
    def _damaged(self, file: str | Path, exc: BaseException | str) -> IndexDamaged:
        """The error of a file of this version that does not read: the damage,
        named, or, when the whole version is gone from disk, that it was pruned."""
        if self.pruned():
            return VersionPruned(self)
        rel = Path(file).relative_to(self.path) if Path(file).is_absolute() else file
        problem = exc if isinstance(exc, str) else short_error(exc)
        return IndexDamaged(self.path, str(rel), problem, version=self.version)

    def pruned(self) -> bool:
        """Whether this version's folder is gone: a newer publish removed it (it
        keeps the newest few versions), after this ``Index`` opened it."""
        return not (self._vdir / MANIFEST).is_file()

    def _table(self, name: str, optional: bool = False) -> pl.DataFrame | None:
        import polars as pl  # the tables are for inspection: a query reads the arrays

        path = self._vdir / TABLE_FILES[name]
        if optional and not path.exists():
            return None
        try:
            return pl.read_parquet(path)
        except Exception as e:  # noqa: BLE001 - missing, truncated, not Parquet: one message
            raise self._damaged(path, e) from None

    @cached_property
    def _nodes(self) -> pl.DataFrame:
        """Hierarchy nodes plus entity nodes (from OpenIE), one frame."""
        from strata.core.query_arrays import graph_nodes

        return graph_nodes(self._table("nodes"), self._table("entities", optional=True))

    @cached_property
    def _edges(self) -> pl.DataFrame:
        return self._table("edges")

    def nodes(self) -> pl.DataFrame:
        return self._nodes

    def edges(self) -> pl.DataFrame:
        return self._edges

    def documents(self) -> pl.DataFrame:
        return self._table("documents")

    def skipped(self) -> pl.DataFrame:
        return self._table("skipped")

    def facts(self) -> pl.DataFrame | None:
        return self._table("facts", optional=True)

    def table(self, name: str) -> pl.DataFrame | None:
        """Any artifact table by name (summaries, captions, images, failures, ...)."""
        return self._table(name, optional=True)

    def stats(self) -> dict:
        from strata.core.stats import index_stats

        s = index_stats(self._nodes, self._edges, self.documents(), self.skipped())
        facts = self.facts()
        s["facts"] = facts.height if facts is not None else 0
        s["entities"] = s["nodes_by_kind"].get("entity", 0)
        failures = self.table("failures")
        s["failures"] = failures.to_dicts() if failures is not None else []
        s["build_seconds"] = self.manifest.get("build_seconds")
        return s

    @cached_property
    def _arrays(self) -> QueryArrays:
        """What queries read (:mod:`strata.core.query_arrays`): memory-mapped from the
        version's ``query/`` folder, or, for a version published before it
        existed, computed from the Parquet and Lance files (slower; a warning
        names the command that writes them)."""
        from strata.core.query_arrays import DamagedArrays, compute, open_arrays

        if self.pruned():
            raise VersionPruned(self)
        try:
            arrays = open_arrays(self._vdir, int(self.manifest["dim"]))
        except DamagedArrays as e:  # one line naming the file
            raise self._damaged(e.path, e.cause) from None
        if arrays is not None:
            return arrays
        log.warning("index %s (version %d) has no query arrays: it was published by an older "
                    "Strata, so each process reads its tables and vectors whole. Write them once, "
                    "without encoding again: strata upgrade --index %s", self.path, self.version,
                    self.path)
        self._check_vector_tables()
        try:
            return compute(self._vdir, int(self.manifest["dim"]))
        except IndexDamaged:
            raise
        except Exception as e:  # noqa: BLE001 - a table that does not read: name the folder
            raise self._damaged(self._vdir, e) from None

    def verify(self) -> None:
        """Map what queries read and check it (:mod:`strata.core.query_checks`),
        raising :class:`IndexDamaged` naming the first file that is not as the
        format defines. A service calls it before it serves a version, at start
        and on every reload alike; a version published before the query arrays
        existed is checked when its arrays are first computed."""
        from strata.core.query_arrays import present

        if self.pruned() or present(self._vdir):
            _ = self._arrays  # mapped and checked once, kept for the queries

    def _check_vector_tables(self) -> None:
        """Every data and index file of the Lance tables still ends as a Lance file
        does (four bytes read per file): a truncated one is named, not met later."""
        for k in VECTOR_KINDS:
            table_dir = self._vdir / LANCE_DIR / f"{vector_table_name(k)}.lance"
            if table_dir.exists() and damaged_lance_file(table_dir) is not None:
                raise self._lance_damage(k)

    @cached_property
    def _row_of(self) -> RowOf:
        return RowOf(self._arrays.graph)

    def _id_at(self, row: int) -> str:
        """The node id of graph row ``row``, read from the mapped column (no list
        of every id is built for it)."""
        nid = self._arrays.nodes.column("node_id")[row].as_py()
        self._row_of.remember(nid, row)
        return nid

    @cached_property
    def _columns(self) -> dict[str, list]:
        return NodeColumns(self._arrays.nodes)

    def node(self, node_id: str) -> dict:
        i = self._row_of[node_id]
        table = self._arrays.nodes
        return {c: table.column(c)[i].as_py() for c in NODE_FIELDS}

    # -- vectors ----------------------------------------------------------------
    @property
    def encoder(self) -> Encoder:
        """The encoder of the manifest's model, on the runtime queries use
        (:func:`strata.core.encoders.query_runtime.query_spec`: ONNX Runtime where the model
        exports, so a query imports no torch; ``STRATA_EMBED_RUNTIME`` picks one
        explicitly). Another runtime than the build's is checked by
        :meth:`check_runtime`; one chosen here that disagrees gives way to the
        build's own runtime."""
        with self._encoder_lock:  # one load when requests arrive together
            return self._load_encoder()

    def _load_encoder(self) -> Encoder:
        if self._encoder is None:
            from strata.core.encoders.embedding import AUTO, load_encoder
            from strata.core.encoders.query_runtime import query_spec
            from strata.core.config.settings import EmbedSettings, load

            built = EncoderSpec.from_manifest(self.manifest["embedding"])
            asked = load(EmbedSettings)  # $STRATA_EMBED_RUNTIME, only when the user set it
            wanted = asked.runtime if "runtime" in asked.model_fields_set else AUTO
            encoder = load_encoder(query_spec(built, wanted))
            try:
                self.check_runtime(encoder)
            except EmbeddingModelMismatch as e:
                if wanted != AUTO:
                    raise
                log.warning("%s; querying with %s instead", e, built.runtime)
                encoder = load_encoder(query_spec(built, built.runtime))
            self._encoder = encoder
        return self._encoder

    def check_runtime(self, encoder: Encoder) -> None:
        """An encoder running the index's model on another runtime (torch,
        torch-bf16, onnx, onnx-int8) may embed its queries only when its vectors
        of the index's own texts agree with the stored ones
        (:func:`strata.core.encoders.query_runtime.agreement`: measured once per index content
        and runtime, then read from the model cache); otherwise one line says
        why (:class:`EmbeddingModelMismatch`)."""
        from strata.core.encoders.query_runtime import agreement

        built = EncoderSpec.from_manifest(self.manifest["embedding"])
        if built.same_runtime(encoder.spec):
            return
        texts, stored = self._probe()
        mean, why = agreement(built, encoder, texts, stored)
        self.runtime_agreement = mean
        if why:
            raise EmbeddingModelMismatch(
                f"index {self.path} was built with {built.label}; {encoder.spec.label} may not "
                f"embed its queries: {why}. Query with runtime {built.runtime} "
                f"(STRATA_EMBED_RUNTIME) or rebuild the index with {encoder.spec.runtime}.")

    def _probe(self):
        """A few embedded texts of each vector table and their stored vectors."""
        return self._arrays.probe_texts, self._arrays.probe_vectors

    def embed_query(self, query: str):
        query = clean_query(query)
        v = self._query_cache.get(query)
        if v is None:
            v = self.encoder.encode([query])[0]
            if len(self._query_cache) > 4096:
                self._query_cache.clear()
            self._query_cache[query] = v
        return v

    def _lance_damage(self, kind: str, exc: BaseException | None = None) -> IndexDamaged:
        """The damaged file of a vector table (the one whose Lance footer is gone),
        or the table itself when no single file can be blamed."""
        table_dir = self._vdir / LANCE_DIR / f"{vector_table_name(kind)}.lance"
        bad = damaged_lance_file(table_dir)
        if bad is not None:
            return self._damaged(bad, "truncated or overwritten: no Lance footer"
                                 + (f"; {short_error(exc)}" if exc is not None else ""))
        return self._damaged(table_dir, exc if exc is not None else "unreadable")

    def _result(self, node_id: str, score: float, relation: str = "seed",
                via: str | None = None) -> Result:
        if node_id not in self._row_of and node_id in self._fact_source:
            return self._fact_result(node_id, score, relation)
        return Result(**self.node(node_id), score=float(score), relation=relation, via=via)

    @cached_property
    def _fact_source(self) -> dict[str, tuple[str, str]]:
        """fact id → (its triple's text, the first chunk it was extracted from)."""
        cols = self.fact_columns("fact_id", "text", "chunk_id")
        out: dict[str, tuple[str, str]] = {}
        for f, t, c in zip(cols["fact_id"], cols["text"], cols["chunk_id"]):
            out.setdefault(f, (t, c))
        return out

    def fact_columns(self, *names: str) -> dict[str, list]:
        """Columns of the facts table as lists (empty when the index has none),
        read with pyarrow: the modes that walk facts need a few columns, not a
        DataFrame library."""
        import pyarrow.parquet as pq

        path = self._vdir / TABLE_FILES["facts"]
        if not path.exists():
            return {n: [] for n in names}
        try:
            table = pq.ParquetFile(path).read(columns=list(names))  # not the dataset API
        except Exception as e:  # noqa: BLE001 - missing, truncated, not Parquet: one message
            raise self._damaged(path, e) from None
        return {n: table.column(n).to_pylist() for n in names}

    def _fact_result(self, fact_id: str, score: float, relation: str) -> Result:
        """A fact (an OpenIE triple, a vector but not a graph node) as a result:
        its text, placed at the chunk it came from (``via``)."""
        text, chunk_id = self._fact_source[fact_id]
        src = self.node(chunk_id) if chunk_id in self._row_of else {}
        return Result(node_id=fact_id, kind=FACT, path=src.get("path", ""),
                      node_path=src.get("node_path", ""),
                      breadcrumb=f"{src.get('breadcrumb', '')} > fact".lstrip(" >"),
                      text=text, title=text, start_line=src.get("start_line"),
                      end_line=src.get("end_line"), page=src.get("page"), score=float(score),
                      relation=relation, via=chunk_id)

    # -- shared building blocks of the modes ------------------------------------
    @property
    def graph(self):
        """The graph as CSR arrays (:class:`strata.core.query_arrays.Graph`)."""
        return self._arrays.graph

    @property
    def node_vectors(self):
        """Unit vectors aligned with ``graph`` dense ids (zeros for nodes without
        one), memory-mapped."""
        return self._arrays.vectors

    def fact_vectors(self):
        """(fact ids, row-normalised fact vectors) for exact kNN (``([], empty)``
        when the index has no facts)."""
        return self._fact_unit

    @cached_property
    def _unit_vectors(self):
        """(row-normalised node vectors, has-own-vector mask, kind codes), aligned
        with ``graph``: exact kNN is one matrix-vector product on these."""
        from strata.retrieval.graph_arrays import limit_blas_threads

        limit_blas_threads()
        a = self._arrays
        return a.vectors, a.has_vector, a.graph.kind

    @cached_property
    def _ann(self):
        """The approximate index a large version was published with, else None."""
        if not self._arrays.mapped:
            return None
        from strata.core.ann import open_ann
        from strata.core.config.schema import QUERY_DIR

        nprobe = value_or_default(QuerySettings, "ann_nprobe")
        try:
            return open_ann(self._vdir / QUERY_DIR, nprobe)
        except Exception as e:  # noqa: BLE001 - unreadable: one line naming it
            from strata.core.ann import ANN_FILE

            raise self._damaged(self._vdir / QUERY_DIR / ANN_FILE, e) from None

    def _dense_rows(self, q, k: int, node_kinds: list[int]):
        """(rows, cosines) of the ``k`` nearest node vectors of ``node_kinds``:
        the approximate index's candidates scored exactly where the version has
        one and they cover ``k``, else a scan of every row."""
        import numpy as np

        from strata.core.ann import RERANK
        from strata.retrieval.graph_arrays import top_k

        unit, own, kind = self._unit_vectors
        ann = self._ann
        if ann is not None:
            cand = ann.candidates(q, max(RERANK * k, 100))
            cand = np.sort(cand[own[cand] & np.isin(kind[cand], node_kinds)])
            if len(cand) >= k:
                return top_k(ann.rows(unit, cand) @ q, cand, k)
        key = tuple(sorted(node_kinds))
        cand = self._kind_rows.get(key)
        if cand is None:  # the rows of these kinds that have a vector, once per kind set
            cand = self._kind_rows[key] = np.nonzero(own & np.isin(kind, node_kinds))[0]
        if not len(cand):
            return cand, np.zeros(0, np.float32)
        # one product over the span the rows lie in (entities follow the hierarchy, so
        # a search of the hierarchy kinds reads only its part of the matrix), no copy
        lo, hi = int(cand[0]), int(cand[-1]) + 1
        return top_k((unit[lo:hi] @ q)[cand - lo], cand, k)

    @cached_property
    def relevance_background(self):
        """The sample of unit vectors a query's background is measured on
        (:class:`retrieval.relevance.Background`), read once per index."""
        from strata.retrieval.relevance import Background

        return Background(self)

    @cached_property
    def _fact_unit(self):
        a = self._arrays
        return a.fact_ids.to_pylist(), a.fact_vectors

    def dense(self, vec, k: int, kinds=None) -> list[tuple[str, float]]:
        """(node_id, cosine similarity) of the k nearest vectors, over ``kinds``
        (default: the hierarchy kinds; entity and fact tables are opt-in).

        Exact search on the memory-mapped vectors: one matrix-vector product
        over every row (the mask applied to the scores, so no rows are copied).
        A version large enough to have been published with an approximate
        index (:mod:`strata.core.ann`) takes its candidates from it and scores them
        exactly."""
        import numpy as np

        from strata.retrieval.graph_arrays import KIND_CODE, top_k

        if k <= 0:
            return []
        kinds = list(kinds or EMBEDDED_KINDS)
        q = np.asarray(vec, dtype=np.float32)
        q = q / (float(np.linalg.norm(q)) or 1.0)
        hits: list[tuple[str, float]] = []
        node_kinds = [KIND_CODE[kd] for kd in kinds if kd != FACT and kd in KIND_CODE]
        if node_kinds:
            rows, scores = self._dense_rows(q, k, node_kinds)
            hits += [(self._id_at(r), float(s)) for r, s in zip(rows.tolist(), scores)]
        if FACT in kinds:
            ids, unit = self._fact_unit
            if ids:
                rows, scores = top_k(unit @ q, np.arange(len(ids)), k)
                hits += [(ids[r], float(s)) for r, s in zip(rows.tolist(), scores)]
        hits.sort(key=lambda h: -h[1])
        return hits[:k]

    @cached_property
    def _lexical(self) -> dict:
        """The BM25 collections (:mod:`strata.core.lexical.bm25`): ``units`` and ``graph``."""
        from strata.core.lexical.bm25 import LexicalIndex

        folder = self._vdir / LEXICAL_DIR
        out = {}
        for name in (LEXICAL_UNITS, LEXICAL_GRAPH):
            try:
                out[name] = LexicalIndex.load(folder / name)
            except Exception as e:  # noqa: BLE001 - any unreadable part: one clear line
                raise self._damaged(folder / name, e) from None
        return out

    def keyword(self, query: str, k: int, kinds=None) -> list[tuple[str, float]]:
        """(node_id, BM25 score) of the ``k`` best matches over ``kinds`` (default:
        the hierarchy kinds), from one BM25 index, so scores of different kinds
        are comparable. Entities and facts live in a second collection; when
        both are asked for, the two rankings are merged by reciprocal rank."""
        if not query.strip():
            return []
        kinds = list(kinds or EMBEDDED_KINDS)
        unit_kinds = [kd for kd in kinds if kd in EMBEDDED_KINDS]
        graph_kinds = [kd for kd in kinds if kd not in EMBEDDED_KINDS]
        lists = [self._lexical[name].search(query, k, ks) for name, ks in
                 ((LEXICAL_UNITS, unit_kinds), (LEXICAL_GRAPH, graph_kinds)) if ks]
        if len(lists) == 1:
            return lists[0]
        score: dict[str, float] = {}
        for ranking in lists:
            for rank, (nid, _) in enumerate(ranking):
                score[nid] = score.get(nid, 0.0) + 1.0 / (60 + rank + 1)
        return sorted(score.items(), key=lambda kv: -kv[1])[:k]

    @cached_property
    def _lexical_rows(self):
        """Dense graph id of every document of the ``units`` collection."""
        import numpy as np

        g = self.graph
        return np.array([g.index.get(n, -1) for n in self._lexical[LEXICAL_UNITS].node_ids],
                        dtype=np.int64)

    @cached_property
    def _fact_lexical_rows(self):
        """Row of each fact of ``_fact_unit`` in the ``graph`` collection (-1: absent)."""
        import numpy as np

        pos = {n: i for i, n in enumerate(self._lexical[LEXICAL_GRAPH].node_ids)}
        return np.array([pos.get(f, -1) for f in self._fact_unit[0]], dtype=np.int64)

    def fact_lexical_scores(self, query: str):
        """BM25 score of every fact, aligned with :meth:`fact_vectors`."""
        import numpy as np

        rows = self._fact_lexical_rows
        s = self._lexical[LEXICAL_GRAPH].scores(query)
        return np.where(rows >= 0, s[np.maximum(rows, 0)], 0.0) if len(s) else \
            np.zeros(len(rows), dtype=np.float32)

    def lexical_scores(self, query: str):
        """BM25 score of every graph node for ``query`` (0 for nodes without text
        or without a matching term), aligned with ``graph``: the lexical
        counterpart of one dense matrix-vector product."""
        import numpy as np

        out = np.zeros(len(self.graph.ids), dtype=np.float32)
        rows = self._lexical_rows
        s = self._lexical[LEXICAL_UNITS].scores(query)
        ok = rows >= 0
        out[rows[ok]] = s[ok]
        return out

    def result(self, node_id: str, score: float, relation: str = "seed",
               via: str | None = None) -> Result:
        return self._result(node_id, score, relation, via)

    def search(self, query: str, mode: str | None = None, k: int = 10,
               min_relevance: float | None = None, **params) -> SearchResults:
        """Search in one of the modes: ``auto`` (the default: fused dense + BM25
        recall, the entity walk where the facts are model-made, each hit with its
        parent and siblings), ``flat`` (dense kNN), ``keyword``, ``hybrid``,
        ``hierarchical``, ``diffusion`` or ``routed``. Extra keyword arguments are
        that mode's parameters (see :mod:`retrieval.modes`).

        At most ``k`` results come back, each with its ``relevance`` (see
        :mod:`retrieval.relevance`); those below ``min_relevance`` (default
        ``STRATA_MIN_RELEVANCE``; 0 keeps all) are left out and kept in
        ``SearchResults.below``, and ``SearchResults.note`` says so — when none
        is left, that nothing relevant was found, and what came closest."""
        from strata.retrieval.modes import DEFAULT_MODE, run_mode

        return run_mode(self, clean_query(query), mode=mode or DEFAULT_MODE, k=k,
                        min_relevance=min_relevance, **params)

    def ask(self, question: str, mode: str | None = None, llm=None, k: int = 8, **params):
        """Retrieve, assemble the context and answer (see :mod:`retrieval.answer`)."""
        from strata.retrieval.answer import ask

        return ask(self, question, mode=mode, llm=llm, k=k, **params)


class VersionPruned(IndexDamaged):
    """The version an open :class:`Index` reads was removed from disk by a newer
    publish (which keeps the newest few versions): nothing is damaged and a
    rebuild would not help; opening the index again reads the current version
    (a service reloads by itself)."""

    def __init__(self, index: Index):
        RuntimeError.__init__(
            self, f"index {index.path}: version {index.version} is no longer on disk: a newer "
                  f"publish pruned it while it was open (nothing is damaged); open the index "
                  f"again (Index.open({str(index.path)!r}), or run the command again) to read "
                  f"the current version; strata serve and strata mcp move to it by themselves")
        self.index_dir, self.version = Path(index.path), index.version
        self.file, self.problem = f"versions/v{index.version:06d}", "pruned"
