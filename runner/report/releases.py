"""Releases side by side, for a sweep across Ceph releases (`devcluster: {release: [...]}`):
the report's release-over-release table and chart (IOPS of the same step on each release, as
Intel's Ceph performance studies open with 4K random writes), and `cephscope compare RUN
--across-releases` (each release against the first, with the two-run comparison's test).

A step's release is its `devcluster.release` axis; its version is what the cluster's daemons
reported for it (`ceph versions`, stored in the step's timestamps as `ceph_version`).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cephscope.runner.results import RunDir
from cephscope.runner.steps import RELEASE_AXIS, Step

if TYPE_CHECKING:
    from cephscope.runner.report.build import Row


def without_release(step: Step) -> Step:
    """The step as it would be on any release: what matches it across releases."""
    axes = {k: v for k, v in step.axes.items() if k != RELEASE_AXIS}
    return dataclasses.replace(step, id="", release=None, axes=axes)


def release_versions(run_dir: Path) -> dict[str, str]:
    """release -> the version its cluster reported (the releases in the spec's order)."""
    rd = RunDir(Path(run_dir))
    versions: dict[str, str] = {}
    for step in rd.steps():
        result = rd.step_result(step)
        if step.release is None:
            continue
        version = ((result or {}).get("timestamps") or {}).get("ceph_version") or ""
        if version or step.release not in versions:
            versions[step.release] = str(version)
    return versions


def _release_label(release: str, versions: Mapping[str, str]) -> str:
    version = versions.get(release)
    return f"{release} {version}" if version else release


def _iops_by_release(rows: Sequence[Row]) -> dict[tuple[str, str], dict[str, float]]:
    """(step params without the release, mode) -> release -> mean IOPS over iterations."""
    found: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in rows:
        iops = r.figure("iops")
        if r.status != "done" or r.step.release is None or iops is None:
            continue
        base = without_release(r.step)
        params = f"{base.benchmark} {base.short_params()}"
        found.setdefault((params, r.mode or ""), {}).setdefault(r.step.release, []).append(iops)
    return {key: {rel: statistics.fmean(v) for rel, v in per.items()}
            for key, per in found.items()}


def release_table(run_dir: Path, rows: Sequence[Row]) -> tuple[list[str], list[list[str]]] | None:
    """IOPS per release, side by side, and each release against the first; None unless the
    run's steps span two releases or more."""
    releases = list(dict.fromkeys(r.step.release for r in rows if r.step.release))
    if len(releases) < 2:
        return None
    versions = release_versions(run_dir)
    first = releases[0]
    header = ["params", "mode", *(f"{_release_label(rel, versions)} IOPS" for rel in releases),
              *(f"{rel}/{first}" for rel in releases[1:])]
    body = []
    for (params, mode), per in _iops_by_release(rows).items():
        cells = [params, mode]
        cells += [f"{per[rel]:,.0f}" if rel in per else "-" for rel in releases]
        cells += [f"{per[rel] / per[first]:.2f}" if rel in per and per.get(first) else "-"
                  for rel in releases[1:]]
        body.append(cells)
    return header, body


def plot_releases(run_dir: Path, rows: Sequence[Row], out_dir: Path) -> list[Path]:
    """One bar chart: IOPS of every step (params, mode) on each release."""
    from cephscope.runner.report.plots import _pyplot, _save

    releases = list(dict.fromkeys(r.step.release for r in rows if r.step.release))
    groups = _iops_by_release(rows)
    if len(releases) < 2 or not groups:
        return []
    versions = release_versions(run_dir)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups) * len(releases) / 2 + 3), 4.5))
    width = 0.8 / len(releases)
    for i, rel in enumerate(releases):
        xs = [g + (i - (len(releases) - 1) / 2) * width for g in range(len(groups))]
        values = [per.get(rel, 0.0) for per in groups.values()]
        bars = ax.bar(xs, values, width, label=_release_label(rel, versions))
        ax.bar_label(bars, labels=[f"{v:,.0f}" if v else "" for v in values], fontsize=8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{params}\n{mode}" for params, mode in groups], fontsize=8)
    ax.set_ylabel("IOPS (mean over iterations)")
    ax.set_title("IOPS release over release")
    ax.legend()
    fig.tight_layout()
    return [_save(fig, out_dir, "releases-iops")]


def release_samples(run_dir: Path) -> tuple[list[str], dict[str, tuple[
        dict[tuple[str, str], dict[str, list[float]]], dict[str, str]]]]:
    """The run's releases (spec order) and, per release, `compare`'s samples and labels with
    steps keyed without their release, so the same step matches across releases."""
    from cephscope.runner.report.compare import add_samples

    rd = RunDir(Path(run_dir))
    per_release: dict[str, tuple[dict[tuple[str, str], dict[str, list[float]]],
                                 dict[str, str]]] = {}
    for step in rd.steps():
        result = rd.step_result(step)
        if result is None or step.release is None:
            continue
        add_samples(*per_release.setdefault(step.release, ({}, {})), without_release(step),
                    result)
    releases = [r for r in dict.fromkeys(s.release for s in rd.steps()) if r in per_release]
    return releases, per_release


def report_sections(run_dir: Path, rows: Sequence[Row], plot_dir: Path | None,
                    ) -> tuple[tuple[list[str], list[list[str]]] | None, list[Path]]:
    """The report's "Releases" table and chart (None / [] for a run on one release)."""
    found = release_table(run_dir, rows)
    if found is None:
        return None, []
    return found, (plot_releases(run_dir, rows, plot_dir) if plot_dir is not None else [])
