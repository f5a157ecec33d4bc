"""`cephscope` command: one entry point, one sub-command per part.

Each part owns a module exposing ``add_arguments(parser)`` and ``run(args) -> int``;
they are imported lazily so that `cephscope devcluster` does not pay for matplotlib.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from cephscope import __version__

# sub-command -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "devcluster": ("cephscope.deploy.devcluster_cli", "real single-host Ceph dev cluster on 127.0.0.1"),
    "stack": ("cephscope.deploy.stack_cli", "local Prometheus/Alertmanager/node_exporter stack"),
    "sweep": ("cephscope.sweep_command", "run a parametric benchmark sweep"),
    "report": ("cephscope.runner.report_cli",
               "write the report of a run (markdown, self-contained HTML, plots)"),
    "search": ("cephscope.runner.search.cli", "replay a search against a stored full grid"),
    "recommend": ("cephscope.runner.search.recommend_cli",
                  "the configuration to use, with its confidence"),
    "compare": ("cephscope.runner.compare_cli",
                "compare up to six runs step by step against the first (Welch's t-test)"),
    "dashboards": ("cephscope.dashboards.build", "build the Grafana dashboards JSON and the rule files"),
}


USAGE_DESCRIPTION = """\
Benchmark a Ceph cluster and see what it did: sweep ceph config options and benchmark
parameters (rados bench, fio on RBD), with every step tagged in Prometheus, then a report
(IOPS, client and OSD-side latency percentiles, CPU per host and core, disks, NICs, OSD
thread groups, the likely bottleneck) and run-to-run comparisons with significance tests."""

USAGE_EPILOG = """\
typical use:
  cephscope sweep examples/iterations.yaml --conf /etc/ceph/ceph.conf \\
      --prometheus-url http://127.0.0.1:9090 --results-dir results/run1
  cephscope report results/run1                 # report.md, report.html (self-contained)
  cephscope compare results/run0 results/run1 --fail-on-regression 10

try it on a throwaway dev cluster on this machine (as root):
  make demo

`cephscope COMMAND --help` shows the options of a command."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cephscope", description=USAGE_DESCRIPTION,
                                     epilog=USAGE_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"cephscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if name != only:
            continue
        module = importlib.import_module(module_name)
        module.add_arguments(sp)
        sp.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Import only the module of the sub-command being run.
    only = next((a for a in argv if a in SUBCOMMANDS), None)
    parser = build_parser(only)
    args = parser.parse_args(argv)
    try:
        return int(args._module.run(args) or 0)
    except KeyboardInterrupt:
        print("cephscope: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
