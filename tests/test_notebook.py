"""notebooks/explore.ipynb runs top to bottom on the sample index (so it never
rots), and the neighbourhood helpers it uses give a well-formed subgraph and a
picture."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import polars as pl
import pytest

from strata.retrieval import Index
from strata.retrieval.neighbourhood import draw_neighbourhood, neighbourhood
from strata.core.config.schema import EDGE_TYPES, NODE_KINDS
from tests.conftest import REPO

NOTEBOOK = REPO / "notebooks" / "explore.ipynb"
QUESTION = "How do I correct pressure readings for barometric drift?"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _text(output) -> str:
    """Everything a reader sees of one output, as text."""
    if output.output_type == "stream":
        return output.text
    if output.output_type == "error":
        return f"{output.ename}: {output.evalue}"
    data = output.get("data", {})
    return "\n".join(str(data[m]) for m in ("text/plain", "text/html", "text/markdown")
                     if m in data)


def _cell_text(cell) -> str:
    """All of a cell's outputs as one text: a kernel may flush one print in several
    stream outputs, so no check reads only the first."""
    return "".join(_text(o) for o in cell.outputs)


def _tagged(nb, tag: str) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


def test_committed_notebook_is_clean():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code), \
        "commit the notebook with its outputs cleared"
    assert any(c.cell_type == "markdown" for c in nb.cells)
    assert "dagster" not in json.dumps([c.source for c in code])


def test_notebook_runs_on_the_sample_index(sample_index, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("STRATA_INDEX", str(sample_index))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(LABELS_INSIDE_CHECK))  # after the graph is drawn
    NotebookClient(nb, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [_text(o) for o in outputs if o.output_type == "error"]
    assert not errors, errors
    (setup,) = [c for c in nb.cells if c.get("id") == "setup"]
    assert str(sample_index.resolve()) in _cell_text(setup)  # STRATA_INDEX was used

    (stats,) = _tagged(nb, "stats")
    stats_text = "\n".join(_text(o) for o in stats.outputs)
    assert "section" in stats_text and "structural" in stats_text

    mode_cells = _tagged(nb, "modes")
    assert len(mode_cells) == 4
    mode_text = "\n".join(_text(o) for c in mode_cells for o in c.outputs)
    for mode in ("flat", "keyword", "hybrid", "hierarchical", "diffusion", "routed"):
        assert f"{mode}: " in mode_text, mode  # "<mode>: n results in x ms"
    frames = [o for c in mode_cells for o in c.outputs if "text/html" in o.get("data", {})]
    result_frames = [o for o in frames if "breadcrumb" in _text(o)]
    assert len(result_frames) == 6
    for o in result_frames:
        html = o["data"]["text/html"]
        for column in ("kind", "breadcrumb", "score", "relation", "via"):
            assert f"<th>{column}</th>" in html
    assert "docs/calibration.md" in mode_text
    assert "connection" in mode_text  # routed followed a direct link or import
    assert any("<th>stage</th>" in o["data"]["text/html"] for o in frames)  # diffusion trace

    (default,) = _tagged(nb, "default")  # the default mode: hits with their context, a budget
    default_text = "\n".join(_text(o) for o in default.outputs)
    assert "auto: 6 results" in default_text and "top hit:" in default_text
    assert "parent" in default_text and "sibling" in default_text
    assert "blocks within 600 tokens" in default_text

    (neigh,) = _tagged(nb, "neighbourhood")
    pngs = [o["data"]["image/png"] for o in neigh.outputs if "image/png" in o.get("data", {})]
    assert pngs and all(len(p) > 1000 for p in pngs)

    (answer,) = _tagged(nb, "answer")
    answer_text = "\n".join(_text(o) for o in answer.outputs)
    assert "Sources" in answer_text and "Connections" in answer_text
    assert "extractive answer" in answer_text  # no LLM configured in the tests
    assert "docs/calibration.md" in answer_text and "Reasoning:" in answer_text

    # every label of the neighbourhood graph, the centre's included, is drawn whole
    assert _cell_text(nb.cells[-1]).strip() == "clipped labels: []"


def test_notebook_runs_on_another_index_and_a_question_it_cannot_answer(oh_build, monkeypatch):
    """The way the notebook's own text says to use it: ``STRATA_INDEX`` at an index
    of one's own (the OpenHarmony pages) and ``STRATA_QUESTION`` at something it does
    not hold: every cell runs, and the mode cells say that nothing looks relevant."""
    from nbclient import NotebookClient

    base, _env, _stats = oh_build
    monkeypatch.setenv("STRATA_INDEX", str(base / "index"))
    monkeypatch.setenv("STRATA_QUESTION", "zzqx pangolin tariff of the 1880s")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [_text(o) for o in outputs if o.output_type == "error"]
    assert not errors, errors
    text = "\n".join(_text(o) for tag in ("modes", "default") for c in _tagged(nb, tag)
                     for o in c.outputs)
    assert "auto: 0 results" in text and "no result above relevance" in text


# Run by the test above as one more cell: the labels of the neighbourhood figure that
# stick out of its axes (matplotlib clips them there; the centre's bold label once did).
LABELS_INSIDE_CHECK = """\
ax = fig.axes[0]
fig.draw_without_rendering()
box = ax.get_window_extent()
clipped = [t.get_text() for t in ax.texts
           if (e := t.get_window_extent()).x0 < box.x0 or e.x1 > box.x1
           or e.y0 < box.y0 or e.y1 > box.y1]
