"""A run that could not show its lesson says so (lab.audit.shown), and is not judged on it."""

from __future__ import annotations

from lab.audit.predictions import Prediction, judge
from lab.audit.shown import cautions, could_not_show


def e(t, type_, **kw):
    return {"t": 1000.0 + t, "type": type_, **kw}


PRODUCER = [e(0.0, "producer-start", rate=1000.0), e(3.0, "producer-done", sent=3000)]


def test_a_crash_before_the_first_batch_shows_no_replay():
    events = PRODUCER + [e(0.4, "fault", kind="driver-crash", batch=None, elapsed_s=0.4), e(1.0, "batch-done", batch=0)]
    [line] = could_not_show(events)
    assert line.startswith("the driver-crash (@at=0.4s) came before the first batch was done: this run shows no replay")
    assert "driver-crash@batch=N" in line
    assert could_not_show(events, batches_mark_output=False) == []  # flink, real-time mode: output precedes batches
    at_a_point = PRODUCER + [e(0.4, "fault", kind="driver-crash", batch=0, point="mid-output"), e(1.0, "batch-done")]
    assert could_not_show(at_a_point) == []  # inside batch 0 at a named point: the point says what was written


def test_a_crash_after_output_is_a_lesson():
    events = PRODUCER + [e(0.3, "batch-done", batch=0), e(0.4, "fault", kind="driver-crash", batch=None, elapsed_s=0.4),
                         e(0.9, "fault", kind="driver-crash", batch=None, elapsed_s=0.9)]
    assert could_not_show(events) == []
    other = PRODUCER + [e(0.4, "fault", kind="ack-loss"), e(1.0, "batch-done", batch=0)]
    assert could_not_show(other) == []  # not a crash of the pipeline's output


def test_a_fault_that_never_fired_is_named():
    events = PRODUCER + [e(9.0, "fault-not-applied", kind="driver-crash", index=0,
                           reason="the stream ended before it")]
    assert could_not_show(events) == []  # said once, by faults_not_applied: not judged on it either
    report = {"guarantee": "exactly-once", "faults_not_applied": [events[-1]], "could_not_show": []}
    v = judge(Prediction("crash", "at-least-once", "buttons", 1.0), report, measure=lambda r: (r["guarantee"], ""))
    assert v.right is None and v.not_judged == "the planned driver-crash never fired (the stream ended before it)"


def test_a_producer_far_behind_its_rate_moves_the_timed_faults():
    slow = [e(0.0, "producer-start", rate=1000.0), e(10.0, "producer-done", sent=3000)]  # 300/s of 1000/s
    [line] = cautions(slow, 1000.0, "driver-crash@batch=2,ack-loss@at=1s")
    assert line.startswith("the producer sent 300 events/s of the 1000/s asked")
    assert could_not_show(slow) == []  # a caution, not a run without its lesson: the check's relation decides
    assert cautions(slow, 1000.0, "driver-crash@batch=2") == []  # no fault timed in seconds: no matter
    assert cautions(slow, 0, "ack-loss@at=1s") == []  # as fast as it can: no rate to fall behind
    assert cautions([e(0.0, "producer-start"), e(5.0, "producer-done", sent=3000)], 1000.0, "x@at=1s") == []


def test_such_a_run_is_not_judged():
    report = {"lost": 0, "duplicated": 0, "unexpected": 0, "acked": 3000, "unseen": 0, "guarantee": "exactly-once",
              "could_not_show": ["the driver-crash (@at=0.4s) came before the first batch was done: this run shows "
                                 "no replay; run it again, or use driver-crash@batch=N"]}
    v = judge(Prediction("crash", "at-least-once", "buttons", 1.0), report,
              measure=lambda r: (r["guarantee"], ""))
    assert v.right is None and "came before the first batch" in v.not_judged


def test_a_crash_after_the_stream_ended_with_nothing_to_replay():
    events = PRODUCER + [e(1.0, "batch-done", batch=0, rows=600), e(30.0, "fault", kind="driver-crash", batch=None,
                                                                     elapsed_s=30.0)]
    [line] = could_not_show(events)
    assert line.startswith("the driver-crash (@at=30.0s) came after the stream had ended, with nothing left to replay")
    replayed = events + [e(31.0, "batch-done", batch=1, rows=40)]  # uncommitted output read again: a lesson
    assert could_not_show(replayed) == []


