"""The matrix's results table: one row per run, read from its ``report.json``; the CSV, Parquet and text views.

``matrix.csv`` (and ``matrix.parquet``) hold :data:`COLUMNS`, then any other
field a row has; lists and mappings of a report (``restart_s``, ``settings``,
``versions``) are kept as JSON text. A row is always rebuilt from its run's
report, so an interrupted matrix resumes with every column filled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from lab.audit.expectations import AS_EXPECTED, TOPIC_EXPECTATIONS, measured, verdict
from lab.audit.restarts import restart_cell

if TYPE_CHECKING:
    from lab.matrix.grid import Grid, Scenario

#: Columns of the results table, in order (then every count of the report).
COLUMNS = ["key", "name", "expect", "verdict", "guarantee", "pipeline", "sink", "faults", "seed", "acked",
           "exactly_once", "duplicated", "extra_copies", "lost", "unseen", "unexpected", "source_duplicates",
           "topic_lost", "failed_sends",
           "windows", "windows_exact", "windows_over", "windows_under", "overcount", "undercount", "late_dropped",
           "write_attempts", "stored_rows", "restarts", "restart_s", "total_s", "settings", "versions", "run_dir",
           "notebook", "html"]


def row_from_report(s: Scenario, report: dict, nb_out: Path | None = None, html: str | None = None) -> dict:
    row = {k: report.get(k) for k in COLUMNS if k in report}
    # a list per run: kept as JSON text, as ``settings`` is (a report from before it has none)
    if "restart_s" in report:
        row["restart_s"] = json.dumps(report["restart_s"])
    topic = report.get("topic") or {}
    row.update(topic_lost=topic.get("lost"), failed_sends=topic.get("failed_sends"))
    row.update(key=s.key, name=s.name, expect=s.expect, seed=s.seed, faults=report.get("faults", ""),
               sink=report["settings"].get("sink"), total_s=report.get("timings", {}).get("total_s"),
               settings=json.dumps(report.get("settings", {}), sort_keys=True),
               versions=json.dumps(report.get("versions", {}), sort_keys=True),
               verdict=verdict(s.expect, report),
               notebook=str(nb_out) if nb_out else None, html=html)
    return row


def write_table(out: Path, grid: Grid, rows: dict[str, dict]):
    import pandas as pd

    ordered = [rows[s.key] for s in grid.scenarios if s.key in rows]
    df = pd.DataFrame(ordered, columns=list(dict.fromkeys(COLUMNS + [c for r in ordered for c in r])))
    tmp = out / "matrix.csv.tmp"
    df.to_csv(tmp, index=False)
    os.replace(tmp, out / "matrix.csv")
    try:
        df.astype({c: "string" for c in ("settings", "versions", "faults", "error", "restart_s")
                   if c in df}).to_parquet(
            out / "matrix.parquet", index=False)
    except Exception:
        pass  # CSV is the record; Parquet is a convenience
    return df


def summary_lines(df) -> list[str]:
    """The matrix as text lines (what ``lab matrix`` and ``make demo`` print)."""
    lines = [f"{'scenario':<58} {'expected':<17} {'measured':<20} {'lost':>5} {'dup':>6} {'restart s':>13}  verdict"
             "   (lost: the sink's; for acked-* rows, the topic's final read; restart s: from each driver's "
             "death to its successor's first batch done)"]
    for _, r in df.iterrows():
        lost = r.get("topic_lost") if r["expect"] in TOPIC_EXPECTATIONS else r.get("lost")
        lines.append(f"{str(r['name'])[:58]:<58} {r['expect']:<17} {measured(r['expect'], r):<20} "
                     f"{count_text(lost):>5} {count_text(r.get('duplicated')):>6} "
                     f"{restart_cell(r.get('restart_s')):>13}  {r['verdict']}")
    bad = int((df["verdict"] != AS_EXPECTED).sum()) if len(df) else 0
    lines.append(f"{len(df)} runs, {bad} not as expected")
    return lines


def count_text(v) -> str:
    """A count as text, ``-`` when there is none."""
    try:
        return str(int(v))
    except (TypeError, ValueError):
        return "-"
