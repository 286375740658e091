"""What a matrix row may expect, and whether a run's measured counts satisfy it: the matrix's verdict rule.

One rule for every place that judges a run against a documented claim: the
matrix's table and report (:mod:`lab.matrix.runner`, :mod:`lab.matrix.report`), the
semantics grid, the exercises' checks (:mod:`lab.lessons.solve`) and notebook 07's
replication grid. A verdict comes from the measured counts only (``lost``,
``duplicated``, ``unexpected``, ``unseen``, ``source_duplicates``; for
``acked-lost`` and ``acked-kept`` the topic's final read, ``topic.lost``),
never from the expectation.
"""

from __future__ import annotations

from lab.errors import choices_error
from lab.outcomes import OUTCOMES, classify

#: The sink's outcomes (:data:`lab.outcomes.OUTCOMES`) each expectation accepts. An expectation that is an outcome
#: word accepts that outcome only; ``no-loss`` and ``loss`` name what a claim about loss alone allows.
ACCEPTS = {
    "exactly-once": ("exactly-once",),
    "at-least-once": ("at-least-once",),
    "unexpected rows": ("unexpected rows",),
    "at-most-once": ("at-most-once",),
    "no-loss": ("exactly-once", "at-least-once", "unexpected rows"),
    "loss": ("at-most-once", "loss and duplicates"),
}
_MEANING = {o.word: o.meaning for o in OUTCOMES}

#: What a grid row may expect, and the measured counts that satisfy it.
EXPECTATIONS = {
    **{k: _MEANING[k] for k in ("exactly-once", "at-least-once", "unexpected rows", "at-most-once")},
    "no-loss": "no event lost: " + ", ".join(ACCEPTS["no-loss"]),
    "loss": "some events lost: " + " or ".join(ACCEPTS["loss"]),
    "source-duplicates": "duplicates already in the topic (written twice by the producer)",
    "acked-lost": "acknowledged sends missing from the topic's final read (the brokers lost them)",
    "acked-kept": "every acknowledged send in the topic's final read",
}

#: Expectations judged on the topic's final read (a report's ``topic.lost``, a results row's ``topic_lost``).
TOPIC_EXPECTATIONS = ("acked-lost", "acked-kept")


def _topic_lost(counts) -> int | None:
    """The final read's acknowledged-and-lost count of a report (``topic.lost``) or a results row (``topic_lost``)."""
    value = counts.get("topic_lost")
    if value is None:
        value = (counts.get("topic") or {}).get("lost")
    try:
        return None if value is None or value != value else int(value)  # NaN from a table: no final read
    except (TypeError, ValueError):
        return None


def measured(expect: str, counts) -> str:
    """What a run measured, in its expectation's terms: the final read's outcome for ``acked-*``, else the guarantee."""
    if expect in TOPIC_EXPECTATIONS:
        lost = _topic_lost(counts)
        return "error" if lost is None else "acked-lost" if lost > 0 else "acked-kept"
    guarantee = counts.get("guarantee")
    return guarantee if isinstance(guarantee, str) and guarantee else "error"


#: The verdict words: a run's measured counts against the claim it was run to check.
AS_EXPECTED = "as expected"
MISMATCH = "MISMATCH"


def verdict(expect: str, counts) -> str:
    """:data:`AS_EXPECTED` when ``counts`` satisfy ``expect`` (:func:`satisfies`), else :data:`MISMATCH`.

    The one verdict of the matrix's table and report, the semantics grid and notebook 07's replication table.
    """
    return AS_EXPECTED if satisfies(expect, counts) else MISMATCH


def satisfies(expect: str, counts: dict) -> bool:
    """Whether measured ``counts`` satisfy expectation ``expect``."""
    if expect in TOPIC_EXPECTATIONS:  # the final read of the topic, whatever the sink read (lab.audit.topic)
        topic_lost = _topic_lost(counts)
        if topic_lost is None:
            return False
        return topic_lost > 0 if expect == "acked-lost" else topic_lost == 0
    if expect == "source-duplicates":
        return counts.get("source_duplicates", 0) > 0
    if expect not in ACCEPTS:
        raise choices_error("expectation", expect, EXPECTATIONS)
    got = classify(counts.get("lost", 0), counts.get("duplicated", 0), counts.get("unexpected", 0),
                   counts.get("unseen", 0))  # ``incomplete`` while unseen: not drained, no claim can be checked
    return got in ACCEPTS[expect]