def test_a_caution_is_judged_with_it_beside_the_counts():
    report = {"lost": 0, "duplicated": 5, "unexpected": 0, "acked": 3000, "unseen": 0, "guarantee": "at-least-once",
              "cautions": ["the producer sent 300 events/s of the 1000/s asked (a busy machine): ..."]}
    v = judge(Prediction("crash", "at-least-once", "buttons", 1.0), report, measure=lambda r: (r["guarantee"], "5 dup"))
    assert v.right is True and v.detail == "5 dup; caution: " + report["cautions"][0]


def test_a_flink_restart_that_wrote_nothing_again_shows_no_replay():
    from lab.audit.shown import nothing_replayed

    crash = [{"type": "fault", "kind": "driver-crash", "batch": 2, "point": "mid-output", "t": 5.0}]
    empty = {"restarts": [{"attempt": 2, "checkpoint": 5, "written_before": 2759, "replayed": 0}]}
    assert nothing_replayed(empty, crash, "at-least-once") == [
        "the driver-crash came when checkpoint 5, which the restart restored, covered everything the job had "
        "written: this run shows no replay; run it again"]
    replayed = {"restarts": [{"attempt": 2, "checkpoint": 4, "written_before": 2759, "replayed": 120}]}
    assert nothing_replayed(replayed, crash, "at-least-once") == []
    assert nothing_replayed(empty, [], "at-least-once") == []
    assert nothing_replayed({"restarts": []}, crash, "at-least-once") == []
    # the exactly-once sink writes nothing again by design, whatever the crash: not a run without its lesson
    assert nothing_replayed(empty, crash, "exactly-once") == []


def test_a_flink_exactly_once_restart_with_nothing_to_abort_says_so_as_a_caution():
    from lab.audit.shown import nothing_to_abort

    crash = [{"type": "fault", "kind": "driver-crash", "batch": 2, "point": "mid-output", "t": 5.0}]
    held_all = {"restarts": [{"attempt": 2, "checkpoint": 2, "written_before": 4500, "replayed": 0, "reread": 0}]}
    assert nothing_to_abort(held_all, crash, "exactly-once") == [
        "the driver-crash came when checkpoint 2, which the restart restored, held every record the job had read: "
        "no transaction was open to abort, so this run shows no aborted records; run it again to see them"]
    read_again = {"restarts": [{"attempt": 2, "checkpoint": 4, "written_before": 2759, "replayed": 0, "reread": 80}]}
    assert nothing_to_abort(read_again, crash, "exactly-once") == []
    assert nothing_to_abort(held_all, crash, "at-least-once") == []  # its line is nothing_replayed's
    assert nothing_to_abort({"restarts": [{"attempt": 2, "checkpoint": 2, "replayed": 0}]}, crash,
                            "exactly-once") == []  # reread unknown: not said
    assert nothing_to_abort(held_all, [], "exactly-once") == []



def test_a_samza_restart_that_resumed_where_the_output_ended_shows_no_replay():
    from lab.audit.shown import resumed_at_the_output_end

    crash = {"type": "fault", "kind": "driver-crash", "elapsed_s": 5.02, "t": 5.0}
    window = {"type": "batch-start", "attempt": 1, "t": 4.0, "replayed": 0}
    resumed = {"type": "batch-start", "attempt": 2, "t": 9.0, "replayed": 0}
    events = [window, crash, resumed]
    assert resumed_at_the_output_end(events, 0) == [
        "the driver-crash (@at=5.0s) came just after a checkpoint: the restarted job resumed where the output had "
        "ended and sent nothing again; this run shows no replay; run it again"]
    assert resumed_at_the_output_end([window, crash, {**resumed, "replayed": 40}], 40) == []
    assert resumed_at_the_output_end(events, 3) == []  # an output sent but not yet reported: written again
    assert resumed_at_the_output_end([crash, resumed], 0) == []  # before any window: could_not_show's to say
    assert resumed_at_the_output_end([window, {**crash, "batch": 2}, resumed], 0) == []  # at a point: it says
