"""A ZooKeeper for one run, on 127.0.0.1: Storm's cluster state and Trident's transaction state.

Started by the supervisor before the storm pipeline's first driver (the storm engine's
``services``, :mod:`lab.engines.storm`) and stopped when the run ends, so it outlives every driver crash:
a restarted Trident topology finds there the transaction ids and the offsets of
each batch that the killed one stored, and replays an unfinished batch exactly as
it was. Storm's LocalCluster would start a ZooKeeper of its own inside the
driver's JVM, listening on every interface and dying with the driver.

It is ZooKeeper's own server (``ZooKeeperServerMain``, as Storm shades it in its
jars), standalone, its data under ``RUN_DIR/zookeeper``, its admin server off.
Delivery effect: none of its own; what Trident stores there decides what a
restarted topology replays.
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.errors import LabError
from lab.host import jars, processes
from lab.host.jar_sets import STORM_JARS
from lab.host.java import find_java

MAIN_CLASS = "org.apache.storm.shade.org.apache.zookeeper.server.ZooKeeperServerMain"
#: Seconds ZooKeeper may take to listen (measured: about 1.5 s on 2 cores).
START_TIMEOUT_S = 60.0
JVM_FLAGS = ("-Xms16m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
             "-Djava.awt.headless=true", "-XX:+ExitOnOutOfMemoryError")
#: Written to the run directory for the drivers.
INFO_FILE = "zookeeper.json"


@dataclass(frozen=True)
class ZooKeeperInfo:
    """A running ZooKeeper: where clients connect and which process it is."""

    host: str
    port: int
    pid: int
    data_dir: str

    def to_dict(self) -> dict:
        return asdict(self)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_text(port: int, data_dir: Path) -> str:
    """``zoo.cfg`` for a standalone server on 127.0.0.1:``port``."""
    return "\n".join([
        "tickTime=2000",
        f"dataDir={data_dir}",
        f"clientPort={port}",
        "clientPortAddress=127.0.0.1",
        "admin.enableServer=false",  # its Jetty admin server would listen on 8080, every interface
        "maxClientCnxns=0",
        "4lw.commands.whitelist=",
    ]) + "\n"


class ZooKeeper:
    """A context manager: the server runs inside the ``with`` block (its own process group)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = Path(run_dir) / "zookeeper"
        self.proc = None
        self.info: ZooKeeperInfo | None = None

    def __enter__(self) -> ZooKeeperInfo:
        self.dir.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        cfg = self.dir / "zoo.cfg"
        cfg.write_text(config_text(port, self.dir / "data"))
        cmd = [find_java().executable, *JVM_FLAGS, "-cp", jars.classpath(STORM_JARS), MAIN_CLASS, str(cfg)]
        self.proc = processes.spawn(cmd, log_path=self.dir / "zookeeper.log")
        try:
            processes.wait_for_port("127.0.0.1", port, START_TIMEOUT_S, self.proc, what="ZooKeeper")
        except LabError as e:
            self.__exit__()
            raise LabError(f"{e}; its log: {processes.last_log_line(self.dir / 'zookeeper.log')}") from None
        self.info = ZooKeeperInfo("127.0.0.1", port, self.proc.pid, str(self.dir / "data"))
        return self.info

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            processes.stop_process(self.proc, grace_s=5.0)
            self.proc = None
