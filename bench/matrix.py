"""Matrix benchmark: how long the default grid takes, end to end, with the driver start-up techniques on and off.

Runs ``lab matrix`` on the default grid (every row of the expected-outcomes
table) into a fresh results directory and writes the wall time, the number of
runs and their verdicts to ``bench/results/matrix_defaults.json``. ``--original``
runs only the 14 rows the grid had when its 4-minute target was set
(:data:`ORIGINAL_ROWS`, as they are today), into
``bench/results/matrix_original.json``; ``--set KEY=VALUE`` sets a parameter in
every row, for a before/after pair of one setting (``_set`` in the file name). ``--pair`` runs the whole grid
twice, back to back, into ``bench/results/matrix.json``: first with every start-up technique off (the start as it
was before them: no class archive, the JVM's default flags, the worker
warm-up before the query, a 1 s restart delay; :data:`lab.host.start_tuning.ALL_OFF`),
then with the defaults, and compares the two row by row: a technique may
change the time, never a classification. ``--jobs-pair`` runs it with one
scenario at a time (one shared broker), then two at once (a broker each), and
compares them the same way, into ``bench/results/matrix_jobs.json``. ``--ahead-pair`` runs it with each
row's notebook started only when the row before has ended (``LAB_ROW_AHEAD=off``), then with the next row's
notebook started while a row runs (the default, :mod:`lab.matrix.rows`), into ``bench/results/matrix_ahead.json``
(with ``--original``: its 14 rows, ``matrix_original_ahead.json``). ``--beside-pair`` runs it with the cluster's
rows in the relay, in grid order (``LAB_CLUSTER_BESIDE=off``), then beside the other rows (the default,
:mod:`lab.matrix.lane`), into ``bench/results/matrix_beside.json``. Each file keeps the headline of the measures it
replaced under ``earlier`` (:func:`with_earlier`), each with the machine speed it recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from lab.host.start_tuning import ALL_OFF

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: make `bench` importable
from bench.machine import core_seconds, cpu_model  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_MINUTES = 4
#: The default grid's 14 rows before the stateful, replication and kafka-eos rows joined it (commit 9095b2a's
#: parent), when it took 7 min 37 s and the 4-minute target was set; ``--original`` runs these rows of today's grid.
ORIGINAL_ROWS = (
    "receiver, unreliable ack, no WAL, driver-crash",
    "receiver, reliable ack, no WAL, driver-crash",
    "receiver, reliable ack, no WAL, executor-crash, replication 2",
    "receiver, reliable ack, WAL, driver-crash",
    "receiver, unreliable ack, WAL, driver-crash",
    "direct, offsets in checkpoint, append, crash after output before commit",
    "direct, offsets in the sink's transaction, crash after output before commit",
    "direct, offsets in the sink's transaction, crash mid-output",
    "structured, foreachBatch append, crash after sink before commit log",
    "structured, idempotent sink, crash after sink before commit log",
    "structured, batch-id transactional sink, crash mid-output",
    "structured, append with writes inside tasks, task-failure",
    "producer without idempotence, ack-loss, append sink",
    "producer without idempotence, ack-loss, event-id keyed sink",
)


def parse_sets(items: list[str]) -> dict:
    """``["k=v", ...]`` as ``{k: v}``, each value read as YAML (``600`` is a number); a one-line error otherwise."""
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE, e.g. max_batch_records=600")
        out[key.strip()] = yaml.safe_load(value)
    return out


def default_grid(overrides: dict | None = None, original: bool = False):
    """Today's default grid, with ``overrides`` set in every row; ``original``: cut to :data:`ORIGINAL_ROWS`."""
    from dataclasses import replace

    from lab.config import make_config
    from lab.matrix.grid import load_grid

    grid = load_grid(None)
    rows = [replace(s, params={**s.params, **(overrides or {})}) for s in grid.scenarios
            if not original or s.name in ORIGINAL_ROWS]
    for s in rows:
        make_config(**s.params)  # a bad override fails here, before any run
    missing = set(ORIGINAL_ROWS if original else ()) - {s.name for s in rows}
    if missing:
        raise SystemExit(f"rows no longer in the default grid: {sorted(missing)}")
    return replace(grid, scenarios=rows)


