"""The notebooks' text: predict before you are told, an opening that says what each notebook is for, real
sources instead of private names for them, and glossary links that land on an entry."""

import json
import re
from pathlib import Path

import pytest

from lab.audit.predictions import TOPIC_OUTCOMES
from lab.outcomes import NAIVE_READER_OUTCOMES, WORDS
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

#: What gives an outcome away with no outcome word in it: the mechanism that decides the run, stated before the run
#: (a replay, a skip, a fence, where the only copy of a block lives). Each group is a way the notebooks once did it;
#: every pattern is matched on ``prose`` (no emphasis marks, one space between words), ignoring case.
MECHANISMS = (
    # a replay stated as what the restart does: with the crash point of the section, it is the answer
    r"\b(?:runs?|ran|written|writes?|stores?|stored)\b(?:\s+[\w'\"-]+){0,4}?\s+again\b",
    r"\bsame (?:ranges|offsets|records) (?:are |is )?read again\b",
    r"\breads? again after\b",
    # a sink or a log that recognises a repeat: the replay is refused before anyone asked what it does
    r"\bskips? (?:a|the) (?:key|batch|txid)\b[^.;]{0,20}\balready\b",
    r"\bfails? loudly\b",
    r"(?<!may )\balready (?:has|holds?)\b",  # "records the broker may already have" only sets the scene
    # a replayed batch's state: says the state is never counted twice
    r"\bas the batch before left it\b|\bnever added to twice\b|\bstarts? from the version before\b",
    # the audit's word for what a run drops on purpose: says it is not lost
    r"\bcounts? (?:it|them) apart\b|\b(?:does not|doesn't|never) call (?:it|them) lost\b|\bfrom a lost one\b",
    # fencing told before it is measured: who aborts what, who is refused
    r"\brefuses? the (?:old|older)\b",
    r"\b(?:restarted|successor'?s?|coordinator)\b[^.;]{0,60}\baborts?\b",
    r"\bwhat fences it\b|\bfencing stops\b",
    # an open transaction's records: says what a read_committed reader gets
    r"\bsit in an open\b|\bmakes both visible at once\b",
    # where the only copy lives: says what a crash of that place loses
    r"\blive only in\b|\bkept on that executor only\b|\b(?:is|are|were) gone\b",
    # a mechanism that removes or absorbs copies: says there are copies, and that they go
    r"\bwhat removes each kind\b|\bremov(?:es?|ing) (?:which |a producer's )duplicates\b",
    r"\beach do about it\b|\babsorbs?\b",
    # one run's outcome carried over to the next run, or to the other mode
    r"\bboth recover the same\b|\bat the price of a bigger\b|\bthe exactly-once mode too\b",
    r"\bis an idempotent one too\b",
    # Storm's spout without an acker: commits before it emits, so nothing comes back
    r"\bcommits? each poll'?s offsets before\b|\bnothing is tracked\b",
    # a documented promise quoted as the result
    r"=\s*exactly-once\b|\b(?:transformations|receiving) (?:are|is) exactly-once\b",
    r"\bat-least-once by default\b|\bmust go through the sink'?s metadata\b",
    # single give-aways: files nobody lists, sends nobody is owed, offsets moved past lost output, the state rebuilt
    r"\blisted nowhere\b|\bowed to nobody\b|\bmove the offsets past\b|\brebuilds the store as it was\b",
    r"\bsafer settings?\b|\bevery send of the transaction acknowledged first\b",
)
MECHANISM = re.compile("|".join(f"(?:{p})" for p in MECHANISMS), re.I)

#: A cell that takes a prediction: the buttons of ``nb.predict`` (the cells test_notebook_style checks), the
#: panels and 07's settings picker (runs with a predict control of their own, test_notebook_style's
#: UNPREDICTED_RUNS), or, in a notebook that runs nothing (04), a markdown table with a "your prediction" column.
PREDICT_CALL = re.compile(r"^\w+ = nb\.(?:predict(?:_grid)?|ask)\(", re.M)
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
    """What a learner reads before opening anything: no folded ``<details>`` block, no code, no link targets.

    Emphasis marks go and every run of spaces and line breaks becomes one space, so that a phrase split by bold
    (``runs **again, with**``) or by a line break (``live only`` / ``in``) still reads as one.
    """
    text = re.sub(r"<details\b.*?</details>", " ", markdown, flags=re.S | re.I)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)
    text = re.sub(r"\]\([^)\s]*\)", "]", text)
    return " ".join(text.replace("*", "").split())


