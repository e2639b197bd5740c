"""Tests for stages.parse.chunking.split_text and the chunk children that
stages.parse.finalize adds to long sections."""

from __future__ import annotations

import json

import pytest

from strata.core.tokens import estimate_tokens
from strata.stages.parse.chunking import split_text
from strata.stages.parse.finalize import ParseSettings, finalize
from strata.stages.parse.markdown import parse_markdown


def _paragraph(i: int, words: int = 40) -> str:
    return " ".join(f"p{i}w{j}" for j in range(words)) + "."


def test_estimate_tokens_counts_words_and_punctuation():
    assert estimate_tokens("") == 0
    assert estimate_tokens("hello world") == 2
    assert estimate_tokens("don't stop.") == 5  # don ' t stop .
    assert estimate_tokens("a, b; c!") == 6


def test_text_under_budget_is_returned_unchanged():
    text = "Short paragraph one.\n\nShort paragraph two.\n"
    assert split_text(text, 200) == [text]
    exact = " ".join(["w"] * 50)
    assert split_text(exact, 50) == [exact]


def test_long_multi_paragraph_text_packs_paragraphs_under_budget():
    paras = [_paragraph(i) for i in range(20)]  # 41 estimated tokens each
    text = "\n\n".join(paras)
    chunks = split_text(text, 100)
    assert len(chunks) == 10  # two paragraphs per chunk
    assert all(estimate_tokens(c) <= 100 for c in chunks)
    assert chunks[0] == paras[0] + "\n\n" + paras[1]
    assert text.split() == " ".join(chunks).split()


def test_paragraphs_are_never_cut_when_they_fit():
    paras = [_paragraph(i, words) for i, words in enumerate([10, 70, 30, 90, 5, 60, 45])]
    chunks = split_text("\n\n\n".join(paras), 100)
    assert all(estimate_tokens(c) <= 100 for c in chunks)
    pieces = [p for c in chunks for p in c.split("\n\n")]
    assert pieces == paras


def test_huge_paragraph_without_blank_lines_is_split_by_sentences():
    sentences = [f"Sentence number {i} says something about topic {i % 7}." for i in range(200)]
    text = " ".join(sentences)
    assert "\n\n" not in text
    chunks = split_text(text, 60)
    assert len(chunks) > 10
    assert all(estimate_tokens(c) <= 60 for c in chunks)
    # every chunk boundary is a sentence boundary
    pieces = [p for c in chunks for p in c.split("\n\n")]
    assert pieces == sentences
    assert " ".join(chunks).split() == text.split()


def test_sentence_split_keeps_closing_quotes_and_brackets():
    unit = 'He said "stop now." Then (he left.) Was it [really?] Done! '
    text = unit * 40
    chunks = split_text(text, 50)
    assert len(chunks) > 1
    assert all(estimate_tokens(c) <= 50 for c in chunks)
    assert " ".join(chunks).split() == text.split()
    assert chunks[0].startswith('He said "stop now."\n\nThen (he left.)\n\nWas it [really?]')


def test_single_sentence_of_50k_words_is_split_by_words():
    words = [f"w{i}" for i in range(50_000)]
    text = " ".join(words)
    chunks = split_text(text, 200)
    # 0.7 × budget = 140 words per run: 357 full runs, and the 20-word rest
    # is packed with the last one
    assert len(chunks) == 357
    assert [len(c.split()) for c in chunks[-2:]] == [140, 160]
    assert all(estimate_tokens(c) <= 200 for c in chunks)
    assert " ".join(chunks).split() == words


def test_word_runs_longer_than_budget_are_the_only_overflow():
    # one "word" of many estimated tokens cannot be cut further
    blob = "-".join(["x"] * 300)
    text = f"Intro words here. {blob} And an ending."
    chunks = split_text(text, 50)
    assert " ".join(chunks).split() == text.split()
    over = [c for c in chunks if estimate_tokens(c) > 50]
    assert len(over) == 1 and blob in over[0].split()
    assert chunks[0] == "Intro words here."


