"""Sinks: where a pipeline's output goes, and how the auditor reads it back.

Driver-process code: pipelines write through these modules, the control process
reads through :func:`lab.sinks.reader.open_sink`. A sink module imports ``lab.host``,
``lab.kafka`` and the root's words, and of the audit only what a sink is judged by
(the ledger's readers, the naive reader's outcome words); never the run or the views.
"""