print(f"clipped labels: {clipped}")
"""


def test_nbconvert_executes_the_notebook(request, tmp_path):
    """What a reader can do without opening JupyterLab: `jupyter nbconvert --to notebook
    --execute notebooks/explore.ipynb` from the venv (the notebook extra, which `make
    install` includes) runs it top to bottom and writes it with its outputs."""
    if importlib.util.find_spec("nbconvert") is None:
        pytest.skip("the notebook extra is not installed in this environment "
                    "(pip install -e '.[notebook]', or make install): no jupyter nbconvert")
    sample_index = request.getfixturevalue("sample_index")  # built only when not skipped
    jupyter = Path(sys.executable).with_name("jupyter")
    assert jupyter.exists(), f"nbconvert is importable but {jupyter} is missing"
    committed = NOTEBOOK.read_bytes()
    env = {**os.environ, "STRATA_INDEX": str(sample_index),
           "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    # the timeouts only stop a hung kernel from hanging the suite; nothing is timed
    proc = subprocess.run(
        [str(jupyter), "nbconvert", "--to", "notebook", "--execute", str(NOTEBOOK),
         "--output-dir", str(tmp_path), "--ExecutePreprocessor.timeout=600"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / NOTEBOOK.name
    assert "Writing" in proc.stderr and out.exists()

    nb = nbformat.read(out, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)  # every cell ran
    outputs = [o for c in code for o in c.outputs]
    assert not [_text(o) for o in outputs if o.output_type == "error"]
    (setup,) = [c for c in nb.cells if c.get("id") == "setup"]
    assert str(sample_index.resolve()) in _cell_text(setup)  # STRATA_INDEX was used
    (neigh,) = _tagged(nb, "neighbourhood")
    assert any("image/png" in o.get("data", {}) for o in neigh.outputs)
    assert NOTEBOOK.read_bytes() == committed  # written to tmp_path, the committed file untouched


@pytest.fixture(scope="module")
def sample(sample_index):
    return Index.open(sample_index)


@pytest.mark.parametrize("hops,max_nodes", [(1, 40), (2, 40), (2, 12), (0, 10), (3, 1)])
def test_neighbourhood_is_a_closed_capped_subgraph(sample, hops, max_nodes):
    centre = sample.search(QUESTION, mode="hierarchical", k=5)[0].node_id
    nodes, edges = neighbourhood(sample, centre, hops=hops, max_nodes=max_nodes)
    assert nodes.columns == ["node_id", "kind", "label", "breadcrumb", "distance"]
    assert edges.columns == ["src", "dst", "type", "relation"]
    ids = nodes["node_id"].to_list()
    assert ids[0] == centre and nodes["distance"][0] == 0
    assert len(ids) == len(set(ids)) and 1 <= len(ids) <= max_nodes
    assert nodes["distance"].max() <= hops
    assert nodes["distance"].to_list() == sorted(nodes["distance"].to_list())  # closest first
    assert set(nodes["kind"]) <= set(NODE_KINDS)
    assert nodes["label"].null_count() == 0
    assert set(edges["src"]) | set(edges["dst"]) <= set(ids)
    assert set(edges["type"]) <= set(EDGE_TYPES)
    pairs = [(min(s, d), max(s, d), t)
             for s, d, t in edges.select("src", "dst", "type").iter_rows()]
    assert len(pairs) == len(set(pairs))  # one row per linked pair and type
    if hops >= 1 and max_nodes >= 10:
        # the hierarchy comes first: the parent and the children are all kept
        row = sample.nodes().filter(pl.col("node_id") == centre).row(0, named=True)
        assert row["parent_id"] in ids
        kids = sample.nodes().filter(pl.col("parent_id") == centre)["node_id"].to_list()
        assert set(kids) <= set(ids)
    # deterministic
    again = neighbourhood(sample, centre, hops=hops, max_nodes=max_nodes)
    assert again[0].equals(nodes) and again[1].equals(edges)


def test_neighbourhood_of_an_unknown_node(sample):
    with pytest.raises(KeyError):
        neighbourhood(sample, "section-does-not-exist")


def test_draw_neighbourhood_writes_a_png(sample, tmp_path):
    centre = sample.search(QUESTION, mode="hierarchical", k=5)[0].node_id
    nodes, edges = neighbourhood(sample, centre, hops=2, max_nodes=25)
    fig = draw_neighbourhood(nodes, edges, centre, path=tmp_path / "n.png")
    data = (tmp_path / "n.png").read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000
    assert tuple(round(v) for v in fig.get_size_inches() * fig.dpi) == (900, 600)
    # the legends name the kinds and edge types drawn
    legend_text = {t.get_text() for ax in fig.axes for a in ax.get_children()
                   if hasattr(a, "get_texts") for t in a.get_texts()}
    assert set(nodes["kind"]) <= legend_text and "centre" in legend_text
    assert "structural" in legend_text

    # drawing on a given axes, a lone node
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    lone = nodes.head(1)
    assert draw_neighbourhood(lone, edges.head(0), centre, ax=ax) is ax.figure
    with pytest.raises(KeyError):
        draw_neighbourhood(nodes, edges, "not-a-node")
