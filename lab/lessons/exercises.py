"""The notebooks' exercises: one setting for the learner to fill in, a prediction, a run, and an answer it must bear
out.

Each :class:`Exercise` is a scenario (``make_config`` parameters), the one
parameter its task is about (``blank``: the learner's line leaves its value as
``...``), and the answer, one outcome word (:data:`lab.audit.expectations.EXPECTATIONS`).
A topic notebook ends with its exercises' tasks (:func:`markdown`, the same
text a unit test compares it with): ``r = nb.exercise("00.1", commit=...,
predict=...)``. :func:`check_setting` judges the learner's value before
anything runs (left blank: an error; not the change asked for: refused);
:func:`judge_attempt` judges the run twice, against the learner's prediction
and against the answer, each from the run's own counts. An "explain from the
evidence" exercise reads a run the notebook already made. Its solutions
notebook (``notebooks/solutions/<same name>.ipynb``) fills in the blank with the
answer and runs it with :func:`lab.notebook.solve`, which fails when the
measured result disagrees, so a solution cannot drift from what the lab does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.errors import choices_error

#: The faults of notebook 07: followers held from 2 s (out of the ISR about 3 s later), partition 0's leader killed
#: as soon as its ISR is that leader alone (a fixed time could come before the ISR shrank on a slower machine).
CLUSTER_FAULTS = "follower-lag@at=2s:for=8s,leader-crash@isr=1:for=3s"


@dataclass(frozen=True)
class Exercise:
    """One exercise: what to change, the run it takes, and the answer.

    ``params`` are :func:`lab.config.make_config` parameters (a solution may
    shrink ``events``); ``expect`` is one outcome word
    (:data:`lab.audit.expectations.EXPECTATIONS`); ``why`` is the explanation
    the solution gives. ``cluster``: the run needs notebook 07's three-broker
    cluster.

    A run exercise names its ``blank``: the one parameter the task is about,
    which the learner's line leaves for them to fill in (``params[blank]`` is
    the answer). An "explain from the evidence" exercise names ``evidence``, a
    check of :data:`lab.lessons.evidence.CHECKS` that reads a run's files,
    ``look``, the line that opens them (the run is ``r``), and ``lesson_run``,
    the notebook's own run it reads (an expression of the topic notebook), so
    it spends no run of its own.
    """

    id: str
    notebook: str
    title: str
    task: str
    params: dict = field(hash=False)
    expect: str
    why: str
    cluster: bool = False
    evidence: str = ""
    look: str = ""
    blank: str = ""
    lesson_run: str = ""


EXERCISES = (
    Exercise("00.1", "00_start_here", "Commit first",
             "The consumer commits its offsets first and writes the batch after that, and the driver is killed right "
             "after a commit, before its write. Fill in the `commit` setting that makes it commit first. What will "
             "the sink hold?",
             dict(pipeline="plain", sink="append", commit="before-output", max_batch_records=300,
                  faults="driver-crash@batch=2:after-commit-before-output"), "at-most-once",
             "The restarted consumer starts at the committed offset, after the batch it never wrote: that batch is "
             "lost. Committing before the output trades duplicates for loss (at most once).", blank="commit"),
    Exercise("00.2", "00_start_here", "A sink keyed on the event id",
             "The timer commit of the scenario above, a sink that stores each event id once, and the driver killed in "
             "the middle of a batch's output. Fill in the `sink` that stores each event id once. What happens to "
             "the replayed records?",
             dict(pipeline="plain", sink="idempotent", max_batch_records=300,
                  faults="driver-crash@batch=2:mid-output"), "exactly-once",
             "The restart reads again from the last commit and writes those events again; the sink upserts on the "
             "event id, so they are written twice and stored once: write attempts exceed stored rows.", blank="sink"),
    Exercise("01.1", "01_receiver_wal", "Absorb the WAL's duplicates",
             "Take the \"reliable, WAL\" run and change only the sink, to the one keyed on the event id. The same "
             "driver crash mid-output. Fill in the `sink`, then predict the guarantee.",
             dict(pipeline="receiver", ack="stored", wal="on", sink="idempotent", max_batch_records=300,
                  faults="driver-crash@batch=3:mid-output"), "exactly-once",
             "The WAL and reliable acknowledgements still replay the recovered batches and re-send uncommitted "
             "records, but every copy carries its event id and the sink stores each id once.", blank="sink"),
    Exercise("01.2", "01_receiver_wal", "The WAL against a worker failure",
             "Section 2 killed the receiver's executor without a WAL, with replication 1. Keep everything else and "
             "fill in the `wal` setting that turns the write-ahead log on. Does the log help when a worker dies, "
             "not the driver?",
             dict(pipeline="receiver", ack="stored", wal="on", spark_master="local-cluster[2,1,1024]",
                  max_batch_records=300, faults="executor-crash@batch=3"), "exactly-once",
             "Yes: every block was written to the log in the checkpoint before it was reported, so a batch whose "
             "only in-memory copy died with the executor is read back from the log. Without the WAL and with one "
             "copy, the same kill loses those blocks (section 2). No batch was replayed either: the driver lived, so "
             "nothing was written twice.", blank="wal"),
    Exercise("01.3", "01_receiver_wal", "Explain from the evidence: where recovered batches come from",
             "Section 1's \"reliable, WAL\" run: the append sink and the driver crash mid-output. Open its log: "
             "`nb.wal_segments(r)` lists the segments of `checkpoint/receivedData` (Spark names each "
             "`log-<start ms>-<end ms>`) and the batch whose blocks each holds. Which batches did the restarted "
             "driver recover, and was their data on disk before the driver died?",
             dict(pipeline="receiver", ack="stored", wal="on", sink="append", max_batch_records=300,
                  faults="driver-crash@batch=3:mid-output"), "at-least-once",
             "The batch that was running and any already received behind it. Their blocks "
             "were written to the log as they arrived, before the crash, and the restarted driver read them back "
             "from there, not from Kafka; it then ran batch 3 again, whose output had been half written.",
             evidence="recovered-from-the-wal", look="nb.wal_segments(r)", lesson_run='results["reliable, WAL"]'),
    Exercise("02.1", "02_direct_kafka", "Half a batch",
             "Offsets in the checkpoint, an append sink, but the driver is killed in the middle of batch 2's output. "
             "Fill in the fault plan (`faults`: a kind, the batch and the crash point, as in the lesson's own "
             "plans), then predict.",
             dict(pipeline="direct", offsets="checkpoint", sink="append", max_batch_records=100,
                  faults="driver-crash@batch=2:mid-output"),
             "at-least-once",
             "Half of batch 2's rows were written; the restart runs the whole range again, so that half is "
             "written twice. Nothing is lost: the range was logged before the batch ran.", blank="faults"),
    Exercise("02.2", "02_direct_kafka", "Kafka's offsets, an event-id sink",
             "Offsets committed to Kafka (`offsets=\"kafka\"`), the crash after the output and before the commit, "
             "and a sink that stores each event id once. Fill in the `sink`, then predict.",
             dict(pipeline="direct", offsets="kafka", sink="idempotent", max_batch_records=100,
                  faults="driver-crash@batch=2:after-output-before-commit"), "exactly-once",
             "The batch is read again from the last committed offsets and written again; the sink keeps one row "
             "per event id. Exactly-once output without transactions needs an idempotent sink.", blank="sink"),
    Exercise("02.3", "02_direct_kafka", "Explain from the evidence: the plan a restart runs",
             "Section 1's run: the append sink, offsets in the checkpoint, the crash after the output and before the "
             "batch is marked done. Open its checkpoint: each batch's plan is `offsets/<batch>.json`, its "
             "`done/<batch>` marker follows its output. Which batch did the crash leave unfinished, and how many "
             "records does its plan hold? Compare with the duplicated count.",
             dict(pipeline="direct", offsets="checkpoint", sink="append", max_batch_records=100,
                  faults="driver-crash@batch=2:after-output-before-commit"), "at-least-once",
             "Batch 2: its plan was written before the crash and its done marker only after the restart. The "
             "restarted driver ran that plan again, the same ranges, so the sink holds exactly the plan's records "
             "twice: the duplicated count is the plan's size.",
             evidence="direct-unfinished-plan",
             look='print(nb.files_under(r.run_dir / "checkpoint"))', lesson_run="ckpt"),
    Exercise("03.1", "03_structured_streaming", "A crash before the output",
             "The append sink again, but the driver dies right after batch 2's offset log entry, before any of its "
             "output. Fill in the fault plan (`faults`), then predict.",
             dict(pipeline="structured", sink="append", max_batch_records=300,
                  faults="driver-crash@batch=2:after-offset-log"),
             "exactly-once",
             "The batch is in the offset log and not in the commit log, so it runs again with the same offsets; "
             "since nothing of it had been written, it is written once.", blank="faults"),
    Exercise("03.2", "03_structured_streaming", "A task failure and the transactional sink",
             "A task failure (`task-failure@batch=2`: one task raises after writing part of its rows and Spark "
             "retries it) against the sink that commits a task's rows in one database transaction. Fill in the "
             "`sink`, then predict.",
             dict(pipeline="structured", sink="transactional", max_batch_records=300,
                  faults="task-failure@batch=2"), "exactly-once",
             "The task's rows and its batch key commit in one database transaction; the failed attempt's rows are "
             "rolled back with it, and the retry writes them once.", blank="sink"),
    Exercise("03.3", "03_structured_streaming", "Explain from the evidence: the batch that ran twice",
             "Section 1's run: the append sink and the crash after the output, before the commit log. Open both logs "
             "of the checkpoint. Which batch id was in the offset log before the crash and in the commit log only "
             "after the restart, and how many records lie between its end offsets and the batch before's?",
             dict(pipeline="structured", sink="append", max_batch_records=300,
                  faults="driver-crash@batch=2:after-output-before-commit"), "at-least-once",
             "Batch 2. Spark found it in the offset log without a commit, ran it again with the same offsets, and "
             "the append sink stored its records a second time: the duplicated count is the number of records "
             "between batch 1's and batch 2's end offsets.",
             evidence="structured-unfinished-batch",
             look='display(nb.checkpoint_log(r.run_dir, "offsets"), nb.checkpoint_log(r.run_dir, "commits"))',
             lesson_run="append"),
    Exercise("04.1", "04_semantics_matrix", "A row for the idempotent sink under task failures",
             "Add a row to a grid: structured, a task failure (`task-failure@batch=2`), and the sink keyed on the "
             "event id. Fill in the `sink`. Which outcome should the row expect?",
             dict(pipeline="structured", sink="idempotent", max_batch_records=300,
                  faults="task-failure@batch=2"), "exactly-once",
             "The retried task writes the rows of its failed attempt again; the sink upserts on the event id, so "
             "each event is stored once.", blank="sink"),
    Exercise("04.2", "04_semantics_matrix", "Batch keys with the direct pipeline",
             "Add a row: direct, offsets in the checkpoint, a crash after the output before the batch is marked done, "
             "and the sink that commits a batch's rows with its batch key in one transaction. Fill in the `sink`.",
             dict(pipeline="direct", offsets="checkpoint", sink="transactional", max_batch_records=100,
                  faults="driver-crash@batch=2:after-output-before-commit"), "exactly-once",
             "The replayed batch has the same id and ranges, so its keys are already committed and the sink skips "
             "it: the checkpoint decides what is read, the sink what is stored.", blank="sink"),
    Exercise("05.1", "05_exactly_once_production", "One half is not enough",
             "The lost acknowledgements of section 1, an append sink, a driver crash after the output "
             "(`driver-crash@batch=2:after-output-before-commit` added to the fault plan), and a producer whose "
             "retries the broker deduplicates. Fill in `idempotence`, then predict.",
             dict(pipeline="structured", sink="append", idempotence=True, max_batch_records=300,
                  faults="ack-loss@at=1s:count=4,driver-crash@batch=2:after-output-before-commit"), "at-least-once",
             "The broker deduplicated the producer's retries, so the topic holds each event once; but the append "
             "sink writes the replayed batch again. Exactly-once needs both halves: producer and sink.",
             blank="idempotence"),
    Exercise("05.2", "05_exactly_once_production", "An event-id sink against aborted transactions",
             "A transactional producer aborting three transactions (`txn-abort@at=1s:count=3`), readers with "
             "`isolation=\"read_uncommitted\"`, and the sink keyed on the event id. Fill in the `sink`. Does it "
             "help?",
             dict(pipeline="structured", sink="idempotent", transactional=True, isolation="read_uncommitted",
                  max_batch_records=300, faults="txn-abort@at=1s:count=3"), "unexpected rows",
             "No. Nothing is lost and nothing is duplicated: each aborted event is read once and stored once. But "
             "it was never acknowledged, so it is a row nobody was promised, and an event-id sink cannot tell it "
             "from a real one. Only `read_committed` readers keep aborted records out.", blank="sink"),
    Exercise("05.3", "05_exactly_once_production", "Explain from the evidence: where the duplicates were made",
             "Section 1's run: a producer without idempotence, the lost acknowledgements, the batch-id sink, no "
             "crash. Read the topic from its beginning: `nb.topic_duplicates(r)` lists each event id stored at "
             "more than one offset. Did the pipeline make the sink's duplicates, or were they in the topic already?",
             dict(pipeline="structured", sink="transactional", idempotence=False, max_batch_records=300,
                  faults="ack-loss@at=1s:count=4"), "at-least-once",
             "In the topic already. The producer resent the sends whose acknowledgements were lost, and the broker "
             "stored each resend at a new offset. The pipeline read every offset once: the events the sink holds "
             "twice are exactly the events the topic holds twice.",
             evidence="topic-duplicates", look="nb.topic_duplicates(r)",
             lesson_run='results["no idempotence → batch-id sink"]'),
    Exercise("06.1", "06_stateful_streaming", "Window counts in one transaction",
             "The window-count query, the crash in the middle of the output (`driver-crash@batch=3:mid-output`), and "
             "the sink that commits a batch's counts with its batch key in one transaction. Fill in the `sink`, "
             "then predict.",
             dict(pipeline="structured", query="window-count", sink="transactional", rate=300, max_batch_records=250,
                  faults="driver-crash@batch=3:mid-output"), "exactly-once",
             "The half-written batch's transaction never committed; the replay recomputes the same counts from "
             "the state of the batch before and commits them with the batch key once.", blank="sink"),
    Exercise("06.2", "06_stateful_streaming", "A crash before the output, with state",
             "The window-count query with the append sink, the driver killed right after batch 3's offset log entry, "
             "before any of its output. Fill in the fault plan (`faults`), then predict.",
             dict(pipeline="structured", query="window-count", sink="append", rate=300, max_batch_records=250,
                  faults="driver-crash@batch=3:after-offset-log"), "exactly-once",
             "The state store had not committed the batch's version and the sink had received nothing: the "
             "replay starts from the previous state version and writes each change once.", blank="faults"),
    Exercise("06.3", "06_stateful_streaming", "Explain from the evidence: the state a replay starts from",
             "Your run of 06.2 (`r`). Batch N commits state version N + 1. Open its state store: which versions were "
             "written before the crash, and which after the restart?",
             dict(pipeline="structured", query="window-count", sink="append", rate=300, max_batch_records=250,
                  faults="driver-crash@batch=3:after-offset-log"), "exactly-once",
             "Versions up to 3 (batch 2) before the crash; version 4, batch 3's, only after the restart, once per "
             "partition. The replay loaded version 3, the state of the batch before, and computed batch 3 once: "
             "no version was written twice, so no window was counted twice.",
             evidence="state-version-of-replay", look="nb.state_store(r.run_dir)", lesson_run="r"),
    Exercise("07.1", "07_kafka_guarantees", "acks=all with unclean election off",
             "The same faults with `acks=\"all\"` and `min_insync=1`, and no out-of-sync replica allowed to become "
             "leader. Fill in `unclean`, then predict.",
             dict(pipeline="plain", sink="append", nodes=3, acks="all", min_insync=1, unclean="off", rate=500,
                  faults=CLUSTER_FAULTS), "acked-kept",
             "The leader acknowledged alone once the followers left the ISR, but with unclean election off no "
             "out-of-sync follower may lead: the partition waits for the old leader, which comes back with every "
             "write it acknowledged.", cluster=True, blank="unclean"),
    Exercise("07.2", "07_kafka_guarantees", "Kafka's exactly-once, crash before the commit",
             "`pipeline=\"kafka-eos\"`, with the driver killed in batch 2 after its output was sent and its offsets "
             "added to the transaction, before the commit. Fill in the fault plan (`faults`), then predict.",
             dict(pipeline="kafka-eos", events=600, rate=0, max_batch_records=100, nodes=3,
                  faults="driver-crash@batch=2:after-output-before-commit"), "exactly-once",
             "The transaction holding the batch's output and its offsets never committed; the restarted driver's "
             "producer aborts it and the batch is consumed and produced again, once, for read_committed readers.",
             cluster=True, blank="faults"),
    Exercise("07.3", "07_kafka_guarantees", "Explain from the evidence: two readers of the output topic",
             "Your run of 07.2 (`r`). Read its output topic twice, as a `read_uncommitted` and as a `read_committed` "
             "consumer would: `nb.output_readers(r)`. Is the dead attempt's output in the topic?",
             dict(pipeline="kafka-eos", events=600, rate=0, max_batch_records=100, nodes=3,
                  faults="driver-crash@batch=2:after-output-before-commit"), "exactly-once",
             "Yes: its records are in the log, so a `read_uncommitted` reader gets them as well as the replay's "
             "copies. The transaction that held them was aborted, and a `read_committed` reader skips them: each "
             "event once. Kafka's exactly-once is a property of what committed readers see.",
             cluster=True, evidence="aborted-output-transaction", look="nb.output_readers(r)", lesson_run="r"),
    Exercise("08.1", "08_other_engines", "A crash before the first checkpoint",
             "The aligned run of section 1, but the job is killed half an interval after it started, before any "
             "checkpoint completed: in batch 0, mid-output. Fill in the fault plan (`faults`). With nothing to "
             "restore, what does the restart do, and what does a `read_committed` reader get?",
             dict(pipeline="flink", partitions=2, events=3000, rate=500, faults="driver-crash@batch=0:mid-output"),
             "exactly-once",
             "No checkpoint completed, so no transaction of the dead job was committed and no offset of the run's "
             "group was either: the restart starts from the group's committed offsets (none: the earliest) and "
             "its sink aborts the dead job's open transaction. Everything is read again and committed once.",
             blank="faults"),
    Exercise("08.2", "08_other_engines", "Acked tuple trees and a sink keyed on the event id",
             "The acked Storm topology of section 5, killed the same way, but writing a sink keyed on the event id. "
             "Fill in the `sink`. What does a reader of the sink get?",
             dict(pipeline="storm", storm_mode="acked", sink="idempotent", partitions=2, events=3000, rate=300,
                  faults="driver-crash@batch=2:after-output-before-commit"),
             "exactly-once",
             "Each event once. The acker still replays every tuple whose tree had not completed, and the sink bolt "
             "writes it again (the report's write attempts exceed its stored rows by the replays), but a row keyed "
             "on the event id is stored once. Storm promises that each tuple is processed; the sink decides whether "
             "a replay shows.", blank="sink"),
    Exercise("08.3", "08_other_engines", "Explain from the evidence: the checkpoint a restart restores",
             "Section 1's aligned run, with the job killed mid-output. Open its checkpoints: `nb.flink_checkpoints(r)` "
             "lists each `chk-<id>` directory, whether its `_metadata` (written last, when the checkpoint completes) "
             "is there and when. Which one did the restarted job restore?",
             dict(pipeline="flink", partitions=2, events=3000, rate=500, faults="driver-crash@batch=2:mid-output"),
             "exactly-once",
             "The newest checkpoint completed before the kill. The restarted job read from the offsets stored in "
             "it and aborted the dead job's open transaction; what the dead job wrote after that checkpoint was "
             "never committed, so a `read_committed` reader gets each event once.",
             evidence="restored-newest-before-crash", look="nb.flink_checkpoints(r)",
             lesson_run='results["aligned, exactly-once sink"]'),
    Exercise("09.1", "09_queues_and_zombies", "Acknowledge first",
             "The share group of section 1, but each consumer accepts and commits its records before it writes them, "
             "and the driver is killed right after a commit, before the write "
             "(`driver-crash@batch=2:after-commit-before-output`). Fill in the `commit` setting. What will the "
             "sink hold?",
             dict(pipeline="share", commit="before-output", rate=300,
                  faults="driver-crash@batch=2:after-commit-before-output"), "at-most-once",
             "The records were accepted: the broker is done with them and never delivers them again, so the batch "
             "that was never written is lost. A share group's acknowledgement is its commit: before the output it "
             "makes at-most-once, as a consumer group's commit does.", blank="commit"),
    Exercise("09.2", "09_queues_and_zombies", "Three poison records",
             "The poison run of section 2, but with the first three records of key `k07` poison. Fill in the fault "
             "plan (`faults`). How many events are lost, and what does the report call the three?",
             dict(pipeline="share", commit="after-output", rate=300, faults="poison@key=7:count=3"), "exactly-once",
             "None is lost. Each of the three is delivered five times, each time killing a consumer, and then "
             "archived: the report's `archived` is 3 and `deliveries.archived` lists them with delivery count 5. "
             "Archived is the group's policy, not a loss: the broker says so by moving past them.", blank="faults"),
    Exercise("09.3", "09_queues_and_zombies", "Explain from the evidence: what the killed consumer held",
             "Section 1's consumer crash. Open the records the killed consumer held: `nb.share_held(r)` lists each "
             "with its delivery count when the consumer died, the most deliveries it had in the end, which consumers "
             "wrote it and its rows in the sink. Why is nothing of them duplicated?",
             dict(pipeline="share", commit="after-output", rate=300, faults="consumer-crash@at=3s"), "exactly-once",
             "The consumer was killed holding them, before it wrote any: nothing was acknowledged, so once its locks "
             "ended the broker delivered each again (delivery count 2) to a live consumer, which wrote it once. A "
             "share group redelivers per record, so only what a dead consumer had written without acknowledging "
             "would come twice.",
             evidence="held-records-delivered-again", look="nb.share_held(r)",
             lesson_run='first["share group, one consumer killed holding records"]'),
)


def for_notebook(notebook: str) -> list[Exercise]:
    """The exercises of a topic notebook (its file stem, e.g. ``01_receiver_wal``), in order."""
    return [e for e in EXERCISES if e.notebook == notebook]


def exercise(exercise_id: str) -> Exercise:
    """The exercise with this id (``"01.2"``).

    Raises
    ------
    lab.errors.LabError
        When there is none, naming the ids there are.
    """
    for e in EXERCISES:
        if e.id == exercise_id:
            return e
    raise choices_error("exercise", exercise_id, [e.id for e in EXERCISES])


def config_call(ex: Exercise, **overrides) -> str:
    """The ``nb.config(...)`` call of an exercise's run, as a learner would type it (``overrides``: a solution's smaller
    run).

    A cluster exercise's run goes to notebook 07's three-broker cluster (``runs_dir=nb.start_cluster()``).
    """
    import json

    params = {**ex.params, **overrides}
    args = [f"{k}={json.dumps(v) if isinstance(v, str) else repr(v)}" for k, v in params.items()]
    if ex.cluster:
        args.append("runs_dir=nb.start_cluster()")
    return f"nb.config({', '.join(args)})"


def choices_of(ex: Exercise) -> tuple[str, ...]:
    """The outcome words a learner predicts this exercise's run in: the topic's final read, or the sink's guarantee."""
    from lab.audit.expectations import TOPIC_EXPECTATIONS
    from lab.outcomes import GUARANTEES, TOPIC_WORDS

    return TOPIC_WORDS if ex.expect in TOPIC_EXPECTATIONS else GUARANTEES


