"""Opening a published index version and reading its artifacts."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import polars as pl

from strata.retrieval.results import Result, SearchResults
from strata.embedding import Encoder, EmbeddingModelMismatch, EncoderSpec
from strata.layout import IndexDamaged, IndexLayout, damaged_lance_file, read_manifest, short_error
from strata.schema import (EMBEDDED_KINDS, FACT, FORMAT_VERSION, LANCE_DIR, LEXICAL_DIR,
                           LEXICAL_GRAPH, LEXICAL_UNITS, TABLE_FILES, VECTOR_KINDS,
                           vector_table_name)
from strata.settings import QuerySettings, SettingsError, default, load
from strata.stats import index_stats

_NODE_FIELDS = ("node_id", "kind", "path", "node_path", "breadcrumb", "text", "title",
                "start_line", "end_line", "page", "language")


_BLAS_LIMITED = False


def limit_blas_threads() -> None:
    """Run numpy's BLAS on one thread in a querying process (``STRATA_BLAS_THREADS``,
    default 1; 0 leaves it alone).

    Why: after a matrix-vector product OpenBLAS's worker threads spin-wait for
    more work, and on a small machine they steal the cores torch needs for the
    next query embedding: on MuSiQue with 2 cores the query embedding took 21 ms
    instead of 10 (hierarchical p50 27 ms → 12 ms with one BLAS thread). The
    products here are memory-bound matrix-vector ones, no faster on more threads.
    Applied once, process-wide, when an index first loads its vectors."""
    global _BLAS_LIMITED
    if _BLAS_LIMITED:
        return
    _BLAS_LIMITED = True
    try:
        n = load(QuerySettings).blas_threads
    except SettingsError:
        n = default(QuerySettings, "blas_threads")
    if n > 0:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=n, user_api="blas")


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
        self._vdir = IndexLayout(path).version_dir(version)
        self.source = str(path)  # where it was opened from (a URI for a mirrored index)
        self._query_cache: dict[str, object] = {}
        self.runtime_agreement: float | None = None  # mean cosine, when another runtime queries

    @classmethod
    def open(cls, path: str | Path, version: int | None = None,
             encoder: Encoder | None = None) -> Index:
        """``path``: an index folder, or the URI of one mirrored to object storage
        (``s3://bucket/indexes/docs``), whose pinned version is copied to a local
        cache once (see :mod:`strata.remote`)."""
        from strata.remote import is_remote

        if is_remote(path):
            from strata.remote import pull_version

            local, version = pull_version(str(path), version)
            idx = cls.open(local, version, encoder)
            idx.source = str(path)
            return idx
        path = Path(path)
        layout = IndexLayout(path)
        vdir = layout.resolve(version)
        try:
            manifest = read_manifest(vdir)
            if not isinstance(manifest, dict) or "version" not in manifest:
                raise ValueError("not a Strata manifest")
        except (OSError, ValueError) as e:
            raise IndexDamaged(path, f"{vdir.relative_to(path)}/manifest.json", short_error(e),
                               version=int(vdir.name[1:])) from None
        fmt = manifest.get("format_version")
        if fmt != FORMAT_VERSION:
            raise ValueError(f"{vdir} has index format {fmt}; this Strata reads format "
                             f"{FORMAT_VERSION}. Rebuild the index with `strata index`.")
        if encoder is not None:
            built = EncoderSpec.from_manifest(manifest["embedding"])
            if not built.same_model(encoder.spec) or encoder.dim != manifest["dim"]:
                raise EmbeddingModelMismatch(
                    f"index {path} was built with {built.backend}:{built.model} (dim "
                    f"{manifest['dim']}); the given encoder is {encoder.spec.backend}:"
                    f"{encoder.spec.model} (dim {encoder.dim}). Query with the same model or "
                    f"rebuild the index with the new one.")
        idx = cls(path, int(manifest["version"]), manifest, encoder)
        if encoder is not None:
            idx.check_runtime(encoder)
        return idx

    @property
    def corpus(self) -> str:
        return self.manifest["corpus"]

    # -- tables -----------------------------------------------------------------
    def _damaged(self, file: str | Path, exc: BaseException | str) -> IndexDamaged:
        rel = Path(file).relative_to(self.path) if Path(file).is_absolute() else file
        problem = exc if isinstance(exc, str) else short_error(exc)
        return IndexDamaged(self.path, str(rel), problem, version=self.version)

    def _table(self, name: str, optional: bool = False) -> pl.DataFrame | None:
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
        nodes = self._table("nodes")
        entities = self._table("entities", optional=True)
        if entities is not None and entities.height:
            nodes = pl.concat([nodes, entities.select(nodes.columns)], how="vertical_relaxed")
        return nodes

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
        s = index_stats(self._nodes, self._edges, self.documents(), self.skipped())
        facts = self.facts()
        s["facts"] = facts.height if facts is not None else 0
        s["entities"] = s["nodes_by_kind"].get("entity", 0)
        failures = self.table("failures")
        s["failures"] = failures.to_dicts() if failures is not None else []
        s["build_seconds"] = self.manifest.get("build_seconds")
        return s

    @cached_property
    def _row_of(self) -> dict[str, int]:
        return {nid: i for i, nid in enumerate(self._nodes["node_id"].to_list())}

    @cached_property
    def _columns(self) -> dict[str, list]:
        return {c: self._nodes[c].to_list() for c in _NODE_FIELDS}

    def node(self, node_id: str) -> dict:
        i = self._row_of[node_id]
        return {c: v[i] for c, v in self._columns.items()}

    # -- vectors ----------------------------------------------------------------
    @property
    def encoder(self) -> Encoder:
        """The encoder the manifest names; ``STRATA_EMBED_RUNTIME`` may ask for
        another runtime of the same model (checked by :meth:`check_runtime`)."""
        if self._encoder is None:
            from dataclasses import replace

            from strata.embedding import AUTO, load_encoder, native_bf16
            from strata.settings import EmbedSettings, load

            spec = EncoderSpec.from_manifest(self.manifest["embedding"])
            asked = load(EmbedSettings)  # $STRATA_EMBED_RUNTIME, only when the user set it
            wanted = asked.runtime if "runtime" in asked.model_fields_set else AUTO
            if spec.backend == "sentence-transformers":
                if wanted != AUTO:
                    spec = replace(spec, runtime=wanted)
                elif spec.runtime == "torch-bf16" and not native_bf16():
                    # emulated bfloat16 is slower than float32 here: query in float32,
                    # which check_runtime lets through (they agree to ~0.9999)
                    spec = replace(spec, runtime="torch")
            encoder = load_encoder(spec)
            self.check_runtime(encoder)
            self._encoder = encoder
        return self._encoder

    def check_runtime(self, encoder: Encoder) -> None:
        """An encoder running the index's model on another runtime (torch,
        torch-bf16, onnx, onnx-int8) may embed its queries only when its vectors
        of the index's own texts agree with the stored ones
        (:func:`strata.embedding.disagreement`); otherwise one line says why
        (:class:`EmbeddingModelMismatch`)."""
        import numpy as np

        from strata.embedding import disagreement

        built = EncoderSpec.from_manifest(self.manifest["embedding"])
        if built.same_runtime(encoder.spec):
            return
        texts, stored = self._probe()
        got = encoder.encode(texts) if texts else np.zeros((0, stored.shape[1]), np.float32)
        why = disagreement((got * stored).sum(1))
        self.runtime_agreement = None if why else round(float((got * stored).sum(1).mean()), 5)
        if why:
            raise EmbeddingModelMismatch(
                f"index {self.path} was built with {built.label}; {encoder.spec.label} may not "
                f"embed its queries: {why}. Query with runtime {built.runtime} "
                f"(STRATA_EMBED_RUNTIME) or rebuild the index with {encoder.spec.runtime}.")

    def _probe(self, per_table: int = 16):
        """Up to ``per_table`` texts and their stored vectors from each vector table."""
        import numpy as np

        texts, vectors = [], []
        for kind in EMBEDDED_KINDS:
            name = vector_table_name(kind)
            if not (self._vdir / LANCE_DIR / f"{name}.lance").exists():
                continue
            try:
                t = self._lance.open_table(name).head(per_table)
            except Exception as e:  # noqa: BLE001 - an I/O or format error from Lance
                raise self._lance_damage(kind, e) from None
            texts += t.column("text").to_pylist()
            vectors += t.column("vector").to_pylist()
        dim = int(self.manifest["dim"])
        return texts, np.asarray(vectors, dtype=np.float32).reshape(len(texts), dim)

    def embed_query(self, query: str):
        v = self._query_cache.get(query)
        if v is None:
            v = self.encoder.encode([query])[0]
            if len(self._query_cache) > 4096:
                self._query_cache.clear()
            self._query_cache[query] = v
        return v

    @cached_property
    def _lance(self):
        import lancedb

        return lancedb.connect(str(self._vdir / LANCE_DIR))

    def _lance_damage(self, kind: str, exc: BaseException | None = None) -> IndexDamaged:
        """The damaged file of a vector table (the one whose Lance footer is gone),
        or the table itself when no single file can be blamed."""
        table_dir = self._vdir / LANCE_DIR / f"{vector_table_name(kind)}.lance"
        bad = damaged_lance_file(table_dir)
        if bad is not None:
            return self._damaged(bad, "truncated or overwritten: no Lance footer"
                                 + (f"; {short_error(exc)}" if exc is not None else ""))
        return self._damaged(table_dir, exc if exc is not None else "unreadable")

    def _read_vectors(self, kind: str, table, columns: list[str]):
        try:
            return table.to_arrow().select(columns)
        except Exception as e:  # noqa: BLE001 - an I/O or format error from Lance
            raise self._lance_damage(kind, e) from None

    def _result(self, node_id: str, score: float, relation: str = "seed",
                via: str | None = None) -> Result:
        if node_id not in self._row_of and node_id in self._fact_source:
            return self._fact_result(node_id, score, relation)
        return Result(**self.node(node_id), score=float(score), relation=relation, via=via)

    @cached_property
    def _fact_source(self) -> dict[str, tuple[str, str]]:
        """fact id → (its triple's text, the first chunk it was extracted from)."""
        facts = self.facts()
        if facts is None or facts.height == 0:
            return {}
        first = facts.unique("fact_id", keep="first", maintain_order=True)
        return {f: (t, c) for f, t, c in first.select("fact_id", "text", "chunk_id").iter_rows()}

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
    @cached_property
    def graph(self):
        """The graph as CSR arrays (built on first use, then kept)."""
        from strata.retrieval.graph import Graph

        return Graph.build(self._nodes, self._edges)

    @cached_property
    def node_vectors(self):
        """Vectors aligned with ``graph`` dense ids (zeros for nodes without one)."""
        import numpy as np

        g = self.graph
        mat = np.zeros((len(g.ids), int(self.manifest["dim"])), dtype=np.float32)
        for kind, table in self._all_vector_tables.items():
            if kind == FACT:
                continue
            t = self._read_vectors(kind, table, ["node_id", "vector"])
            vecs = t.column("vector").combine_chunks().flatten().to_numpy().reshape(t.num_rows, -1)
            for nid, v in zip(t.column("node_id").to_pylist(), vecs):
                j = g.index.get(nid)
                if j is not None:
                    mat[j] = v
        return mat

    def fact_vectors(self):
        """(fact ids, row-normalised fact vectors): the fact store held in memory
        for exact kNN (``([], empty)`` when the index has no facts)."""
        import numpy as np

        table = self._all_vector_tables.get(FACT)
        dim = int(self.manifest["dim"])
        if table is None:
            return [], np.zeros((0, dim), dtype=np.float32)
        t = self._read_vectors(FACT, table, ["node_id", "vector"])
        vecs = t.column("vector").combine_chunks().flatten().to_numpy().reshape(t.num_rows, -1)
        vecs = np.asarray(vecs, dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return t.column("node_id").to_pylist(), vecs / np.where(norms > 0, norms, 1.0)

    @cached_property
    def _all_vector_tables(self) -> dict:
        """The vector tables, each checked once: every data and index file still
        ends as a Lance file does (four bytes read per file). A truncated file can
        otherwise go unnoticed until a query reads it."""
        try:
            names = set(getattr(r := self._lance.list_tables(), "tables", r))
        except Exception as e:  # noqa: BLE001
            raise self._damaged(self._vdir / LANCE_DIR, e) from None
        tables = {}
        for k in VECTOR_KINDS:
            if vector_table_name(k) not in names:
                continue
            table_dir = self._vdir / LANCE_DIR / f"{vector_table_name(k)}.lance"
            if damaged_lance_file(table_dir) is not None:
                raise self._lance_damage(k)
            try:
                tables[k] = self._lance.open_table(vector_table_name(k))
            except Exception as e:  # noqa: BLE001
                raise self._lance_damage(k, e) from None
        return tables

    @cached_property
    def _unit_vectors(self):
        """(row-normalised node vectors, has-own-vector mask, kind codes), aligned
        with ``graph``: exact kNN is one matrix-vector product on these."""
        import numpy as np

        limit_blas_threads()

        vecs = np.asarray(self.node_vectors, dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1)
        own = norms > 0
        return vecs / np.where(own, norms, 1.0)[:, None], own, self.graph.kind

    @cached_property
    def _fact_unit(self):
        return self.fact_vectors()

    def dense(self, vec, k: int, kinds=None) -> list[tuple[str, float]]:
        """(node_id, cosine similarity) of the k nearest vectors, over ``kinds``
        (default: the hierarchy kinds; entity and fact tables are opt-in).

        Exact search on the vectors held in memory (loaded once from the Lance
        tables): at the corpus sizes Strata targets a matrix-vector product
        beats a table scan per kind by an order of magnitude (MuSiQue: 0.5 ms vs
        6 ms per kind), and the results are the same."""
        import numpy as np

        from strata.retrieval.graph import KIND_CODE, top_k

        if k <= 0:
            return []
        kinds = list(kinds or EMBEDDED_KINDS)
        q = np.asarray(vec, dtype=np.float32)
        q = q / (float(np.linalg.norm(q)) or 1.0)
        hits: list[tuple[str, float]] = []
        node_kinds = [KIND_CODE[kd] for kd in kinds if kd != FACT and kd in KIND_CODE]
        if node_kinds:
            unit, own, kind = self._unit_vectors
            cand = np.nonzero(own & np.isin(kind, node_kinds))[0]
            rows, scores = top_k(unit[cand] @ q, cand, k)
            hits += [(self.graph.ids[r], float(s)) for r, s in zip(rows.tolist(), scores)]
        if FACT in kinds:
            ids, unit = self._fact_unit
            if ids:
                rows, scores = top_k(unit @ q, np.arange(len(ids)), k)
                hits += [(ids[r], float(s)) for r, s in zip(rows.tolist(), scores)]
        hits.sort(key=lambda h: -h[1])
        return hits[:k]

    @cached_property
    def _lexical(self) -> dict:
        """The BM25 collections (:mod:`strata.lexical`): ``units`` and ``graph``."""
        from strata.lexical import LexicalIndex

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
               **params) -> SearchResults:
        """Search in one of the modes: ``auto`` (the default: fused dense + BM25
        recall, the entity walk where the facts are model-made, each hit with its
        parent and siblings), ``flat`` (dense kNN), ``keyword``, ``hybrid``,
        ``hierarchical``, ``diffusion`` or ``routed``. Extra keyword arguments are
        that mode's parameters (see :mod:`retrieval.modes`)."""
        from strata.retrieval.modes import DEFAULT_MODE, run_mode

        return run_mode(self, query, mode=mode or DEFAULT_MODE, k=k, **params)

    def ask(self, question: str, mode: str | None = None, llm=None, k: int = 8, **params):
        """Retrieve, assemble the context and answer (see :mod:`retrieval.answer`)."""
        from strata.retrieval.answer import ask

        return ask(self, question, mode=mode, llm=llm, k=k, **params)
