"""The neighbourhood of one node: a picture of how a result sits in the structure.

A search result is one row: a breadcrumb, a score, a ``relation`` and a
``via``. Why it was found, and what else the index knows around it, is in the
graph: its file and parent section, its children, the entities it mentions,
the files it links to or imports. :func:`neighbourhood` cuts that part of the
graph out as two small polars frames, and :func:`draw_neighbourhood` draws
them (nodes coloured by kind, edges styled by type), so a reader sees at a
glance where a passage lives and what connects to it.

Like the rest of :mod:`retrieval`, this never imports the orchestrator; the
plotting libraries (matplotlib, networkx) load only when a picture is drawn.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from strata.core.config.schema import EDGE_TYPES, NODE_KINDS, STRUCTURAL

# Within one hop, structural edges (parent, children) come first, then the
# other edge types in schema order; the cap keeps the closest, best-linked nodes.
_TYPE_RANK = {STRUCTURAL: 0, **{t: i + 1 for i, t in enumerate(t for t in EDGE_TYPES
                                                               if t != STRUCTURAL)}}

# A fixed colour per node kind and a fixed style per edge type, so every
# picture reads the same way (tab10 colours).
KIND_COLOURS = dict(zip(NODE_KINDS, ("#1f77b4", "#2ca02c", "#bcbd22", "#ff7f0e", "#9467bd",
                                     "#e377c2", "#7f7f7f")))
EDGE_STYLES = {  # type: (colour, line style)
    "structural": ("#444444", "solid"),
    "jump": ("#1f77b4", "dashed"),
    "import": ("#d62728", "dashdot"),
    "passage": ("#aaaaaa", "dotted"),
    "semantic": ("#9467bd", "dashed"),
    "synonymy": ("#e377c2", "dotted"),
}
_OTHER_COLOUR = "#17becf"


def _label(kind: str | None, title: str | None, breadcrumb: str | None, node_id: str) -> str:
    if kind == "file" and breadcrumb:  # a file's title is its first heading; its path says more
        return breadcrumb
    if title:
        return title
    if breadcrumb:
        return breadcrumb.rsplit(" > ", 1)[-1]
    return node_id


def neighbourhood(index, node_id: str, hops: int = 1,
                  max_nodes: int = 40) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The subgraph within ``hops`` edges of ``node_id`` (edges followed in both
    directions), as ``(nodes, edges)`` frames.

    ``nodes``: node_id, kind, label (a file's path, else the title, else the
    last breadcrumb part), breadcrumb, distance (0 for the centre). ``edges``:
    src, dst, type, relation, one row per linked pair and edge type (the index
    stores most edges both ways, e.g. ``contains``/``part_of``; the row kept
    points away from the centre).

    At most ``max_nodes`` nodes are kept: the centre, then the closest ones,
    within one distance structural neighbours (parent, children) before the
    other edge types, then in id order, so the same call gives the same frames.
    Raises ``KeyError`` when ``node_id`` is not a graph node."""
    nodes_all = index.nodes()
    row = nodes_all.filter(pl.col("node_id") == node_id)
    if row.height == 0:
        raise KeyError(f"{node_id!r} is not a node of this index (a fact result is a vector, "
                       "not a graph node: use its `via`, the chunk it came from)")
    max_nodes = max(1, int(max_nodes))
    edges_all = index.edges().select("src", "dst", "type", "relation")
    # Both directions: (a → b) for every stored edge and its reverse.
    undirected = pl.concat([
        edges_all.select(a="src", b="dst", type="type"),
        edges_all.select(a="dst", b="src", type="type"),
    ]).with_columns(rank=pl.col("type").replace_strict(_TYPE_RANK, default=len(_TYPE_RANK),
                                                       return_dtype=pl.Int32))

    distance = {node_id: 0}
    order = [node_id]
    frontier = [node_id]
    for d in range(1, max(0, hops) + 1):
        if not frontier or len(order) >= max_nodes:
            break
        pos = {n: i for i, n in enumerate(frontier)}
        cand = (undirected
                .filter(pl.col("a").is_in(frontier) & ~pl.col("b").is_in(order))
                .with_columns(from_pos=pl.col("a").replace_strict(pos, return_dtype=pl.Int64))
                .sort("rank", "from_pos", "b")
                .unique("b", keep="first", maintain_order=True))
        new = cand["b"].to_list()[: max_nodes - len(order)]
        for n in new:
            distance[n] = d
        order += new
        frontier = new

    kept = (pl.DataFrame({"node_id": order, "distance": [distance[n] for n in order]},
                         schema={"node_id": pl.Utf8, "distance": pl.Int32})
            .join(nodes_all.select("node_id", "kind", "title", "breadcrumb")
                  .unique("node_id", keep="first"), on="node_id", how="left",
                  maintain_order="left"))
    nodes = kept.select(
        "node_id", "kind",
        label=pl.struct("kind", "title", "breadcrumb", "node_id").map_elements(
            lambda s: _label(s["kind"], s["title"], s["breadcrumb"], s["node_id"]),
            return_dtype=pl.Utf8),
        breadcrumb=pl.col("breadcrumb"), distance="distance")

    dist = pl.DataFrame({"node_id": order, "d": [distance[n] for n in order]},
                        schema={"node_id": pl.Utf8, "d": pl.Int32})
    edges = (edges_all
             .filter(pl.col("src").is_in(order) & pl.col("dst").is_in(order)
                     & (pl.col("src") != pl.col("dst")))
             .join(dist.rename({"node_id": "src", "d": "d_src"}), on="src")
             .join(dist.rename({"node_id": "dst", "d": "d_dst"}), on="dst")
             .with_columns(lo=pl.min_horizontal("src", "dst"), hi=pl.max_horizontal("src", "dst"),
                           inward=(pl.col("d_src") > pl.col("d_dst")))
             # one row per pair and type: the outward one (then by src, dst, relation)
             .sort("inward", "src", "dst", "relation")
             .unique(["lo", "hi", "type"], keep="first", maintain_order=True)
             .sort("d_src", "d_dst", "type", "src", "dst")
             .select("src", "dst", "type", "relation"))
    return nodes, edges


