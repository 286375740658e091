"""The outcome words: what a run can be measured to show, in one list for every place that names one.

The panel's and the notebooks' prediction buttons, the auditor's verdict
(:func:`classify`), the matrix's table, figures and grid, the report and the
exercises all take their words, colours and order from here, so a word cannot
mean one thing in a verdict and another on a button.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """One outcome word: its meaning, the colour it is drawn in, and how bad it is (for a cell's worst run)."""

    word: str
    meaning: str
    color: str
    severity: int


#: Every outcome a run can be measured to show, in the order the figures list them.
OUTCOMES = (
    Outcome("exactly-once", "no acknowledged event lost, none duplicated, no unexpected row", "#2ca02c", 0),
    Outcome("at-least-once", "no acknowledged event lost, some duplicated", "#ff7f0e", 1),
    Outcome("unexpected rows", "none lost, none duplicated, but rows no acknowledged send explains", "#9467bd", 1),
    Outcome("at-most-once", "some acknowledged events lost, none duplicated", "#d62728", 2),
    Outcome("loss and duplicates", "some lost and some duplicated", "#8c1c13", 3),
    Outcome("incomplete", "events still unseen when the run ended: no claim can be checked", "#7f7f7f", 4),
    Outcome("error", "the run measured nothing that can be judged", "#444444", 5),
    Outcome("acked-kept", "every acknowledged send is in the topic's final read", "#2ca02c", 0),
    Outcome("acked-lost", "acknowledged sends are missing from the topic's final read", "#d62728", 2),
)
#: The words, in order.
WORDS = tuple(o.word for o in OUTCOMES)
#: The outcomes a learner predicts for a pipeline once its run drained (the prediction buttons).
GUARANTEES = WORDS[:5]
#: The outcomes a learner predicts for what the brokers kept of the acknowledged sends (the topic's final read).
TOPIC_WORDS = ("acked-kept", "acked-lost")
#: What a reader that ignores the file sink's ``_spark_metadata`` sees (:func:`lab.sinks.files.naive_reader_outcome`),
#: and a ``read_uncommitted`` reader of an output topic (:func:`lab.audit.predictions.uncommitted_reader_outcome`).
#: Here, with the other words, because the sinks that measure it sit below the audit.
NAIVE_READER_OUTCOMES = ("each event once", "some events more than once")
#: Each word's colour; unknown words are drawn as ``error``.
COLORS = {o.word: o.color for o in OUTCOMES}
#: How bad each word is, for colouring a cell by the worst of its runs.
SEVERITY = {o.word: o.severity for o in OUTCOMES}


def classify(lost: int, duplicated: int, unexpected: int, unseen: int) -> str:
    """The outcome a run's counts show: the one rule every verdict of the lab uses.

    ``incomplete`` while events are unseen; then ``loss and duplicates`` (lost
    and duplicated), ``at-most-once`` (lost), ``at-least-once`` (duplicated),
    ``unexpected rows`` (nothing lost or duplicated, but rows that no
    acknowledged send explains: an aborted transaction read uncommitted, a
    send whose acknowledgement was lost that did land), else ``exactly-once``.
    Loss or duplicates name the outcome when unexpected rows come with them;
    the counts still show those rows.
    """
    if unseen:
        return "incomplete"
    if lost and duplicated:
        return "loss and duplicates"
    if lost:
        return "at-most-once"
    if duplicated:
        return "at-least-once"
    if unexpected:
        return "unexpected rows"
    return "exactly-once"
