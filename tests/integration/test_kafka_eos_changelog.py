"""Samza's changelog on kafka-eos: a driver killed inside its transaction, its store restored from the changelog."""

import json

import pytest

from lab.config import make_config
from lab.events import read_events
from lab.run.supervisor import run_scenario
from lab.sinks.changelog import changelog_topic, read_changelog
from tests.integration.conftest import assert_all_gone, run_pids

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("point", ["mid-output", "after-output-before-commit"])
def test_a_restored_store_counts_every_key_exactly_after_a_kill_inside_the_transaction(runs_dir, point):
    result = run_scenario(make_config(pipeline="kafka-eos", query="key-count", events=600, rate=0,
                                      max_batch_records=100, faults=f"driver-crash@batch=2:{point}"))
    r, events = result.report, read_events(result.run_dir)
    # the output topic's per-event audit is unchanged: every acknowledged event once, read_committed
    assert r["acked"] == 600 and (r["lost"], r["duplicated"], r["unseen"], r["unexpected"]) == (0, 0, 0, 0), r
    assert result.drained and result.restarts == 1
    # the state: every key's last committed count is its acknowledged events
    c = r["changelog"]
    assert c["keys"] > 0 and c["keys_exact"] == c["keys"], c
    assert (c["keys_over"], c["keys_under"], c["overcount"], c["undercount"]) == (0, 0, 0, 0), c
    # the kill came inside the open transaction; the restart restored a new store from batches 0 and 1
    assert [(e["point"], e["batch"]) for e in events if e["type"] == "fault-point"] == [(point, 2)]
    restores = {e["attempt"]: e for e in c["restores"]}
    assert set(restores) == {1, 2} and restores[1]["records"] == 0, c["restores"]
    assert restores[2]["records"] > 0 and restores[2]["keys"] > 0 and restores[2]["took_s"] < 10, c["restores"]
    # the killed attempt's changelog writes are in the log, aborted: read_uncommitted gets more
    bootstrap = json.loads((result.run_dir / "broker.json").read_text())["bootstrap"]
    committed = read_changelog(bootstrap, changelog_topic(result.config.topic), "read_committed")
    everything = read_changelog(bootstrap, changelog_topic(result.config.topic), "read_uncommitted")
    assert len(everything) > len(committed) == c["read_committed_records"], (len(everything), len(committed))
    assert c["read_uncommitted_records"] == len(everything)
    assert all(json.loads(x.value)["attempt"] == 2 or json.loads(x.value)["batch"] < 2 for x in committed)
    assert_all_gone(run_pids(result.run_dir))
