"""The receiver pipeline's Spark settings: its rate cap, block interval, write-ahead log and stop timeout.

Pure: :func:`spark_conf` adds them to :func:`lab.spark.session.session_conf` when the
driver (:mod:`lab.pipelines.receiver.pipeline`) starts its session.
"""

from __future__ import annotations

import math

#: Spark's block interval for the receiver (``spark.streaming.blockInterval``): how often its buffer becomes a block.
BLOCK_INTERVAL_MS = 200


def max_rate(cfg) -> int:
    """The receiver's records/s cap: ``--max-batch`` records per batch interval."""
    return max(1, math.ceil(cfg.max_batch_records / cfg.batch_interval_s))


def spark_conf(cfg) -> dict[str, str]:
    """The streaming settings this pipeline adds to :func:`lab.spark.session.session_conf`."""
    wal = "true" if cfg.spark.wal == "on" else "false"
    return {
        "spark.streaming.receiver.writeAheadLog.enable": wal,
        "spark.streaming.receiver.writeAheadLog.closeFileAfterWrite": "true",
        "spark.streaming.driver.writeAheadLog.closeFileAfterWrite": "true",
        "spark.streaming.receiver.maxRate": str(max_rate(cfg)),
        "spark.streaming.blockInterval": f"{BLOCK_INTERVAL_MS}ms",
        # A block lives on the receiver's executor, whose core the receiver holds: the batch's tasks would wait
        # spark.locality.wait (3 s) for it before running beside it (measured on local-cluster[2,1,1024], one
        # copy: 3.9 s a batch, 0.1 s with two copies). Without the wait they run at once and fetch the block.
        "spark.locality.wait": "0s",
        "spark.streaming.gracefulStopTimeout": str(int(max(10.0, 10 * cfg.batch_interval_s) * 1000)),
    }
