"""Flink: the PyFlink environment, the job's settings, and the job itself (run by path on that environment's Python).

Imports only the root's words and ``lab.host``; ``lab/flink/job.py`` imports nothing of the lab.
"""
