"""Exercises in a notebook: a learner's attempt (:func:`attempt`), a question on a run's files (:func:`explain`), and
the solutions' check (:func:`solve`), which fails when the lab disagrees with the documented answer.

The rules (what a blank may hold, how an attempt is judged) are :mod:`lab.lessons.exercises`'s;
this module runs and displays.
"""

from __future__ import annotations

import time

from lab.lessons.exercises import Exercise, check_setting, choices_of, config_call, exercise, judge_attempt

#: Parameters that only make a run shorter or longer: a learner or a solution may pass them with any exercise.
SIZING = ("events", "rate", "max_batch_records", "partitions", "seed", "deadline_s", "consumers")


def _extra_settings(ex: Exercise, settings: dict) -> None:
    from lab.errors import choices_error

    allowed = (*([ex.blank] if ex.blank else []), *SIZING)
    for key in settings:
        if key not in allowed:
            raise choices_error(f"setting for exercise {ex.id}", key, allowed)


def _run(ex: Exercise, params: dict):
    from lab.run.kernel import start_cluster
    from lab.views.progress import config, run

    if ex.cluster:
        params.setdefault("runs_dir", str(start_cluster()))
    return run(config(**params))


def attempt(exercise_id: str, predict=..., **settings):
    """A learner's exercise: their value for its blank, their prediction, a run, and both judgements.

    Parameters
    ----------
    exercise_id : str
        ``"00.1"``: see :data:`lab.lessons.exercises.EXERCISES`.
    predict : str
        The learner's prediction, an outcome word (:func:`lab.lessons.exercises.choices_of`).
    **settings
        The exercise's blank (``commit="before-output"``), and optionally
        :data:`SIZING` parameters for a shorter run.

    Returns
    -------
    lab.run.supervisor.RunResult or None
        The run; ``None`` when the value was not the change the task asks for
        (then nothing ran: the line says so). The judged prediction is written
        to the run's ``prediction.json`` (source ``exercise``).

    Raises
    ------
    lab.errors.LabError
        Before any run: the blank or the prediction left as ``...``, a value
        the setting cannot take, a prediction that is not an outcome word, a
        setting the exercise does not have, or an evidence exercise (use
        :func:`explain`): one line each, naming the valid choices.
    """
    from html import escape

    from IPython.display import HTML, display

    from lab.audit.predictions import Prediction, as_choice, judge, record
    from lab.errors import LabError
    from lab.views.predict import COLOURS

    ex = exercise(exercise_id)
    if ex.evidence:
        raise LabError(f"exercise {ex.id} reads a run this notebook made: nb.explain({ex.id!r}, {ex.lesson_run})")
    _extra_settings(ex, settings)
    check = check_setting(ex, settings.get(ex.blank, ...))
    if predict is Ellipsis or predict is None or predict == "":
        raise LabError(f"exercise {ex.id}: predict first: predict=... one of {', '.join(choices_of(ex))}")
    predicted = as_choice(predict, choices_of(ex), f"exercise {ex.id}")
    if not check.ok:
        display(HTML(f"<p class='lab-exercise' style='background:#fde0dc;padding:4px'>✘ <b>{ex.id}</b>: "
                     f"<code>{escape(check.setting)}</code> is not the change this exercise asks for: read its task "
                     "again. Nothing was run.</p>"))
        return None
    result = _run(ex, {**ex.params, **settings})
    judged = judge_attempt(ex, check.setting, predicted, result.report)
    verdict = judge(Prediction(f"exercise {ex.id}", predicted, "exercise", time.time()), result.report,
                    lambda _report: (judged.measured, judged.counts))
    record(verdict, result.run_dir)
    colour = COLOURS[judged.right if judged.as_documented else None]
    display(HTML(f"<p class='lab-exercise' style='background:{colour};padding:4px'>{escape(judged.sentence())}</p>"))
    return result


def _differences(ex: Exercise, result) -> list[str]:
    """What differs between ``result``'s run and the one an evidence exercise is about: every parameter but
    :data:`SIZING`, and the fault plan by kind and crash point (a lesson may crash at another batch or second)."""
    from lab.config import make_config
    from lab.faults.plan import parse_fault_plan

    asked = make_config(**ex.params)
    ran = result.config
    out = []
    for key in ex.params:
        if key in SIZING:
            continue
        if key == "faults":
            def shape(plan):
                return sorted((f.kind, getattr(f, "point", None) or "") for f in parse_fault_plan(plan))

            if shape(ex.params["faults"]) != shape(ran.faults):
                out.append(f"faults {ran.faults!r} (this question needs {ex.params['faults']!r})")
        elif asked.is_setting(key) and asked.option(key) != ran.option(key):
            out.append(f"{key}={ran.option(key)!r} (this question needs {asked.option(key)!r})")
    return out


