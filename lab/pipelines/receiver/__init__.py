"""The receiver pipeline: Spark Streaming's receiver-based Kafka input, with or without a write-ahead log.

:mod:`lab.pipelines.receiver.pipeline` is the driver's ``run(ctx)``; the receiver's feed, its offset commits,
its block epochs, its settings and its stop are its parts. Driver-process code: imports the Spark and Kafka
roles below it, never the run, the audit or the views.
"""
