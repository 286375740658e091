"""What more than one pipeline uses: the Spark pipelines' faults inside tasks and their choice of Kafka reader.

A pipeline imports its own module or subpackage, this package, :mod:`lab.pipelines.driver`
(its context) and lower levels; never another pipeline's module. This package imports
no pipeline. Spark's Python workers import :mod:`lab.pipelines.shared.tasks`, so this
``__init__`` imports nothing.
"""
