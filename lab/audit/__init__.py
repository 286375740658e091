"""The audit: the ledger of acknowledged sends, the per-event auditor, the window, topic, changelog and Flink replay audits, restarts, expectations and predictions.

Pure cores over the run directory's files; imports ``lab.sinks``, ``lab.kafka`` and the root's words, never the run or the views.
"""
