"""Predict, then look: a learner's prediction of a scenario's outcome, recorded before the run, and its verdict.

Protocol
--------
1. Before a scenario runs, the learner picks one outcome per scenario from a
   fixed list of choices (:data:`GUARANTEES` for a delivery guarantee,
   :data:`TOPIC_OUTCOMES` for what the brokers kept). Interactively that is a
   row of buttons (:mod:`lab.views.predict`); under papermill it is the notebook's
   ``PREDICTIONS`` parameter, ``{scenario: outcome}``: every value is checked
   at the notebook's first prediction cell (:func:`check_mapping`), before its
   first run; a key that names no run is ignored (that run gets no prediction).
2. When the scenario cell starts, the predictions are frozen: each becomes a
   :class:`Prediction` with the time it was recorded. Nothing chosen later counts.
3. After the run, :func:`judge` compares the prediction with the outcome
   **measured** from the run's own counts (``measure(report)``), never with a
   stored answer, and :func:`record` writes both to ``prediction.json`` in the
   run's directory, next to the evidence.

A scenario without a prediction still gets its measured outcome; its verdict is
``None`` (neither right nor wrong). So does a run whose planned fault never
fired (its report's ``faults_not_applied``): its counts say nothing about the
scenario that was predicted, so the verdict names the fault and why, and the
score leaves it out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.errors import LabError, choices_error
from lab.outcomes import GUARANTEES, NAIVE_READER_OUTCOMES, TOPIC_WORDS

#: What a run's counts can show about delivery (:attr:`lab.audit.auditor.Audit.guarantee`), as choices to predict.
#: What the brokers kept of the acknowledged sends (a report's ``topic.lost``), as choices to predict.
#: The lab's own words (:data:`lab.outcomes.TOPIC_WORDS`), the ones the matrix's ``acked-*`` rows are judged with.
TOPIC_OUTCOMES = TOPIC_WORDS
#: The file a run's judged prediction is written to.
PREDICTION_FILE = "prediction.json"


def measured_guarantee(report: Mapping) -> tuple[str, str]:
    """The delivery guarantee a run report measured (``exactly-once``, ``at-least-once``, ...), and its counts.

    Like every ``measure`` of this module: ``(outcome, the counts that decided it)``.
    """
    return report["guarantee"], (f"{report.get('lost', 0)} lost, {report.get('duplicated', 0)} duplicated "
                                 f"of {report.get('acked', 0)}")


def topic_outcome_of(report: Mapping) -> tuple[str, str]:
    """Whether every acknowledged send was in the topic's final read (one of :data:`TOPIC_OUTCOMES`), and the count.

    Raises
    ------
    LabError
        When the run made no final read of its topic.
    """
    topic = report.get("topic") or {}
    if topic.get("lost") is None:
        raise LabError(f"run {report.get('run_dir', '?')} has no final read of its topic (report field topic.lost)")
    outcome = "acked-lost" if topic["lost"] else "acked-kept"
    return outcome, (f"{topic['lost']} of {topic.get('acked', report.get('acked', 0))} acknowledged sends not in the "
                     "topic")


#: Questions that are not a run's delivery guarantee, and the choices each is answered with. Each is measured by a
#: function next to what it measures (:func:`uncommitted_reader_outcome`, lab.lessons.fencing, lab.views.flink,
#: lab.views.run_files, lab.audit.deliveries.poison_outcomes, lab.views.trigger.state_outcome, window_state_outcome,
#: updates_outcome, lab.views.txn_epochs.epochs_outcome, lab.views.txn_epochs.late_write_outcome) and judged like a
#: run (:func:`judge`).
QUESTIONS = {
    "open transaction": ("aborted by its successor", "committed", "still open"),
    "zombie commit": ("refused", "accepted"),
    "uncommitted reader": NAIVE_READER_OUTCOMES,
    "bigger checkpoints": ("aligned's", "unaligned's"),
    "state providers": ("the same counts", "different counts"),
    "poison record": ("archived", "dead-lettered", "lost", "written"),
    "poison deliveries": ("fewer than the limit", "the delivery limit's times", "more than the limit"),
    "dedupe state": ("every event once", "some events missing", "ids of no event"),
    "window state": ("every count exact", "some counts over", "some counts under"),
    "window updates": ("each update once", "the cut batch's updates twice", "more updates twice"),
    "txn epochs": ("one epoch", "a new epoch per transaction", "neither"),
    "late write": ("fenced", "recognised as a duplicate", "refused another way", "let through"),
}
#: Every outcome a notebook may ask to predict (:func:`check_mapping` checks a whole ``PREDICTIONS`` against it).
ALL_OUTCOMES = tuple(dict.fromkeys(GUARANTEES + TOPIC_OUTCOMES + NAIVE_READER_OUTCOMES
                                   + tuple(c for choices in QUESTIONS.values() for c in choices)))


def uncommitted_reader_outcome(report: Mapping) -> tuple[str, str]:
    """What a ``read_uncommitted`` reader of a kafka-eos run's output topic gets (one of :data:`NAIVE_READER_OUTCOMES`).

    From the run's own reads of its output topic at both isolation levels (:mod:`lab.sinks.topic`).
    """
    extra = report.get("read_uncommitted_extra_copies")
    if extra is None:
        raise LabError(f"run {report.get('run_dir', '?')} read no output topic (report field "
                       "read_uncommitted_extra_copies)")
    outcome = NAIVE_READER_OUTCOMES[1] if extra else NAIVE_READER_OUTCOMES[0]
    return outcome, (f"{report.get('read_uncommitted_records')} records for a read_uncommitted reader, {extra} of them "
                     f"extra copies ({report.get('aborted_output_records', 0)} in aborted transactions)")


def check_mapping(given) -> dict:
    """A ``PREDICTIONS`` parameter as a dict, every value an outcome some question has (or empty).

    Raises
    ------
    LabError
        For a value that is not a mapping (papermill's ``-p`` passes a string:
        use ``-y 'PREDICTIONS: {...}'``), or an outcome no question has, naming
        its key and the outcomes there are.
    """
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise LabError(f"PREDICTIONS must be a mapping {{run label: outcome}}, got {type(given).__name__} "
                       f"{str(given)[:60]!r}; with papermill pass it as YAML: -y 'PREDICTIONS: {{\"reliable, WAL\": "
                       "at-least-once}'")
    for key, value in given.items():
        as_choice(value, ALL_OUTCOMES, key)
    return dict(given)


def normalise(outcome: str) -> str:
    """``"exactly once"``, ``"Exactly_Once"`` and ``"exactly-once"`` are one outcome."""
    words = str(outcome).strip().lower().replace("_", " ").replace("-", " ").split()
    return " ".join(words)


def as_choice(outcome, choices: Sequence[str], scenario: str) -> str | None:
    """``outcome`` as it is spelled in ``choices`` (``None`` and ``""`` stay ``None``).

    Raises
    ------
    LabError
        One line naming the scenario, the bad value and the valid choices.
    """
    if outcome is None or outcome == "":
        return None
    by_form = {normalise(c): c for c in choices}
    found = by_form.get(normalise(outcome))
    if found is None:
        raise choices_error(f"prediction for {scenario!r}", outcome, choices)
    return found


def check_given(given: Mapping | None, scenarios: Sequence[str], choices: Sequence[str]) -> dict[str, str | None]:
    """Validate a ``PREDICTIONS`` parameter against the scenarios a cell will run.

    Parameters
    ----------
    given : mapping or None
        ``{scenario: outcome}``; scenarios left out have no prediction.
    scenarios : sequence of str
        The scenarios the cell runs, in order.
    choices : sequence of str
        The outcomes one may predict.

    Returns
    -------
    dict
        Every scenario mapped to its outcome as spelled in ``choices``, or ``None``.

    Raises
    ------
    LabError
        For a scenario that the cell does not run (naming the ones it does) or an
        outcome not among ``choices``, before anything runs.
    """
    given = dict(given or {})
    unknown = [k for k in given if k not in scenarios]
    if unknown:
        raise choices_error("PREDICTIONS key", unknown[0], scenarios)
    return {s: as_choice(given.get(s), choices, s) for s in scenarios}


@dataclass(frozen=True)
class Prediction:
    """One scenario's prediction as frozen when its cell started.

    ``outcome`` is ``None`` when none was made; ``source`` says where it came
    from (``buttons``, ``PREDICTIONS`` or ``none``); ``recorded_at`` is the
    epoch time it was frozen.
    """

    scenario: str
    outcome: str | None
    source: str
    recorded_at: float


def freeze(outcomes: Mapping[str, str | None], source: str, now: float | None = None) -> dict[str, Prediction]:
    """The chosen outcomes as :class:`Prediction` records, all stamped with one time."""
    now = time.time() if now is None else now
    return {s: Prediction(s, o, source if o is not None else "none", now) for s, o in outcomes.items()}


@dataclass(frozen=True)
class Verdict:
    """A prediction next to the outcome its run measured.

    ``right`` is ``True`` or ``False``, or ``None`` when nothing was predicted.
    ``detail`` gives the counts that decided the outcome; ``source`` and
    ``recorded_at`` are the prediction's.
    """

    scenario: str
    predicted: str | None
    measured: str
    right: bool | None
    detail: str
    run_dir: str
    recorded_at: float
    source: str = "none"
    not_judged: str = ""  # why a prediction was not judged: a fault that never fired, lab.audit.shown

    @property
    def mark(self) -> str:
        return {True: "✔", False: "✘", None: "·"}[self.right]

    def sentence(self) -> str:
        """One line: what was predicted, what was measured, and the counts that decided it."""
        counts = self.detail
        if self.predicted is None:
            return f"{self.mark} {self.scenario}: no prediction; measured {self.measured} ({counts})"
        if self.not_judged:
            return (f"{self.mark} {self.scenario}: you predicted {self.predicted}, not judged: {self.not_judged}; "
                    f"measured {self.measured} ({counts}) without it")
        word = "right" if self.right else "not what happened"
        return (f"{self.mark} {self.scenario}: you predicted {self.predicted}, measured {self.measured} "
                f"({counts}): {word}")


def unshown(report: Mapping) -> list[str]:
    """Why a run could not show its lesson: each planned fault that never fired, and lab.audit.shown's reasons."""
    missed = [f"the planned {f.get('kind', 'fault')} never fired ({f.get('reason', 'no reason recorded')})"
              for f in report.get("faults_not_applied") or []]
    return missed + list(report.get("could_not_show") or [])  # a crash before any output or after the stream


