"""The names of the lab's pinned jar sets (``lab/jars.json``), without the fetching code of :mod:`lab.host.jars`.

Drivers and workers import these names; :mod:`lab.host.jars` (http.client, subprocess) only where jars are read.
"""

#: The jar set the Kafka broker runs from (:mod:`lab.broker.apache`).
KAFKA_JARS = "kafka-broker"
#: The jar set of Spark's Kafka connector (spark-sql-kafka-0-10), for drivers that read with Spark's own format.
SPARK_KAFKA_JARS = "spark-kafka"
