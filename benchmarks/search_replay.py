"""Replay benchmark of the sweep search (issue: sweeps that search).

Runs each search method against stored full grids over many seeds and prints, per grid and
method: the share of seeds whose final choice is within 5 % (and 10 %) of the grid's best by
grid mean, the median and 90th percentile of steps and benchmark-seconds until the choice stayed
there, the benchmark-seconds and OSD restarts the whole search spent, against the grid's own.

Grids:
  - tests/fixtures/search/shard-thread-grid: a real 4 x 4 osd_op_num_shards x
    osd_op_num_threads_per_shard grid, 3 iterations of rados bench 4 KiB write, 16 in flight,
    5 s, recorded on the dev cluster (results only);
  - synthetic 4 x 4 surfaces with 5 % and 15 % per-run noise (5 surfaces each).
Target: >= 90 % of seeds within 5 % of the best with <= 1/3 of the grid's benchmark-seconds.

    .venv/bin/python benchmarks/search_replay.py [--seeds 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from cephscope.runner.search.replay import format_figures, load_grid, replay, synthetic_grid
from cephscope.runner.search.settings import Objective, SearchSettings

FIXTURE = Path(__file__).resolve().parent.parent / "tests/fixtures/search/shard-thread-grid"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100, help="seeds per grid (default 100)")
    parser.add_argument("--surfaces", type=int, default=5, help="synthetic surfaces per noise")
    args = parser.parse_args()
    base = SearchSettings(objectives=(Objective("iops", "maximize"),))
    grids = [("recorded", [load_grid(FIXTURE)])]
    for noise in (0.05, 0.15):
        grids.append((f"synthetic {noise:.0%}", [synthetic_grid(noise, seed=s)
                                                  for s in range(1, args.surfaces + 1)]))
    t0 = time.monotonic()
    met = True
    for title, tables in grids:
        print(f"== {title} ({len(tables)} grid(s) x {args.seeds} seeds; budget 1/3 of the "
              f"grid's benchmark-seconds; 'grid' = one pass of the grid, for reference)")
        for method in ("halving", "bayes", "grid"):
            for tol in (0.05, 0.10):
                f = replay(tables, replace(base, method=method), seeds=args.seeds,
                           tolerance=tol, budget_fraction=1 / 3)
                print("  " + format_figures(f), flush=True)
                if method == "halving" and tol == 0.05:
                    ok = f.success >= 0.9 and f.spent_seconds_median <= f.grid_seconds / 3 + 1e-9
                    met = met and ok
                    print(f"  target (halving, >= 90 % within 5 %, <= 1/3 of the grid's "
                          f"benchmark-seconds): {'met' if ok else 'NOT met'}")
    print(f"replay wall time: {time.monotonic() - t0:.0f} s")
    print(f"all targets met: {'yes' if met else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