def is_prediction(cell: dict) -> bool:
    src = source(cell)
    if cell["cell_type"] == "markdown":
        return bool(PREDICTION_TABLE.search(src))
    src = code_only(src)
    return bool(PREDICT_CALL.search(src)) or any(mark in src for mark in CONTROLS)


def before_predictions(book: list[dict], opening: bool = False):
    """``(index, text)`` for each prediction cell: the markdown from its section's heading down to it.

    The walk goes up from the prediction cell over markdown (and code cells that run nothing, such as
    ``nb.show_code``) and stops at the nearest heading, taken from its line on, or at a cell that ran something.
    With ``opening``, the first prediction's text is every markdown cell above it instead: the question, what you
    will be able to explain, the introduction and "The code that runs" are all read before it.
    """
    first = True
    for i, cell in enumerate(book):
        if not is_prediction(cell):
            continue
        if opening and first:
            first = False
            yield i, "\n\n".join(source(c) for c in book[:i] if c["cell_type"] == "markdown")
            continue
        first = False
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
def test_no_mechanism_gives_an_outcome_away_before_its_prediction(path):
    """A sentence that states what decides a run gives it away with no outcome word. The opening is read too: the
    outcome words are not looked for there, since it defines them."""
    told = []
    for i, text in before_predictions(cells(path), opening=True):
        phrases = sorted({m.group(0).lower() for m in MECHANISM.finditer(prose(text))})
        if phrases:
            heading = next((line for line in text.splitlines() if line.startswith("#")), "(no heading)")
            told.append(f"cell {i} under {heading!r}: {'; '.join(phrases)}")
    assert not told, ("a mechanism that decides the run, stated above its prediction (ask it, and explain it in a "
                      "<details> block after the run):\n" + "\n".join(told))


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


def glossary_entries(markdown: str) -> dict[str, str]:
    """Each heading's anchor and its text down to the next heading."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    parts = re.split(r"^#{1,6} (.+?)\s*#*\s*$", text, flags=re.M)
    seen: dict = {}
    return {slug(heading, seen): body for heading, body in zip(parts[1::2], parts[2::2])}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_glossary_entry_linked_above_a_prediction_gives_its_outcome_away(path):
    """A link above a prediction is one click from the answer: the entry defines, its folded part concludes."""
    glossary = glossary_entries(GLOSSARY.read_text())
    told = []
    for i, text in before_predictions(cells(path), opening=True):
        unfolded = re.sub(r"<details\b.*?</details>", " ", text, flags=re.S | re.I)
        for anchor in sorted(set(re.findall(r"\]\([^)#\s]*glossary\.md#([^)\s]+)\)", unfolded))):
            phrases = sorted({m.group(0).lower() for m in MECHANISM.finditer(prose(glossary.get(anchor, "")))})
            if phrases:
                told.append(f"cell {i} links #{anchor}: {'; '.join(phrases)}")
    assert not told, ("a glossary entry linked above a prediction states its outcome (fold that sentence in the "
                      "entry, or link the entry from the fold after the run):\n" + "\n".join(told))


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
    """Its buttons are the default grid's rows (grid_questions), and each cell that shows an answer waits for them."""
    import yaml

    from lab.matrix.grid import load_grid
    from lab.matrix.questions import grid_questions

    grid = [s["name"]
            for s in yaml.safe_load((ROOT / "lab" / "templates" / "default_grid.yaml").read_text())["scenarios"]]
    assert [q.name for q in grid_questions(load_grid(None))] == grid
    book = [code_only(source(c)) for c in cells(ROOT / "notebooks" / "04_semantics_matrix.ipynb")
            if c["cell_type"] == "code"]
    assert any("questions = nb.matrix.grid_questions(nb.matrix.load_grid(None))" in c for c in book)
    asks = next(i for i, c in enumerate(book)
                if re.search(r"^sheet = nb\.predict_grid\(questions, PREDICTIONS\)", c, re.M))
    shows = [c for c in book[asks + 1:] if re.search(r"nb\.plots\.|display\(|grid_verdicts\(", c)]
    assert shows and all(c.startswith("if sheet.ready():") for c in shows), (
        "an answer is shown before the grid is predicted")