def _short(text: str, n: int = 24) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _layout(nx, g, centre: str) -> dict:
    """Fixed positions: Kamada-Kawai (no randomness; graph distances become
    drawing distances) with the centre moved to the middle, then a short seeded
    spring relaxation, the centre pinned, to spread crowded leaves."""
    if g.number_of_nodes() == 1:
        return {centre: (0.0, 0.0)}
    pos = nx.kamada_kawai_layout(g)
    cx, cy = pos[centre]
    pos = {n: (x - cx, y - cy) for n, (x, y) in pos.items()}
    k = 1.2 / g.number_of_nodes() ** 0.5
    return nx.spring_layout(g, pos=pos, fixed=[centre], k=k, iterations=30, seed=0)


def draw_neighbourhood(nodes: pl.DataFrame, edges: pl.DataFrame, centre: str, ax=None,
                       path: str | Path | None = None):
    """Draw a :func:`neighbourhood` (nodes coloured by kind, edges coloured and
    dashed by type, the centre ringed and larger, labels cut to 24 characters)
    with a deterministic layout (Kamada-Kawai, then a spring relaxation with
    seed 0, the centre pinned in the middle), and return the matplotlib Figure;
    saved as an image to ``path`` when given.

    Without ``ax`` a standalone Figure (no pyplot state) of 9×6 inches is made:
    900×600 pixels at the default 100 dpi."""
    import networkx as nx
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    if ax is None:
        fig = Figure(figsize=(9, 6), dpi=100)
        ax = fig.add_axes((0.02, 0.02, 0.8, 0.9))  # room on the right for the legends
    else:
        fig = ax.figure

    g = nx.Graph()
    for nid, kind, label in nodes.select("node_id", "kind", "label").iter_rows():
        g.add_node(nid, kind=kind, label=label)
    if centre not in g:
        raise KeyError(f"centre {centre!r} is not in the neighbourhood's nodes")
    # One drawn line per linked pair: the structural edge if there is one, else
    # the first type in schema order.
    for src, dst, etype in edges.select("src", "dst", "type").iter_rows():
        if src not in g or dst not in g:
            continue
        prev = g.get_edge_data(src, dst)
        if prev is None or _TYPE_RANK.get(etype, 99) < _TYPE_RANK.get(prev["type"], 99):
            g.add_edge(src, dst, type=etype)

    pos = _layout(nx, g, centre)

    present_types = []
    drawn_types = {d["type"] for *_, d in g.edges(data=True)}
    for etype in [*EDGE_TYPES, *sorted(drawn_types - set(EDGE_TYPES))]:
        es = [(u, v) for u, v, d in g.edges(data=True) if d["type"] == etype]
        if not es:
            continue
        present_types.append(etype)
        colour, style = EDGE_STYLES.get(etype, (_OTHER_COLOUR, "solid"))
        nx.draw_networkx_edges(g, pos, edgelist=es, ax=ax, edge_color=colour, style=style,
                               width=1.6 if etype == STRUCTURAL else 1.2, alpha=0.85)

    kinds = [g.nodes[n]["kind"] for n in g]
    present_kinds = [k for k in NODE_KINDS if k in kinds] + sorted(set(kinds) - set(NODE_KINDS))
    others = [n for n in g if n != centre]
    nx.draw_networkx_nodes(g, pos, nodelist=others, ax=ax, node_size=260,
                           node_color=[KIND_COLOURS.get(g.nodes[n]["kind"], _OTHER_COLOUR)
                                       for n in others],
                           edgecolors="white", linewidths=0.8)
    nx.draw_networkx_nodes(g, pos, nodelist=[centre], ax=ax, node_size=720,
                           node_color=[KIND_COLOURS.get(g.nodes[centre]["kind"], _OTHER_COLOUR)],
                           edgecolors="black", linewidths=2.5)
    # labels just above their node
    ys = [y for _, y in pos.values()]
    lift = 0.025 * ((max(ys) - min(ys)) or 1.0)
    above = {n: (x, y + lift) for n, (x, y) in pos.items()}
    labels = {n: _short(g.nodes[n]["label"]) for n in g}
    nx.draw_networkx_labels(g, above, labels={n: s for n, s in labels.items() if n != centre},
                            ax=ax, font_size=7, verticalalignment="bottom")
    nx.draw_networkx_labels(g, {centre: (pos[centre][0], pos[centre][1] + 2 * lift)},
                            labels={centre: labels[centre]}, ax=ax, font_size=9,
                            font_weight="bold", verticalalignment="bottom")

    kind_handles = [Line2D([], [], marker="o", linestyle="", markersize=8,
                           markerfacecolor=KIND_COLOURS.get(k, _OTHER_COLOUR),
                           markeredgecolor="white", label=k) for k in present_kinds]
    kind_handles.append(Line2D([], [], marker="o", linestyle="", markersize=10,
                               markerfacecolor="white", markeredgecolor="black",
                               markeredgewidth=2, label="centre"))
    edge_handles = [Line2D([], [], color=EDGE_STYLES.get(t, (_OTHER_COLOUR, "solid"))[0],
                           linestyle=EDGE_STYLES.get(t, (_OTHER_COLOUR, "solid"))[1],
                           label=t) for t in present_types]
    first = ax.legend(handles=kind_handles, title="node kind", loc="upper left",
                      bbox_to_anchor=(1.0, 1.0), fontsize=8, title_fontsize=9, frameon=False)
    if edge_handles:
        ax.add_artist(first)
        ax.legend(handles=edge_handles, title="edge type", loc="lower left",
                  bbox_to_anchor=(1.0, 0.0), fontsize=8, title_fontsize=9, frameon=False)
    ax.set_title(f"Neighbourhood of {_short(g.nodes[centre]['label'], 60)} "
                 f"({g.number_of_nodes()} nodes, {g.number_of_edges()} links)", fontsize=10)
    ax.margins(0.08)
    ax.set_axis_off()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=fig.dpi)
    return fig
