"""One run's life in the control process: the supervisor, its fault injector, the driver process, the producer, the
run's end and its result, a kernel's brokers.

Imports everything below it (brokers, sinks, audit, Spark for the one-time preparation); drivers never import it: they
talk through the run directory's files.
"""
