"""`cephscope report RUN_DIR`: write report.md / report.html (+ plots) of a run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cephscope.runner.report.per_osd import TOP_OSDS
from cephscope.runner.results import ResultsError


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="results dir of a run")
    parser.add_argument("--prometheus-url", metavar="URL",
                        help="pull system metrics for steps that have none stored "
                             "(e.g. http://127.0.0.1:9090)")
    parser.add_argument("--rate-window", default="auto", metavar="DURATION",
                        help="rate() window of the system queries pulled with --prometheus-url "
                             "(default auto: 4 x Prometheus' scrape interval)")
    parser.add_argument("--no-plots", action="store_true", help="skip the matplotlib plots")
    parser.add_argument("--top-osds", type=positive_int, default=TOP_OSDS, metavar="N",
                        help="per-OSD tables list the N OSDs with the highest figure and the "
                             "spread over all of them (default %(default)s)")


def run(args: argparse.Namespace) -> int:
    from cephscope.runner.report.build import write_report

    try:
        report = write_report(args.run_dir, args.prometheus_url, args.rate_window,
                              plots=not args.no_plots, top_osds=args.top_osds)
    except ResultsError as exc:
        print(f"cephscope report: {exc}", file=sys.stderr)
        return 2
    done = sum(1 for r in report.rows if r.status == "done")
    print(f"report: {report.markdown_path} ({done} result rows, {len(report.plots)} plots)")
    print(f"html:   {report.html_path}")
    return 0
