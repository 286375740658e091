"""Whether a run could show its lesson: the states in which its counts teach nothing, one line each.

On a busy laptop a fault timed in seconds can land where the lesson is not: before the pipeline wrote anything,
after the stream had ended, or early in a stream the producer could not keep at its rate. The counts of such a
run are still true, but they may answer another question; a verdict judged on them, or a check passed or failed
on them, would say something the run did not show. The report, ``lab run``'s table, the notebook's verdicts and
the exercises' solutions say each state in one line.

:func:`could_not_show`: the states in which the run shows nothing of its lesson (a prediction is not judged,
an exercise's solution says so instead of passing or failing):

* **a crash before any output**: a ``driver-crash`` or ``executor-crash`` timed in seconds, carried out before
  any batch of the run was done (``batch-done``), in a pipeline whose batches are done once their output is
  written (not flink, whose batches are its checkpoints, nor real-time mode, whose batch spans its interval):
  nothing was written yet, so the restart replays nothing;
* **a crash after the stream had ended**: carried out after the producer was done, with no batch writing
  anything after it: nothing was left to replay;
* **a flink crash with nothing past its checkpoint** (:func:`nothing_replayed`): the restart restored a
  checkpoint that covered everything the job had written, so it wrote nothing again;
* **a samza crash just after a checkpoint** (:func:`resumed_at_the_output_end`): the restarted job resumed where
  the output had ended, so it sent nothing again;

A fault that never fired is one more such state; it has its own report field (``faults_not_applied``), which
the same readers already say and judge by.

:func:`cautions`: what a reader of the counts should know, without making them say nothing:

* **a flink crash with no transaction to abort** (:func:`nothing_to_abort`): the exactly-once sink's restored
  checkpoint held every record the job had read, so the run shows the checkpoint restored but no aborted records;
* **a producer far behind its rate**, in a run with a fault timed in seconds: it sent fewer than :data:`BEHIND`
  of the events per second asked, so such a fault came at another place in the stream than planned. The
  fault still happened; whether its lesson shows is the check's relation to decide.
"""

from __future__ import annotations

from lab import events as ev

#: The crash kinds whose lesson is what a restart does with output already written.
OUTPUT_CRASHES = ("driver-crash", "executor-crash")
#: A producer that reached less than this share of its rate is "far behind" it.
BEHIND = 0.5


def could_not_show(events: list[dict], *, batches_mark_output: bool = True) -> list[str]:
    """One line per reason the run shows nothing of its lesson; empty when it could show it.

    Parameters
    ----------
    events : list of dict
        The run's ``events.jsonl``.
    batches_mark_output : bool
        Whether the pipeline writes ``batch-done`` once a batch's output is written (every pipeline but flink
        and structured in real-time mode): only then does "no batch done yet" mean "nothing written yet".
    """
    lines = []
    done = [(e["t"], e.get("rows", 0)) for e in events if e["type"] == ev.BATCH_DONE]
    produced = next((e["t"] for e in events if e["type"] == ev.PRODUCER_DONE), None)
    for f in events:
        if f["type"] != ev.FAULT or f.get("kind") not in OUTPUT_CRASHES:
            continue
        if f.get("batch") is not None:
            continue  # pressed inside a batch, at a named point: where the output stands is the point's to say
        trigger = f"@at={f.get('elapsed_s', 0):.1f}s"
        if batches_mark_output and not [t for t, _ in done if t < f["t"]]:
            lines.append(f"the {f['kind']} ({trigger}) came before the first batch was done: this run shows no "
                         f"replay; run it again, or use {f['kind']}@batch=N")
            break
        if produced is not None and produced < f["t"] and not [t for t, rows in done if t > f["t"] and rows]:
            lines.append(f"the {f['kind']} ({trigger}) came after the stream had ended, with nothing left to "
                         f"replay: this run shows no replay; run it again earlier, or use {f['kind']}@batch=N")
            break
    return lines