def judge(prediction: Prediction, report: Mapping,
          measure: Callable[[Mapping], tuple[str, str]] = measured_guarantee) -> Verdict:
    """Compare a frozen prediction with the outcome measured from a run report.

    Parameters
    ----------
    prediction : Prediction
    report : mapping
        The run's ``report.json`` (:attr:`lab.run.supervisor.RunResult.report`).
    measure : callable
        ``report -> (outcome, detail)``: :func:`measured_guarantee` (default),
        :func:`topic_outcome_of`, :func:`lab.sinks.files.naive_reader_outcome`.

    A run whose report lists ``faults_not_applied`` or ``could_not_show``
    (:mod:`lab.audit.shown`) is not judged (``right`` is ``None``, ``not_judged``
    says why): the prediction was about the run with its fault, where its lesson shows.
    """
    measured, detail = measure(report)
    missed = unshown(report)
    if report.get("cautions"):  # judged, with the caution beside the counts
        detail = f"{detail}; caution: {'; '.join(report['cautions'])}"
    not_judged = "; ".join(missed) if prediction.outcome is not None else ""
    right = None if prediction.outcome is None or not_judged else normalise(prediction.outcome) == normalise(measured)
    return Verdict(prediction.scenario, prediction.outcome, measured, right, detail, str(report.get("run_dir", "")),
                   prediction.recorded_at, prediction.source, not_judged)


