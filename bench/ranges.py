"""The range of numbers each default-matrix scenario gives, over every run of today's grid on record.

``python bench/ranges.py [--runs N] [--out FILE]`` runs the default grid ``N``
times (default 2; each about 6 minutes on 2 cores, through
:func:`bench.matrix.one`) and adds their rows to the runs ``FILE`` already
holds (default ``bench/results/ranges.json``). Each row is recorded with the
digest of its scenario's whole configuration (:func:`config_digest`: every
field of :class:`lab.config.RunConfig`, the batch size and interval
included, which decide how many events a replayed batch duplicates). The table
counts only rows whose digest is today's for that scenario: once a default
changes, the runs made before it leave the table by themselves instead of
widening its ranges with numbers a learner can no longer get. Per scenario:
how many runs, how many were as expected, the guarantees measured, and the
minimum and maximum of ``lost``, ``duplicated`` and ``topic_lost`` (the
cluster rows' acknowledged records missing from the final read).

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


def config_digest(params: dict) -> str:
    """A short digest of the configuration ``params`` make (:func:`lab.config.make_config`)."""
    from lab.config import make_config

    fields = {k: v for k, v in asdict(make_config(**params)).items() if k not in NOT_BEHAVIOUR}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:12]


def grid_digests() -> dict[str, str]:
    """Today's default grid: each scenario's name and the digest of its configuration."""
    from lab.matrix import load_grid

    return {s.name: config_digest(s.params) for s in load_grid(None).scenarios}


def span(values) -> str:
    vals = [int(v) for v in values if v is not None and v == v]  # None or NaN: no final read
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def table(runs: list[dict], digests: dict[str, str]) -> list[dict]:
    """Per scenario of ``digests`` (grid order), the spread of its rows in ``runs`` measured with that digest (pure)."""
    out = []
    for name, digest in digests.items():
        rows = [r for run in runs for r in run["rows"] if r["name"] == name and r.get("digest") == digest]
        if not rows:
            continue
        out.append({"scenario": name, "expect": rows[0]["expect"], "runs": len(rows),
                    "as expected": sum(r["verdict"] == "as expected" for r in rows),
                    "guarantees": sorted({r["guarantee"] for r in rows}),
                    **{c: span(r.get(c) for r in rows) for c in COUNTS}})
    return out


def markdown(rows: list[dict]) -> str:
    """The table as ``docs/workshop.md`` shows it (pure)."""
    lines = ["| scenario | expected | runs | as expected | lost | duplicated | acked, then lost by the brokers |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['scenario']} | {r['expect']} | {r['runs']} | {r['as expected']} | {r['lost']} | "
              f"{r['duplicated']} | {r['topic_lost']} |" for r in rows]
    return "\n".join(lines)


def measure(digests: dict[str, str]) -> dict:
    """One run of the default grid, each row tagged with its scenario's digest."""
    from bench.matrix import one

    record = one(Path(tempfile.mkdtemp(prefix="lab-ranges-")), {})
    keep = ("measured_at", "seconds", "core_seconds_before", "verdicts")
    return {**{k: record[k] for k in keep},
            "rows": [{**{k: r.get(k) for k in ("name", "expect", "guarantee", "verdict", *COUNTS)},
                      "digest": digests.get(r["name"])} for r in record["rows"]]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="runs of the default grid to add (0: recompute only)")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    if a.runs < 0:
        ap.error(f"--runs {a.runs}: expected 0 or more")
    out = Path(a.out)
    digests = grid_digests()
    kept = json.loads(out.read_text()).get("runs", []) if out.is_file() else []
    for i in range(a.runs):
        print(f"run {i + 1} of {a.runs} of the default grid", flush=True)
        kept.append(measure(digests))
        out.write_text(json.dumps({"runs": kept}, indent=1, default=str) + "\n")  # a later interruption keeps this run
    rows = table(kept, digests)
    current = sum(any(r.get("digest") == digests.get(r["name"]) for r in run["rows"]) for run in kept)
    out.write_text(json.dumps({"grid": digests, "runs_of_todays_grid": current, "table": rows, "runs": kept},
                              indent=1, default=str) + "\n")
    print(markdown(rows))
    print(f"{current} of {len(kept)} runs on record have rows of today's grid; written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