def explain(exercise_id: str, result) -> None:
    """An evidence exercise on a run already made: check it is the run the question is about, and show the question.

    Raises
    ------
    lab.errors.LabError
        For a run exercise (use :func:`attempt`), or a run whose settings the
        question is not about, naming each difference and the run to use.
    """
    from html import escape

    from IPython.display import HTML, display

    from lab.errors import LabError

    ex = exercise(exercise_id)
    if not ex.evidence:
        raise LabError(f"exercise {ex.id} is a run to predict: nb.exercise({ex.id!r}, {ex.blank}=..., predict=...)")
    if result is None or not hasattr(result, "run_dir"):
        raise LabError(f"exercise {ex.id} reads a finished run: pass {ex.lesson_run}, got {type(result).__name__}")
    differs = _differences(ex, result)
    if differs:
        raise LabError(f"exercise {ex.id} is about another run: this one has {'; '.join(differs)}; pass "
                       f"{ex.lesson_run}")
    display(HTML(f"<p class='lab-exercise'><b>{ex.id}</b>: run <code>{escape(result.run_dir.name)}</code>. "
                 f"{escape(ex.task)} Write your explanation down, then compare it with "
                 f"<code>solutions/{ex.notebook}.ipynb</code>.</p>"))


def solve(exercise_id: str, run=None, **settings):
    """Run exercise ``exercise_id`` with its blank filled in, and fail unless the measured result bears out its answer.

    Parameters
    ----------
    exercise_id : str
        ``"01.2"``: see :data:`lab.lessons.exercises.EXERCISES`.
    run : RunResult, optional
        An evidence exercise's run, made earlier in the notebook (06.3 reads 06.2's); without it the exercise's own run.
    **settings
        The blank, filled in (``wal="on"``): the solution's line is the learner's
        with the answer in it; and :data:`SIZING` parameters for a quick check.

    Returns
    -------
    lab.run.supervisor.RunResult

    Raises
    ------
    AssertionError
        When the value filled in is not the change the task asks for, when the
        run's counts do not measure the stated answer, when the exercise's
        fault never happened, or when the run's files do not bear out an
        evidence exercise's answer (:func:`lab.lessons.evidence.check`): the
        solution no longer holds.
    lab.errors.LabError
        For an unknown exercise id, a blank left empty, or a setting the exercise does not have.
    """
    from html import escape

    from IPython.display import HTML, display

    from lab.audit.expectations import EXPECTATIONS
    from lab.views.progress import show

    ex = exercise(exercise_id)
    _extra_settings(ex, settings)
    if ex.blank:
        check = check_setting(ex, settings.get(ex.blank, ...))
        if not check.ok:
            raise AssertionError(f"exercise {ex.id}: {check.setting} is not the answer's "
                                 f"{ex.blank}={ex.params[ex.blank]!r}")
    result = run if run is not None else _run(ex, {**ex.params, **settings})
    if run is not None:
        explain(ex.id, run)  # the run given is the one the question is about
    judged = judge_attempt(ex, f"{ex.blank}={settings.get(ex.blank)!r}" if ex.blank else "its run", ex.expect,
                           result.report)
    if result.report.get("faults_not_applied"):  # the exercise is about that fault: without it nothing was shown
        raise AssertionError(f"exercise {ex.id}: its fault never happened ({result.report['faults_not_applied']}), "
                             f"run directory {result.run_dir}")
    if judged.not_judged:  # lab.audit.shown: neither right nor wrong, so said and not judged
        raise AssertionError(f"exercise {ex.id}: this run could not show its lesson: {judged.not_judged}; "
                             f"run directory {result.run_dir}")
    if not judged.as_documented:
        raise AssertionError(f"exercise {ex.id}: the answer says {ex.expect} ({EXPECTATIONS[ex.expect]}); "
                             f"the run measured {judged.measured} ({judged.counts}), run directory {result.run_dir}")
    finding = None
    if ex.evidence:  # the question the run's files decide (lab.lessons.evidence)
        from lab.lessons.evidence import check as check_evidence

        finding = check_evidence(ex.evidence, result)
        if not finding.holds:
            raise AssertionError(f"exercise {ex.id}: the answer says {ex.why!r}; the run's files show: "
                                 f"{finding.shows}, run directory {result.run_dir}")
    shown = f"nb.solve({ex.id!r}, run=...)" if run is not None else config_call(ex, **settings)
    display(HTML(f"<p>The checked run: <code>{escape(shown)}</code></p>"))
    show(result)
    if finding is not None:
        display(HTML(f"<p>What the files show: {escape(finding.shows)}.</p>"))
        if finding.table is not None:
            display(finding.table)
    display(HTML(f"<p style='background:#d8f3dc;padding:4px'>✔ <b>{ex.id}</b>: measured <b>{judged.measured}</b> "
                 f"({judged.counts}), as the answer states: {ex.expect} ({EXPECTATIONS[ex.expect]}).</p>"))
    return result
