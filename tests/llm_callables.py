"""Callables for the `callable` LLM backend in tests (imported by path, as a user would)."""

from __future__ import annotations

import json
import re

STATE = {"calls": 0, "answered": 0, "fail_after": None, "summary_words": 12}


class Interrupted(BaseException):
    """Stands in for a process killed mid-stage: a BaseException is not an item
    failure, so it escapes the stage like a real kill would."""


def answer(prompt: str) -> str:
    """A deterministic 'model': JSON OpenIE for OpenIE prompts, else a summary."""
    STATE["calls"] += 1
    if STATE["fail_after"] is not None and STATE["calls"] > STATE["fail_after"]:
        raise Interrupted("simulated crash")
    data = prompt.rsplit("```", 2)[-2] if prompt.count("```") >= 2 else prompt
    STATE["answered"] += 1
    if '"triples"' in prompt or "triples" in prompt.lower():
        words = re.findall(r"[A-Z][a-zA-Z]{3,}", data)[:3]
        triples = [[words[0], "relates to", words[1]]] if len(words) >= 2 else []
        return json.dumps({"entities": [{"name": w, "description": ""} for w in words],
                           "triples": triples})
    return "Summary: " + " ".join(data.split()[:STATE["summary_words"]])


def other(prompt: str) -> str:
    """A second 'model', told apart from :func:`answer` by its summaries."""
    return "Other model: " + " ".join(prompt.split()[-8:])
