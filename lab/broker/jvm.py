"""The Kafka broker JVM's flags, shared by the broker (:mod:`lab.broker.apache`) and its class archive
(:mod:`lab.broker.archive`)."""

from __future__ import annotations

#: JVM flags of the Kafka broker and its StorageTool. Measured on this 2-core machine: 159 MB RSS
#: once started, 164-200 MB after the integration tests' load (5,000 records plus a transaction;
#: or 20,000 records of 200 B), against 263 MB started with kafka-server-start's defaults
#: (-Xmx1G -Xms1G, G1). A 256 MB heap holds the lab's topics; C1 only (TieredStopAtLevel=1)
#: and serial GC suit a short-lived broker on 2 cores.
KAFKA_JVM_FLAGS = (
    "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=48m",
    "-XX:MaxMetaspaceSize=128m", "-Xss512k", "-Djava.awt.headless=true", "-XX:+ExitOnOutOfMemoryError",
    # slf4j-simple (pinned in the jar set) writes to stderr, i.e. kafka.log; INFO is needed: the ready
    # line and the listeners' ports are INFO lines.
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
)