def one(out: Path, env: dict, jobs: int = 1, grid=None) -> dict:
    """Run ``grid`` (default: the default grid) into ``out`` with ``env`` set, ``jobs`` scenarios at once; its time,
    verdicts and rows."""
    from lab.matrix.grid import load_grid
    from lab.matrix.runner import run_matrix
    from lab.matrix.table import summary_lines

    core_s = core_seconds()  # before the run: a quiet machine's speed, to compare figures across machines
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        t0 = time.monotonic()
        df = run_matrix(grid or load_grid(None), out, jobs=jobs)
        took = time.monotonic() - t0
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    print("\n".join(summary_lines(df)))
    return {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "env": env, "jobs": jobs, "cpus": os.cpu_count(),
        "cpu_model": cpu_model(), "core_seconds_before": core_s, "load_average_at_end": os.getloadavg(),
        "runs": len(df), "seconds": round(took, 1), "minutes": round(took / 60, 2), "target_minutes": TARGET_MINUTES,
        "met": took < TARGET_MINUTES * 60, "verdicts": df["verdict"].value_counts().to_dict(),
        "rows": [{k: v for k, v in r.items() if k != "error" or (isinstance(v, str) and v)}
                 for r in df[[c for c in ("key", "name", "expect", "guarantee", "lost", "duplicated", "topic_lost",
                                          "verdict", "total_s", "error")
                              if c in df.columns]].to_dict(orient="records")],
        "results_dir": str(out),
    }


def compare(before: dict, after: dict) -> list[dict]:
    """Row by row: each scenario's measured guarantee and verdict before and after (pure)."""
    b = {r["name"]: r for r in before["rows"]}
    rows = []
    for r in after["rows"]:
        old = b.get(r["name"], {})
        rows.append({"name": r["name"], "expect": r["expect"], "before": old.get("guarantee"),
                     "after": r["guarantee"], "verdict_before": old.get("verdict"), "verdict_after": r["verdict"],
                     "same": old.get("guarantee") == r["guarantee"] and old.get("verdict") == r["verdict"]})
    return rows


def paired(before: dict, after: dict) -> dict:
    """The record of two runs of the grid: both, compared row by row, and the speed-up (pure)."""
    rows = compare(before, after)
    return {"before": before, "after": after, "compared": rows,
            "classifications_unchanged": all(r["same"] for r in rows),
            "verdicts_unchanged": all(r["verdict_before"] == r["verdict_after"] for r in rows),
            "speed_up": round(before["seconds"] / after["seconds"], 2)}


#: What a record keeps of each earlier measure it replaces (:func:`with_earlier`), with its rows not as expected.
HEADLINE = ("measured_at", "runs", "seconds", "verdicts", "cpu_model", "core_seconds_before")
#: What it keeps of such a row: which one, what it measured, and a failed run's error.
ROW_HEADLINE = ("name", "expect", "guarantee", "verdict", "error")


