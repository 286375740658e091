"""The range of numbers each default-matrix scenario gives, over every run of today's grid on record.

``python bench/ranges.py [--runs N] [--out FILE]`` runs the default grid ``N``
times (default 2; each about 6 minutes on 2 cores, through
:func:`bench.matrix.one`, in a temporary directory removed after it) and adds
their rows to the runs ``FILE`` already holds (default
``bench/results/ranges.json``). Each row is recorded with the digest of its
scenario's whole configuration and seed (:func:`config_digest`: every field
of :class:`lab.config.RunConfig`, the batch size and interval included, which
decide how many events a replayed batch duplicates). The table counts only
rows whose digest is one of today's for that scenario (a scenario the grid
runs with several seeds pools them): once a default
changes, the runs made before it leave the table by themselves instead of
widening its ranges with numbers a learner can no longer get. Per scenario:
how many runs, how many were as expected, the guarantees measured, and the
minimum and maximum of ``lost``, ``duplicated`` and ``topic_lost`` (the
cluster rows' acknowledged records missing from the final read). A row whose
run failed (verdict ``error``, no counts) counts in ``runs`` and ``errors``,
not in the spans.

``--runs 0`` recomputes the table from the runs on record. The table is
printed as Markdown for ``docs/workshop.md``'s "The numbers to expect".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `bench` importable
OUT = ROOT / "bench" / "results" / "ranges.json"
#: Configuration fields that say where a run writes, not how it behaves.
NOT_BEHAVIOUR = ("runs_dir",)
COUNTS = ("lost", "duplicated", "topic_lost")


def config_digest(params: dict, seed: int = 1) -> str:
    """A short digest of the configuration ``params`` and ``seed`` make (:func:`lab.config.make_config`)."""
    from lab.config import make_config

    fields = {k: v for k, v in asdict(make_config(**params, seed=seed)).items() if k not in NOT_BEHAVIOUR}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:12]


def grid_digests(grid) -> dict[str, tuple[str, str]]:
    """Each scenario of ``grid``: its key (:attr:`lab.matrix.runner.Scenario.key`), name and configuration's digest."""
    return {s.key: (s.name, config_digest(s.params, s.seed)) for s in grid.scenarios}


def span(values) -> str:
    vals = [int(v) for v in values if v is not None and v == v]  # None or NaN: no final read, or a failed run
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def table(runs: list[dict], digests: dict[str, tuple[str, str]]) -> list[dict]:
    """Per scenario name of ``digests`` (grid order), the spread of its rows in ``runs`` made with one of today's
    digests for it (pure)."""
    today: dict[str, set[str]] = {}
    for name, digest in digests.values():
        today.setdefault(name, set()).add(digest)
    out = []
    for name, wanted in today.items():
        rows = [r for run in runs for r in run["rows"] if r["name"] == name and r.get("digest") in wanted]
        if not rows:
            continue
        ran = [r for r in rows if r["verdict"] != "error"]
        out.append({"scenario": name, "expect": rows[0]["expect"], "runs": len(rows),
                    "as expected": sum(r["verdict"] == "as expected" for r in rows),
                    "errors": len(rows) - len(ran),
                    "guarantees": sorted({r["guarantee"] for r in ran if isinstance(r.get("guarantee"), str)}),
                    **{c: span(r.get(c) for r in ran) for c in COUNTS}})
    return out


def markdown(rows: list[dict]) -> str:
    """The table as ``docs/workshop.md`` shows it (pure)."""
    lines = ["| scenario | expected | runs | as expected | lost | duplicated | acked, then lost by the brokers |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['scenario']} | {r['expect']} | {r['runs']} | {r['as expected']} | {r['lost']} | "
              f"{r['duplicated']} | {r['topic_lost']} |" for r in rows]
    return "\n".join(lines)


def plain(value):
    """``value`` for JSON: NaN (a count a failed run never had) as None."""
    return None if isinstance(value, float) and value != value else value


def measure(grid, digests: dict[str, tuple[str, str]]) -> dict:
    """One run of ``grid``, each row tagged with its scenario's digest (``digests``, made from that same grid)."""
    from bench.matrix import one

    with tempfile.TemporaryDirectory(prefix="lab-ranges-") as tmp:
        record = one(Path(tmp), {}, grid=grid)
    keep = ("measured_at", "seconds", "core_seconds_before", "verdicts")
    return {**{k: record[k] for k in keep},
            "rows": [{**{k: plain(r.get(k)) for k in ("name", "expect", "guarantee", "verdict", *COUNTS)},
                      "digest": digests.get(r.get("key"), (None, None))[1]} for r in record["rows"]]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="runs of the default grid to add (0: recompute only)")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    if a.runs < 0:
        ap.error(f"--runs {a.runs}: expected 0 or more")
    from lab.matrix.grid import load_grid

    out = Path(a.out)
    grid = load_grid(None)
    digests = grid_digests(grid)
    previous = json.loads(out.read_text()) if out.is_file() else {}
    if previous and "runs" not in previous:
        ap.error(f"{out} holds no runs this script recorded (an older format): name another --out, or move it away")
    kept = previous.get("runs", [])
    for i in range(a.runs):
        print(f"run {i + 1} of {a.runs} of the default grid", flush=True)
        kept.append(measure(grid, digests))
        out.write_text(json.dumps({"runs": kept}, indent=1) + "\n")  # a later interruption keeps this run
    rows = table(kept, digests)
    ours = {d for _, d in digests.values()}
    current = sum(any(r.get("digest") in ours for r in run["rows"]) for run in kept)
    out.write_text(json.dumps({"grid": {k: list(v) for k, v in digests.items()},
                               "runs_with_rows_of_todays_grid": current, "table": rows, "runs": kept}, indent=1) + "\n")
    print(markdown(rows))
    print(f"{current} of {len(kept)} runs on record have rows of today's grid; written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
