"""The machine: processes the lab starts and ends by PID, atomic files, Java, the jar cache, the lab's Java compiled,
JVM class archives, how a driver JVM starts.

The lowest role: it imports nothing of the lab but ``lab.errors``.
"""
