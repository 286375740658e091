"""The audit: the ledger of acknowledged sends, the per-event auditor, the window, topic and Flink replay audits,
restarts, expectations and the verdict rule, predictions and their summary per scenario (``lab predictions``).

Pure cores over the run directory's files; imports ``lab.kafka`` and the root's words, never the run or the views.
Only :mod:`lab.audit.ledger` queries the ledger's ``sends`` table.
"""
