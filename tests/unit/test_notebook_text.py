"""The notebooks' text: predict before you are told, an opening that says what each notebook is for, real
sources instead of private names for them, and glossary links that land on an entry."""

import json
import re
from pathlib import Path

import pytest

from lab.audit.predictions import NAIVE_READER_OUTCOMES, TOPIC_OUTCOMES
from lab.outcomes import WORDS
from tests.conftest import ROOT
from tests.unit.test_notebook_style import PREDICTING, UNPREDICTED_RUNS

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))
GLOSSARY = ROOT / "docs" / "glossary.md"

#: What states an outcome: the lab's outcome words (but the two that say a run could not be judged), the other
#: prediction choices (07's final read, 03's naive reader), and the plain words for what a run counts.
OUTCOMES = tuple(w for w in WORDS if w not in ("incomplete", "error")) + TOPIC_OUTCOMES + NAIVE_READER_OUTCOMES
GIVEAWAYS = (r"duplicated", r"duplicates?", r"deduplicate[sd]", r"lost", r"loss", r"twice", r"overcount\w*")


def _phrase(words: str) -> str:
    """``exactly-once`` as a pattern that also matches ``exactly once`` and ``Exactly-Once``."""
    return r"\b" + r"[\s-]+".join(map(re.escape, re.split(r"[\s-]+", words))) + r"\b"


TOLD = re.compile("|".join([*map(_phrase, OUTCOMES), *(rf"\b{w}\b" for w in GIVEAWAYS)]), re.I)

#: A cell that takes a prediction: the buttons of ``nb.predict`` (the cells test_notebook_style checks), the
#: panels and 07's settings picker (runs with a predict control of their own, test_notebook_style's
#: UNPREDICTED_RUNS), or, in a notebook that runs nothing (04), a markdown table with a "your prediction" column.
PREDICT_CALL = re.compile(r"^\w+ = nb\.predict\(", re.M)
CONTROLS = tuple(mark for marks in UNPREDICTED_RUNS.values() for mark in marks if mark != "nb.recovery_s(")
PREDICTION_TABLE = re.compile(r"^\|.*\byour prediction\b.*\|\s*$", re.M | re.I)
#: A code cell after which the learner has seen a run's result.
RAN = re.compile(r"nb\.run\(|nb\.verdicts\(")


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def code_only(src: str) -> str:
    """A code cell without its comment lines."""
    return "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("#"))


def prose(markdown: str) -> str:
    """What a learner reads before opening anything: no folded ``<details>`` block, no code, no link targets."""
    text = re.sub(r"<details\b.*?</details>", " ", markdown, flags=re.S | re.I)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)
    return re.sub(r"\]\([^)\s]*\)", "]", text)


def is_prediction(cell: dict) -> bool:
    src = source(cell)
    if cell["cell_type"] == "markdown":
        return bool(PREDICTION_TABLE.search(src))
    src = code_only(src)
    return bool(PREDICT_CALL.search(src)) or any(mark in src for mark in CONTROLS)


def before_predictions(book: list[dict]):
    """``(index, text)`` for each prediction cell: the markdown from its section's heading down to it.

    The walk goes up from the prediction cell over markdown (and code cells that run nothing, such as
    ``nb.show_code``) and stops at the nearest heading, taken from its line on, or at a cell that ran something.
    """
    for i, cell in enumerate(book):
        if not is_prediction(cell):
            continue
        parts = []
        for above in reversed(book[:i]):
            src = source(above)
            if above["cell_type"] == "code":
                if RAN.search(code_only(src)):
                    break
                continue
            heads = [m.start() for m in re.finditer(r"^#{1,6} ", src, re.M)]
            if heads:
                parts.append(src[heads[-1]:])
                break
            parts.append(src)
        yield i, "\n\n".join(reversed(parts))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_takes_a_prediction(path):
    book = cells(path)
    found = [i for i, c in enumerate(book) if is_prediction(c)]
    assert found, "no prediction cell: nb.predict, a panel's predict control, or a 'your prediction' table"
    if path.stem in PREDICTING:
        assert any(PREDICT_CALL.search(code_only(source(book[i]))) for i in found)
    if all(book[i]["cell_type"] == "markdown" for i in found):
        # a notebook that runs nothing (04 reads a table) asks for the learner's grid before it shows the measured one
        shows = [i for i, c in enumerate(book)
                 if c["cell_type"] == "code" and re.search(r"nb\.plots\.|display\(", code_only(source(c)))]
        assert shows and found[0] < shows[0], "the prediction comes after the results it asks about"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_outcome_is_told_before_its_prediction(path):
    told = []
    for i, text in before_predictions(cells(path)):
        words = sorted({m.group(0).lower() for m in TOLD.finditer(prose(text))})
        if words:
            heading = next((line for line in text.splitlines() if line.startswith("#")), "(no heading)")
            told.append(f"cell {i} under {heading!r}: {', '.join(words)}")
    assert not told, ("outcome words above a prediction (fold them into a <details> block after the run):\n"
                      + "\n".join(told))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_opens_with_its_question_time_and_needs(path):
    first = next(c for c in cells(path) if c["cell_type"] == "markdown")
    text = source(first)
    assert text.startswith("# "), "the first markdown cell starts with the notebook's title"
    for mark in ("**The question:**", "**What you will be able to explain:**", "**Time:**", "**Needs:**"):
        assert mark in text, f"the first markdown cell has no {mark}"
    question = text.split("**The question:**", 1)[1].split("\n\n", 1)[0]
    assert question.strip().endswith("?"), "the question is a question"
    explain = text.split("**What you will be able to explain:**", 1)[1].split("**Time:**", 1)[0]
    assert 2 <= len(re.findall(r"^\* ", explain, re.M)) <= 4, "2-4 things you will be able to explain"
    time = text.split("**Time:**", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"\b\d+ minutes\b", time), "the time, in minutes"
    assert text.split("**Needs:**", 1)[1].split("\n\n", 1)[0].strip(), "what the notebook needs"
    assert "](../docs/glossary.md)" in text, "the opening links the glossary"