def with_earlier(record: dict, previous: dict | None) -> dict:
    """``record`` with the headline of ``previous`` (the file it replaces) and of that file's own earlier ones (pure).

    The same grid takes 1.6 times as long on a slower machine with the same code: a new measure
    keeps the older ones beside it, newest first, each with the machine speed it recorded.
    """
    if not previous:
        return record
    last = previous.get("after", previous)  # a pair's headline is its second run's
    headline = {k: last[k] for k in HEADLINE if k in last}
    odd = [{k: r[k] for k in ROW_HEADLINE if k in r} for r in last.get("rows", [])
           if r.get("verdict", "as expected") != "as expected"]
    if odd:  # which row failed stays known once the measure is only a headline
        headline["not_as_expected"] = odd
    earlier = [headline, *previous.get("earlier", [])]
    return {**record, "earlier": earlier}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=None, help="results directory (default: a fresh temporary one)")
    p.add_argument("--pair", action="store_true", help="run with the start-up techniques off, then on; compare")
    p.add_argument("--jobs-pair", action="store_true", help="run with --jobs 1, then --jobs 2; compare")
    p.add_argument("--ahead-pair", action="store_true",
                   help="run with LAB_ROW_AHEAD=off, then on (the default); compare")
    p.add_argument("--beside-pair", action="store_true",
                   help="run with LAB_CLUSTER_BESIDE=off, then on (the default); compare")
    p.add_argument("--original", action="store_true",
                   help="run only the grid's 14 original rows (into bench/results/matrix_original.json)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter for every row (a YAML value), e.g. batch_interval_s=1; into "
                        "bench/results/matrix_original_set.json with --original, else matrix_defaults_set.json")
    a = p.parse_args(argv)
    if a.set and (a.pair or a.jobs_pair or a.ahead_pair or a.beside_pair):
        p.error("--set applies to --original or the plain run only")
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="lab-matrix-bench-"))
    target = RESULTS / "matrix.json"
    if a.jobs_pair:
        before, after = one(out / "jobs-1", {}, jobs=1), one(out / "jobs-2", {}, jobs=2)
        record, took = paired(before, after), after["seconds"]
        target = RESULTS / "matrix_jobs.json"
        print(f"--jobs 1 {before['minutes']} min, --jobs 2 {after['minutes']} min; "
              f"classifications unchanged: {record['classifications_unchanged']}")
    elif a.ahead_pair:
        grid = default_grid(original=a.original)
        before, after = (one(out / "ahead-off", {"LAB_ROW_AHEAD": "off"}, grid=grid),
                         one(out / "ahead-on", {}, grid=grid))
        record, took = paired(before, after), after["seconds"]
        target = RESULTS / ("matrix_original_ahead.json" if a.original else "matrix_ahead.json")
        print(f"rows one after another {before['minutes']} min, the next started ahead {after['minutes']} min; "
              f"classifications unchanged: {record['classifications_unchanged']}")
    elif a.beside_pair:
        before = one(out / "beside-off", {"LAB_CLUSTER_BESIDE": "off"})
        after = one(out / "beside-on", {})
        record, took = paired(before, after), after["seconds"]
        target = RESULTS / "matrix_beside.json"
        print(f"cluster rows in the relay {before['minutes']} min, beside it {after['minutes']} min; "
              f"classifications unchanged: {record['classifications_unchanged']}")
    elif a.pair:
        before, after = one(out / "techniques-off", ALL_OFF), one(out / "defaults", {})
        record, took = paired(before, after), after["seconds"]
        print(f"before {before['minutes']} min, after {after['minutes']} min; "
              f"classifications unchanged: {record['classifications_unchanged']}")
    elif a.original:
        overrides = parse_sets(a.set)
        record = one(out, {}, grid=default_grid(overrides, original=True)) | {"baseline_minutes": 7.62,
                                                                               "overrides": overrides}
        took = record["seconds"]
        target = RESULTS / ("matrix_original_set.json" if overrides else "matrix_original.json")
    else:
        overrides = parse_sets(a.set)
        record = one(out, {}, grid=default_grid(overrides)) | {"overrides": overrides}
        took = record["seconds"]
        target = RESULTS / ("matrix_defaults_set.json" if overrides else "matrix_defaults.json")
    RESULTS.mkdir(parents=True, exist_ok=True)
    previous = json.loads(target.read_text()) if target.is_file() else None
    target.write_text(json.dumps(with_earlier(record, previous), indent=2, default=str) + "\n")
    print(f"{took / 60:.1f} minutes (the last run); written {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
