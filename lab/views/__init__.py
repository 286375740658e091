"""What a person looks at: the control panel, plots, prediction buttons, replication and Flink views, a run's files, a
run's progress, the printed learner card.

Widgets and printing live here; imports the run, the matrix and below, never the lessons or the notebook face.
"""
