"""The answer given without a language model: the best passages, quoted.

When no LLM is configured (or it fails), :func:`retrieval.answer.ask` cannot
write an answer, so it shows the reader the retrieved text that best matches
the question, word for word, with citations. That is only honest if what is
quoted reads as the sources' own prose: a Markdown heading, a line of code, a
table row or a bold list label ending in ``**`` quoted "as a sentence" looks
like an answer and says nothing. So this module

- cuts a passage's text into *whole prose sentences* using its structure
  (:func:`prose_sentences`): headings, fenced and indented code, table rows,
  HTML tag lines, figure captions and lines that read as code are dropped
  before sentences are split, and a sentence must end like one, be long enough
  to say something and have balanced emphasis, backticks and brackets;
- picks, per source, the sentences that share the most question words
  (stemmed, each word weighted by how rare it is among the candidate
  sentences), always quoting the top two sources that have prose, because the
  ranking put them first and the reader should see them
  (:func:`extractive_quotes`);
- quotes code by its prose only: the docstring of a function, class or
  module, else its comments (:func:`retrieval.code_prose.code_prose`), cited
  with the code unit's location and said to be its docstring or comment, so
  that a code corpus can be answered from what its authors wrote about it
  while no line of code is quoted as a sentence;
- renders them in source order, one bullet per source with its ``[n]`` and
  location, and points to code without docstring or comments, tables and
  figures among the top sources ("see [n] (path:lines)") instead of quoting
  them as prose (:func:`extractive_text`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from strata.core.lexical.bm25 import STOPWORDS
from strata.retrieval.code_prose import code_prose, python_docstring

MAX_SENTENCES = 5  # a readable answer: the top two sources plus a few more sentences
MIN_SENTENCES = 3
PER_SOURCE = 2  # sentences quoted from one source at most
ALWAYS_QUOTED = 2  # the first sources with prose, quoted whatever their overlap
SEE_TOP = 3  # passages without prose (code, tables) among this many are pointed to
EXTRA_SHARE = 0.5  # a further sentence must score this share of the best one

# results whose text is not prose: code, tables, image captions, graph entities
NO_PROSE_KINDS = frozenset({"code", "table", "image", "entity", "fact"})
# of those, the ones whose prose may still be quoted: code, by its docstring and comments
NO_CODE_PROSE_KINDS = NO_PROSE_KINDS - {"code"}
PROSE_LANGUAGES = frozenset({"", "text", "txt", "plaintext", "markdown", "md", "rst", "html"})

_WORD = re.compile(r"[A-Za-z0-9_]+")

_FENCE = re.compile(r"^(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^(?:[-*+•]|\d+[.)])\s+")
_UNDERLINE = re.compile(r"^([=\-~^*#+`:.'\"_])\1{2,}$")  # RST heading underline, rule
_HTML_LINE = re.compile(r"^</?[A-Za-z!][^>]*>.*>?$|^<!--")
_CAPTION = re.compile(r"^(?:figure|fig\.|table|listing)\s*\d+[.:]", re.IGNORECASE)
_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_INLINE_TAG = re.compile(r"</?(?:a|b|i|u|em|strong|code|kbd|sup|sub|span|small|mark|br|del|ins)"
                         r"\b[^>]*>")  # HTML markup, not ArkTS's <Text>
# a line that reads as code: a definition or statement keyword at its start,
# an assignment, a call standing alone, or code punctuation
_CODE_START = re.compile(
    r"^(?:def|async def|class|fn|pub|impl|func|struct|enum|trait|interface|type|let|var|const|"
    r"import|from\s+\S+\s+import|package|use|mod|return|yield|raise|if|for|while|elif|else|"
    r"try|except|catch|switch|case|#include|#define|@\w+)\b[^.!?]*$|^(?:\$|>>>|\.\.\.)\s")
_ASSIGN = re.compile(r"^[A-Za-z_][\w.\[\]'\"]*\s*(?:[-+*/|&]|:\s*\w+\s*)?=(?!=)")
_CALL = re.compile(r"^[\w.]+\(.*\)[;,]?$")
_CODE_END = ("{", "}", ";", "):", "=>", "->", "\\", "{}", "[", "(")
_CODE_ANY = ("=>", "::", "impl ", "impl<", "def ", "fn ", "func ", "){", ") {", "};", "!=", "==",
             "&&", "||", "+=", "/*", "*/")
# how a sentence may start: a capital, a digit, markup, or an identifier ("fill_gaps
# no longer ..."); a lower-case word is the tail of a sentence cut by structure
_STARTS = re.compile(r"^(?:[^a-z]|[a-z]\w*[_.(])")
# the end of a sentence: terminal punctuation, then closing marks, then a space
# and what starts the next one
_SPLIT = re.compile(r"([.!?](?:\*\*|__|[)\]\"'’”*_])*)\s+(?=[A-Z0-9`\"'(\[*_“‘\\@])")
_ENDS = re.compile(r"[.!?](?:[)\]\"'’”_]|\*(?!\*))*$")


def words(text: str) -> set[str]:
    """The content words of ``text``, lower-cased and stemmed."""
    return {stem(w) for w in (m.lower() for m in _WORD.findall(text))
            if len(w) > 2 and w not in STOPWORDS}


def stem(w: str) -> str:
    for suf in ("ing", "ed", "es", "s"):
        if len(w) > len(suf) + 3 and w.endswith(suf):
            return w[: -len(suf)]
    return w


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def looks_like_code(line: str, starts_block: bool = True) -> bool:
    """True for a line that reads as code rather than prose (inline code spans
    in prose are ignored: "`fn` returns" is prose). Inside a paragraph
    (``starts_block`` false) only code punctuation counts: a wrapped prose
    line may well start with "for" or "use"."""
    s = _CODE_SPAN.sub("`x`", line.strip())
    if not s:
        return False
    if s.endswith(_CODE_END) or s.startswith(("//", "/*", "# ", "$ ", ">>> ")) \
            or any(tok in s for tok in _CODE_ANY):
        return True
    if not starts_block:
        return False
    if _CODE_START.match(s) or _ASSIGN.match(s) or _CALL.match(s):
        return True
    visible = [c for c in s if not c.isspace()]
    return sum(c.isalpha() for c in visible) < 0.5 * len(visible)


def _paragraphs(text: str, titles: frozenset[str]) -> list[str]:
    """The prose paragraphs of ``text`` (list items count as paragraphs), with
    everything structural left out."""
    out: list[str] = []
    cur: list[str] = []

    def flush():
        if cur:
            out.append(" ".join(cur))
            cur.clear()

    fence = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if fence:
            if line.startswith(fence):
                fence = None
            continue
        m = _FENCE.match(line)
        if m:
            flush()
            fence = m.group(1)
            continue
        if not line:
            flush()
            continue
        if _UNDERLINE.match(line):  # an RST heading's underline: the line before was its title
            if len(cur) == 1:
                cur.clear()
            flush()
            continue
        if not cur and raw.startswith(("\t", "    ")):
            flush()  # an indented block (Markdown or RST literal): code
            continue
        if (line.startswith(("#", "|", "![", ">>>")) or _HTML_LINE.match(line)
                or _norm(_clean(line)).strip(" :.") in titles
                or looks_like_code(line, starts_block=not cur or bool(_LIST_ITEM.match(line)))):
            flush()
            continue
        item = _LIST_ITEM.match(line)
        if item:
            flush()
            line = line[item.end():]
        line = line.lstrip("> ").strip()
        if line:
            cur.append(line)
    flush()
    return out


def _clean(sentence: str) -> str:
    """A sentence as a reader should see it: links as their text, inline tags
    and Markdown escapes dropped, whitespace collapsed."""
    s = _LINK.sub(r"\1", sentence)
    s = _INLINE_TAG.sub("", s)
    s = re.sub(r"\\([@\\`*_{}\[\]()#+\-.!<>|])", r"\1", s)
    return " ".join(s.split())


def _whole(s: str, titles: frozenset[str]) -> bool:
    """Whether ``s`` is a whole prose sentence worth quoting."""
    if not 25 <= len(s) <= 400 or len(s.split()) < 5:
        return False
    if not _ENDS.search(s) or s.endswith(("**", "__", ":")) or not _STARTS.match(s):
        return False
    if s.count("**") % 2 or s.count("`") % 2 or s.count("(") != s.count(")"):
        return False
    if _CAPTION.match(s) or _norm(s).rstrip(".:") in titles or looks_like_code(s):
        return False
    return sum(c.isalpha() for c in s) >= 0.6 * len(s.replace(" ", ""))


def _numbered(text: str, titles=()) -> list[tuple[int, str]]:
    """The whole prose sentences of ``text`` with their positions, counted so
    that two sentences are adjacent only when nothing (a dropped fragment, a
    paragraph break) came between them."""
    skip = frozenset(_norm(_clean(t)).strip(" :.") for t in titles if t)
    out, pos = [], 0
    for para in _paragraphs(text, skip):
        for part in _SPLIT.sub("\\1\n", para).split("\n"):
            s = _clean(part)
            if _whole(s, skip):
                out.append((pos, s))
            pos += 1
        pos += 1
    return out


def prose_sentences(text: str, titles=()) -> list[str]:
    """The whole prose sentences of a passage's text, in order, as they will be
    quoted (links shown as their text). ``titles``: headings to leave out even
    where the text does not mark them (an HTML or PDF section's first line is
    its title, without a ``#``)."""
    return [s for _, s in _numbered(text, titles)]


def has_prose_text(r) -> bool:
    """Whether a result's text may be quoted as prose at all (code, tables,
    captions and the text of code files may not)."""
    return r.kind not in NO_PROSE_KINDS and (r.language or "").lower() in PROSE_LANGUAGES


def _titles(r) -> list[str]:
    return [r.title, *(r.breadcrumb or "").split(" > ")]


def quotable_text(r) -> str:
    """The part of a result's text that may be quoted as prose: all of it for
    prose; for code (a code unit, or a file or chunk in a programming
    language), its docstring or comments only; nothing for tables, captions
    and graph entities."""
    if has_prose_text(r):
        return r.text or ""
    if r.kind in NO_CODE_PROSE_KINDS:
        return ""
    return code_prose(r.text or "", r.language)


def quotable_sentences(r) -> list[tuple[int, str]]:
    """The whole prose sentences a result may be quoted by, with their
    positions (:func:`quotable_text`, cut by :func:`prose_sentences`)."""
    return _numbered(quotable_text(r), _titles(r))


def code_prose_label(r) -> str:
    """What a quote from a code result is, for its citation: its docstring or
    its comment (with the unit's name); '' for a prose result."""
    if has_prose_text(r):
        return ""
    name = r.title or (r.breadcrumb or "").split(" > ")[-1]
    what = "docstring" if (r.language or "").lower() in ("python", "py") \
        and python_docstring(r.text or "") else "comment"
    return f"{what} of {name}" if name else what


@dataclass
class Quote:
    """A sentence chosen for the answer, with what places and ranks it."""

    n: int  # the result's 1-based number, as cited
    pos: int  # the sentence's position in the result's text
    text: str
    score: float


def _candidates(results) -> list[list[Quote]]:
    """Per result, its prose sentences not already quoted by a better-ranked one."""
    seen: set[str] = set()
    out = []
    for n, r in enumerate(results, 1):
        quotes = []
        for pos, s in quotable_sentences(r):
            key = _norm(s)
            if key not in seen:
                seen.add(key)
                quotes.append(Quote(n, pos, s, 0.0))
        out.append(quotes)
    return out


def _score(question: str, per_result: list[list[Quote]]) -> None:
    """Score each sentence by the question words it shares, each weighted by
    its inverse frequency among the candidates (a word every sentence shares,
    the corpus's own name, says little about which one answers)."""
    q = words(question)
    bags = [[words(x.text) for x in quotes] for quotes in per_result]
    total = sum(len(b) for b in bags) or 1
    df = {w: sum(w in bag for b in bags for bag in b) for w in q}
    idf = {w: math.log(1 + total / (1 + df[w])) for w in q}
    for quotes, b in zip(per_result, bags):
        for x, bag in zip(quotes, b):
            shared = q & bag
            # shared weight, a little less for a long sentence that shares it by bulk
            x.score = sum(idf[w] for w in shared) / (1 + 0.01 * len(bag)) if shared else 0.0


def extractive_quotes(question: str, results, max_sentences: int = MAX_SENTENCES) -> list[Quote]:
    """The sentences to quote, in source order: the best-matching sentence of
    each of the first two sources that have prose, then the best-matching
    further sentences (at most two per source) up to ``max_sentences``."""
    per_result = _candidates(results)
    _score(question, per_result)
    best_of = lambda quotes: max(quotes, key=lambda x: (x.score, -x.pos))  # noqa: E731
    chosen: list[Quote] = [best_of(qs) for qs in per_result if qs][:ALWAYS_QUOTED]
    pool = sorted((x for qs in per_result for x in qs if x.score > 0 and x not in chosen),
                  key=lambda x: (-x.score, x.n, x.pos))
    top = max((x.score for x in pool), default=0.0)
    count = {x.n: 1 for x in chosen}
    for x in pool:
        if len(chosen) >= max_sentences:
            break
        if count.get(x.n, 0) >= PER_SOURCE:
            continue
        if x.score < EXTRA_SHARE * top and len(chosen) >= MIN_SENTENCES:
            break
        chosen.append(x)
        count[x.n] = count.get(x.n, 0) + 1
    return sorted(chosen, key=lambda x: (x.n, x.pos))


def extractive_text(question: str, results, lead: str) -> str:
    """The extractive answer: ``lead``, then one bullet per quoted source (its
    sentences, ``[n]`` and location; for code, also that they are its
    docstring or comment), then a pointer to the top sources that hold no
    prose (code without either, tables, figures). Without any prose to quote,
    the passages themselves are listed with their citations."""
    quotes = extractive_quotes(question, results)
    lines = [lead, ""]
    if not quotes:
        lines.append("None of the retrieved passages holds prose to quote; they are:")
        for n, r in enumerate(results[:MAX_SENTENCES], 1):
            name = r.title or (r.breadcrumb or "").split(" > ")[-1]
            kind = r.kind if has_prose_text(r) or r.kind in NO_PROSE_KINDS else "code"
            lines.append(f"- [{n}] {r.location()}: {name} ({kind})")
        return "\n".join(lines)
    by_source: dict[int, list[Quote]] = {}
    for x in quotes:
        by_source.setdefault(x.n, []).append(x)
    for n, xs in by_source.items():
        parts = [xs[0].text]
        for prev, x in zip(xs, xs[1:]):
            parts.append(x.text if x.pos == prev.pos + 1 else f"… {x.text}")
        r = results[n - 1]
        label = code_prose_label(r)
        lines.append(f"- {' '.join(parts)} [{n}] ({r.location()}{', ' + label if label else ''})")
    see = [f"[{n}] ({r.location()})" for n, r in enumerate(results[:SEE_TOP], 1)
           if n not in by_source and not (has_prose_text(r) and quotable_sentences(r))]
    if see:
        lines += ["", "Passages without prose to quote (code, tables, figures): see "
                  + ", ".join(see) + "."]
    return "\n".join(lines)