def record(verdict: Verdict, run_dir: Path | str, name: str = PREDICTION_FILE) -> Path:
    """Write the verdict to ``prediction.json`` (or ``name``: a question's file) in the run's directory; its path."""
    path = Path(run_dir) / name
    path.write_text(json.dumps(asdict(verdict), indent=1, ensure_ascii=False))
    return path


#: The file a set of judged predictions (notebook 04's grid) is written to.
PREDICTIONS_FILE = "predictions.json"


def record_all(verdicts: Sequence[Verdict], directory: Path | str) -> Path:
    """Write several verdicts (one per row of a grid) to ``predictions.json`` in ``directory`` (made) and return its
    path."""
    path = Path(directory) / PREDICTIONS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([asdict(v) for v in verdicts], indent=1, ensure_ascii=False))
    return path


def score(verdicts: Sequence[Verdict]) -> str:
    """``"3 of 4 predictions right"`` (scenarios without a prediction, or not judged, are not counted).

    Predictions not judged (the run could not show its lesson: lab.audit.shown, a fault that never fired) are
    counted after the score.
    """
    made = [v for v in verdicts if v.right is not None]
    unjudged = sum(1 for v in verdicts if v.not_judged)
    aside = f"; {unjudged} not judged: the run could not show its lesson" if unjudged else ""
    if not made:
        return (f"no predictions recorded for these {len(verdicts)} runs" if not unjudged
                else f"no prediction could be judged{aside}")
    return f"{sum(v.right for v in made)} of {len(made)} predictions right{aside}"
