"""Storm: the topology's settings, its build (Java source compiled once into the cache) and the ZooKeeper it keeps state
in.

Imports the root's words and ``lab.host``. The topology itself is Java (``lab/storm/java``), run by
:mod:`lab.pipelines.storm` in the driver's process group; :mod:`lab.storm.zookeeper` runs in the control process.
"""