def blank_choices(ex: Exercise) -> str:
    """What may fill an exercise's blank, in words for an error line."""
    from lab.config import ON_OFF
    from lab.engines.kafka import COMMIT_MODES
    from lab.sinks.spec import SINK_MODES

    known = {"commit": ", ".join(COMMIT_MODES), "sink": ", ".join(SINK_MODES), "wal": ", ".join(ON_OFF),
             "unclean": ", ".join(ON_OFF), "idempotence": "True, False",
             "faults": "a fault plan, kind@trigger:point, as the lesson's own plans "
                       "(docs/reference-tables.md#2-fault-plans)"}
    return known.get(ex.blank, "the setting the task names")


@dataclass(frozen=True)
class SettingCheck:
    """Whether the value a learner filled into an exercise's blank is the change its task asks for."""

    ok: bool
    setting: str  # as typed: commit='before-output'


def check_setting(ex: Exercise, value) -> SettingCheck:
    """Judge the learner's value for ``ex.blank`` against the task's (``ex.params[ex.blank]``), before anything runs.

    A fault plan is compared as parsed (:func:`lab.faults.plan.parse_fault_plan`),
    any other setting as the run's config holds it (``"ON"`` is ``"on"``).

    Raises
    ------
    lab.errors.LabError
        When the blank was left (``...``, ``None`` or empty), naming the
        setting and what may fill it; or when the value is not valid for that
        setting at all (the config's or the fault plan's own one-line error).
    """
    from lab.config import make_config
    from lab.errors import LabError
    from lab.faults.plan import parse_fault_plan

    if not ex.blank:
        raise LabError(f"exercise {ex.id} has no setting to fill in: it reads a run (nb.explain)")
    if value is Ellipsis or value is None or (isinstance(value, str) and not value.strip()):
        raise LabError(f"exercise {ex.id}: fill in {ex.blank}=... before you run it (one of: {blank_choices(ex)})")
    setting = f"{ex.blank}={value!r}"
    if ex.blank == "faults":
        return SettingCheck(parse_fault_plan(value) == parse_fault_plan(ex.params["faults"]), setting)
    # Built without the fault plan: a plan's point may require the answer ("exists only with --commit
    # before-output"), and a wrong value's error must not give the answer away.
    rest = {k: v for k, v in ex.params.items() if k != "faults"}
    mine = make_config(**{**rest, ex.blank: value})
    asked = make_config(**rest)
    if not asked.is_setting(ex.blank):
        return SettingCheck(value == ex.params[ex.blank], setting)
    return SettingCheck(mine.option(ex.blank) == asked.option(ex.blank), setting)


