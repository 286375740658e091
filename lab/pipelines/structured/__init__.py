"""The structured pipeline: the query and its micro-batch sinks (``pipeline``), its Kafka input (``kafka_input``),
and Spark's Kafka sink in micro-batches or real-time mode (``kafka_sink``)."""
