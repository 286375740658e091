"""Kafka's share groups (KIP-932): the share consumer the ``share`` pipeline runs, one JVM per consumer."""
