"""The structured pipeline: the query and its micro-batch sinks (``pipeline``), the
Spark tasks that write them (``tasks``), its Kafka input (``kafka_input``),
Spark's Kafka sink in micro-batches or real-time mode (``kafka_sink``), its logs read back (``checkpoint``), and
``session-count``'s transformWithState processor (``sessions``)."""
