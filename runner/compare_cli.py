"""`cephscope compare RUN_A RUN_B`: first what differs between the two runs' environments
(hosts' sysctls, kernel, device queues, NICs, then Ceph versions, config, pools, OSDs: see
`cephscope.runner.environment`), then B against baseline A, per step (same params; all iterations
of it together) and mode: the mean of every figure (IOPS, average and p99 latency) on each side,
B/A, and Welch's t-test across the iterations.

A figure regressed when it moved the bad way (IOPS down, latency up) by more than the threshold
AND the t-test calls the difference significant (p < alpha). With fewer than 2 iterations on a
side there is no test: a change beyond the threshold is reported as "cannot tell" (one sample
per side cannot tell noise from change; run the spec with `iterations: 3` or more): the
verdict is then "cannot tell (worse)" or "cannot tell (better)".

`cephscope compare RUN_A RUN_B RUN_C ...` (up to six runs, as CBT's comparison): every run
against the first with the same figures, test and verdicts, as one table with a column per run
(and the environment settings that differ, a column per run); `--fail-on-regression` looks at
all of them. Seven or more runs are refused. `--plots DIR` draws the runs overlaid (a line per
run), the response curves with each run's knee among them.

`cephscope compare RUN --across-releases`: one run of a sweep across Ceph releases
(`devcluster: {release: [...]}`), each release against the first named, step by step (a step
matches itself on another release), with the same figures, test and verdicts.

Exit codes:
  0  no regression (or no --fail-on-regression given)
  1  with --fail-on-regression: at least one significant regression beyond the threshold
  2  bad input: a run dir is unreadable, no step matches, a bad flag value
  3  with --fail-on-regression: no regression found, but changes for the worse beyond the
     threshold that could not be tested (fewer than 2 iterations on a side)
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cephscope.runner.environment import render_md as render_env_md
from cephscope.runner.report.compare import (
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD_PERCENT,
    FIGURES,
    Comparison,
    FigureComparison,
    compare_runs,
    compare_samples,
    environment_changes,
)
from cephscope.runner.report.compare_many import MAX_RUNS, compare_many, run_labels
from cephscope.runner.report.compare_many import render_csv as render_many_csv
from cephscope.runner.report.compare_many import render_json as render_many_json
from cephscope.runner.report.compare_many import render_md as render_many_md
from cephscope.runner.results import ResultsError

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_CANNOT_TELL = 0, 1, 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", type=Path, metavar="RUN_A", help="baseline run dir")
    parser.add_argument("run_b", type=Path, metavar="RUN_B", nargs="*",
                        help="run dir(s) compared to it, up to "
                             f"{MAX_RUNS - 1} (not with --across-releases)")
    parser.add_argument("--across-releases", action="store_true",
                        help="RUN_A is a sweep across Ceph releases: compare each release's "
                             "steps against the first release's")
    parser.add_argument("--threshold", type=float, metavar="PCT", default=None,
                        help="a change smaller than PCT %% is never a regression (default "
                             f"{DEFAULT_THRESHOLD_PERCENT:g}, or the --fail-on-regression value)")
    parser.add_argument("--fail-on-regression", type=float, metavar="PCT",
                        help="exit 1 if any figure regressed by more than PCT %% (IOPS lower, "
                             "latency higher) and the t-test finds it significant; exit 3 if "
                             "a change beyond PCT %% cannot be tested (one iteration per side)")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help="significance level of Welch's t-test across iterations "
                             f"(default {DEFAULT_ALPHA:g})")
    parser.add_argument("--format", choices=("md", "json", "csv"), default="md",
                        help="output: a markdown table (default), JSON or CSV")
    parser.add_argument("--plots", type=Path, metavar="DIR",
                        help="write the runs' plots overlaid (a line per run: figures against "
                             "every sweep axis, response curves with their knees) into DIR")


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


ROW_FIELDS: Sequence[tuple[str, Callable[[Comparison, FigureComparison], str]]] = (
    ("params", lambda c, f: c.params),
    ("mode", lambda c, f: c.mode),
    ("figure", lambda c, f: FIGURES[f.figure][0]),
    ("n A", lambda c, f: str(f.n_a)),
    ("n B", lambda c, f: str(f.n_b)),
    ("mean A", lambda c, f: _cell(f.mean_a * (1 if f.figure == "iops" else 1e3),
                                  ",.0f" if f.figure == "iops" else ".3f")),
    ("mean B", lambda c, f: _cell(f.mean_b * (1 if f.figure == "iops" else 1e3),
                                  ",.0f" if f.figure == "iops" else ".3f")),
    ("B/A", lambda c, f: _cell(f.ratio, ".3f")),
    ("p (Welch)", lambda c, f: _cell(f.p_value, ".4f")),
    ("verdict", lambda c, f: f.verdict),
)


def _render(comparisons: Sequence[Comparison], only_a: Sequence[str], only_b: Sequence[str],
            fmt: str, threshold: float, alpha: float) -> str:
    if fmt == "json":
        return json.dumps({"threshold_percent": threshold, "alpha": alpha,
                           "comparisons": [asdict(c) for c in comparisons],
                           "only_in_a": list(only_a), "only_in_b": list(only_b)},
                          indent=2) + "\n"
    rows = [[f(c, fig) for _h, f in ROW_FIELDS] for c in comparisons for fig in c.figures]
    header = [h for h, _f in ROW_FIELDS]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(header)
        writer.writerows(rows)
        return buf.getvalue()
    lines = ["mean A / mean B: IOPS, or latency in ms; "
             f"regression = worse by more than {threshold:g}% and p < {alpha:g}", "",
             "| " + " | ".join(header) + " |", "|" + "|".join("---" for _h in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if only_a:
        lines += ["", f"only in A ({len(only_a)}): {'; '.join(only_a)}"]
    if only_b:
        lines += ["", f"only in B ({len(only_b)}): {'; '.join(only_b)}"]
    figures = [f for c in comparisons for f in c.figures]
    regressed = sum(1 for f in figures if f.verdict == "regression")
    untestable = sum(1 for f in figures if f.verdict.startswith("cannot tell"))
    lines += ["", f"{regressed} of {len(figures)} figures regressed (step/mode pairs: "
                  f"{len(comparisons)})"]
    if untestable:
        lines.append(f"{untestable} figures changed by more than {threshold:g}% but cannot be "
                     "tested: fewer than 2 iterations on a side cannot tell noise from change "
                     "(set `iterations: 3` in the spec)")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    threshold = args.fail_on_regression if args.threshold is None else args.threshold
    threshold = DEFAULT_THRESHOLD_PERCENT if threshold is None else threshold
    for flag, value in (("--fail-on-regression", args.fail_on_regression),
                        ("--threshold", threshold)):
        if value is not None and value < 0:
            print(f"cephscope compare: {flag} must be >= 0", file=sys.stderr)
            return EXIT_BAD_INPUT
    if not 0 < args.alpha < 1:
        print("cephscope compare: --alpha must be between 0 and 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.across_releases:
        if args.plots is not None:
            print("cephscope compare: --plots overlays run dirs; not with --across-releases "
                  "(the run's report puts its releases side by side)", file=sys.stderr)
            return EXIT_BAD_INPUT
        if args.run_b:
            print("cephscope compare: --across-releases compares the releases of one run; "
                  "give RUN_A only", file=sys.stderr)
            return EXIT_BAD_INPUT
        return run_across_releases(args, threshold)
    if not args.run_b:
        print("cephscope compare: give RUN_A and RUN_B (or one run with --across-releases)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if 1 + len(args.run_b) > MAX_RUNS:
        print(f"cephscope compare: at most {MAX_RUNS} runs (the first is the baseline), got "
              f"{1 + len(args.run_b)}: compare the rest against the same baseline in another "
              "call", file=sys.stderr)
        return EXIT_BAD_INPUT
    if len(args.run_b) > 1:
        return run_many(args, threshold)
    run_b = args.run_b[0]
    try:
        comparisons, only_a, only_b = compare_runs(args.run_a, run_b, threshold, args.alpha)
    except ResultsError as exc:
        print(f"cephscope compare: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    env_changes = environment_changes(args.run_a, run_b)
    if env_changes is not None and args.format == "md":
        sys.stdout.write(render_env_md(env_changes) + "\n")
    if not comparisons:
        if env_changes is not None and args.format == "json":
            sys.stdout.write(json.dumps({"environment": env_changes}, indent=2) + "\n")
        print(f"cephscope compare: no step of {run_b} matches a finished step of "
              f"{args.run_a} (steps match by their params: benchmark, axes, ceph config)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    out = _render(comparisons, only_a, only_b, args.format, threshold, args.alpha)
    if args.format == "json" and env_changes is not None:
        out = json.dumps({"environment": env_changes, **json.loads(out)}, indent=2) + "\n"
    sys.stdout.write(out)
    _write_plots(args)
    return _exit_code(args, comparisons)


def run_many(args: argparse.Namespace, threshold: float) -> int:
    """Three to six runs: each against the first, one column per run."""
    try:
        many = compare_many(args.run_a, args.run_b, threshold, args.alpha)
    except ResultsError as exc:
        print(f"cephscope compare: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    unmatched = [str(r.run) for r in many.runs if not r.comparisons]
    if unmatched:
        print(f"cephscope compare: no step of {', '.join(unmatched)} matches a finished step "
              f"of {args.run_a} (steps match by their params: benchmark, axes, ceph config)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    render = {"md": render_many_md, "json": render_many_json, "csv": render_many_csv}
    sys.stdout.write(render[args.format](many))
    _write_plots(args)
    return _exit_code(args, many.all_comparisons)


def _write_plots(args: argparse.Namespace) -> None:
    """--plots DIR: the runs overlaid; the files are named on stderr (stdout stays the
    table, JSON or CSV)."""
    if args.plots is None:
        return
    from cephscope.runner.report.build import load_rows
    from cephscope.runner.report.compare_plots import overlay_axes, overlay_curves

    paths = [args.run_a, *args.run_b]
    runs = [(label, load_rows(path)[1]) for label, path in zip(run_labels(paths), paths,
                                                                 strict=True)]
    written = overlay_axes(runs, args.plots) + overlay_curves(runs, args.plots)
    print(f"plots: {len(written)} in {args.plots}", file=sys.stderr)
    for path in written:
        print(f"  {path}", file=sys.stderr)


def _exit_code(args: argparse.Namespace, comparisons: Sequence[Comparison]) -> int:
    if args.fail_on_regression is None:
        return EXIT_OK
    if any(c.regressions for c in comparisons):
        return EXIT_REGRESSION
    if any(c.untestable for c in comparisons):
        return EXIT_CANNOT_TELL
    return EXIT_OK


def run_across_releases(args: argparse.Namespace, threshold: float) -> int:
    """Each release of one run against its first release: one table per release (md/csv), or
    one JSON document keyed by release."""
    from cephscope.runner.report.releases import release_samples, release_versions

    try:
        releases, per_release = release_samples(args.run_a)
        versions = release_versions(args.run_a)
    except ResultsError as exc:
        print(f"cephscope compare: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if len(releases) < 2:
        print(f"cephscope compare: {args.run_a} has finished steps on "
              f"{len(releases)} release(s); --across-releases needs a run of a sweep across "
              f"two or more (`devcluster: {{release: [...]}}`)", file=sys.stderr)
        return EXIT_BAD_INPUT
    first = releases[0]
    everything: list[Comparison] = []
    parts: dict[str, Any] = {}
    out = []
    for release in releases[1:]:
        comparisons, only_a, only_b = compare_samples(*per_release[first], *per_release[release],
                                                      threshold, args.alpha)
        everything += comparisons
        heading = (f"{release} ({versions.get(release) or '?'}) against {first} "
                   f"({versions.get(first) or '?'})")
        rendered = _render(comparisons, only_a, only_b, args.format, threshold, args.alpha)
        if args.format == "json":
            parts[release] = {"against": first, "versions": {first: versions.get(first),
                                                              release: versions.get(release)},
                              **json.loads(rendered)}
        elif args.format == "csv":
            out.append(f"# {heading}\n{rendered}")
        else:
            out.append(f"## {heading}\n\n{rendered}")
    sys.stdout.write(json.dumps({"releases": parts}, indent=2) + "\n" if args.format == "json"
                     else "\n".join(out))
    return _exit_code(args, everything)