@dataclass(frozen=True)
class Attempt:
    """A learner's exercise run judged twice: against their prediction, and against the documented answer.

    ``measured`` is in the exercise's words (:func:`lab.audit.expectations.measured`);
    ``not_judged`` says why the run could not show the lesson (its fault never
    fired, lab.audit.shown), and then neither comparison is made.
    """

    exercise: str
    setting: str
    predicted: str
    measured: str
    answer: str
    counts: str
    run_dir: str
    not_judged: str = ""

    @property
    def right(self) -> bool | None:
        return None if self.not_judged else self.predicted == self.measured

    @property
    def as_documented(self) -> bool | None:
        return None if self.not_judged else self.measured == self.answer

    def sentence(self) -> str:
        """One line a learner reads: their setting, their prediction, the measurement, the documented answer."""
        head = f"{self.exercise} with {self.setting}"
        if self.not_judged:
            return f"· {head}: not judged: {self.not_judged} (run {self.run_dir}); run it again"
        if self.as_documented:
            if self.right:
                return (f"✔ {head}: you predicted {self.predicted}; measured {self.measured} ({self.counts}), "
                        "the documented answer too")
            return (f"✘ {head}: you predicted {self.predicted}; measured {self.measured} ({self.counts}), which is "
                    "the documented answer: compare your reasoning with the solution's explanation")
        word = "right" if self.right else "not what happened"
        return (f"△ {head}: measured {self.measured} ({self.counts}) where the documented answer is {self.answer}; "
                f"your prediction ({self.predicted}) was {word} for this run. Open its timeline (run {self.run_dir}) "
                "to see what differed")


