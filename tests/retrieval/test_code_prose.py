"""The prose of a unit of code (its docstring, else its comments), which an
offline answer may quote where it may not quote the code."""

from __future__ import annotations

from strata.retrieval.code_prose import code_prose
from strata.retrieval.extractive import prose_sentences

METHOD = '''    def fill(self, series, max_gap=30):
        """Linearly interpolate missing samples in gaps no longer than ``max_gap``.

        Longer gaps are left as they are:

            series.fill(max_gap=60)

        """
        # walk the gaps
        return [s for s in series if s is not None]
'''


def test_an_indented_method_gives_its_docstring_and_no_code():
    prose = code_prose(METHOD, "python")
    assert prose.startswith("Linearly interpolate missing samples")
    assert "walk the gaps" not in prose and "return" not in prose
    assert prose_sentences(prose) == [
        "Linearly interpolate missing samples in gaps no longer than ``max_gap``."]


def test_a_module_and_a_class_give_their_docstrings():
    assert code_prose('"""Tide series I/O."""\n\nimport os\n', "python") == "Tide series I/O."
    cls = 'class Gauge:\n    """A tide gauge at one station."""\n\n    def read(self): ...\n'
    assert code_prose(cls, "python") == "A tide gauge at one station."


def test_a_unit_that_does_not_parse_alone_still_gives_its_docstring():
    py2 = 'def parse(line):\n    """Parse one fixed-width line."""\n    print "x"\n'
    assert code_prose(py2, "python") == "Parse one fixed-width line."


def test_without_a_docstring_the_whole_line_comments_are_the_prose():
    text = ("#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n"
            "def total(xs):\n    # Sum the readings, skipping gaps.\n    # Gaps are None.\n\n"
            "    return sum(x for x in xs if x)  # not this one\n")
    assert code_prose(text, "python") == "Sum the readings, skipping gaps.\nGaps are None."
    go = ("/**\n * Read the oldest sample.\n * Nil when empty.\n */\n"
          "func (r *Ring) Read() *Sample { // not this\n\t// Take the tail.\n\treturn nil\n}\n")
    assert code_prose(go, "go") == "Read the oldest sample.\nNil when empty.\n\nTake the tail."
    assert code_prose("#include <stdio.h>\n// Open the port.\n", "c") == "Open the port."


def test_text_of_no_known_language_gives_nothing():
    assert code_prose("# Heading\nSome text.", None) == ""
    assert code_prose("# Heading\nSome text.", "markdown") == ""
    assert code_prose("def f():\n    return 1\n", "python") == ""
