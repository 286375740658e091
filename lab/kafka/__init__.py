"""Kafka clients: topics, offsets, reading a topic whole, watching replication.

Used by both processes (driver and control); imports only ``lab.host``, ``lab.errors`` and ``lab.events``.
"""