def judge_attempt(ex: Exercise, setting: str, predicted: str, report) -> Attempt:
    """A finished run's report judged against the prediction and the answer (the counts decide, never the answer)."""
    from lab.audit.expectations import measured
    from lab.audit.predictions import unshown

    got = measured(ex.expect, report)
    counts = (f"{report.get('lost', 0)} lost, {report.get('duplicated', 0)} duplicated, "
              f"{report.get('unexpected', 0)} unexpected of {report.get('acked', 0)}")
    if got in ("acked-kept", "acked-lost"):
        counts = f"{(report.get('topic') or {}).get('lost')} acknowledged sends not in the topic; {counts}"
    return Attempt(ex.id, setting, predicted, got, ex.expect, counts, str(report.get("run_dir", "")),
                   "; ".join(unshown(report)))


def ready_line(ex: Exercise) -> str:
    """The lines a learner copies into a code cell for exercise ``ex``: the blank and the prediction left as ``...``.

    An evidence exercise reads the notebook's own run (``ex.lesson_run``) and
    adds the line that opens its files.
    """
    if ex.evidence:
        return f"r = {ex.lesson_run}\nnb.explain(\"{ex.id}\", r)\n{ex.look}"
    return f"r = nb.exercise(\"{ex.id}\", {ex.blank}=..., predict=...)"


def markdown(notebook: str) -> str:
    """The "Exercises" cell a topic notebook ends with: each task, its line to complete, where its solution is."""
    from lab.outcomes import GUARANTEES

    items = "\n".join(f"{i}. **{e.id} {e.title}.** {e.task}\n\n   ```python\n   "
                      + ready_line(e).replace("\n", "\n   ") + "\n   ```\n"
                      for i, e in enumerate(for_notebook(notebook), 1))
    return ("## Exercises\n\nChange one setting, predict, run, explain. In each `nb.exercise` line, replace the first "
            "`...` with the value of the setting the task names, and the `...` after `predict=` with your "
            f"prediction ({', '.join(GUARANTEES)}; for a cluster's final read: acked-kept or acked-lost). It "
            "runs the exercise with your value, then says whether that was the change asked for, what the run "
            "measured, and whether that matches your prediction and the documented answer. An \"explain from the "
            "evidence\" question reads a run this notebook already made. The solutions, with runs that check "
            f"their answers, are in `solutions/{notebook}.ipynb`.\n\n{items}").rstrip()
