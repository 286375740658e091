"""kafka-python's CRC-32C in C (the ``crc32c`` module, ``kafka-python[crc32c]``) against its pure-Python fallback.

A record batch of Kafka's format v2 carries a CRC-32C of its contents, which the producer
computes for every batch it sends (kafka-python: ``kafka.record.util.calc_crc32c``). Without
the ``crc32c`` module kafka-python computes it in Python, at about 6 MB/s on one core of these
machines; the module computes it in C. The lab's consumers do not check CRCs
(``lab.kafka.tools.READ_SETTINGS``), so the producer is where the difference lies.

Each scenario is run as a user runs it (``lab run``), alternately with the module (``c``) and
with it masked (``python``: a directory put first on ``PYTHONPATH`` whose ``crc32c.py`` raises
``ImportError``, so every Python process of the run falls back as it would without the
module), so each pair shares the machine's state. Recorded per run: wall time, the machine's
CPU seconds (``/proc/stat``), the producer's time from ``producer-start`` to ``producer-done``
and the run's guarantee, which no variant may change; per scenario, the medians of each variant and
the differences within each round (``c_minus_python``).

Run with ``python bench/kafka_crc.py [--rounds N] [--out FILE]``; writes medians and every run to
``FILE`` (default ``bench/results/kafka_crc.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` and `lab` importable from the checkout
from bench.machine import core_seconds, machine  # noqa: E402
from bench.run_cpu import timed_run  # noqa: E402
from bench.testbed import emit, summary  # noqa: E402

#: The fast-restart issue's two commands: the producer at full speed, and at 500 events/s.
SCENARIOS = {
    "200,000 events at full speed": ["--pipeline", "structured", "--sink", "transactional", "--events", "200000",
                                     "--rate", "0", "--faults", "driver-crash@batch=3:mid-output"],
    "3,000 events at 500/s": ["--pipeline", "structured", "--sink", "idempotent", "--events", "3000", "--rate", "500",
                              "--faults", "driver-crash@batch=2:after-output-before-commit"],
}
VARIANTS = ("c", "python")
MASK = 'raise ImportError("crc32c masked by bench/kafka_crc.py")\n'


def variant_env(variant: str, mask_dir: Path, env=None) -> dict:
    """The environment of a run of ``variant``: ``python`` puts ``mask_dir`` first on ``PYTHONPATH`` (pure)."""
    env = dict(os.environ if env is None else env)
    if variant == "python":
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(mask_dir), env.get("PYTHONPATH")) if p)
    return env


def producer_seconds(events: list[dict]) -> float | None:
    """Seconds from the run's ``producer-start`` to its ``producer-done`` (pure; None without both)."""
    start = next((e["t"] for e in events if e["type"] == "producer-start"), None)
    done = next((e["t"] for e in events if e["type"] == "producer-done"), None)
    return round(done - start, 2) if start is not None and done is not None else None


def crc_in_use(env: dict) -> str:
    """The CRC-32C function kafka-python picks in a fresh Python with ``env``: ``C`` or ``Python``."""
    p = subprocess.run([sys.executable, "-c", "import kafka.record.util as u; print(type(u._crc32c).__name__)"],
                       env=env, capture_output=True, text=True, check=True)
    return "C" if p.stdout.strip() == "builtin_function_or_method" else "Python"


def measure(args: list[str], env: dict) -> dict:
    """One ``lab run``: wall time, machine CPU, the producer's seconds and the guarantee."""
    from lab.events import read_events

    wall, cpu, report = timed_run(args, env)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 1),
            "producer_s": producer_seconds(read_events(Path(report["run_dir"]))), "guarantee": report["guarantee"]}


def medians(runs: list[dict]) -> dict:
    """Per scenario and variant: the runs' count, min/median/max of each figure, and their guarantees (pure)."""
    out: dict = {}
    for r in runs:
        out.setdefault(r["scenario"], {}).setdefault(r["variant"], []).append(r)
    return {s: {v: {"runs": len(rs), **{k: summary([r[k] for r in rs if r[k] is not None])
                                         for k in ("wall_s", "cpu_s", "producer_s")},
                    "guarantees": sorted({r["guarantee"] for r in rs})}
                for v, rs in by.items()} for s, by in out.items()}


def paired(runs: list[dict]) -> dict:
    """Per scenario, ``c`` minus ``python`` within each round: min/median/max of each figure (pure).

    The machine drifts from minute to minute; a pair run one after the other shares its state.
    """
    by = {(r["scenario"], r["round"], r["variant"]): r for r in runs}
    out: dict = {}
    for (scenario, rnd, variant), r in by.items():
        other = by.get((scenario, rnd, "python"))
        if variant != "c" or other is None:
            continue
        for k in ("wall_s", "cpu_s", "producer_s"):
            if r[k] is not None and other[k] is not None:
                out.setdefault(scenario, {}).setdefault(k, []).append(round(r[k] - other[k], 2))
    return {s: {k: summary(v) for k, v in figures.items()} for s, figures in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "kafka_crc.json"))
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lab-crc-mask-") as tmp:
        mask_dir = Path(tmp)
        (mask_dir / "crc32c.py").write_text(MASK)
        envs = {v: variant_env(v, mask_dir) for v in VARIANTS}
        in_use = {v: crc_in_use(envs[v]) for v in VARIANTS}
        if in_use != {"c": "C", "python": "Python"}:
            raise SystemExit(f"kafka-python's CRC-32C: {in_use} (want c: C, python: Python); is crc32c installed? make "
                             "venv")
        before = core_seconds()
        runs = []
        for rnd in range(a.rounds):
            for scenario, args in SCENARIOS.items():
                for variant in VARIANTS:
                    r = {"scenario": scenario, "variant": variant, "round": rnd, **measure(args, envs[variant])}
                    print(json.dumps(r), flush=True)
                    runs.append(r)
    emit({"machine": {**machine(), "core_seconds_before": before}, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
          "scenarios": SCENARIOS, "crc32c_in_use": in_use, "rounds": a.rounds, "summary": medians(runs),
          "c_minus_python": paired(runs), "runs": runs},
         a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
