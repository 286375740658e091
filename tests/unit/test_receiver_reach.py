"""The receiver's reach of its feeder (lab.pipelines.receiver.reach): decided by Spark's start report and the
accepts."""

from lab.pipelines.receiver.reach import REACH_LIMIT_S, Reach, unreachable_message


def test_no_verdict_before_spark_starts_the_receiver():
    r = Reach()
    assert r.unreached(accepted=0, now=1000.0) is None  # a slow machine that has not started it yet: no verdict
    r.receiver_error("Error connecting to 127.0.0.1:40000")  # an error alone is not a start
    assert r.unreached(accepted=0, now=2000.0) is None


def test_unreached_once_started_without_an_accept_for_the_limit():
    r = Reach()
    r.receiver_started(100.0)
    assert r.unreached(accepted=0, now=100.0 + REACH_LIMIT_S - 0.1) is None
    r.receiver_error("Error connecting to jupyter:41234")
    r.receiver_error("Error connecting to jupyter:41234")
    why = r.unreached(accepted=0, now=100.0 + REACH_LIMIT_S)
    assert why == f"Error connecting to jupyter:41234 (2 receiver error(s) in {REACH_LIMIT_S:.0f} s)"
    r.receiver_started(105.0)  # Spark's restart of the receiver: the clock runs from the first start
    assert r.unreached(accepted=0, now=100.0 + REACH_LIMIT_S) is not None


def test_one_accept_settles_it_for_the_attempt():
    r = Reach()
    r.receiver_started(100.0)
    assert r.unreached(accepted=1, now=10_000.0) is None  # later drops are receiver restarts, not a wrong address


def test_the_line_names_the_address_and_the_setting():
    line = unreachable_message("127.0.0.1", 41234, "Connection refused (3 receiver error(s) in 8 s)")
    assert "\n" not in line and "127.0.0.1:41234" in line and "LAB_SPARK_DRIVER_HOST" in line