WORDS_FOR_SOURCES = re.compile(r"\bthe seeds\b|\bsource[ -](documents?|posts?)\b", re.I)


@pytest.mark.parametrize("path", NOTEBOOKS + SOLUTIONS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_sources_are_named_and_linked(path):
    for cell in cells(path):
        src = source(cell)
        assert not WORDS_FOR_SOURCES.search(src), f"name and link the source instead: {src[:120]!r}"
        if cell["cell_type"] == "markdown":  # the SEEDS parameter, in code or `code`, is a run's random seeds
            assert not re.search(r"\bseeds\b", prose(src), re.I), f"name and link the source instead: {src[:120]!r}"


def slug(heading: str, seen: dict) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    base = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


def anchors(markdown: str) -> set[str]:
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    seen: dict = {}
    return {slug(m.group(1), seen) for m in re.finditer(r"^#{1,6} (.+?)\s*#*\s*$", text, re.M)}


@pytest.mark.parametrize("path", NOTEBOOKS + SOLUTIONS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_every_glossary_link_lands_on_an_entry(path):
    entries = anchors(GLOSSARY.read_text())
    for cell in cells(path):
        if cell["cell_type"] != "markdown":
            continue
        for target, anchor in re.findall(r"\]\(([^)#\s]*glossary\.md)(?:#([^)\s]*))?\)", source(cell)):
            assert (path.parent / target).resolve() == GLOSSARY.resolve(), f"{target} is not docs/glossary.md"
            assert not anchor or anchor in entries, f"docs/glossary.md has no #{anchor}"


#: The entries the notebooks rely on (GitHub anchors of docs/glossary.md's headings).
REQUIRED = ("at-most-once", "at-least-once", "exactly-once", "acknowledged-event", "ledger", "duplicated", "lost",
            "lineage", "receiver", "block", "write-ahead-log-wal", "micro-batch", "offset", "commit-log", "offset-log",
            "checkpoint", "idempotent-sink", "transactional-sink", "watermark", "state-store", "epoch",
            "isr-in-sync-replicas", "acks", "mininsyncreplicas", "unclean-leader-election", "idempotent-producer",
            "transaction-and-read_committed", "barrier", "aligned-and-unaligned-checkpoint", "chandy-lamport-snapshot",
            "changelog")


def test_the_glossary_defines_each_term_with_a_link_to_its_documentation():
    text = GLOSSARY.read_text()
    entries = anchors(text)
    assert set(REQUIRED) <= entries, sorted(set(REQUIRED) - entries)
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    for section in sections:
        title = section.splitlines()[0]
        assert re.search(r"\]\(https?://", section), f"{title}: no link to its documentation"
    for anchor in re.findall(r"\]\(#([^)\s]+)\)", text):
        assert anchor in entries, f"docs/glossary.md links #{anchor}, which it does not define"


def test_notebook_04_asks_for_every_row_of_the_default_grid_in_its_order():
    import yaml

    grid = [s["name"] for s in yaml.safe_load((ROOT / "lab" / "templates" / "default_grid.yaml").read_text())["scenarios"]]
    table = next(source(c) for c in cells(ROOT / "notebooks" / "04_semantics_matrix.ipynb")
                 if c["cell_type"] == "markdown" and PREDICTION_TABLE.search(source(c)))
    asked = re.findall(r"^\| ([^|]+?) \| \d\d \| *\|$", table, re.M)
    assert asked == grid, (set(grid) - set(asked), set(asked) - set(grid))
