"""Tolerant JSON parsing of model output (:class:`strata.core.llm.LLM`'s parsers, the stages').

Models wrap JSON in Markdown fences, add a sentence before or after it, or stop
mid-object when they hit ``max_tokens``. :func:`parse_json` strips the fences,
keeps the outermost ``{...}`` / ``[...]`` and falls back to the ``json-repair``
package (a declared dependency, imported on first use: most answers parse without
it) for truncated or slightly broken objects.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["parse_json"]

_FENCE = re.compile(r"```[ \t]*(?:json[c5]?|JSON)?[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)


def _strip_fences(text: str) -> str:
    m = _FENCE.search(text)
    return m.group(1) if m else text


def _outermost(text: str) -> str | None:
    """From the first ``{`` or ``[`` to its matching close (or the end, if truncated)."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return None
    start = min(starts)
    depth = 0
    in_str = False
    esc = False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return text[start:]  # unbalanced: truncated output, left for the repair step


def _repair(candidate: str) -> Any:
    import json_repair

    try:
        return json_repair.loads(candidate)
    except Exception:  # noqa: BLE001 - the library's own failures mean "unrepairable"
        return None


def parse_json(text: str) -> Any:
    """Parse model output as JSON, tolerating fences, chatter and truncation.

    Raises ``ValueError`` when nothing usable comes out of non-empty input (the
    output is not JSON at all), and for empty input.
    """
    if text is None or not str(text).strip():
        raise ValueError("empty model output (expected JSON)")
    body = _strip_fences(str(text)).strip()
    candidate = _outermost(body)
    if candidate is None:
        raise ValueError(f"no JSON object or array in model output: {text[:80]!r}")
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    value = _repair(candidate)
    if value is None or value == "" or (isinstance(value, (dict, list)) and not value
                                        and candidate.strip() not in ("{}", "[]")):
        raise ValueError(f"unrepairable JSON in model output: {text[:80]!r}")
    if not isinstance(value, (dict, list)):
        raise ValueError(f"model output is not a JSON object or array: {text[:80]!r}")
    return value
