"""The answer without a language model, on a real build of the bundled sample:
whole prose sentences of the top sources, quoted with their citations under a
line saying no model wrote them, never a heading, a line of code or a bold
list label; code quoted by its docstring or comments only, cited with the
code unit's location; and no answer at all (and no LLM call) when nothing
retrieved reaches the relevance floor."""

from __future__ import annotations

import ast
import re
import textwrap

import polars as pl
import pytest

from strata.retrieval import Index
from strata.retrieval.answer import ask, ask_stream
from strata.retrieval.code_prose import code_prose
from strata.retrieval.extractive import (has_prose_text, looks_like_code, prose_sentences,
                                         quotable_sentences)
from tests.conftest import SAMPLE

QUESTIONS = [
    "How do I correct pressure readings for barometric drift?",
    "Which sensor models are supported and at what sampling rates?",
    "What does fill_gaps do with a hole longer than max_gap?",
    "How do I export a tide series to Parquet?",
    "How often should the batteries of a gauge be replaced?",
    "How do I tie the gauge zero to the station datum?",
]
NOT_IN_SAMPLE = "How do I configure a Kubernetes ingress controller for TLS?"
DECLINE = "Nothing in the index looks relevant to this question (closest: "
_CITED = re.compile(r"^- (?P<quote>.+) \[(?P<n>\d+)\] \((?P<loc>.+?)"
                    r"(?:, (?P<what>docstring|comment) of (?P<name>.+))?\)$")


@pytest.fixture(scope="module")
def idx(sample_index):
    return Index.open(sample_index)


@pytest.fixture(scope="module")
def structure(idx):
    """What must never be quoted as prose: every heading (section and file
    titles) and the text of every code node, whitespace collapsed."""
    nodes = idx.nodes()
    titles = {_norm(t).rstrip(".:") for t in nodes.filter(
        pl.col("kind").is_in(["section", "file"]))["title"].to_list() if t}
    code = [_norm(t) for t in nodes.filter(pl.col("kind") == "code")["text"].to_list() if t]
    return titles, code


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _unlinked(text: str) -> str:
    """A source's text as the answer shows it: Markdown links as their text."""
    return _norm(re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text))


def _code_lines(text: str) -> list[str]:
    """The lines of a unit of code that are code: not comments, not lines of
    its docstring (found with ast here, not by the module under test), 12
    characters or more, whitespace collapsed."""
    doc = ""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        tree = None
    if tree is not None:
        doc = ast.get_docstring(tree) or ""
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        if not doc and defs:
            doc = ast.get_docstring(defs[0]) or ""
    doc = _norm(doc)
    return [s for s in map(_norm, text.splitlines())
            if len(s) >= 12 and not s.startswith(("#", "//")) and s not in doc]


def recording_llm():
    calls: list[str] = []

    def fn(prompt: str) -> str:
        calls.append(prompt)
        return "An answer from the context [1]."

    fn.calls = calls
    return fn


# --------------------------------------------------------------------------- the quoted answer

@pytest.mark.parametrize("question", QUESTIONS)
def test_the_offline_answer_quotes_whole_prose_sentences_of_the_top_sources(
        idx, structure, question):
    titles, code = structure
    # floor 0: the answer's shape is under test here, not the relevance calibration
    results = idx.search(question, k=8, min_relevance=0)
    ans = ask(idx, question, k=8, min_relevance=0)
    assert ans.extractive and results
    lead, *rest = ans.text.splitlines()
    assert "no language model wrote" in lead and "quoted from the sources" in lead
    # the top source is cited: quoted, or pointed to when it is code or a table
    assert "[1]" in ans.text and results[0].location() in ans.text

    bullets = [line for line in rest if line.startswith("- ")]
    assert 1 <= len(bullets) <= 6
    assert not any(line.lstrip().startswith(("#", "```", "|")) for line in rest)
    sentences = 0
    for line in bullets:
        m = _CITED.match(line)
        assert m, line
        r = results[int(m["n"]) - 1]
        assert m["loc"] == r.location()
        # code is quoted by its docstring or comments only, and says so
        own = _norm(code_prose(r.text, r.language)) if m["what"] else _unlinked(r.text)
        assert bool(m["what"]) == (not has_prose_text(r))
        for piece in m["quote"].split(" … "):
            assert _norm(piece) in own, piece  # the source's own words
            for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`])", piece):
                sentences += 1
                assert s[-1] in ".!?" and not s.endswith(("**", ":")), s
                assert s.count("**") % 2 == 0 and s.count("`") % 2 == 0, s
                assert _norm(s).rstrip(".:") not in titles, s  # not a heading
                if not m["what"]:
                    assert not any(_norm(s) in c for c in code), s  # not a line of code
                assert not looks_like_code(s), s
    assert 1 <= sentences <= 8


