"""The brokers a run talks to: embedded Apache Kafka (one node or a three-node cluster), an external one, and the proxy
in front of each.

Control-process code (the proxy runs as its own process); imports ``lab.host`` and ``lab.kafka``, never the run, the
audit or the views.
"""
