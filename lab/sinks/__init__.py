"""Sinks: where a pipeline's output goes, and how the auditor reads it back.

Driver-process code: pipelines write through these modules, the control process
reads through :func:`lab.sinks.reader.open_sink`. A sink module imports ``lab.host``,
``lab.kafka`` and the root's words (the naive reader's outcome words among them); never
the audit (what a sink is judged against, the ledger's counts, its caller passes in),
the run or the views.
"""
