"""Matrix benchmark: how long the default grid takes, end to end (target: under 20 minutes on 2 cores).

Runs ``lab matrix`` on the default grid (every row of the expected-outcomes
table) into a fresh results directory and writes the wall time, the number of
runs and their verdicts to ``bench/results/matrix.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=None, help="results directory (default: a fresh temporary one)")
    a = p.parse_args(argv)
    from lab.matrix import load_grid, run_matrix, summary_lines

    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="lab-matrix-bench-"))
    grid = load_grid(None)
    t0 = time.monotonic()
    df = run_matrix(grid, out)
    took = time.monotonic() - t0
    print("\n".join(summary_lines(df)))
    record = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(), "runs": len(df), "seconds": round(took, 1),
        "minutes": round(took / 60, 2), "target_minutes": 20, "met": took < 20 * 60,
        "verdicts": df["verdict"].value_counts().to_dict(),
        "rows": df[["name", "expect", "guarantee", "lost", "duplicated", "verdict"]].to_dict(orient="records"),
        "results_dir": str(out),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "matrix.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"{took / 60:.1f} minutes for {len(df)} runs; written {RESULTS / 'matrix.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