def test_the_top_two_sources_with_prose_are_always_quoted(idx):
    for question in QUESTIONS:
        results = idx.search(question, k=8, min_relevance=0)
        text = ask(idx, question, k=8, min_relevance=0).text
        with_prose = [n for n, r in enumerate(results, 1) if quotable_sentences(r)][:2]
        quoted = {int(m["n"]) for m in map(_CITED.match, text.splitlines()) if m}
        assert set(with_prose) <= quoted, (question, with_prose, quoted)


def test_code_among_the_top_sources_is_quoted_by_its_docstring_or_pointed_to(idx):
    question = "Which function converts feet to metres?"
    results = idx.search(question, k=8, min_relevance=0)
    text = ask(idx, question, k=8, min_relevance=0).text
    top_code = [(n, r) for n, r in enumerate(results[:3], 1) if r.kind == "code"]
    assert top_code, "the sample's unit conversions are code"
    bullets = {int(m["n"]): m for m in map(_CITED.match, text.splitlines()) if m}
    see = next((line for line in text.splitlines() if "see [" in line), "")
    for n, r in top_code:
        if n in bullets:  # its docstring, cited as such with the unit's location
            assert bullets[n]["what"] == "docstring" and bullets[n]["loc"] == r.location()
        else:
            assert f"[{n}] ({r.location()})" in see
    assert any(bullets[n]["name"] == "feet_to_metres" for n in bullets)
    assert "def " not in text and "return " not in text


DRIFT_CODE_Q = ("What does correct_barometric_drift do with readings that have no nearby "
                "barometer sample?")


def test_code_is_answered_from_its_docstring_with_its_location(idx):
    source = (SAMPLE / "tidewater" / "calibration.py").read_text()
    fn = next(n for n in ast.parse(source).body
              if isinstance(n, ast.FunctionDef) and n.name == "correct_barometric_drift")
    docstring = _norm(ast.get_docstring(fn))
    assert docstring.startswith("recompute water levels of a non-vented pressure gauge")
    results = idx.search(DRIFT_CODE_Q, k=8, min_relevance=0)
    (n, unit), = [(n, r) for n, r in enumerate(results, 1)
                  if r.title == "correct_barometric_drift"]
    assert unit.kind == "code" and unit.location() == \
        f"tidewater/calibration.py:{fn.lineno}-{fn.end_lineno}"

    text = ask(idx, DRIFT_CODE_Q, k=8, min_relevance=0).text
    cited = [m for m in map(_CITED.match, text.splitlines()) if m and int(m["n"]) == n]
    assert cited, text
    m = cited[0]
    assert m["loc"] == unit.location() and m["what"] == "docstring"
    assert m["name"] == "correct_barometric_drift"
    pieces = m["quote"].split(" … ")
    assert all(_norm(p) in docstring for p in pieces)
    assert any("no nearby barometer sample" in _norm(p) for p in pieces)
    # no line of code, of this unit or any other retrieved one, is quoted
    for line in text.splitlines():
        assert not line.lstrip("- ").startswith(("def ", "return ", "class ", "for ", "if "))
    answer = _norm(text)
    for r in results:
        if r.kind == "code":
            assert not [c for c in _code_lines(r.text) if c in answer], r.location()


def test_the_barometric_drift_answer_holds_the_procedure(idx):
    text = ask(idx, QUESTIONS[0], min_relevance=0).text.lower()
    assert "barometer" in text and "non-vented" in text
    assert "impl" not in text and "sampler" not in text


