"""The flink pipeline's quick run: aligned barriers with Flink's at-least-once Kafka sink, the job killed mid-epoch.

Notebook 08 runs the other combinations (aligned checkpoints with the exactly-once
sink, at-least-once barriers, unaligned under back-pressure) and its test applies
:mod:`tests.integration.flink_checks` to them. This one is none of those: aligned
barriers make the checkpoint consistent, but a sink that only flushes at each
checkpoint has already sent what the dead job processed after it, so the restored
job sends those records again. The duplicates are predicted from the run's own
timeline (:mod:`lab.audit.flink_replay`), never from a stored figure.
"""

import pytest

from lab.config import make_config
from lab.run.supervisor import run_scenario
from tests.integration.flink_checks import (
    check_at_least_once_duplicates_exactly_what_was_written_after_the_restored_checkpoint,
    check_flink_crash_run,
)

pytestmark = pytest.mark.integration

#: 3,000 events at 300/s: a 10 s stream, so the crash in checkpoint epoch 2 lands while events still arrive.
CRASH_BATCH = 2


@pytest.fixture(scope="module", autouse=True)
def flink_environment():
    from lab.flink.env import env_problem

    problem = env_problem()
    if problem:
        pytest.fail(f"the flink pipeline's environment is missing: {problem} (make flink)")


@pytest.mark.quick
def test_aligned_barriers_with_an_at_least_once_sink_duplicate_what_was_sent_after_the_restored_checkpoint(runs_dir):
    result = run_scenario(make_config(pipeline="flink", events=3000, rate=300, checkpointing="aligned",
                                      flink_delivery="at-least-once",
                                      faults=f"driver-crash@batch={CRASH_BATCH}:mid-output"))
    r = {**result.report, "run_dir": str(result.run_dir)}
    assert r["settings"]["checkpointing"] == "aligned"
    events = check_flink_crash_run(r, CRASH_BATCH)
    check_at_least_once_duplicates_exactly_what_was_written_after_the_restored_checkpoint(r, events)
