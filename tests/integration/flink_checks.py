"""The flink pipeline's checks: a real Flink mini-cluster killed mid-epoch, restored from its own checkpoint.

Notebook 08 runs these scenarios (aligned checkpoints with Flink's exactly-once
Kafka sink, and at-least-once barriers, each with the driver killed mid-epoch),
and its test applies these checks to those runs (``tests/notebooks``,
``check_08``), so each Flink run is made once per suite. The expectations come
from Flink's and Kafka's documentation, the counts from the audit of the output
topic, and the duplicates a restart should write from the run's own timeline
(:mod:`lab.audit.flink_replay`), never from a stored figure.
"""

import tempfile
from pathlib import Path

from lab import events as ev
from lab.events import read_events
from tests.integration.conftest import assert_all_gone, run_pids


def flink_temp_files() -> set[Path]:
    """What Flink leaves in the system's temporary directory when nobody tells it where else to write."""
    tmp = Path(tempfile.gettempdir())
    return {p for pattern in ("minicluster_*", "flink-*") for p in tmp.glob(pattern)}


def check_flink_crash_run(r: dict, crash_batch: int) -> list[dict]:
    """A flink run (its report) with ``driver-crash@batch=N:mid-output``: killed where planned, restored from the
    dead job's checkpoint at the offsets it held, its working files in the run directory and removed; its timeline."""
    run_dir = Path(r["run_dir"])
    # both attempts, the killed one included, kept their working files in the run directory, and the driver
    # removed them once no job was using them (the logs stay)
    assert not list((run_dir / "flink").glob("logs-*/tmp"))
    assert all((run_dir / "flink" / f"logs-{attempt}").is_dir() for attempt in (1, 2))
    events = read_events(run_dir)
    starts = [e for e in events if e["type"] == ev.FLINK_START]
    jobs = [e for e in events if e["type"] == ev.FLINK_JOB]
    # the crash came where planned; the restart restored a checkpoint of the dead job and started from its offsets
    assert [(e["point"], e["batch"]) for e in events if e["type"] == ev.FAULT_POINT] == [("mid-output", crash_batch)]
    assert r["restarts"] == 1 and len(starts) == len(jobs) == 2 and r["drained"]
    assert starts[0]["restore"] is None and starts[1]["restore"].startswith(str(run_dir / "checkpoint"))
    assert starts[1]["restore"].split("/")[-2] == jobs[0]["job_id"]
    source = [e for e in events if e["type"] == ev.FLINK_SOURCE and e["attempt"] == 2]
    assert source and source[0]["offsets"] == starts[1]["start_offsets"]  # what Flink logged = what the checkpoint held
    assert_all_gone(run_pids(run_dir))
    return events


def check_aligned_checkpoints_and_a_transactional_sink_are_exactly_once(r: dict) -> None:
    """Aligned checkpoints, Flink's exactly-once Kafka sink, a crash mid-epoch: every event once for a reader."""
    n = r["acked"]
    assert r["exactly_once"] == n > 0 and (r["lost"], r["duplicated"], r["unseen"]) == (0, 0, 0), r
    assert r["guarantee"] == "exactly-once" and r["settings"]["flink_delivery"] == "exactly-once"
    # the dead job's open transaction is in the log, aborted: read_uncommitted sees it, the audit does not
    # It held records unless the restored checkpoint held every event the job had read (`reread` 0: a loaded
    # suite's job started late, read the whole input by checkpoint 2, and the kill found no transaction to abort)
    held_all = [line for line in r["cautions"] if "no transaction was open to abort" in line]
    if [x.get("reread") for x in r["flink_replays"]["restarts"]] == [0]:
        assert r["aborted_output_records"] == r["read_uncommitted_records"] - n, r
        assert len(held_all) == 1, r["cautions"]  # and the reader is told why
    else:
        assert r["aborted_output_records"] == r["read_uncommitted_records"] - n > 0, r
        assert held_all == [], r["cautions"]
    assert r["flink_replays"]["predicted_extra_copies"] == 0, r["flink_replays"]


def check_at_least_once_duplicates_exactly_what_was_written_after_the_restored_checkpoint(r: dict, events) -> None:
    """At-least-once barriers, a crash mid-epoch: the duplicates are what was written after the restored checkpoint."""
    replays = r["flink_replays"]
    assert r["settings"]["flink_delivery"] == "at-least-once" and r["lost"] == 0 and r["unseen"] == 0, r
    if r["could_not_show"]:  # the restored checkpoint covered everything written: nothing to write again
        assert replays["predicted_extra_copies"] == r["duplicated"] == 0 and "shows no replay" in \
            r["could_not_show"][0], (replays, r["could_not_show"])
        return
    assert r["guarantee"] == "at-least-once"
    # predicted from the timeline (restore offsets, the output's end at the restart, the ledger) = measured
    assert replays["predicted_extra_copies"] == r["extra_copies"] == r["duplicated"] > 0, (replays, r)
    start = next(e for e in events if e["type"] == ev.FLINK_START and e["attempt"] == 2)
    assert replays["restarts"][0]["start_offsets"] == start["start_offsets"]
