"""The lab's own broker's files: where each broker keeps its log, and what that log holds of transactions.

Reads the data directories (``log.dirs``) of the broker or cluster the lab started (:mod:`lab.broker.embedded`,
:mod:`lab.broker.cluster`): ``<log_dir>/kafka-data``, a cluster's ``<log_dir>/node-N/kafka-data``. An external
broker's files are not on this machine. Delivery effect: none; it reads files the broker writes.
"""

from __future__ import annotations

from pathlib import Path

from lab.errors import LabError


def broker_data_dir(broker_info) -> Path:
    """The data directory (``log.dirs``) of the lab's own single broker (:class:`lab.broker.embedded.BrokerInfo`).

    Raises
    ------
    LabError
        For an external broker or a cluster: one data directory per broker (:func:`broker_data_dirs`).
    """
    dirs = broker_data_dirs(broker_info)
    if len(dirs) != 1:
        raise LabError(f"a cluster of {len(dirs)} brokers has a data directory each; this needs the single broker's")
    return dirs[0]


def broker_data_dirs(broker_info) -> list[Path]:
    """The data directory of each broker of the lab's own broker or cluster (``<log_dir>[/node-N]/kafka-data``).

    Raises
    ------
    LabError
        For an external broker (its files are not on this machine).
    """
    if broker_info.external or not broker_info.log_dir:
        raise LabError("the broker's log directory is unknown: an external broker's log is not readable here")
    if broker_info.nodes:
        from lab.broker.cluster import node_dir  # a cluster's modules load only for a cluster

        return [node_dir(Path(broker_info.log_dir), n.node) / "kafka-data" for n in broker_info.nodes]
    return [Path(broker_info.log_dir) / "kafka-data"]


def log_epochs(data_dirs: list[Path], topic: str) -> dict:
    """Per producer id, ``topic``'s transactions as the broker's log holds them
    (:func:`lab.kafka.log_segments.epochs_per_producer`), each partition read from the first data directory that has
    it (a cluster's replicas hold the same batches). Keys are strings (the report's JSON)."""
    from lab.kafka.log_segments import epochs_per_producer, partition_dirs, read_partition, transactions_of

    found: dict[int, Path] = {}
    for d in data_dirs:
        for p, path in partition_dirs(d, topic).items():
            found.setdefault(p, path)
    txns = [t for p, path in sorted(found.items()) for t in transactions_of(p, read_partition(path))]
    return {str(pid): v for pid, v in epochs_per_producer(txns).items()}
