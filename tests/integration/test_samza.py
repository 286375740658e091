"""The samza pipeline end to end: Samza's job killed for real, its output and its restored state audited per key."""

import pandas as pd
import pytest

from lab.config import make_config
from lab.events import read_events
from lab.run.supervisor import run_scenario
from tests.integration.conftest import assert_all_gone, resumed_at, run_pids

pytestmark = pytest.mark.integration

#: 3,000 events at 300/s: the stream lasts 10 s, so a crash 5 s into it lands while events still arrive.
STREAM = dict(pipeline="samza", events=3000, rate=300, faults="driver-crash@at=5s")


@pytest.mark.quick
def test_a_crash_replays_output_and_every_key_is_restored_exactly_from_the_changelog(runs_dir):
    result = run_scenario(make_config(**STREAM))
    r = result.report
    assert result.drained and result.restarts == 1 and r["settings"]["query"] == "key-count"
    # the output, as Samza documents it: at least once, the replay since the last checkpoint sent again: in each
    # partition the events written twice are one unbroken run of offsets from where the restarted job resumed (none
    # when the kill came just after a checkpoint: measured once in a loaded suite, Samza checkpoints every second)
    assert r["lost"] == 0 and r["guarantee"] == ("at-least-once" if r["duplicated"] else "exactly-once"), r
    assert len(r["could_not_show"]) == (r["duplicated"] == 0), r["could_not_show"]  # and then it says so
    table = pd.read_csv(result.run_dir / "audit.csv")
    twice = {int(p): sorted(int(o) for o in g["kafka_offset"])
             for p, g in table[table["delivered"] > 1].groupby("partition")}
    resume = resumed_at(result.run_dir)
    assert twice == {p: list(range(resume[p], resume[p] + len(o))) for p, o in twice.items()}, (resume, twice)
    assert sum(map(len, twice.values())) == r["duplicated"], r
    state = r["changelog"]
    assert state["keys"] > 0 and state["keys_exact"] == state["keys"], state
    restores = [e for e in read_events(result.run_dir) if e["type"] == "changelog-restore"]
    assert {e["attempt"] for e in restores} == {1, 2} and len(restores) == 2 * 3  # a task per partition, per attempt
    assert sum(e["keys"] for e in restores if e["attempt"] == 2) > 0  # the new host's stores came from the changelog
    assert_all_gone(run_pids(result.run_dir))


def test_samzas_default_store_cache_can_lose_the_last_commits_state_changes_and_never_counts_twice(runs_dir):
    """A race (lab/samza/settings.py ``STORE_CACHE``): keys short in 6 of 9 runs measured, exact in 3. What always
    holds: no output lost, no key over; each key short or exact, each restore counted."""
    result = run_scenario(make_config(**STREAM, samza_store_cache="on"))
    state = result.report["changelog"]
    assert (result.report["lost"] == 0 and result.restarts == 1
            and result.report["settings"]["samza_store_cache"] == "on")
    assert state["keys_over"] == 0 and state["keys_exact"] + state["keys_under"] == state["keys"] > 0, state