def test_an_llm_failure_falls_back_to_the_quoted_answer(idx):
    def boom(prompt):
        raise RuntimeError("model down")

    ans = ask(idx, QUESTIONS[0], llm=boom, min_relevance=0)
    assert ans.extractive and ans.text.startswith("The LLM could not answer")
    assert "no language model wrote" in ans.text.splitlines()[0]
    assert any(_CITED.match(line) for line in ans.text.splitlines())


# --------------------------------------------------------------------------- declining

def test_nothing_above_the_floor_declines_without_asking_the_llm(idx):
    llm = recording_llm()
    ans = ask(idx, QUESTIONS[0], llm=llm, min_relevance=0.99)
    assert llm.calls == []
    assert ans.text.startswith(DECLINE) and ans.text.endswith(").")
    assert re.search(r"closest: \S.*, relevance 0\.\d\d\)\.$", ans.text)
    assert ans.sources == [] and ans.extractive  # no model wrote it
    assert any("no LLM asked" in n for n in ans.trace["notes"])


def test_nothing_above_the_floor_declines_offline_too(idx):
    results = idx.search(NOT_IN_SAMPLE, min_relevance=0.99)
    assert not results and results.below
    ans = ask(idx, NOT_IN_SAMPLE, min_relevance=0.99)
    assert ans.text == (f"{DECLINE}{results.below[0].location()}, "
                        f"relevance {results.below[0].relevance:.2f}).")
    assert "no passages" in ans.reasoning and "closest" in ans.reasoning


def test_ask_stream_declines_without_asking_the_llm(idx):
    llm = recording_llm()
    events = list(ask_stream(idx, QUESTIONS[0], llm=llm, min_relevance=0.99))
    assert [e for e, _ in events] == ["sources", "delta", "done"]
    assert llm.calls == []
    assert events[1][1].startswith(DECLINE) and events[2][1].text == events[1][1]


def test_an_llm_is_still_asked_when_something_is_relevant(idx):
    llm = recording_llm()
    ans = ask(idx, QUESTIONS[0], llm=llm, min_relevance=0)
    assert len(llm.calls) == 1 and ans.text == "An answer from the context [1]."
    events = list(ask_stream(idx, QUESTIONS[0], llm=llm, min_relevance=0))
    assert len(llm.calls) == 2 and events[-1][1].text == "An answer from the context [1]."


# --------------------------------------------------------------------------- the splitter

def test_structure_is_never_a_sentence():
    text = """# Calibration

Tidewater offers two tools for it. The `Calibrator` class matches a gauge to a
reference record, and `correct_barometric_drift` removes the weather.

    reference = scale × level + offset

```rust
impl<S: Source> Sampler<S> {
    pub fn new(source: S) -> Self { Self { source } }
}
```

| Option | Meaning |
| --- | --- |
| `smoothing_window` | Number of samples in the moving average. |

<table><tr><td>Kelpie PT-12</td></tr></table>

- **Drift of several centimetres per year.** Pressure sensors drift as their
  diaphragm ages; recalibrate at every service visit.
- Pass the barometer readings as follows:

Field log
=========

Replaced the desiccant cartridge on the barometer housing today.
impl<S: Source> Sampler<S> {
def correct(series): return series
"""
    assert prose_sentences(text, ["Calibration"]) == [
        "Tidewater offers two tools for it.",
        "The `Calibrator` class matches a gauge to a reference record, and "
        "`correct_barometric_drift` removes the weather.",
        "Pressure sensors drift as their diaphragm ages; recalibrate at every service visit.",
        "Replaced the desiccant cartridge on the barometer housing today.",
    ]


def test_an_html_section_title_on_its_own_line_is_not_quoted():
    text = "Upgrading from 0.4.1\nNothing to do: upgrade with pip install -U tidewater."
    assert prose_sentences(text, ["Upgrading from 0.4.1"]) == [
        "Nothing to do: upgrade with pip install -U tidewater."]
    assert prose_sentences("See [the guide](docs/guide.md#setup) before you start.") == [
        "See the guide before you start."]
