"""The lab: make stream-processing delivery guarantees visible.

Importing this package has no side effects and does not import PySpark or
kafka-python; modules that need them import them when they are used.
"""

__version__ = "0.1.0"
