"""The OpenIE scorer (benchmarks.openie_quality): its matching rule on a small
hand-made reference, the GPT-3.5 file scored against itself, the heuristic on
the first 200 MuSiQue passages, and the command line that scores
a model's output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.openie_quality import (load_extractor, load_passages, load_predictions, main,
                                       normalize_name, prf, run_extractor, score, score_entities,
                                       score_triples)

MUSIQUE = Path(__file__).resolve().parents[2] / "shared" / "data" / "musique_100"


@pytest.fixture(scope="module")
def passages():
    if not (MUSIQUE / "corpus.json").is_file():
        pytest.skip("shared MuSiQue data is not beside this checkout")
    return load_passages()


def test_names_compare_without_case_punctuation_or_article():
    assert normalize_name("The Hollywood Reporter") == normalize_name("hollywood reporter")
    assert normalize_name("G. Stanley Hall") == "g stanley hall"
    assert normalize_name("An") == "an"  # a name that is only an article stays


def test_entity_matching_on_a_hand_made_reference():
    ref = ["Journal of Mathematical Physics", "American Institute of Physics", "Jan Philip Solovej",
           "January 1960", "1963"]
    pred = [("the Journal of Mathematical Physics", "desc"), ("American Institute", ""),
            ("Solovej", ""), ("1963", ""), ("Impact Factor", ""), ("1963.", "")]
    c = score_entities(pred, ref)
    assert (c.pred, c.ref) == (5, 5)  # "1963." and "1963" are one name
    assert c.exact == 2  # the journal (article and case aside) and 1963
    # lenient: "American Institute" shares 2 of "American Institute of Physics"'s 4 words;
    # "Solovej" only 1 of 3
    assert c.lenient == 3
    assert prf(c.exact, c.pred, c.ref) == {"P": 40.0, "R": 40.0, "F1": 40.0}


def test_lenient_matching_is_one_to_one():
    ref = ["New York City"]
    pred = ["New York City", "New York", "York City"]
    c = score_entities(pred, ref)
    assert c.exact == 1 and c.lenient == 1  # three fragments cannot all match one name


def test_triple_matching_rules():
    ref = [("Journal of Mathematical Physics", "published by", "American Institute of Physics"),
           ("Jan Philip Solovej", "is from", "University of Copenhagen"),
           ("Barack Obama", "born in", "Honolulu")]
    pred = [("journal of mathematical physics", "published by", "the American Institute of Physics"),
            ("Jan Philip Solovej", "from", "University of Copenhagen"),  # "is" is a function word
            ("Barack Obama", "located in", "Honolulu"),  # "born" ≠ "located": not lenient
            ("Honolulu", "birthplace of", "Barack Obama")]  # reversed: a pair only
    c = score_triples(pred, ref)
    assert (c.pred, c.ref) == (4, 3)
    assert c.exact == 1
    assert c.lenient == 2
    assert c.pair == 3  # each reference pair once, in either order
    monthly = score_triples([("JMP", "published monthly by", "AIP")], [("JMP", "published by", "AIP")])
    assert monthly.lenient == 1 and monthly.exact == 0
    # malformed and self-loop triples are not counted on either side
    odd = score_triples([("a", "b"), ("x", "is", "x"), ("a", "r", "b")], [("a", "r", "b"), "abc"])
    assert (odd.pred, odd.ref, odd.exact) == (1, 1, 1)


def test_the_reference_scores_itself_perfectly(passages):
    outs = load_predictions(MUSIQUE / "openie_gpt-3.5-turbo-1106.json", passages)
    s = score(outs, passages, limit=100)
    for kind in ("exact", "lenient"):
        assert s["entities"][kind] == {"P": 100.0, "R": 100.0, "F1": 100.0}
        assert s["triples"][kind] == {"P": 100.0, "R": 100.0, "F1": 100.0}
    assert s["passages"] == 100


def test_the_offline_heuristic_against_gpt35(passages):
    """A floor under the figures in the README (first 200 passages: entity P 69.8,
    triple lenient F1 19.4, pair F1 33.3; the first heuristic had 66.0 / 6.0 / 23.4)."""
    from strata.stages.enrich.openie import offline_openie

    outs, _ = run_extractor(offline_openie, passages[:200])
    s = score(outs, passages, limit=200)
    assert s["entities"]["exact"]["P"] >= 68 and s["entities"]["exact"]["R"] >= 80
    assert s["triples"]["lenient"]["F1"] >= 17
    assert s["triples"]["pair"]["F1"] >= 30


def test_extractors_load_from_a_module_or_a_file(tmp_path):
    assert load_extractor("strata.stages.enrich.openie:offline_openie").__name__ == "offline_openie"
    f = tmp_path / "mine.py"
    f.write_text("from dataclasses import dataclass\n"
                 "from strata.stages.enrich.openie import OpenIEOut\n"
                 "def extract(text, title):\n"
                 "    return OpenIEOut(entities=[(title, '')], triples=[])\n")
    assert load_extractor(f"{f}:extract")("x", "Rome").entities == [("Rome", "")]
    with pytest.raises(SystemExit):
        load_extractor("no_colon_here")


def test_command_line_keeps_other_rows(passages, tmp_path):
    """Score a model's output file next to the heuristic."""
    preds = tmp_path / "preds.json"
    docs = [{"idx": 0, "extracted_entities": ["Journal of Mathematical Physics", "1963"],
             "extracted_triples": [["Journal of Mathematical Physics", "became monthly in", "1963"]]}]
    preds.write_text(json.dumps({"docs": docs}))
    out = tmp_path / "results"
    main(["--label", "heuristic", "--subsets", "3", "--out", str(out),
          "--save-predictions", str(tmp_path / "heuristic.json")])
    main(["--label", "model", "--predictions", str(preds), "--subsets", "1,3", "--out", str(out)])
    report = json.loads((out / "openie_quality.json").read_text())
    assert list(report["rows"]) == ["heuristic", "model"]
    model = report["rows"]["model"]["subsets"]
    assert model["first 1"]["entities"]["exact"]["P"] == 100.0
    assert model["first 3"]["passages"] == 3 and model["first 3"]["entities"]["exact"]["R"] < 100
    assert "| model | first 1 |" in (out / "openie_quality.md").read_text()
    # the saved heuristic output scores the same as the heuristic itself
    main(["--label", "saved", "--predictions", str(tmp_path / "heuristic.json"), "--subsets", "3",
          "--out", str(out)])
    rows = json.loads((out / "openie_quality.json").read_text())["rows"]
    assert rows["saved"]["subsets"]["first 3"] == rows["heuristic"]["subsets"]["first 3"]
