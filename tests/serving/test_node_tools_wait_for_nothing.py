"""The MCP tools that embed no query (outline, node, neighbourhood, index_stats)
answer without waiting for the query encoder to load: an agent's first look at a
node is not held up by a model it does not use. The registry and tools as
`strata mcp` builds them, on the shared sample index."""

from __future__ import annotations

from strata.service import mcp_tools
from strata.service.registry import Registry


def test_node_tools_do_not_load_the_encoder_and_search_does(sample_index):
    registry = Registry([str(sample_index)], reload_interval_s=60, warm_up=False,
                        background=False)
    (slot,) = registry.slots.values()
    tools = mcp_tools.Tools(registry)
    tools.index_stats()
    tools.outline("tidewater.calibration")
    tools.node("tidewater.calibration.correct_barometric_drift")
    answer = tools.neighbourhood("tidewater.calibration")
    assert "Neighbourhood of" in answer.text
    assert not slot.ready.is_set()  # the encoder was never asked for
    tools.search("barometric drift", k=1)
    assert slot.ready.is_set()
