"""Samza: the job's configuration (pure) and its build (Java source compiled once into the cache).

Imports the root's words and ``lab.host``. The job itself is Java (``lab/samza/java``), run by
:mod:`lab.pipelines.samza` in the driver's process group.
"""
