"""How a driver's JVMs start: the start-up techniques, each one switchable for the bench's before/after pairs.

None of them changes what a run delivers: they decide how fast a driver
JVM comes up, not what it reads, writes or commits. ``bench/startup.py``
measures each one off and on in the same run (``bench/results/startup.json``).

``LAB_CLASS_ARCHIVE``       ``on`` (default) / ``off``: the driver JVM maps its classes
                            from the archive :mod:`lab.spark.archive` builds once
                            (:mod:`lab.host.class_archive`).
``LAB_DRIVER_JVM_OPTIONS``  the driver JVM's flags (default :data:`DRIVER_JVM_OPTIONS`;
                            empty for the JVM's own defaults).
``LAB_EXECUTOR_JVM_OPTIONS`` the flags of a driver's executor JVMs on ``local-cluster`` and
                            standalone masters (default :data:`EXECUTOR_JVM_OPTIONS`; empty
                            for the JVM's own defaults).
``LAB_FLINK_JVM_OPTIONS``   the flink pipeline's job JVM's flags (default :data:`FLINK_JVM_OPTIONS`;
                            empty for the JVM's own defaults), after any ``JVM_ARGS`` of the user's.
``LAB_WARM_UP``             ``beside`` (default): Python workers start while the driver
                            plans its first batch; ``before``: the driver waits for them.
``LAB_WORKER_DAEMON``       ``lab`` (default): Spark's Python worker daemon imports PySpark
                            from the installed package, compiled once (:mod:`lab.spark.daemon`);
                            ``pyspark``: Spark's own start, from its zips, compiled each time.
``LAB_WORKER_PRELOAD``      ``on`` (default) / ``off``: with ``LAB_WORKER_DAEMON=lab``, the daemon
                            imports the modules the pipeline's workers use (pandas and pyarrow
                            for ``mapInArrow``, the lab's task modules) once, before it forks
                            them, instead of each worker importing them again.
``LAB_STANDBY``             ``planned`` (default): the first driver starts while the broker
                            starts, and while the fault plan still has a driver crash to
                            come, the next driver is started ahead as soon as the current
                            one has its turn; each waits with its JVM, session and workers up
                            for its turn (:mod:`lab.run.driver_process`). ``always``: a next
                            driver also without a planned crash (the panel's default, for
                            its Crash button); ``off``: every driver starts when needed.
                            Pipelines whose driver waits for its turn (``waits_for_turn`` in
                            the registry, which the caller passes in), on a ``local`` master.
``LAB_QUICK_STOP``          ``on`` (default) / ``off``: a driver's clean stop skips PySpark's wait for
                            its accumulator server's thread (:func:`lab.spark.session.skip_accumulator_wait`),
                            and a receiver's stops its streaming context without Spark's graceful
                            wait once its batches are done (:mod:`lab.pipelines.receiver.stop`).
``LAB_BROKER_ARCHIVE``      ``on`` (default) / ``off``: the Kafka broker's JVM maps its classes from the
                            archive :mod:`lab.broker.archive` builds once (which reads the switch
                            itself as a broker starts; checked here too, so that a run's start
                            names a bad value whatever its broker).
``LAB_TASK_FETCH_WAIT_MS``  ``fetch.max.wait.ms`` of the consumers in the tasks of Spark's Kafka source
                            of the structured pipeline (default :data:`TASK_FETCH_WAIT_MS`, 20;
                            Kafka's own is 500).
``LAB_CODEGEN``             ``off`` (default): Spark SQL evaluates the drivers' queries interpreted
                            (:data:`NO_CODEGEN_CONF`) instead of compiling Java for each of them;
                            ``on``: Spark's own code generation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lab.host.env import choice, milliseconds, switch

#: Only the client compiler (C1): a driver lives seconds to minutes on 2 cores, and C2's compiling
#: competes with the start for them (measured, bench/startup.py, restarted structured driver to first
#: batch done, medians of 3: 11.0 s → 9.0 s). The GC and the heap stay the JVM's (G1, Spark's -Xmx): the serial GC
#: measured 37.4 against 36.2 machine CPU-s for the 3,000-event crash run, 21.2 against 20.6 s (bench/run_cpu.py,
#: 8 rounds in turns; bench/README.md, Past experiments; driver JVMs' GC threads 0.72 vs 0.88 CPU-s), and with a 256 MB
#: young generation 34.5 vs 35.6 CPU-s (4 rounds; bench/README.md, Past experiments): in a run's spread (30-40 CPU-s).
#: C1 compiling fewer methods does not pay either: -XX:CompileThresholdScaling=3 and =10 cut the JIT threads' CPU
#: 4.5 → 3.3 and 1.9 s, but the code they left interpreted cost more: 39.3 and 40.9 against 38.3 machine CPU-s, 22.6
#: and 23.5 against 21.8 s (6 rounds in turns; bench/README.md, Past experiments).
#: Transparent huge pages for the heap (-XX:+UseTransparentHugePages; the kernel's are madvise) did not pay:
#: 37.4 vs 36.6 machine CPU-s, the driver JVMs 20.6 vs 18.8 (4 rounds in turns; bench/README.md, Past experiments).
DRIVER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
#: The same for executor JVMs (``local-cluster``, standalone): a direct run with an executor kill on
#: ``local-cluster[2,1,1024]`` took 22.0 → 15.3 CPU-s, 28.6 → 25.5 s (bench/jvm_flags.py, medians of 3). The
#: driver's class archive does not serve them: their class path differs, and the JVM refuses it (measured: 15.1
#: against 15.2 CPU-s).
EXECUTOR_JVM_OPTIONS = DRIVER_JVM_OPTIONS
#: The same for the flink pipeline's job JVM (a mini-cluster living as long as the run): a crash run of 3,000
#: events took 16.2 → 11.1 CPU-s, 14.2 → 12.5 s (bench/jvm_flags.py, medians of 3). The serial GC, -Xss512k and
#: -XX:-UsePerfData added nothing (11.1-11.3 CPU-s).
FLINK_JVM_OPTIONS = DRIVER_JVM_OPTIONS
#: ``fetch.max.wait.ms`` of the consumers in the tasks of Spark's own Kafka source (Kafka's default: 500).
#: Each of its reads asks for the partition's earliest and latest offsets after its poll, and the
#: broker answers a connection's requests in order: they waited behind the consumer's next fetch,
#: which the broker holds up to this long when no record is past the offset it asks for. Measured on a
#: structured crash run (3 partitions, 2 cores): a new driver's first batch 2.2 s → 0.9-1.1 s, the
#: restarted driver's replayed batch 1.5 s → 0.6 s, the task threads idle in ``KafkaConsumer.position``
#: (jstack) before; bench/startup.py, medians of 3: crash to first batch done 2.47 → 1.52 s. The direct
#: pipeline's batch reads of the same source measured no difference (1.56 against 1.67 s): they keep Kafka's.
#: A task reads a fixed offset range, so a shorter wait never changes what it reads.
TASK_FETCH_WAIT_MS = 20
#: Spark SQL without code generation: no whole-stage code, and projections, predicates and orderings interpreted
#: instead of compiled. ``factoryMode`` is the switch Spark's own tests use for the interpreted path;
#: ``wholeStage`` alone compiled as many classes (a ``mapInArrow`` and an aggregation: 11, where Spark's defaults
#: compiled 10; with both settings, 1; tests/integration/test_spark_session.py checks that it stays so). Every new
#: driver JVM compiles each query's code with Janino (Spark's compiler cache lives in the JVM), then the JIT
#: compiles that code: a restarted driver paid it again for batches of a few hundred records. Measured on the
#: 3,000-event structured crash run, 6 rounds in turns (bench/README.md, Past experiments): 38.5 against 40.2
#: machine CPU-s, 21.6 against 22.6 s (less CPU in each round, by 0.2-4.3 s); bench/startup.py
#: (medians of 3; bench/README.md, Past experiments): a new structured driver's first batch done 9.3 against 10.8 s, the
#: restarted one's 2.69 against 2.83 s; direct 8.9 against 9.1 and 2.54 against 2.79 s. The 200,000-event run
#: drained in 51.0 s against 49.4 s (one run each). Interpreted evaluation computes the same rows.
NO_CODEGEN_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
WARM_UPS = ("beside", "before")
WORKER_DAEMONS = ("lab", "pyspark")
STANDBYS = ("planned", "always", "off")
#: The environment that turns every technique off, the restart delay included (``LAB_RESTART_DELAY``,
#: :mod:`lab.config`): how a driver started before them, the benches' "before".
ALL_OFF = {"LAB_CLASS_ARCHIVE": "off", "LAB_DRIVER_JVM_OPTIONS": "", "LAB_WARM_UP": "before", "LAB_RESTART_DELAY": "1",
           "LAB_STANDBY": "off", "LAB_WORKER_DAEMON": "pyspark", "LAB_WORKER_PRELOAD": "off",
           "LAB_FLINK_JVM_OPTIONS": "", "LAB_EXECUTOR_JVM_OPTIONS": "", "LAB_QUICK_STOP": "off",
           "LAB_TASK_FETCH_WAIT_MS": "500", "LAB_BROKER_ARCHIVE": "off", "LAB_CODEGEN": "on"}
@dataclass(frozen=True)
class StartTuning:
    """The start-up techniques a driver uses (see the module docstring)."""

    class_archive: bool = True
    jvm_options: str = DRIVER_JVM_OPTIONS
    warm_up: str = "beside"
    standby: str = "planned"
    worker_daemon: str = "lab"
    worker_preload: bool = True
    flink_jvm_options: str = FLINK_JVM_OPTIONS
    executor_jvm_options: str = EXECUTOR_JVM_OPTIONS
    quick_stop: bool = True
    task_fetch_wait_ms: int = TASK_FETCH_WAIT_MS
    broker_archive: bool = True
    codegen: bool = False

    @classmethod
    def from_env(cls, env=None, standby_default: str = "planned") -> StartTuning:
        """Read the start-up switches from ``env`` (default ``os.environ``).

        ``LAB_CLASS_ARCHIVE``, ``LAB_DRIVER_JVM_OPTIONS``, ``LAB_WARM_UP``,
        ``LAB_STANDBY``, ``LAB_WORKER_DAEMON``, ``LAB_WORKER_PRELOAD``, ``LAB_EXECUTOR_JVM_OPTIONS``,
        ``LAB_FLINK_JVM_OPTIONS``, ``LAB_QUICK_STOP``, ``LAB_TASK_FETCH_WAIT_MS``, ``LAB_BROKER_ARCHIVE`` and
        ``LAB_CODEGEN`` (see the module docstring).

        ``standby_default``: ``LAB_STANDBY`` when unset (the panel's is ``always``).

        Raises
        ------
        LabError
            A value outside its choices, named with them.
        """
        env = os.environ if env is None else env
        archive = switch(env, "LAB_CLASS_ARCHIVE")
        return cls(class_archive=archive, jvm_options=env.get("LAB_DRIVER_JVM_OPTIONS", DRIVER_JVM_OPTIONS),
                   warm_up=choice(env, "LAB_WARM_UP", "beside", WARM_UPS),
                   standby=choice(env, "LAB_STANDBY", standby_default, STANDBYS),
                   worker_daemon=choice(env, "LAB_WORKER_DAEMON", "lab", WORKER_DAEMONS),
                   worker_preload=switch(env, "LAB_WORKER_PRELOAD"),
                   flink_jvm_options=env.get("LAB_FLINK_JVM_OPTIONS", FLINK_JVM_OPTIONS),
                   executor_jvm_options=env.get("LAB_EXECUTOR_JVM_OPTIONS", EXECUTOR_JVM_OPTIONS),
                   quick_stop=switch(env, "LAB_QUICK_STOP"),
                   task_fetch_wait_ms=milliseconds(env, "LAB_TASK_FETCH_WAIT_MS", TASK_FETCH_WAIT_MS),
                   broker_archive=switch(env, "LAB_BROKER_ARCHIVE"),
                   codegen=switch(env, "LAB_CODEGEN", default="off"))

    def wants_standby(self, waits_for_turn: bool, master: str, needed: bool, first: bool = False) -> bool:
        """Whether a run starts its next driver ahead (see ``LAB_STANDBY``).

        ``waits_for_turn``: the run's pipeline has a driver that waits for its turn
        (its registry entry's, :attr:`lab.registry.PipelineSpec.waits_for_turn`);
        a pipeline whose driver does not wait gains nothing from one started ahead.
        ``needed``: that driver will be needed (the first one; the next while a
        driver crash is planned). Only on a ``local`` master: elsewhere a
        standby's session would hold executors of its own beside the running
        driver's. ``first``: the run's first driver, which no other driver runs
        beside: also on ``local-cluster``, whose executors are its session's own
        (an executor-crash row then starts its executors before its turn).
        """
        local = master.startswith("local[") or (first and master.startswith("local-cluster["))
        if self.standby == "off" or not waits_for_turn or not local:
            return False
        return self.standby == "always" or needed