def nothing_replayed(replays: dict, events: list[dict], delivery: str) -> list[str]:
    """A flink run's line when a crash's restart had nothing to write again.

    ``replays`` is its report's ``flink_replays`` (:func:`lab.audit.flink_replay.replay_report`): per restart,
    ``replayed`` the records written after the checkpoint it restored; ``delivery`` its sink's guarantee
    (``flink_delivery``). With the at-least-once sink the lesson is the records written again: none, and the run
    shows no replay (measured: a kill at ``batch=2:mid-output`` came once when the job's output was all behind
    checkpoint 5). The exactly-once sink writes nothing again by design (its ``replayed`` is always 0), so no line:
    its runs' lessons are the checkpoint restored and the aborted transaction, which their checks read.
    """
    crashes = [f for f in events if f["type"] == ev.FAULT and f.get("kind") in OUTPUT_CRASHES]
    restarts = replays.get("restarts") or []
    if delivery == "exactly-once" or not crashes or not restarts or any(r.get("replayed") for r in restarts):
        return []
    return [f"the {crashes[0]['kind']} came when checkpoint {restarts[0].get('checkpoint')}, which the restart "
            "restored, covered everything the job had written: this run shows no replay; run it again"]


def resumed_at_the_output_end(events: list[dict], duplicated: int) -> list[str]:
    """A samza run's line when a crash timed in seconds came just after a checkpoint, so its restart sent nothing
    again.

    Samza's output is at least once: a restart sends again what was sent past the last checkpoint, and that is
    the lesson. Its windows' ``batch-start`` events say ``replayed``, the rows below what the earlier attempts
    had reported; when every window of the restarted attempts has none and the audit counts no duplicate (an
    output sent but not yet reported would be one), the restart resumed where the output ended (measured once in
    a loaded suite: a kill 0.16 s after a checkpoint, Samza checkpointing every second).
    """
    crash = next((f for f in events if f["type"] == ev.FAULT and f.get("kind") in OUTPUT_CRASHES
                  and f.get("batch") is None), None)
    if crash is None or duplicated:
        return []
    before = [e for e in events if e["type"] == ev.BATCH_START and e.get("attempt", 1) == 1 and e["t"] < crash["t"]]
    after = [e for e in events if e["type"] == ev.BATCH_START and e.get("attempt", 1) > 1]
    if not before or not after or any(e.get("replayed") for e in after):
        return []
    return [f"the {crash['kind']} (@at={crash.get('elapsed_s', 0):.1f}s) came just after a checkpoint: the restarted "
            "job resumed where the output had ended and sent nothing again; this run shows no replay; run it again"]


def nothing_to_abort(replays: dict, events: list[dict], delivery: str) -> list[str]:
    """A flink run's caution when its exactly-once sink had no transaction open to abort at the crash.

    The restored checkpoint held every input record the job had read (``reread`` 0 for every restart;
    measured: a loaded suite's job read the whole input by checkpoint 2 before the kill), so the dead job had
    written nothing past it and the audit's aborted records are 0. The checkpoint restored still shows, so the
    run's counts are judged; the reader is told why no aborted transaction is among them.
    """
    crashes = [f for f in events if f["type"] == ev.FAULT and f.get("kind") in OUTPUT_CRASHES]
    restarts = replays.get("restarts") or []
    if delivery != "exactly-once" or not crashes or not restarts or any(r.get("reread") != 0 for r in restarts):
        return []
    return [f"the {crashes[0]['kind']} came when checkpoint {restarts[0].get('checkpoint')}, which the restart "
            "restored, held every record the job had read: no transaction was open to abort, so this run shows "
            "no aborted records; run it again to see them"]


def cautions(events: list[dict], rate: float, faults: str) -> list[str]:
    """What to keep in mind reading the run's counts (a producer far behind its rate); empty when nothing.

    ``rate``: the events per second asked (0: as fast as it can); ``faults``: the plan as given.
    """
    start = next((e for e in events if e["type"] == ev.PRODUCER_START), None)
    end = next((e for e in events if e["type"] == ev.PRODUCER_DONE), None)
    if not (rate > 0 and "@at=" in faults and start and end and end["t"] > start["t"]):
        return []
    reached = end.get("sent", 0) / (end["t"] - start["t"])
    if reached >= BEHIND * rate:
        return []
    return [f"the producer sent {reached:.0f} events/s of the {rate:g}/s asked (a busy machine): faults timed in "
            "seconds came at another place in the stream than planned; trigger them by batch to place them"]
