"""Spark: sessions, the driver class archive, the Python workers' daemon, the standalone cluster, the lab's Kafka
source.

Used by the driver process; imports ``lab.host``, ``lab.kafka`` and the root's words, never the run, the audit or the
views.
"""
