"""Sinks: where a pipeline's output goes, and how the auditor reads it back.

Driver-process code: pipelines write through these modules, the control process
reads through :func:`lab.sinks.reader.open_sink`. A sink module may import
``lab.host``, ``lab.kafka``, ``lab.errors`` and ``lab.events``; never the run,
the audit or the views.
"""
