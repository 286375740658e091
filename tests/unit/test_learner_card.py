"""docs/learner-card.md is the card the code's catalogues write: it names every pipeline, fault, point and word,
fits a printed page, and gives no answer away."""

from __future__ import annotations

import re

from lab.audit.expectations import EXPECTATIONS
from lab.faults.catalogue import FAULTS, POINTS
from lab.outcomes import WORDS
from lab.registry import PIPELINES
from lab.views import learner_card
from tests.conftest import ROOT

CARD = ROOT / learner_card.CARD_PATH
#: Past this many words the card no longer prints on one page (measured at 10 pt: it held about 620).
WORDS_AT_MOST = 650
#: Outcome words that stand in a pipeline's own description, with why that is no answer.
NAMED_BY_THE_PRODUCT = {
    "Kafka's exactly-once": "the name Kafka gives its transactions (KIP-98): the claim the lab tests, not a "
                            "measurement",
}
#: What an answer would say: an outcome word, an expectation, or a count's words.
ANSWER = re.compile("|".join([*(re.escape(w) for w in (*WORDS, *EXPECTATIONS)), r"\blos[st]\b", r"duplicat"]), re.I)


def sections(text: str) -> dict[str, str]:
    """Each ``## `` heading and the text below it, up to the next."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {heading: body for heading, body in zip(parts[1::2], parts[2::2])}


def test_the_committed_card_is_the_generated_one():
    assert CARD.read_text() == learner_card.card(), (
        f"docs/learner-card.md differs from what the catalogues give: run `{learner_card.COMMAND}` and commit it")


def test_the_card_names_every_pipeline_fault_point_and_word():
    text = learner_card.card()
    ticked = set(re.findall(r"`([^`]+)`", text))
    missing = (set(PIPELINES) | set(FAULTS) | set(POINTS) | set(WORDS) | set(EXPECTATIONS)) - ticked
    assert not missing, f"not on the card: {sorted(missing)}"


def test_the_card_fits_one_printed_page():
    n = len(learner_card.readable_words(learner_card.card()))
    assert n <= WORDS_AT_MOST, (f"the learner card has {n} words, over {WORDS_AT_MOST}: one printed page no longer "
                                "holds it; shorten the catalogue's texts it prints or what the card takes from them")


def test_no_pipeline_fault_or_point_is_paired_with_an_outcome():
    """Predict, then run: the card describes the pipelines, faults and points without saying what they lead to."""
    told = []
    for heading, body in sections(learner_card.card()).items():
        if "outcome words" in heading:
            continue
        for line in body.splitlines():
            described = line.split("|")[2] if line.startswith("| `") else line  # the text, not a name like ack-loss
            for phrase in NAMED_BY_THE_PRODUCT:
                described = described.replace(phrase, "")
            if ANSWER.search(described):
                told.append(f"{heading}: {line}")
    assert not told, "the card pairs a pipeline, fault or point with an outcome:\n" + "\n".join(told)


def test_the_check_sees_an_answer():
    assert ANSWER.search("a crash here leaves duplicates") and ANSWER.search("it is at-least-once")
    assert not ANSWER.search("SIGKILL to one executor JVM")


def test_a_fault_keeps_what_happens_and_a_placeholder_stays_text():
    assert learner_card.first_clause("SIGKILL to the group (Python and JVM); the supervisor restarts it") == \
        "SIGKILL to the group"
    assert learner_card.plain("the first record of key k<nn>") == "the first record of key `k<nn>`"
    assert learner_card.pipelines_cell(("structured", "direct")) == "structured, direct"