@pytest.mark.parametrize("budget", [20, 64, 200])
def test_mixed_text_preserves_every_word_in_order(budget):
    parts = []
    for i in range(30):
        if i % 5 == 0:
            parts.append(" ".join(f"Long{i} sentence {j}." for j in range(60)))
        else:
            parts.append(_paragraph(i, 12 + i))
    text = "\n\n".join(parts)
    chunks = split_text(text, budget)
    assert " ".join(chunks).split() == text.split()
    assert all(estimate_tokens(c) <= budget for c in chunks)


# ---------------------------------------------------------------- finalize


def _long_section_doc() -> tuple[str, list[str]]:
    paras = [_paragraph(i) for i in range(12)]
    text = ("# Title\n\nShort intro.\n\n## Long\n\n" + "\n\n".join(paras)
            + "\n\n## After\n\nTail text.\n")
    return text, paras


def test_finalize_gives_long_sections_chunk_children():
    text, paras = _long_section_doc()
    pf = parse_markdown(text, "doc.md")
    rows, refs = finalize(pf, "c", "doc.md", text, ParseSettings(chunk_tokens=100))
    assert refs == []
    by_path = {r["node_path"]: r for r in rows}
    long = by_path["doc.md#title/long"]
    assert long["kind"] == "section"
    chunks = [r for r in rows if r["parent_id"] == long["node_id"]]
    assert [c["kind"] for c in chunks] == ["chunk"] * 6
    assert [c["node_path"] for c in chunks] == [f"doc.md#title/long/chunk-{i}"
                                                for i in range(1, 7)]
    assert [c["title"] for c in chunks] == [f"Long (part {i}/6)" for i in range(1, 7)]
    assert [c["ordinal"] for c in chunks] == list(range(6))
    assert all(c["depth"] == long["depth"] + 1 for c in chunks)

    assert long["embedded"] is False
    assert all(c["embedded"] is True for c in chunks)
    # short sections are not chunked and stay embedded
    for short in ("doc.md#title", "doc.md#title/after"):
        assert by_path[short]["embedded"] is True
        assert not any(r["parent_id"] == by_path[short]["node_id"] and r["kind"] == "chunk"
                       for r in rows)
    assert not any(r["kind"] == "chunk" and r["parent_id"] != long["node_id"] for r in rows)

    # all of the section's words are in its chunks, in order
    assert " ".join(c["text"] for c in chunks).split() == long["text"].split()
    for p in paras:
        assert sum(p in c["text"] for c in chunks) == 1


def test_chunk_line_ranges_are_inside_the_section_and_increasing():
    text, paras = _long_section_doc()
    lines = text.splitlines()
    pf = parse_markdown(text, "doc.md")
    rows, _ = finalize(pf, "c", "doc.md", text, ParseSettings(chunk_tokens=100))
    long = next(r for r in rows if r["node_path"] == "doc.md#title/long")
    chunks = [r for r in rows if r["parent_id"] == long["node_id"]]
    assert (long["start_line"], long["end_line"]) == (5, 30)
    ranges = [(c["start_line"], c["end_line"]) for c in chunks]
    for start, end in ranges:
        assert long["start_line"] <= start <= end <= long["end_line"]
    starts = [s for s, _ in ranges]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    for (_, end), (nxt, _) in zip(ranges, ranges[1:]):
        assert end < nxt
    # each chunk's range holds the paragraphs of its text
    for c in chunks:
        span = "\n".join(lines[c["start_line"] - 1:c["end_line"]])
        for p in paras:
            if p in c["text"]:
                assert p in span


def test_finalize_does_not_chunk_python_files():
    body = "\n\n".join(f"# {_paragraph(i)}\nx{i} = {i}" for i in range(30))
    from strata.stages.parse.python_code import parse_python

    pf = parse_python(body, "m.py", "m")
    rows, _ = finalize(pf, "c", "m.py", body, ParseSettings(chunk_tokens=50))
    assert estimate_tokens(rows[0]["text"]) > 50
    assert [r["kind"] for r in rows] == ["file"]
    assert json.loads(rows[0]["attrs"])["is_package"] is False
