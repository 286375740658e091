"""The range of numbers each default-matrix scenario gives, over every measured run of it on record.

Sources, all real runs of the default grid on 2 cores: the rows of
``bench/results/matrix.json`` (its ``before`` and ``after`` runs, every
start-up technique off and on; classifications unchanged) and the committed
reference table ``docs/reference/matrix.csv``. Per scenario: how many runs,
the verdicts, and the minimum and maximum of ``lost`` and ``duplicated`` (and
``topic_lost`` for the cluster rows), for the workshop guide's "numbers to
expect".

Run with ``python bench/ranges.py [--out FILE]`` (default
``bench/results/ranges.json``); prints the table as Markdown.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def runs_on_record() -> dict[str, list[dict]]:
    """Every recorded run of the default grid, by scenario name, in the order the names first appear."""
    import pandas as pd

    by_name: dict[str, list[dict]] = {}
    bench = json.loads((ROOT / "bench" / "results" / "matrix.json").read_text())
    for phase in ("before", "after"):
        for row in bench[phase]["rows"]:
            by_name.setdefault(row["name"], []).append(row)
    ref = ROOT / "docs" / "reference" / "matrix.csv"
    if ref.is_file():
        for row in pd.read_csv(ref).to_dict("records"):
            by_name.setdefault(row["name"], []).append(row)
    return by_name


def span(values) -> str:
    vals = [int(v) for v in values if v == v and v is not None]  # NaN: no final read
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "ranges.json"))
    a = ap.parse_args(argv)
    table = []
    for name, rows in runs_on_record().items():
        table.append({"scenario": name, "expect": rows[0]["expect"], "runs": len(rows),
                      "as expected": sum(r["verdict"] == "as expected" for r in rows),
                      "guarantees": sorted({r["guarantee"] for r in rows}),
                      "lost": span(r["lost"] for r in rows), "duplicated": span(r["duplicated"] for r in rows),
                      "acked then lost by the brokers": span(r.get("topic_lost") for r in rows)})
    Path(a.out).write_text(json.dumps({"sources": ["bench/results/matrix.json (before, after)",
                                                   "docs/reference/matrix.csv"], "rows": table}, indent=1) + "\n")
    print("| scenario | expected | runs | as expected | lost | duplicated | acked, then lost by the brokers |")
    print("|---|---|---|---|---|---|---|")
    for r in table:
        print(f"| {r['scenario']} | {r['expect']} | {r['runs']} | {r['as expected']} | {r['lost']} | "
              f"{r['duplicated']} | {r['acked then lost by the brokers']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
