"""`cephscope search --replay RUN_DIR`: measure a search method against a stored full grid."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from cephscope.runner.search.replay import (
    ReplayError,
    format_figures,
    load_grid,
    replay,
    synthetic_grid,
)
from cephscope.runner.search.settings import METHODS, Objective, SearchSettings, parse_search
from cephscope.runner.spec_checker import Checker


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--replay", type=Path, metavar="RUN_DIR",
                     help="a finished full-grid run dir (every combination, >= 1 iteration)")
    src.add_argument("--synthetic", type=float, metavar="NOISE",
                     help="a synthetic 4 x 4 shards x threads surface with this relative "
                          "per-run noise (e.g. 0.05)")
    parser.add_argument("--method", choices=[m for m in METHODS if m != "grid"],
                        action="append", help="method(s) to replay (default: halving and bayes)")
    parser.add_argument("--seeds", type=int, default=100, help="seeds (default 100)")
    parser.add_argument("--budget-fraction", type=float, default=1 / 3,
                        help="budget as a fraction of the grid's benchmark-seconds (default 1/3)")
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="'found' means within this fraction of the grid's best (0.05)")
    parser.add_argument("--maximize", default=None, metavar="METRIC[@MODE]",
                        help="objective (default: the run's search objective, else iops)")
    parser.add_argument("--restart-seconds", type=float, default=0.0, metavar="S",
                        help="what one OSD restart costs; the budget and the grid's cost then "
                             "count restarts too (default 0: benchmark-seconds only)")
    parser.add_argument("--max-restarts", default=None, metavar="N|grid",
                        help="halving: restart at most N times ('grid': the grid's count)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def run(args: argparse.Namespace) -> int:
    if args.seeds < 1 or not 0 < args.budget_fraction <= 1 or not 0 < args.tolerance < 1 \
            or args.restart_seconds < 0:
        print("cephscope search: --seeds >= 1, 0 < --budget-fraction <= 1, "
              "0 < --tolerance < 1, --restart-seconds >= 0", file=sys.stderr)
        return 2
    max_restarts: int | str | None = args.max_restarts
    if max_restarts is not None and max_restarts != "grid":
        if not str(max_restarts).isdigit() or int(max_restarts) < 1:
            print(f"cephscope search: --max-restarts {max_restarts!r}: an integer >= 1 or "
                  f"'grid'", file=sys.stderr)
            return 2
        max_restarts = int(max_restarts)
    try:
        table = (load_grid(args.replay) if args.replay is not None
                 else synthetic_grid(args.synthetic, seed=1))
    except ReplayError as exc:
        print(f"cephscope search: {exc}", file=sys.stderr)
        return 2
    base = SearchSettings(objectives=(Objective("iops", "maximize"),),
                          restart_seconds=args.restart_seconds, max_restarts=max_restarts)
    if args.maximize:
        checker = Checker(lambda kp: "--maximize")
        settings = parse_search(checker, ("search",), {"maximize": args.maximize}, {})
        if settings is None:
            print("cephscope search: " + "; ".join(checker.problems), file=sys.stderr)
            return 2
        base = replace(base, objectives=settings.objectives)
    rows = []
    for method in args.method or ["halving", "bayes"]:
        try:
            figures = replay(table, replace(base, method=method), seeds=args.seeds,
                             tolerance=args.tolerance, budget_fraction=args.budget_fraction)
        except (ReplayError, ValueError) as exc:
            print(f"cephscope search: {method}: {exc}", file=sys.stderr)
            return 1
        rows.append(figures)
        if not args.json:
            print(format_figures(figures), flush=True)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2, default=str))
    return 0
