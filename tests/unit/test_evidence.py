"""Evidence exercises: every pipeline notebook has one, and a check fails when the files disagree with the counts."""

import json
import os
from types import SimpleNamespace

import pytest

from lab import events as ev, notebook as nb
from lab.errors import LabError
from lab.lessons.evidence import CHECKS, check
from lab.lessons.exercises import EXERCISES, for_notebook

#: The notebooks that run a pipeline and show its files (00 tours the lab, 04 reads results).
PIPELINE_NOTEBOOKS = ("01_receiver_wal", "02_direct_kafka", "03_structured_streaming", "05_exactly_once_production",
                      "06_stateful_streaming", "07_kafka_guarantees", "08_other_engines", "09_queues_and_zombies")


@pytest.mark.parametrize("notebook", PIPELINE_NOTEBOOKS)
def test_every_pipeline_notebook_has_an_evidence_exercise(notebook):
    evidence = [e for e in for_notebook(notebook) if e.evidence]
    assert len(evidence) == 1, notebook
    ex = evidence[0]
    assert ex.evidence in CHECKS and ex.look
    for name in {n.split("(")[0] for n in ex.look.replace("(", " (").split() if n.startswith("nb.")}:
        assert hasattr(nb, name.removeprefix("nb.")), f"{ex.id}: {name} is not in lab.notebook"


def test_an_unknown_check_names_the_valid_ones():
    with pytest.raises(LabError, match="'nope'.*direct-unfinished-plan"):
        check("nope", None)


def _direct_run(tmp_path, *, done_2_after_crash=True):
    """A direct run's files: four plans of 100 records, the driver killed at t=100 in batch 2."""
    run = tmp_path / "run"
    for d in ("offsets", "done"):
        (run / "checkpoint" / d).mkdir(parents=True)
    t0, crash = 1000.0, 1100.0
    lines = [{"t": t0, "type": ev.RUN_START}, {"t": crash, "type": ev.FAULT, "kind": "driver-crash"}]
    for b in range(4):
        plan = run / "checkpoint" / "offsets" / f"{b}.json"
        plan.write_text(json.dumps({"batch": b, "ranges": [{"partition": 0, "fromOffset": 100 * b,
                                                            "untilOffset": 100 * (b + 1)}]}))
        logged = t0 + 10 + 30 * b
        os.utime(plan, (logged, logged))
        done = run / "checkpoint" / "done" / str(b)
        done.write_text("{}")
        finished = logged + (60 if b == 2 and done_2_after_crash else 5)
        os.utime(done, (finished, finished))
        lines.append({"t": logged, "type": ev.BATCH_START, "batch": b})
    lines.append({"t": crash + 10, "type": ev.BATCH_START, "batch": 2, "replay": True})
    (run / ev.EVENTS_FILE).write_text("".join(json.dumps(e) + "\n" for e in sorted(lines, key=lambda e: e["t"])))
    return run


def test_the_plan_a_crash_left_unfinished_explains_the_duplicates(tmp_path):
    run = _direct_run(tmp_path)
    found = check("direct-unfinished-plan", SimpleNamespace(run_dir=run, report={"duplicated": 100}))
    assert found.holds, found.shows
    assert "batch 2" in found.shows and list(found.table["left unfinished by the crash"]) == [False, False, True, False]


def test_duplicates_other_than_the_plan_fail_the_check(tmp_path):
    run = _direct_run(tmp_path)
    found = check("direct-unfinished-plan", SimpleNamespace(run_dir=run, report={"duplicated": 37}))
    assert not found.holds and "37 events twice" in found.shows


def test_no_batch_left_unfinished_fails_the_check(tmp_path):
    run = _direct_run(tmp_path, done_2_after_crash=False)
    found = check("direct-unfinished-plan", SimpleNamespace(run_dir=run, report={"duplicated": 100}))
    assert not found.holds and "0 batches unfinished" in found.shows


def test_evidence_ids_follow_their_notebooks_exercises():
    for ex in EXERCISES:
        if ex.evidence:
            same = for_notebook(ex.notebook)
            assert same[-1] is ex, f"{ex.id}: the evidence exercise comes last in its notebook"
