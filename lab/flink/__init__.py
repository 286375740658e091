"""Flink: the PyFlink environment, the job's settings, and the job itself (run by path on that environment's Python).

Imports the root's words, ``lab.host`` and the output topic's names (:mod:`lab.sinks.topic`);
``lab/flink/job.py`` imports nothing of the lab.
"""
