"""The flink pipeline end to end: a real Flink mini-cluster killed mid-epoch, restored from its own checkpoint.

Each test is one ``lab run`` as a user would start it; the expectations come from
Flink's and Kafka's documentation, the counts from the audit of the output topic,
and the duplicates a restart should write from the run's own timeline
(:mod:`lab.flink_audit`), never from a stored figure.
"""

import tempfile
from pathlib import Path

import pytest

from lab import events as ev
from lab.config import make_config
from lab.events import read_events
from lab.supervisor import run_scenario
from tests.integration.conftest import assert_all_gone, run_pids

pytestmark = [pytest.mark.integration, pytest.mark.kafka_only, pytest.mark.flink]

#: Half a checkpoint interval into the fourth epoch: the job is up 4-8 s after the run starts and checkpoints
#: every second or so, so the crash comes 8-12 s in, while the producer (6,000 events at 400/s: 15 s) still sends.
CRASH = "driver-crash@batch=3:mid-output"


def _flink_temp_files() -> set[Path]:
    """What Flink leaves in the system's temporary directory when nobody tells it where else to write."""
    tmp = Path(tempfile.gettempdir())
    return {p for pattern in ("minicluster_*", "flink-*") for p in tmp.glob(pattern)}


def _run(**params):
    before = _flink_temp_files()
    result = run_scenario(make_config(pipeline="flink", partitions=2, faults=CRASH, **params))
    # both attempts, the killed one included, kept their working files in the run directory, and the driver
    # removed them once no job was using them (the logs stay)
    assert _flink_temp_files() - before == set()
    assert not list((result.run_dir / "flink").glob("logs-*/tmp"))
    assert all((result.run_dir / "flink" / f"logs-{attempt}").is_dir() for attempt in (1, 2))
    events = read_events(result.run_dir)
    starts = [e for e in events if e["type"] == ev.FLINK_START]
    jobs = [e for e in events if e["type"] == ev.FLINK_JOB]
    # the crash came where planned; the restart restored a checkpoint of the dead job and started from its offsets
    assert [(e["point"], e["batch"]) for e in events if e["type"] == ev.FAULT_POINT] == [("mid-output", 3)]
    assert result.restarts == 1 and len(starts) == len(jobs) == 2 and result.drained
    assert starts[0]["restore"] is None and starts[1]["restore"].startswith(str(result.run_dir / "checkpoint"))
    assert starts[1]["restore"].split("/")[-2] == jobs[0]["job_id"]
    source = [e for e in events if e["type"] == ev.FLINK_SOURCE and e["attempt"] == 2]
    assert source and source[0]["offsets"] == starts[1]["start_offsets"]  # what Flink logged = what the checkpoint held
    assert_all_gone(run_pids(result.run_dir))
    return result, events


def test_aligned_checkpoints_and_a_transactional_sink_are_exactly_once_across_a_crash(runs_dir):
    result, events = _run(events=6000, rate=400, checkpointing="aligned")
    r = result.report
    assert (r["acked"], r["exactly_once"], r["lost"], r["duplicated"], r["unseen"]) == (6000, 6000, 0, 0, 0), r
    assert r["guarantee"] == "exactly-once" and r["settings"]["flink_delivery"] == "exactly-once"
    # the dead job's open transaction is in the log, aborted: read_uncommitted sees it, the audit does not
    assert r["read_uncommitted_records"] > 6000 and r["aborted_output_records"] == r["read_uncommitted_records"] - 6000
    assert r["flink_replays"]["predicted_extra_copies"] == 0 and r["flink_replays"]["restarts"][0]["written_before"] > 0


def test_at_least_once_duplicates_exactly_what_was_written_after_the_restored_checkpoint(runs_dir):
    result, events = _run(events=6000, rate=400, checkpointing="at-least-once")
    r = result.report
    replays = r["flink_replays"]
    assert r["settings"]["flink_delivery"] == "at-least-once" and r["lost"] == 0 and r["unseen"] == 0, r
    assert r["guarantee"] == "at-least-once" and r["duplicated"] > 0
    # predicted from the timeline (restore offsets, the output's end at the restart, the ledger) = measured
    assert replays["predicted_extra_copies"] == r["extra_copies"] == r["duplicated"], (replays, r)
    start = next(e for e in events if e["type"] == ev.FLINK_START and e["attempt"] == 2)
    assert replays["restarts"][0]["start_offsets"] == start["start_offsets"]


# Aligned vs unaligned checkpoints under back-pressure (sizes, in-flight records) are measured by notebook 08's
# test (tests/notebooks/test_notebooks.py, check_08), which runs both: a third pair here would add 45 s.
