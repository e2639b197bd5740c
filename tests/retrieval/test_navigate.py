"""How :func:`retrieval.navigate.resolve` reads the names an agent or a reader
gives for a node, on the shared sample index: every tool that takes a node
(outline, node, neighbourhood) goes through it."""

from __future__ import annotations

import pytest

from strata.retrieval import navigate
from strata.retrieval.index import Index


@pytest.fixture(scope="module")
def idx(sample_index) -> Index:
    return Index.open(sample_index)


def test_a_module_its_path_and_its_id_name_the_same_node(idx):
    file_id = navigate.resolve(idx, "tidewater/calibration.py")
    assert file_id.startswith("file-")
    for name in ("tidewater.calibration", "./tidewater/calibration.py", " calibration.py ",
                 file_id):
        assert navigate.resolve(idx, name) == file_id, name


def test_symbols_and_anchors_by_full_name_or_unique_tail(idx):
    fn = navigate.resolve(idx, "tidewater.calibration.correct_barometric_drift")
    assert idx.node(fn)["node_path"] == "tidewater.calibration.correct_barometric_drift"
    assert navigate.resolve(idx, "correct_barometric_drift") == fn
    assert navigate.resolve(idx, "calibration.correct_barometric_drift") == fn
    fit = navigate.resolve(idx, "Calibrator.fit")
    assert idx.node(fit)["node_path"] == "tidewater.calibration.Calibrator.fit"
    drift = navigate.resolve(idx, "docs/calibration.md#calibration/barometric-drift")
    assert idx.node(drift)["title"] == "Barometric drift"
    assert navigate.resolve(idx, "calibration.md#calibration/barometric-drift") == drift
    # outline, node_view and connections agree on the resolved node
    assert navigate.outline(idx, "Calibrator.fit")["root"]["node_id"] == fit
    assert navigate.outline(idx, fit)["focus"] == fit


@pytest.mark.parametrize("name, expected", [
    ("calibration", ["tidewater.calibration", "docs/calibration.md#calibration"]),
    ("tidewater.calibraton", ["did you mean tidewater.calibration"]),
    ("calibrashun.py", ["did you mean tidewater/calibration.py"]),
    ("", ["give a node id"]),
])
def test_unknown_or_ambiguous_names_fail_in_one_line_with_candidates(idx, name, expected):
    with pytest.raises(navigate.NotFound) as e:
        navigate.resolve(idx, name)
    message = str(e.value)
    assert "\n" not in message
    for part in expected:
        assert part in message, message


@pytest.mark.parametrize("name", ["tidewater.nonexistent", "docs/zzz.md", "does.not.exist"])
def test_a_name_like_nothing_here_gets_no_suggestion(idx, name):
    """Suggestions are names like the one asked for where names differ, their last
    word; the package or folder every name shares (``tidewater.``, ``docs/``) and
    letters that happen to line up are no reason to send a reader there."""
    with pytest.raises(navigate.NotFound) as e:
        navigate.resolve(idx, name)
    assert "did you mean" not in str(e.value), str(e.value)
