"""The faults: the catalogue of real failures and named points (:mod:`.catalogue`), and a plan's syntax and its
check against the catalogue (:mod:`.plan`). Imports only ``lab.errors`` and ``lab.events``: every process reads it.
"""
