"""`cephscope recommend RUN_DIR`: the configuration to use, how sure, and how to apply it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cephscope.runner.search.analysis import (
    AnalysisError,
    format_front,
    format_recommendation,
    front_of,
    load_runs,
    plot_front,
    recommend,
    workload_header,
)
from cephscope.runner.search.live import format_outcome, load_outcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="a run dir (grid, adaptive or search)")
    parser.add_argument("--baseline", metavar="AXIS=VALUE,...",
                        help="the configuration to compare with (default: the cluster's values "
                             "before the sweep, when they were measured)")
    parser.add_argument("--plot", type=Path, metavar="PNG",
                        help="with two or more objectives: write the Pareto front plot here")


def _parse_baseline(text: str | None) -> dict[str, str] | None:
    if not text:
        return None
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise AnalysisError(f"--baseline {text!r}: expected AXIS=VALUE[,AXIS=VALUE...]")
        out[key.strip()] = value.strip()
    return out


def run(args: argparse.Namespace) -> int:
    try:
        per_workload = load_runs(args.run_dir, _parse_baseline(args.baseline))
    except AnalysisError as exc:
        print(f"cephscope recommend: {exc}", file=sys.stderr)
        return 2
    from cephscope.runner.results import RunDir

    outcome = load_outcome(RunDir(args.run_dir))
    if outcome is not None:
        for line in format_outcome(outcome):
            print(line)
    for workload, data in per_workload:
        for line in workload_header(workload) + format_recommendation(recommend(data), data):
            print(line)
        if len(data.objectives) >= 2:
            front = front_of(data)
            for line in format_front(front):
                print(line)
            if args.plot is not None:
                print(f"front plot: {plot_front(front, args.plot)}")
    return 0
