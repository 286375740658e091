"""Run an exercise (:mod:`lab.lessons.exercises`) and check the answer its solution states against what the run measured."""

from __future__ import annotations

from lab.lessons.exercises import config_call, exercise


def solve(exercise_id: str, **overrides):
    """Run exercise ``exercise_id`` and fail unless the measured result bears out its stated answer.

    Parameters
    ----------
    exercise_id : str
        ``"01.2"``: see :data:`lab.lessons.exercises.EXERCISES`.
    **overrides
        Parameters that shrink the run for a quick check (``events=1500``); they
        must not change what the exercise is about.

    Returns
    -------
    lab.run.supervisor.RunResult

    Raises
    ------
    AssertionError
        When the run's counts do not satisfy the answer (:func:`lab.audit.expectations.satisfies`),
        naming the answer and what was measured, when the exercise's fault
        never happened, or when the run's files do not bear out an evidence
        exercise's answer (:func:`lab.lessons.evidence.check`): the solution no longer holds.
    lab.errors.LabError
        For an unknown exercise id.
    """
    from IPython.display import HTML, display

    from lab.run.kernel import start_cluster
    from lab.views.progress import config, run, show
    from lab.audit.expectations import EXPECTATIONS, measured, satisfies

    ex = exercise(exercise_id)
    params = {**ex.params, **overrides}
    if ex.cluster:
        params.setdefault("runs_dir", str(start_cluster()))
    result = run(config(**params))
    counts = result.report
    got = measured(ex.expect, counts)
    summary = (f"{counts['lost']} lost, {counts['duplicated']} duplicated, {counts['unexpected']} unexpected of "
               f"{counts['acked']}" + (f"; acknowledged and lost by the brokers: {counts['topic']['lost']}"
                                       if ex.cluster and counts.get("topic") else ""))
    if counts.get("faults_not_applied"):  # the exercise is about that fault: without it nothing was shown
        raise AssertionError(f"exercise {ex.id}: its fault never happened ({counts['faults_not_applied']}), "
                             f"run directory {result.run_dir}")
    if counts.get("could_not_show"):  # lab.audit.shown: neither right nor wrong, so said and not judged
        raise AssertionError(f"exercise {ex.id}: this run could not show its lesson: "
                             f"{'; '.join(counts['could_not_show'])}; run directory {result.run_dir}")
    if not satisfies(ex.expect, counts):
        raise AssertionError(f"exercise {ex.id}: the answer says {ex.expect} ({EXPECTATIONS[ex.expect]}); "
                             f"the run measured {got} ({summary}), run directory {result.run_dir}")
    finding = None
    if ex.evidence:  # the question the run's files decide (lab.lessons.evidence)
        from lab.lessons.evidence import check

        finding = check(ex.evidence, result)
        if not finding.holds:
            raise AssertionError(f"exercise {ex.id}: the answer says {ex.why!r}; the run's files show: "
                                 f"{finding.shows}, run directory {result.run_dir}")
    from html import escape

    display(HTML(f"<p>The checked run: <code>{escape(config_call(ex, **overrides))}</code></p>"))
    show(result)
    if finding is not None:
        display(HTML(f"<p>What the files show: {escape(finding.shows)}.</p>"))
        if finding.table is not None:
            display(finding.table)
    display(HTML(f"<p style='background:#d8f3dc;padding:4px'>✔ <b>{ex.id}</b>: measured <b>{got}</b> ({summary}), "
                 f"as the answer states: {ex.expect} ({EXPECTATIONS[ex.expect]}).</p>"))
    return result
