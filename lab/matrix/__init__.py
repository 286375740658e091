"""The semantics matrix: grids of scenarios, their rows run through papermill, the results table, the report and the
semantics grid.

Imports ``lab.run`` and below; never the views or the lessons.
"""
