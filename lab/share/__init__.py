"""Kafka's share groups (KIP-932): the share group's settings and the reader of its state (a small Java class)."""
