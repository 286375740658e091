"""The lessons' own machinery: exercises and their checked solutions, the code regions a lesson shows, the reference
pages, the fencing experiment.

Imports the views, the run and below; only :mod:`lab.notebook` imports it.
"""
