"""The names of the lab's pinned jar sets (``lab/jars.json``), without the fetching code of :mod:`lab.host.jars`.

Drivers and workers import these names; :mod:`lab.host.jars` (http.client, subprocess) only where jars are read.
"""

#: The jar set the Kafka broker runs from (:mod:`lab.broker.apache`).
KAFKA_JARS = "kafka-broker"
#: The jar set of Spark's Kafka connector (spark-sql-kafka-0-10), for drivers that read with Spark's own format.
SPARK_KAFKA_JARS = "spark-kafka"
#: The jar set Apache Storm's LocalCluster, Trident, the Kafka spout and the lab's ZooKeeper run from
#: (:mod:`lab.storm`).
STORM_JARS = "storm"
#: The Eclipse compiler, which compiles the Storm topology on any Java runtime (:mod:`lab.storm.build`).
ECJ_JARS = "ecj"
#: The jar set Apache Samza's standalone job runs from (:mod:`lab.samza`).
SAMZA_JARS = "samza"
