"""The offline OpenIE heuristic: entities and triples from surface patterns.

A *heuristic stand-in, not an LLM and not a real OpenIE system*: what a build
gets with no model configured. Deterministic, linear in the text length, no
model or data download, and everything it returns is literally present in the
text (or the unit's title). ``python -m benchmarks.openie_quality`` scores it
against GPT-3.5's extraction of the MuSiQue passages; the choices below were
made from that benchmark's errors, each a general rule of English text rather
than a list of the benchmark's names.

**Entities** are mentions found in one pass per sentence:

- the unit's title (a Wikipedia-style "Name (qualifier)" title gives "Name",
  and the qualifier too when it is capitalised);
- `backticked` identifiers, snake_case names and ``calls()``, quoted terms,
  dates, years, and numbers with units;
- runs of capitalised words, joined by whitespace, by "&" and by name particles
  ("de", "van", "bin"), with initials and abbreviations inside them ("G. Stanley
  Hall", "U.S."), and through "of"/"for" only when the left part can head such a
  name ("University of Copenhagen", "British Journal of Aesthetics", "Bishop of
  Rome", "Manuel I of Portugal" — but "Andrew Johnson" and "Democratic Party"
  stay two). A leading office ("President Michelle Bachelet") is dropped when a
  name of two or more words follows. Not entities: a single capitalised word
  that starts a sentence, function words ("However", "During"), honorifics on
  their own ("Sir", "Jr"), and runs of more than eight capitalised words
  (headings and table rows run together);
- a one-word mention that is the last word of an earlier name of a few words
  ("Hall" after "G. Stanley Hall") is that name, not a new entity.

**Triples** come from a shallow reading of each clause (sentences split at ";"):

- the clause's *subject* is the mention it opens with (after a leading
  "In 1990," adverbial and an article); a clause opening with "he"/"she"/"his"/
  "her" takes the last explicit subject; one opening with another pronoun or a
  description ("It", "The journal", "This theory") takes the unit's topic (its
  title) — how encyclopaedic and documentation text refers back to its subject;
- each later mention is an *object*: after a verb ("is", "was founded by",
  "published", "known as"; a closed list of auxiliaries and irregular verbs plus
  "-ed"/"-ing" forms), the triple is (subject, verb phrase, object), the verb
  phrase running from the last verb (with the adverbs before it) to the object;
  after "who"/"which" the head is the mention just before; a list ("A, B and
  C") repeats the previous head and relation; a prepositional link without a
  verb ("Solovej from University of Copenhagen", "Vatican City, an enclave within
  Rome") attaches to the mention just before, except a date or number, which
  attaches to the subject with the last verb ("founded by X in 1990" → "founded
  in"); anything else is not a triple;
- "X is a/the NOUN PHRASE" (not followed by "of") also gives (X, is, noun
  phrase): "New York City Waterfalls is a public art project" → (…, is, public
  art project).

At most 30 entities and 50 triples per unit; relations have at most 6 words.
Bump :data:`OFFLINE_VERSION` with any change here: cached offline results (and
the ``facts`` asset's code version) are keyed by it.

Over 600 lines because a third of it is the closed word lists its rules share.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from collections.abc import Iterable

from strata.stages.enrich.openie_text import OpenIEOut, Triple, clean, normalize, unit_title

__all__ = ["OFFLINE_VERSION", "offline_openie", "MAX_ENTITIES", "MAX_TRIPLES",
           "MAX_RELATION_WORDS"]

# Bump when offline_openie() or validate() change: the offline cache is keyed by it.
OFFLINE_VERSION = "2"
MAX_ENTITIES = 30  # per unit
MAX_TRIPLES = 50  # per unit
MAX_RELATION_WORDS = 6
MAX_DESCRIPTION = 120
MAX_NAME_WORDS = 8  # a longer capitalised run is a heading or a table row, not a name
MAX_TITLE_CHARS = 80

# --------------------------------------------------------------------------- word lists

_MONTHS = ("January|February|March|April|May|June|July|August|September|October|"
           "November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
_UNITS = ("%|percent|kg|km|km2|km²|cm|mm|mi|ft|m|mph|km/h|ms|sec|seconds?|min|minutes?|"
          "hours?|days?|weeks?|months?|years?|GB|MB|KB|TB|GiB|MiB|KiB|Hz|kHz|MHz|GHz|"
          "V|W|kW|MW|GW|°C|°F|K|hPa|Pa|kPa|bar|dB|px|pt|people|inhabitants|acres|hectares|"
          "tons?|tonnes?|miles|metres|meters|feet|dollars|euros|USD|EUR")
# One pass per sentence; each alternative is linear (no nested quantifiers).
_PATTERNS = re.compile(
    r"`(?P<code>[^`\n]{1,80})`"
    r"|\"(?P<dq>[^\"\n]{2,80})\""
    r"|\u201c(?P<cq>[^\u201d\n]{2,80})\u201d"
    rf"|(?P<date>\b\d{{1,2}}\s+(?:{_MONTHS})\.?(?:\s+\d{{3,4}})?\b"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{3,4}}\b"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{3,4}}\b)"
    rf"|(?P<qty>(?<![\w.])\d+(?:[.,]\d+)*\s?(?:{_UNITS})(?![\w]))"
    r"|(?P<year>(?<![\w.,])(?:1[0-9]{3}|20[0-9]{2})s?(?!\w)(?![.,]\d))"
    r"|(?P<ident>\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b|\b[A-Za-z_][\w.]*\(\))"
)
_TIME_KINDS = frozenset({"date", "qty", "year"})
_ABBREVS = "St|Mt|Ft|Jr|Sr|Dr|Mr|Mrs|Ms|Prof|Rev|Gen|Col|Capt|Lt|Sgt|Gov|Sen|Rep|Hon|No|Co|Inc|Ltd|Corp"
# A word; initials and dotted abbreviations are one token ("U.S.", "G.", "Jr.").
_TOKEN = re.compile(
    rf"(?:[A-Z]\.){{2,}}|[A-Z]\.(?=\s+[A-Z])|\b(?:{_ABBREVS})\.(?=\s)"
    r"|[^\W_](?:[\w\-]|['\u2019](?=\w))*")
_WORD = re.compile(r"[^\W_](?:[\w\-]|['\u2019](?=\w))*")
# joined inside a name without restriction
_PARTICLES = frozenset("de la le du del della da van von der den y di al bin ibn the upon".split())
# joined only after a word that can head an "X of Y" name
_OF = frozenset({"of", "for"})
_OF_HEADS = frozenset("""
academy act acts administration age agency alliance archbishop archdiocese army assembly
association authority band bank basilica battle bay bishop board book brotherhood bureau
cape castle cathedral center centre chamber championship championships chancellor chapel
charter church circle city club coast college commander commission committee commonwealth
companion company confederation congress constitution convention corporation council count
countess county court crown cup daughters declaration department diocese director district
division duchess duke earl emperor empire empress exchange faculty federation festival force
forces foundation friends fund gallery games garden gardens general governor guard gulf hall
harbour harbor head history hospital house institute institution isle isles journal judge
king kingdom knight knights lady lake land league legion library lord lords marquess mayor
member minister ministry monastery mount mountains museum nation navy office officer order
orders palace parliament party patriarch port president prince princess province queen
republic review revolution river school sea secretary senate siege society sons state states
station street synod temple territory theatre theater tower treaty tribunal trust union
university valley viscount war wars
""".split())
# a year before one of these is part of the name ("1952 Summer Olympics")
_EVENTS = frozenset("olympics games cup championship championships election elections festival "
                    "awards open tournament season series census olympiad paralympics expo "
                    "grand prix marathon classic final finals".split())
_ROMAN = re.compile(r"^(?:[IVX]{1,5})$")
# offices dropped before a name of two or more words ("President Michelle Bachelet")
_OFFICES = frozenset("""
president senator governor secretary minister chancellor mayor judge justice representative
ambassador commissioner director editor coach chairman chairwoman ceo professor prof dr mr mrs
ms miss congressman congresswoman councillor councilman premier
""".split())
_HONORIFICS = frozenset("sir dame mr mrs ms dr st jr sr hon rev mt ft inc ltd co corp no "
                        "prof gen col capt lt sgt gov sen rep".split())
_CAP_STOP = frozenset((
    "The A An This That These Those It Its He She His Her Hers They Them Their We Our You Your "
    "I In On At For From By With As To Of And Or But If When While After Before During Since "
    "Although Though However Because So Then There Here Where What Which Who Whom Whose How Why "
    "Is Are Was Were Be Been Has Have Had Do Does Did Not No Yes All Some Any Each Every Both "
    "Many Most Such Other Another One Two Three First Second Also Only Even Later Today Use Using "
    "See Note Example Returns Return Default True False None Null Following Despite Under Upon "
    "Between Among Unlike Like According Along Within Without Throughout Several Few Until Once "
    "Meanwhile Originally Currently Eventually Moreover Furthermore Additionally Thus Therefore "
    "Instead Yet Overall Nevertheless Whether Either Neither Over Into Through About Around "
    "Much Whereas Whilst Unless Per Via Including Except "
    "NOTE TIP WARNING CAUTION IMPORTANT TODO FIXME DEPRECATED").split())
_FILLER = frozenset("and or but the a an , ; : which who whom that whose where".split())
_ARTICLES = frozenset("the a an".split())
_DETERMINERS = frozenset("the a an its his her their this that these those".split())
_PERSONAL = frozenset("he she his her him".split())
_REFERRING = frozenset("it its they their them this these those such".split())
_RELATIVE = frozenset("who which whom whose where that".split())
_SUBORDINATE = frozenset("when while whereas because although though if unless until "
                         "after before since".split())
_COORD = frozenset("and or nor & as well along with plus then also both either".split())
_PREPS = frozenset("""
of in on at by for from with to into onto within near under over about against between among
through during after before since until as like via toward towards across along behind beyond
beside besides inside outside upon throughout off per than including
""".split())
_AUX = frozenset("is are was were be been being am has have had having will would shall should "
                 "can could may might must do does did".split())
_BE = frozenset("is are was were".split())
_VERBS = frozenset("""
began begun became become becomes won wrote written made took taken led held ran built bought
sold left met found gave given got went gone came grew grown knew drew spoke broke chose rose
fell kept lost paid said sent spent stood taught thought brought fought sang sung beat struck
drove rode wore hid shot lay laid hung stuck born known shown seen done run put set cut let
read spread sat sought swore wound withdrew overcame overthrew forgave undertook underwent
oversaw includes include contains contain covers cover features stars serves lies lie flows
consists borders hosts refers means plays operates owns produces provides represents uses
remains runs holds leads makes takes gives connects links joins crosses follows describes
depicts tells focuses belongs comprises encompasses surrounds separates forms marks reaches
receives replaces requires supports shares sells starts ends begins creates seeks aims allows
affects causes depends returns stands sits carries covers portrays lists names
""".split())
_NOT_VERBS = frozenset("""
need speed seed bed red shed feed breed creed deed greed hundred indeed bred bled fled sled
sped wed weed steed reed led-by
""".split())
_ADVERBS = frozenset("first also originally later not still currently formerly previously now "
                     "once then jointly officially primarily mainly mostly largely only "
                     "initially subsequently eventually again further".split())


def _verb_rank(word: str) -> int:
    """2 for a finite verb or a participle, 1 for an "-ing" form, 0 otherwise."""
    w = word.lower()
    if w in _AUX or w in _VERBS:
        return 2
    if len(w) > 4 and w.endswith("ed") and w not in _NOT_VERBS and w.isalpha():
        return 2
    if len(w) > 5 and w.endswith("ing") and w.isalpha():
        return 1
    return 0


# --------------------------------------------------------------------------- sentences

_ABBREV = re.compile(r"(?:\b[A-Z]|\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|Prof|vs|etc|e\.g|i\.e|No|Vol|Inc|Ltd|"
                     r"Co|Fig|approx|Mt|Ft|Gen|Col|Capt|Lt|Sgt|Gov|Sen|Rep|Hon|Rev))\.$")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*(?:#|[-*+] |\d+[.)] ))")


def _sentences(text: str) -> list[str]:
    out: list[list[str]] = []  # pieces of each sentence, joined at the end (linear)
    for raw in _SENT_SPLIT.split(text or ""):
        piece = raw.strip()
        if not piece:
            continue
        if out and _ABBREV.search(out[-1][-1][-8:]) and not out[-1][0].startswith("#"):
            out[-1].append(piece)  # "G. Stanley Hall", "e.g. this": not a sentence end
        else:
            out.append([piece])
    joined = (" ".join(parts) for parts in out)
    return [s.lstrip("#").strip() if s.startswith("#") else s for s in joined]


# --------------------------------------------------------------------------- mentions

class Mention(NamedTuple):
    start: int
    end: int
    name: str
    kind: str  # title | code | dq | cq | date | qty | year | ident | name
    possessive: bool = False  # "Hall's": what follows belongs to it, it is no list item


def _is_cap(word: str) -> bool:
    return word[:1].isupper()


def _gap_ok(sentence: str, a: int, b: int) -> bool:
    """Whitespace, "&" ("Thames & Hudson") or a spaced hyphen ("Zeta - Jones")."""
    gap = sentence[a:b]
    return bool(gap) and (gap.isspace() or gap.strip() in ("&", "-") and gap[0].isspace())


def _may_join_through(run: list[tuple[int, int, str]], connectors: list[str]) -> bool:
    """Whether a run of capitalised words continues through these lowercase
    words: name particles always ("Ludwig van Beethoven", "Rio de la Plata");
    "of"/"for" after one word ("Bishop of Rome"), a head noun ("British Journal
    of Aesthetics") or a regnal number ("Manuel I of Portugal"); after other
    names only without "the" ("National Register of Historic Places", but
    "Andrew Johnson" of "the Democratic Party")."""
    low = [c.lower() for c in connectors]
    if not any(c in _OF for c in low):
        return True
    last = run[-1][2]
    if len(run) == 1 or last.lower() in _OF_HEADS or _ROMAN.match(last):
        return True
    return "the" not in low


def _cap_spans(sentence: str) -> Iterable[tuple[int, int]]:
    """Names: runs of capitalised words (see the module docstring)."""
    words = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(sentence)]
    n = len(words)
    i = 0
    while i < n:
        if not _is_cap(words[i][2]):
            i += 1
            continue
        j = i  # last capitalised word in the run
        k = i + 1
        while k < n and _gap_ok(sentence, words[k - 1][1], words[k][0]):
            if _is_cap(words[k][2]):
                j = k
                k += 1
                continue
            if words[k][2].isdigit() and len(words[k][2]) <= 3 and not words[j][2][:1].isdigit():
                j = k  # "Billboard Hot 100", "U.S. Route 119"; a run ends at its number
                break
            m = k  # "of", "de la", "of the" inside a name, if a capital follows
            while (m < n and m - k < 2 and words[m][2].lower() in (_PARTICLES | _OF)
                   and m + 1 < n and sentence[words[m][1]:words[m + 1][0]].isspace()):
                m += 1
            if (m > k and m < n and _is_cap(words[m][2])
                    and _may_join_through(words[i:j + 1], [w[2] for w in words[k:m]])):
                k = m
            else:
                break
        run = words[i:j + 1]
        while run and run[0][2] in _CAP_STOP:  # "However", "During"
            run = run[1:]
        run = _without_office(run)
        i = max(j + 1, i + 1)
        if not run or len(run) > MAX_NAME_WORDS:
            continue
        word = run[0][2]
        if len(run) == 1:
            bare = word.rstrip(".").lower()
            acronym = len(word) >= 2 and sum(c.isupper() for c in word) >= 2
            at_start = run[0][0] == words[0][0]
            if bare in _HONORIFICS or len(bare) < 2 or (at_start and not acronym):
                continue
        yield run[0][0], run[-1][1]


def _without_office(run: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """"(American) President Harry S. Truman" → "Harry S. Truman": an office and
    what precedes it go when two or more capitalised words (not "of ...") follow."""
    for t, (_, _, w) in enumerate(run[:-2]):
        if w.rstrip(".").lower() in _OFFICES:
            rest = run[t + 1:]
            if all(_is_cap(x[2]) for x in rest) and rest[0][2].lower() not in _OF_HEADS:
                return rest
    return run


def _mention_name(raw: str) -> str:
    name = clean(raw)
    name = name.strip(" ,;:!?()[]{}")
    if name.endswith(".") and not re.search(r"(?:\b[A-Z]|" + _ABBREVS + r")\.$", name):
        name = name.rstrip(".")
    for suffix in ("'s", "\u2019s"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name.strip()


def _mentions(sentence: str, titles: list[str]) -> list[Mention]:
    cands: list[tuple[int, int, str, int, str]] = []  # start, end, name, priority, kind
    for title in titles:
        for m in re.finditer(re.escape(title).replace(r"\ ", r"\s+"), sentence, re.IGNORECASE):
            cands.append((m.start(), m.end(), title, 0, "title"))
    for m in _PATTERNS.finditer(sentence):
        group = m.lastgroup or ""
        s, e = m.span(group)
        cands.append((s, e, m.group(group), 1, group))
    for s, e in _cap_spans(sentence):
        cands.append((s, e, sentence[s:e], 2, "name"))
    cands.sort(key=lambda c: (c[0], -(c[1] - c[0]), c[3]))
    out: list[Mention] = []
    last_end = -1
    for s, e, name, _, kind in cands:
        if s < last_end:
            continue
        raw = sentence[s:e]
        name = name if kind == "title" else _mention_name(name)
        if len(normalize(name)) >= 2 and (kind not in ("dq", "cq") or _quoted_term(name)):
            if (kind == "name" and out and out[-1].kind == "year" and sentence[out[-1].end:s] == " "
                    and name.split()[-1].lower() in _EVENTS):  # "1952 Summer Olympics"
                s = out.pop().start
                name = sentence[s:e] if name == raw else f"{sentence[s:e - len(raw)]}{name}"
            out.append(Mention(s, e, name, kind, raw.endswith(("'s", "\u2019s"))))
            last_end = e
    return out


def _quoted_term(text: str) -> bool:
    """A quoted name or term, not a quoted remark: at most 8 words, and at most 3
    when it starts in lowercase ("tide offset" yes, "the worst mistake in our
    history" no)."""
    n = len(text.split())
    return n <= 8 and (n <= 3 or not text[:1].islower())


def _titles(title: str) -> tuple[str, list[str]]:
    """The topic and the names the title gives: "The Sun (United Kingdom)" →
    topic "The Sun", names ["The Sun", "United Kingdom"]."""
    t = clean(unit_title(title))
    if len(t) > MAX_TITLE_CHARS or not normalize(t):
        return "", []
    m = re.fullmatch(r"(.+?)\s*\(([^()]+)\)", t)
    if not m or not normalize(m.group(1)):
        return t, [t]
    base, qualifier = m.group(1).strip(), m.group(2).strip()
    names = [base]
    if _is_cap(qualifier) and not qualifier[:1].isdigit() and normalize(qualifier) != normalize(base):
        names.append(qualifier)
    return base, names


# --------------------------------------------------------------------------- relations

def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _trim(words: list[str]) -> list[str]:
    while words and words[0].lower() in _FILLER:
        words = words[1:]
    while words and (words[-1].lower() in _FILLER or words[-1].lower() in _DETERMINERS):
        words = words[:-1]
    return words


def _verb_phrase(words: list[str]) -> tuple[str, str] | None:
    """(relation, verb) from the last verb in ``words`` to their end, with the
    adverbs before it; an auxiliary before a participle stays out ("was founded
    by" → "founded by"). None when there is no verb or the phrase is longer than
    6 words (the object is then seldom the verb's own)."""
    best, rank = -1, 0
    for i, w in enumerate(words):
        r = _verb_rank(w)
        if r and r >= rank:
            best, rank = i, r
    if best < 0:
        return None
    start = best
    while start > 0 and (words[start - 1].lower() in _ADVERBS
                         or words[start - 1].lower().endswith("ly") and len(words[start - 1]) > 4):
        start -= 1
    rel = _trim(words[start:])
    if len(rel) > MAX_RELATION_WORDS:  # "played a prominent role in the history of"
        rel = rel[:1] + rel[-2:] if rel[-1].lower() in _PREPS else []
    if not rel:
        return None
    return " ".join(rel), words[best]


def _prep_phrase(words: list[str]) -> str | None:
    """A short verbless link that starts or ends with a preposition ("from", "an
    enclave within", "on behalf of", "by artist")."""
    rel = _trim(words)
    if not rel or len(rel) > 3 or any(w.lower() in _RELATIVE or w.lower() in _SUBORDINATE
                                      for w in rel):
        return None
    if rel[-1].lower() not in _PREPS and rel[0].lower() not in _PREPS:
        return None
    return " ".join(rel)


_NP_STOP = _PREPS | _RELATIVE | _SUBORDINATE | frozenset("and or but".split())
_HAVE = frozenset("has have had".split())
Word = tuple[int, int, str, bool]  # start, end, word, punctuation before it


def _copula_np(after: list[Word]) -> tuple[str, str, int, int] | None:
    """"is a peer-reviewed journal published ..." → ("is", "peer-reviewed
    journal", start, end), from the words after a clause's subject. The verb is
    "is/was/are/were" (or "has/had") followed by "a/an/the", within the first
    words or after an apposition ("X, also known as Y, is the largest ...");
    the phrase has 1–5 words, ends before a stop word, a verb or punctuation,
    and is not followed by "of" ("the capital of" is left to the relation)."""
    b = None
    for i, w in enumerate(after[:12]):
        lw = w[2].lower()
        if lw in _BE or lw in _HAVE:
            if i == 0 or (w[3] and after[0][3]) or (i <= 2 and not w[3]):
                b = i
            break
        if _verb_rank(w[2]) == 2 and not after[0][3]:
            break  # another verb first: not "X is a ..."
    if b is None:
        return None
    k = b + 1
    while k < len(after) and after[k][2].lower() in _ADVERBS:
        k += 1
    if k >= len(after) or after[k][2].lower() not in _ARTICLES or after[k][3]:
        return None
    k += 1
    np: list[Word] = []
    while k < len(after) and len(np) <= 5:
        w = after[k]
        if w[2].lower() in _NP_STOP or _verb_rank(w[2]) == 2 or w[2].lower() in _ARTICLES \
                or (np and w[3]):
            break
        np.append(w)
        k += 1
    if not np or len(np) > 5:
        return None
    if k < len(after) and after[k][2].lower() == "of" and not after[k][3]:
        return None
    if len(np) == 1 and k < len(after) and after[k][3]:
        return None  # "a terrible, insensitive, horrible article": a list of adjectives
    return after[b][2], " ".join(w[2] for w in np), np[0][0], np[-1][1]


# --------------------------------------------------------------------------- the extractor

class _Entities:
    """A unit's entities by normalized name, with one-word aliases of earlier names."""

    def __init__(self) -> None:
        self.by_key: dict[str, tuple[str, str]] = {}  # key -> (name, description)
        self.last_word: dict[str, set[str]] = {}  # "hall" -> {"g stanley hall"}
        self.alias: dict[str, str] = {}  # "ann arbor" -> "ann arbor michigan" (the title)

    def add(self, name: str, sentence: str) -> str | None:
        """The key of the entity ``name`` mentions (None past the cap)."""
        key = normalize(name)
        key = self.alias.get(key, key)
        words = key.split()
        if len(words) == 1 and key not in self.by_key:
            owners = self.last_word.get(key, ())
            if len(owners) == 1:
                return next(iter(owners))  # "Hall" after "G. Stanley Hall"
        if key not in self.by_key:
            if len(self.by_key) >= MAX_ENTITIES:
                return None
            self.by_key[key] = (name, "")
            if (2 <= len(words) <= 4 and not set(words) & (_PARTICLES | _OF)
                    and not any(c.isdigit() for c in key)):
                self.last_word.setdefault(words[-1], set()).add(key)
        if sentence and not self.by_key[key][1] and normalize(sentence) != key:
            # the first sentence that mentions it; a heading is no description
            self.by_key[key] = (self.by_key[key][0], clean(sentence)[:MAX_DESCRIPTION])
        return key

    def name(self, key: str) -> str:
        return self.by_key[key][0]


class _Triples:
    def __init__(self, entities: _Entities) -> None:
        self.entities = entities
        self.out: list[Triple] = []
        self.seen: set[tuple[str, str, str]] = set()

    def add(self, head: str, rel: str, tail: str, tail_name: str | None = None) -> None:
        """(head key, relation, tail key); ``tail_name`` for a tail that is not an entity."""
        key3 = (head, normalize(rel), tail)
        if head == tail or not key3[1] or key3 in self.seen or len(self.out) >= MAX_TRIPLES:
            return
        self.seen.add(key3)
        self.out.append((self.entities.name(head), rel, tail_name or self.entities.name(tail)))


def offline_openie(text: str, title: str = "") -> OpenIEOut:
    """Heuristic stand-in for an LLM OpenIE (see the module docstring)."""
    topic, title_names = _titles(title)
    ents = _Entities()
    for t in title_names:
        ents.add(t, "")
    if "," in topic and len(title_names) == 1:  # "Ann Arbor, Michigan": "Ann Arbor" is it
        ents.alias[normalize(topic.split(",")[0])] = normalize(topic)
    triples = _Triples(ents)
    reader = _ClauseReader(normalize(topic) if topic else None, triples)
    for sentence in _sentences(text):
        resolved: list[Mention] = []
        keys: dict[int, str] = {}
        for m in _mentions(sentence, title_names):
            key = ents.add(m.name, sentence)
            if key is not None:
                resolved.append(m)
                keys[id(m)] = key
        for c_start, c_end, ms in _clauses(sentence, resolved):
            reader.read(sentence, c_start, c_end, ms, keys)
    return OpenIEOut(entities=list(ents.by_key.values()), triples=triples.out)


def _clauses(sentence: str, mentions: list[Mention]) -> Iterable[tuple[int, int, list[Mention]]]:
    """The sentence cut at semicolons outside mentions, with each part's mentions."""
    start, i = 0, 0  # mentions are in order: one pass over them (linear)
    for m in re.finditer(";", sentence):
        j = i
        while j < len(mentions) and mentions[j].start < m.start():
            j += 1
        if j > 0 and mentions[j - 1].end > m.start():
            continue  # the ";" is inside a mention
        yield start, m.start(), mentions[i:j]
        start, i = m.end(), j
    yield start, len(sentence), mentions[i:]


class _ClauseReader:
    """Triples of one clause at a time (see the module docstring); remembers the
    last explicit subject for "he"/"she"."""

    def __init__(self, topic: str | None, triples: _Triples) -> None:
        self.topic = topic
        self.last_subject = topic
        self.triples = triples

    def read(self, sentence: str, c_start: int, c_end: int, ms: list[Mention],
             keys: dict[int, str]) -> None:
        add = self.triples.add
        pos = _after_adverbial(sentence, c_start, c_end)
        lead = [m for m in ms if m.start < pos]
        objects = [m for m in ms if m.start >= pos]
        body = _words_with_gaps(sentence, pos, c_end)
        k = 0
        while k < len(body) and body[k][2].lower() in _ARTICLES:
            k += 1
        first = body[0][2].lower() if body else ""
        subject, subject_end, implicit = None, pos, True
        if k < len(body) and objects and objects[0].start == body[k][0] \
                and not objects[0].possessive:
            subject, subject_end, implicit = keys[id(objects[0])], objects[0].end, False
            objects = objects[1:]
            self.last_subject = subject
        elif first in _PERSONAL:
            subject = self.last_subject or self.topic
        else:  # "It ...", "The journal ...", or no subject we can name: the topic
            subject = self.topic or self.last_subject
        if subject is None:
            if not objects:
                return
            subject, subject_end, implicit = keys[id(objects[0])], objects[0].end, False
            objects = objects[1:]
        prev_end = c_start
        for m in lead:  # "In 1990, X ..." → (X, in, 1990)
            words = _words(sentence[prev_end:m.start])
            rel = _prep_phrase(words) if len(words) <= 3 else None
            if rel and m.kind in _TIME_KINDS:
                add(subject, rel, keys[id(m)])
            prev_end = m.end

        # what an implicit subject is called: "The current editor is X" → "current editor is"
        described = _description(body) if implicit else None
        after = _words_with_gaps(sentence, subject_end, c_end)
        if implicit:  # past "It" / "The journal" to the verb
            b = next((i for i, w in enumerate(after[:5]) if w[2].lower() in _BE | _HAVE), None)
            after = after[b:] if b is not None else []
        # "X is a public art project by ..." → (X, is, public art project)
        np_span = (-1, -1)
        np = _copula_np(after)
        if np is not None and described is None:
            verb, phrase, np_start, np_end = np
            if not any(m.start < np_start < m.end or m.start < np_end < m.end for m in objects):
                add(subject, verb, normalize(phrase), tail_name=phrase)
                np_span = (np_start, np_end)

        prev_end, prev_key, prev = subject_end, subject, None
        head_rel: tuple[str, str] | None = None  # the last (head, relation), for lists
        last_verb: str | None = None
        for m in objects:
            key = keys[id(m)]
            if np_span[0] <= m.start and m.end <= np_span[1]:  # inside the noun phrase
                prev_end, prev_key, prev = m.end, key, m
                continue
            gap_start = np_span[1] if prev_end <= np_span[1] <= m.start else prev_end
            words = _words(sentence[gap_start:m.start])
            lower = [w.lower() for w in words]
            possessed = prev is not None and prev.possessive
            if possessed:
                head_rel = None  # "Hall's Adolescence": not a list, and no relation we can name
            elif all(w in _COORD for w in lower):  # "A, B and C": B and C as A
                if head_rel is not None:
                    add(head_rel[0], head_rel[1], key)
            elif any(w in _SUBORDINATE for w in lower):
                head_rel = None  # another clause starts: "... when psychologists such as X"
            elif lower[0] in _RELATIVE:  # ", who is known as" → the mention before
                vp = _verb_phrase(words[1:])
                head_rel = (prev_key, vp[0]) if vp else None
            elif (vp := _verb_phrase(words)) is not None:
                last_verb = vp[1]
                rel = vp[0]
                if described is not None and rel.lower() in _BE:
                    rel = f"{described} {rel}"  # "current editor is"
                elif implicit and rel.lower() in _BE:
                    rel = ""  # "The average in July is 72 °F": not a fact about the topic
                head_rel = (subject, rel) if rel else None
            elif m.kind in _TIME_KINDS and (rel := _prep_phrase(words)) is not None:
                if last_verb and len(rel.split()) < MAX_RELATION_WORDS:
                    rel = f"{last_verb} {rel}"  # "founded by X in 1990" → "founded in"
                head_rel = (subject, rel)
            elif (rel := _prep_phrase(words)) is not None:
                time_prev = prev is not None and prev.kind in _TIME_KINDS
                head_rel = (subject if time_prev else prev_key, rel)
            elif head_rel is not None and len(words) <= 2 and all(w.islower() for w in words):
                pass  # "by the American company Prometheus": the same link, to the name
            else:
                head_rel = None
            if head_rel is not None and not possessed and not all(w in _COORD for w in lower):
                add(head_rel[0], head_rel[1], key)
            prev_end, prev_key, prev = m.end, key, m


def _description(body: list[Word]) -> str | None:
    """"The current editor is" → "current editor": the words between a clause's
    opening determiner and its copula, when they are 1–3 lowercase words."""
    if not body or body[0][2].lower() not in _DETERMINERS:
        return None
    words = []
    for w in body[1:5]:
        if w[2].lower() in _BE:
            return " ".join(words) if words else None
        if not w[2].islower() or w[3] or _verb_rank(w[2]) or w[2] in _NP_STOP:
            return None
        words.append(w[2])
    return None


def _after_adverbial(sentence: str, start: int, end: int) -> int:
    """Where a clause's subject may start: past leading adverbials that open with
    a preposition or a subordinator and end at a comma ("On 7 July 2004, in
    response to ...,")."""
    pos = start
    while True:
        first = _WORD.search(sentence, pos, end)
        comma = sentence.find(",", pos, end)
        if not first or comma < 0 or first.start() > comma \
                or first.group().lower() not in (_PREPS | _SUBORDINATE):
            return pos
        pos = comma + 1


def _words_with_gaps(sentence: str, a: int, b: int) -> list[Word]:
    """Words of sentence[a:b] with offsets, and whether punctuation precedes each."""
    out, prev = [], a
    for m in _WORD.finditer(sentence, a, b):
        between = sentence[prev:m.start()]
        out.append((m.start(), m.end(), m.group(), bool(between.strip(" \t\n-"))))
        prev = m.end()
    return out
