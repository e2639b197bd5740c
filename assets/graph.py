"""Graph stage: ``nodes`` + references → ``edges`` (structural, jump, import)."""


import dagster as dg
import polars as pl

from assets.common import corpus_and_layout, md, path_metadata, read_build_table, record_stage
from assets.partitions import corpora_partitions
from resources.corpora import CorpusRegistry
from strata.layout import write_parquet_atomic
from strata.stats import edges_by_type

GRAPH_VERSION = "1"


@dg.asset(
    partitions_def=corpora_partitions,
    group_name="graph",
    kinds={"python", "parquet"},
    deps=["nodes"],
    code_version=GRAPH_VERSION,
    description=(
        "The corpus graph: structural containment edges in both directions (contains/part_of), "
        "jump edges for document links (to the linked section when the anchor resolves) and "
        "import edges between code modules and imported symbols. Writes edges.parquet."),
    check_specs=[dg.AssetCheckSpec("endpoints_exist", asset="edges",
                                   description="Both ends of every edge are nodes of the build.")],
)
def edges(context: dg.AssetExecutionContext, corpora: CorpusRegistry) -> dg.MaterializeResult:
    import time

    from stages.graph import build_edges

    t0 = time.perf_counter()
    spec, layout = corpus_and_layout(context, corpora)
    nodes = read_build_table(layout, "nodes")
    refs = read_build_table(layout, "references")
    result = build_edges(nodes, refs)
    write_parquet_atomic(result.edges, layout.build_table("edges"))
    df = pl.from_arrow(result.edges)
    ids = nodes["node_id"]
    dangling = df.filter(~pl.col("src").is_in(ids) | ~pl.col("dst").is_in(ids)).height
    seconds = time.perf_counter() - t0
    record_stage(layout, "graph", seconds=seconds, edges=df.height)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": df.height,
            "edges_by_type": md(edges_by_type(df), ("type", "edges")),
            "unresolved_links": md(result.unresolved, ("path", "target")),
            "unresolved_link_count": len(result.unresolved),
            "external_imports": result.external_imports,
            "seconds": round(seconds, 3),
            "path": path_metadata(layout.build_table("edges")),
        },
        check_results=[dg.AssetCheckResult(check_name="endpoints_exist", passed=dangling == 0,
                                           metadata={"dangling_edges": dangling})],
    )
