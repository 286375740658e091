import pytest
from hypothesis import given, strategies as st

from lab.errors import LabError
from lab.faults.catalogue import FAULT_KINDS, FAULTS, POINTS
from lab.faults.plan import Fault, format_fault_plan, parse_fault_plan


def test_examples_from_the_docs():
    plan = parse_fault_plan(
        "driver-crash@at=5s, driver-crash@batch=3:after-output-before-commit,broker-outage@at=4s:for=2.5s")
    assert plan[0] == Fault("driver-crash", at_s=5.0, index=0)
    assert plan[1] == Fault("driver-crash", batch=3, point="after-output-before-commit", index=1)
    assert plan[2].kind == "broker-outage" and plan[2].duration_s == 2.5 and plan[2].at_s == 4.0


def test_empty_plan_means_no_faults():
    assert parse_fault_plan("") == () == parse_fault_plan(None) == parse_fault_plan("  ")


@pytest.mark.parametrize(
    "plan, must_name",
    [
        ("driver-krash@at=1s", ["driver-krash", "driver-crash", "ack-loss"]),
        ("driver-crash", ["driver-crash@at=<seconds>s"]),
        ("driver-crash@at=5", ["at=5", "at=<seconds>s", "batch=<n>"]),
        ("driver-crash@batch=2:mid-outpt", ["mid-outpt", "mid-output", "after-offset-log"]),
        ("driver-crash@at=2s:mid-output", ["needs a batch trigger"]),
        ("broker-outage@at=1s:for=3", ["for=3", "for=<seconds>s"]),
        ("ack-loss@at=1s:count=0", ["count=0"]),
        ("ack-loss@at=1s:size=2", ["size", "for", "count"]),
        ("driver-crash@at=1s,,ack-loss@at=2s", ["empty item"]),
        ("broker-outage@batch=2:mid-output", ["named points apply to"]),
        ("driver-crash@isr=1", ["isr=<n> trigger applies to leader-crash", "driver-crash@at=<seconds>s"]),
        ("leader-crash@isr=0:for=2s", ["isr=0", "n >= 1"]),
        ("leader-crash@isr=one", ["isr=one", "isr=<n>", "leader-crash"]),
        ("leader-crash", ["leader-crash@at=<seconds>s, leader-crash@isr=<n> or leader-crash@batch=<n>"]),
    ],
)
def test_bad_plans_name_the_value_and_the_choices(plan, must_name):
    with pytest.raises(LabError) as e:
        parse_fault_plan(plan)
    msg = str(e.value)
    assert "\n" not in msg
    for word in must_name:
        assert word in msg


faults = st.builds(
    lambda kind, trig, point, dur, count: Fault(
        kind=kind,
        at_s=trig[1] if trig[0] == "at" and not FAULTS[kind].key_trigger else None,
        batch=trig[1] if trig[0] == "batch" and not FAULTS[kind].key_trigger else None,
        isr=trig[1] if trig[0] == "isr" and FAULTS[kind].isr_trigger else None,
        key=int(trig[1]) % 64 if FAULTS[kind].key_trigger else None,
        point=point if (FAULTS[kind].points and trig[0] == "batch") else None,
        duration_s=dur if "for" in FAULTS[kind].options else 3.0,
        count=count if "count" in FAULTS[kind].options else None,
    ),
    st.sampled_from(sorted(FAULT_KINDS)),
    st.one_of(st.tuples(st.just("at"), st.integers(0, 600).map(float)), st.tuples(st.just("batch"), st.integers(0, 99)),
              st.tuples(st.just("isr"), st.integers(1, 2))),
    st.one_of(st.none(), st.sampled_from(sorted(POINTS))),
    st.integers(1, 60).map(float),
    st.one_of(st.none(), st.integers(1, 50)),
)


@given(st.lists(faults, min_size=1, max_size=4))
def test_plan_text_round_trips(plan):
    plan = [f for f in plan if not (FAULTS[f.kind].needs_batch and f.batch is None)
            and (f.at_s, f.batch, f.isr, f.key) != (None, None, None, None)]
    plan = [Fault(**{**f.__dict__, "index": i}) for i, f in enumerate(plan)]
    if plan:
        assert list(parse_fault_plan(format_fault_plan(plan))) == plan


def test_after_commit_before_output_needs_the_commit_before_the_output():
    import pytest

    from lab.config import make_config
    from lab.errors import LabError

    with pytest.raises(LabError, match="only with --commit before-output .this run: --commit auto"):
        make_config(pipeline="plain", faults="driver-crash@batch=2:after-commit-before-output")
    make_config(pipeline="plain", commit="before-output", faults="driver-crash@batch=2:after-commit-before-output")


def test_recorded_faults_replay_at_their_second_point_or_isr(tmp_path):
    import json

    from lab.faults.plan import plan_from_events

    events = tmp_path / "events.jsonl"
    lines = [{"type": "run-start"},
             {"type": "fault", "kind": "follower-lag", "elapsed_s": 1.013, "duration_s": 8.0},
             {"type": "fault", "kind": "leader-crash", "elapsed_s": 5.51, "isr": [2], "isr_at_most": 2,
              "duration_s": 2.0},
             {"type": "fault", "kind": "driver-crash", "elapsed_s": 9.0, "batch": 3, "point": "mid-output"},
             {"type": "fault", "kind": "leader-unreachable", "elapsed_s": 11.0, "batch": 4,
              "point": "after-output-before-commit", "duration_s": 15.0}]
    events.write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert plan_from_events(events) == ("follower-lag@at=1s:for=8s,leader-crash@isr=2:for=2s,"
                                        "driver-crash@batch=3:mid-output,"
                                        "leader-unreachable@batch=4:after-output-before-commit:for=15s")
