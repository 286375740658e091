"""The learner card, ``docs/learner-card.md``: one printed page of the lab's words, written from the code's catalogues.

Its pipelines come from :data:`lab.registry.PIPELINES`, its faults and named points from
:mod:`lab.faults.catalogue`, its outcome words from :data:`lab.outcomes.OUTCOMES` and the matrix's other
expectations from :data:`lab.audit.expectations.EXPECTATIONS`. A hand-written card fell behind each time a
pipeline or a fault was added; this one is written again by ``python -m lab.views.learner_card``, and
``tests/unit/test_learner_card.py`` fails while the committed file differs from :func:`card`.

The card names things and says what each means. It never says which pipeline or fault gives which outcome: the
lab's method is to predict, then run, and an answer on the page a learner holds would take the first step away.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from lab.audit.expectations import EXPECTATIONS
from lab.faults.catalogue import FAULTS, POINTS
from lab.outcomes import GUARANTEES, OUTCOMES, TOPIC_WORDS, WORDS
from lab.registry import PIPELINES

#: Where the card lives, from the project's root.
CARD_PATH = Path("docs") / "learner-card.md"
#: The command that writes it again.
COMMAND = "python -m lab.views.learner_card"

#: A parenthesis with no parenthesis inside it, and the space before it.
_ASIDE = re.compile(r"\s*\([^()]*\)")
#: A word with a placeholder in angle brackets (``k<nn>``), which Markdown would take for a tag outside backticks.
_PLACEHOLDER = re.compile(r"(\S*<\w+>\S*)")


def plain(text: str) -> str:
    """A catalogue's text without its asides in parentheses, safe in a Markdown table (``k<nn>`` in backticks)."""
    return _PLACEHOLDER.sub(r"`\1`", _ASIDE.sub("", text)).replace("|", "/").strip()


def first_clause(text: str) -> str:
    """A fault's summary as the card prints it: what happens, up to the first ``;`` or ``:``, without asides.

    The catalogue's summaries are written for contributors ("SIGKILL to the driver's process group (Python
    and JVM); the supervisor restarts it"). The card has one line per fault and one page in all, so it keeps
    what happens and leaves the rest to the reference tables (``docs/reference-tables.md``).
    """
    return re.split(r"[;:] ", plain(text))[0]


def accepting(name: str, kind: str) -> tuple[str, ...]:
    """The pipelines whose registry entry lists the fault or point ``name`` (``kind``: ``faults`` or ``points``)."""
    return tuple(p for p, spec in PIPELINES.items() if name in getattr(spec, kind))


def pipelines_cell(names: Sequence[str]) -> str:
    """The pipelines a fault or point applies to: ``all``, ``all but samza``, or their names in the registry's order."""
    missing = [p for p in PIPELINES if p not in names]
    if not missing:
        return "all"
    if len(missing) == 1:
        return f"all but {missing[0]}"
    return ", ".join(p for p in PIPELINES if p in names)


def _code(words: Sequence[str], conjunction: str = "or") -> str:
    """``a``, ``a or b``, ``a, b or c``, each in backticks."""
    ticked = [f"`{w}`" for w in words]
    return ticked[0] if len(ticked) == 1 else ", ".join(ticked[:-1]) + f" {conjunction} " + ticked[-1]


#: Small counts in words, as the card's prose writes them.
_NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}


def _first(words: Sequence[str]) -> str:
    """``the first five words`` when ``words`` open the outcome table, else the words themselves."""
    if tuple(words) == WORDS[:len(words)]:
        return f"one of the first {_NUMBERS.get(len(words), len(words))} words"
    return _code(words)


def _only(pipelines: Sequence[str]) -> str:
    """`` (direct, receiver)`` after a fault's or point's text when it applies to some pipelines only, else nothing."""
    cell = pipelines_cell(pipelines)
    return "" if cell == "all" else f" ({cell})"


def card() -> str:
    """The learner card's Markdown, as ``docs/learner-card.md`` must hold it."""
    verdict_only = [w for w in WORDS if w not in GUARANTEES and w not in TOPIC_WORDS]
    expected = {w: first_clause(m) for w, m in EXPECTATIONS.items() if w not in WORDS}
    lines = [
        "# Learner card: delivery guarantees you can see",
        "",
        f"<!-- Written by `{COMMAND}` from lab/registry.py, lab/faults/catalogue.py, lab/outcomes.py and "
        "lab/audit/expectations.py: change those, then run it again. -->",
        "",
        "**Predict, then run.** Pick the outcome you expect, then run: the lab measures what happens. This card",
        "names the pipelines, faults and words; which fault gives which outcome is yours to predict.",
        "",
        "## The pipelines (`pipeline=`)",
        "",
        "| pipeline | what it is built with |",
        "|---|---|",
        *(f"| `{p.name}` | {plain(p.summary)} |" for p in PIPELINES.values()),
        "",
        "## The faults (`faults=\"KIND@TRIGGER\"`)",
        "",
        "TRIGGER: `at=3s` or `batch=2`; join several faults with commas. What a fault kills is started again.",
        "",
        "| fault | what really happens (pipelines, if not all) |",
        "|---|---|",
        *(f"| `{f.name}` | {first_clause(f.summary)}{_only(accepting(f.name, 'faults'))} |" for f in FAULTS.values()),
        "",
        "## Where a crash stops the driver (`driver-crash@batch=2:POINT`)",
        "",
        "| point | the driver dies when (pipelines, if not all) |",
        "|---|---|",
        *(f"| `{p.name}` | {plain(p.summary)}{_only(accepting(p.name, 'points'))} |" for p in POINTS.values()),
        "",
        "## The outcome words",
        "",
        "| word | it means |",
        "|---|---|",
        *(f"| `{o.word}` | {plain(o.meaning)} |" for o in OUTCOMES),
        "",
        # Which words a button offers, said so that a verdict's words are not taken for answers one could pick.
        f"You predict {_first(GUARANTEES)} for what a sink holds, {_code(TOPIC_WORDS)} for what a topic kept;",
        f"{_code(verdict_only, 'and')} come from verdicts only. A matrix row may also expect "
        + ", ".join(f"`{w}` ({m})" for w, m in expected.items()) + ".",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lab.views.learner_card [PATH]``: write the card (default ``docs/learner-card.md`` of the
    checkout)."""
    from lab.host.env import project_root

    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        path = Path(args[0])
    else:
        root = project_root()
        if root is None:
            print(f"error: no checkout of the lab here (no pyproject.toml); name the file: {COMMAND} PATH",
                  file=sys.stderr)
            return 2
        path = root / CARD_PATH
    text = card()
    path.write_text(text)
    print(f"{path}: {len(readable_words(text))} words")
    return 0


def readable_words(markdown: str) -> list[str]:
    """The words a reader of the printed card reads: no comment, no table rule, no lone ``|``."""
    text = re.sub(r"<!--.*?-->", " ", markdown, flags=re.S)
    return [w for w in text.split() if re.search(r"\w", w)]


if __name__ == "__main__":
    raise SystemExit(main())
