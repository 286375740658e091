"""bench/broker_idle.py's CPU readings, on this process's own threads, and the property it compares."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from bench.broker_idle import NO_OP_PROPERTY, process_cpu_s, thread_cpu
from lab.broker import apache as kafka_broker


def test_a_busy_thread_is_counted():
    stop, tids = threading.Event(), []

    def spin():
        tids.append(str(threading.get_native_id()))
        while not stop.is_set():
            sum(range(1000))

    t = threading.Thread(target=spin)
    t.start()
    while not tids:
        time.sleep(0.01)
    try:
        before, process_before = thread_cpu(os.getpid()), process_cpu_s(os.getpid())
        deadline = time.monotonic() + 10  # on a loaded machine the spinning thread gets the CPU later, not never
        while True:
            time.sleep(0.5)
            after, process_after = thread_cpu(os.getpid()), process_cpu_s(os.getpid())
            spun = sum(s - before.get(k, 0.0) for k, s in after.items() if k[0] == tids[0])
            if spun > 0.1 or time.monotonic() > deadline:
                break
    finally:
        stop.set()
        t.join()
    assert spun > 0.1  # the GIL is this thread's while the main one sleeps
    assert process_after - process_before >= spun - 0.02  # the process counts its threads (tick rounding)


def test_the_compared_property_is_the_labs():
    assert NO_OP_PROPERTY in kafka_broker.SMALL_NODE_PROPERTIES
    assert NO_OP_PROPERTY in kafka_broker.properties(Path("/data"), 9092)
