"""Graph stage: ``nodes`` + references → ``edges`` (structural, jump, import)."""


import dagster as dg
import polars as pl

from strata.assets.charts import bar_chart, md_image
from strata.assets.common import (corpus_and_layout, md, output_version, path_metadata, read_build_table,
                           record_stage, stoppable)
from strata.assets.groups import INDEX
from strata.assets.partitions import corpora_partitions
from strata.resources.corpora import CorpusRegistry
from strata.core.storage.layout import write_parquet_atomic
from strata.core.stats import edges_by_type

GRAPH_VERSION = "3"


class GraphConfig(dg.Config):
    synonymy_threshold: float = 0.8
    """Entity pairs with embedding cosine similarity at or above this get a synonymy edge."""
    synonymy_k: int = 10
    """Neighbours examined per entity (kNN)."""


# What the graph reads of the nodes table: ids, the hierarchy and what links resolve
# against; not the texts, which are most of the table's bytes.
NODE_COLUMNS = ["node_id", "parent_id", "kind", "subkind", "path", "node_path", "attrs"]


def _entity_rows(layout):
    """(entity ids in table order, a function reading their vectors, a key standing
    for the vectors or None). The vectors are read only by synonymy, a batch at a
    time, in passes (``synonymy_edges``'s blocks), and only the id and vector
    columns (not the embedded texts). When the vector tables' contents file is
    trusted, the ids and the key come from it, so a synonymy cache hit reads
    nothing; else the ids are read from the table now, and the key is None (the
    cache key then hashes the vectors themselves)."""
    from strata.core.storage.lance_scan import connect, scan, vector_matrix
    from strata.core.config.schema import ENTITY, vector_table_name
    from strata.stages.vector_contents import read_contents, unstamp

    name = vector_table_name(ENTITY)
    contents = read_contents(layout.build_lance)
    if contents is not None:
        listed = contents.of_kind(ENTITY).column("node_id").to_pylist()
        key, source = contents.vectors_key(ENTITY), "its contents file lists"
    elif (layout.build_lance / f"{name}.lance").exists():
        table = connect(layout.build_lance).open_table(name)
        listed = [i for batch in scan(table, ["node_id"]) for i in batch.column("node_id").to_pylist()]
        key, source = None, "it held when the graph step began"
    else:
        return [], None, None

    def changed():  # by hand, since the tables were written or the ids were read
        unstamp(layout.build_lance)  # not trusted again: the next attempt reads the tables
        return RuntimeError(f"{layout.build_lance}: the entity table does not hold the rows "
                            f"{source}; the next attempt reads the tables")

    def blocks():
        table = connect(layout.build_lance).open_table(name)
        at = 0
        for batch in scan(table, ["node_id", "vector"]):
            ids = batch.column("node_id").to_pylist()
            if ids != listed[at:at + len(ids)]:
                raise changed()
            at += len(ids)
            yield vector_matrix(batch.column("vector"))
        if at != len(listed):
            raise changed()

    return listed, blocks, key


def _node_ids(layout) -> pl.Series:
    """Every node id of the build: the hierarchy's and the entities' (only the
    tables' id columns are read)."""
    nodes = read_build_table(layout, "nodes", columns=["node_id"])["node_id"]
    entities = read_build_table(layout, "entities", required=False, columns=["node_id"])
    return nodes if entities is None else pl.concat([nodes, entities["node_id"]])


@dg.asset(
    partitions_def=corpora_partitions,
    group_name=INDEX,
    kinds={"python", "parquet"},
    deps=["nodes", "facts", "image_groups", "embeddings"],
    code_version=GRAPH_VERSION,
    description=(
        "The corpus graph: structural containment edges in both directions (contains/part_of), "
        "jump edges for document links (to the linked section when the anchor resolves) and "
        "import edges between code modules and imported symbols; from OpenIE, passage edges "
        "(chunk↔entity), semantic edges (entity↔entity, weight = co-occurrence count) and synonymy "
        "edges (entity kNN above a similarity threshold, via a faiss index: near-linear). Edges to "
        "near-duplicate images are redirected to their representative. Writes edges.parquet."),
    check_specs=[dg.AssetCheckSpec("endpoints_exist", asset="edges",
                                   description="Both ends of every edge are nodes of the build.")],
)
@stoppable
def edges(context: dg.AssetExecutionContext, config: GraphConfig,
          corpora: CorpusRegistry) -> dg.MaterializeResult:
    import time

    import pyarrow as pa

    from strata.assets.openie import SEMANTIC_EDGES
    from strata.stages.enrich.images import duplicate_mapping
    from strata.stages.enrich.semantic_graph import redirect_edges, synonymy_edges_cached
    from strata.stages.structural_graph import build_edges

    t0 = time.perf_counter()
    spec, layout = corpus_and_layout(context, corpora)
    # Synonymy first: the entity vectors and their kNN index are this step's largest
    # transient, and are freed before the nodes and references are read rather than
    # stacked on them.
    synonymy = None
    entity_ids, vectors, key = _entity_rows(layout)
    if len(entity_ids):
        synonymy, _ = synonymy_edges_cached(entity_ids, vectors, layout.cache,
                                            threshold=config.synonymy_threshold,
                                            k=config.synonymy_k, vectors_key=key)
    del entity_ids, vectors
    result = build_edges(read_build_table(layout, "nodes", columns=NODE_COLUMNS),
                         read_build_table(layout, "references"))
    parts = [result.edges]
    if (layout.build / SEMANTIC_EDGES).exists():
        parts.append(pl.read_parquet(layout.build / SEMANTIC_EDGES).to_arrow().cast(result.edges.schema))
    if synonymy is not None:
        parts.append(synonymy.cast(result.edges.schema))
    all_edges = pa.concat_tables(parts)
    images = read_build_table(layout, "images", required=False)
    if images is not None and images.height:
        all_edges = redirect_edges(all_edges, duplicate_mapping(images.to_arrow()))
    write_parquet_atomic(all_edges, layout.build_table("edges"))
    df = pl.from_arrow(all_edges)
    del parts, all_edges, synonymy
    ids = _node_ids(layout)
    known = ids.implode()  # a Series as one list: is_in on a bare Series is deprecated
    dangling = df.filter(~pl.col("src").is_in(known) | ~pl.col("dst").is_in(known)).height
    seconds = time.perf_counter() - t0
    record_stage(layout, "graph", seconds=seconds, edges=df.height)
    return dg.MaterializeResult(
        data_version=output_version(layout.build_table("edges")),
        metadata={
            "dagster/row_count": df.height,
            "edges_by_type": md(edges_by_type(df), ("type", "edges")),
            "edges_chart": md_image(bar_chart(edges_by_type(df), "edges by type", "type",
                                              log=True), "edges by type"),
            "unresolved_links": md(result.unresolved, ("path", "target")),
            "unresolved_link_count": len(result.unresolved),
            "external_imports": result.external_imports,
            "seconds": round(seconds, 3),
            "path": path_metadata(layout.build_table("edges")),
        },
        check_results=[dg.AssetCheckResult(check_name="endpoints_exist", passed=dangling == 0,
                                           metadata={"dangling_edges": dangling})],
    )
