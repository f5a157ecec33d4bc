"""Response curves, compare over three runs and the cluster's erasure-code profile, on the
session dev cluster.

A real sweep over a load axis (rados bench 4 KiB writes, `concurrent_ops` {1, 4, 16}, 2 s each)
on an erasure-coded pool whose profile the spec names but does not define, CBT-style: the run
looks it up on the cluster at start and creates the pool with it. The report's response curve
is checked against the steps' own results (every point, the knee one of them), its CSV/JSON
and plot; two short runs of the curve's last step make a three-run `cephscope compare`, a
column per run and the plots overlaid. A profile the cluster does not have refuses the run
before anything changes.
"""

from __future__ import annotations

import contextlib
import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cephscope.deploy.devcluster import DevCluster
from cephscope.runner.report.build import load_rows, write_report
from cephscope.runner.report.compare_many import compare_many
from cephscope.runner.report.curves import CSV_FILE, JSON_FILE, response_curves

REPO = Path(__file__).resolve().parents[2]
PROFILE = "cephscope-live-curves"  # made on the cluster by the test, never by the spec
POOL = "cephscope-curves-ec"  # the run's pool for pool profile curves-ec
SPEC = """\
cluster:
  pool_profiles:
    curves-ec: {{replication: erasure, erasure_profile: {profile}, pg_size: 8}}
benchmarks:
  radosbench:
    op_size: 4096
    time: 2
    write_only: true
    concurrent_ops: {ops}
    pool_profile: curves-ec
"""
LOADS = [1, 4, 16]
# the short runs: the curve's last step only (the same step params, so it matches)
SHORT = "[16]"
# no cache drops nor scrub flags: seconds per step on the loaded 2-core host. The health gate
# stays: without it a run's first step measured its new EC pool's PGs peering (4 IOPS at
# 230 ms, one op in flight)
LIGHT = ["--no-drop-caches", "--no-scrub-guard"]


def cephscope(*argv: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cephscope.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, check=False)


def sweep(cluster: DevCluster, spec_text: str, run_dir: Path, *flags: str
          ) -> subprocess.CompletedProcess[str]:
    spec = run_dir.parent / f"{run_dir.name}.yaml"
    spec.write_text(spec_text)
    return cephscope("sweep", str(spec), "--devcluster", str(cluster.state_dir),
                     "--results-dir", str(run_dir), "--metrics-linger", "0",
                     "--idle-baseline", "0", *LIGHT, *flags)


def results_by_load(run_dir: Path) -> dict[int, tuple[str, dict]]:
    """concurrent_ops -> (step id, its write result), from the step files themselves."""
    found = {}
    for path in run_dir.glob("step-*/result.json"):
        params = json.loads((path.parent / "params.json").read_text())
        (result,) = json.loads(path.read_text())["results"]
        found[params["params"]["concurrent_ops"]] = (params["id"], result)
    return found


@dataclass(frozen=True)
class Runs:
    curve: Path
    short: list[Path]


@pytest.fixture(scope="module")
def runs(devcluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    tmp = tmp_path_factory.mktemp("curves")
    devcluster.ceph("osd", "erasure-code-profile", "set", PROFILE, "k=2", "m=1",
                    "crush-failure-domain=osd")
    try:
        curve = tmp / f"curve-{tmp.name}"
        done = sweep(devcluster, SPEC.format(profile=PROFILE, ops=LOADS), curve)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert (f"pool profile curves-ec: the cluster's erasure-code profile {PROFILE} (k=2 "
                "m=1 plugin=jerasure crush-failure-domain=osd)") in done.stdout
        short = []
        for name in ("short-b", "short-c"):
            run_dir = tmp / f"{name}-{tmp.name}"
            done = sweep(devcluster, SPEC.format(profile=PROFILE, ops=SHORT), run_dir)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            short.append(run_dir)
        yield Runs(curve, short)
    finally:
        # a run cut short leaves its pool and the crush rule Ceph made for it
        with contextlib.suppress(Exception):
            devcluster.ceph("osd", "pool", "delete", POOL, POOL,
                            "--yes-i-really-really-mean-it")
        with contextlib.suppress(Exception):
            devcluster.ceph("osd", "crush", "rule", "rm", POOL)
        devcluster.ceph("osd", "erasure-code-profile", "rm", PROFILE)


def test_the_response_curve_comes_from_the_steps(runs: Runs) -> None:
    report = write_report(runs.curve)
    measured = results_by_load(runs.curve)
    assert sorted(measured) == LOADS
    _run, rows = load_rows(runs.curve)
    (curve,) = response_curves(rows)
    assert (curve.benchmark, curve.mode, curve.label) == ("radosbench", "write",
                                                          "concurrent_ops")
    assert [p.load for p in curve.points] == LOADS
    for p in curve.points:
        step_id, result = measured[p.load]
        assert p.steps == (step_id,) and p.iops.n == 1
        assert p.iops.mean == result["iops"] > 0
        assert p.latency.mean == result["latency_avg_seconds"] > 0
    knee = curve.knee
    assert knee is not None and curve.points[knee].load in LOADS
    assert curve.points[knee].power == max(p.power for p in curve.points)
    points = [(p.load, round(p.iops.mean), round(p.latency.mean * 1e3, 2)) for p in curve.points]
    print(f"\nlive: response curve (ops in flight, IOPS, ms) {points}, knee at "
          f"{curve.points[knee].load}")
    md = report.markdown_path.read_text()
    assert f"- {curve.knee_text()}" in md
    (plot,) = [p for p in report.plots if p.name == "response-radosbench-write-concurrent_ops.png"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"](report-plots/{plot.name})" in md
    assert "alt='response-radosbench-write-concurrent_ops' src='data:image/png;base64," \
        in report.html_path.read_text()
    lines = list(csv.DictReader((runs.curve / CSV_FILE).read_text().splitlines()))
    assert [int(line["load"]) for line in lines] == LOADS
    assert [line["knee"] for line in lines].count("1") == 1
    assert int(next(line for line in lines if line["knee"] == "1")["load"]) == \
        curve.points[knee].load
    for line in lines:
        assert float(line["iops_mean"]) == measured[int(line["load"])][1]["iops"]
        assert line["steps"] == measured[int(line["load"])][0]
    (stored,) = json.loads((runs.curve / JSON_FILE).read_text())["curves"]
    assert stored["knee_load"] == curve.points[knee].load


def test_the_pool_was_made_with_the_clusters_profile(runs: Runs, devcluster: DevCluster
                                                     ) -> None:
    for path in runs.curve.glob("step-*/timestamps.json"):
        pool = json.loads(path.read_text())["pools"][POOL]
        assert pool["erasure_code_profile"] == PROFILE
        settings = pool["erasure_code_profile_settings"]
        assert (settings["k"], settings["m"]) == ("2", "1")
    # the run removed its pool and left the cluster's profile as it was
    assert POOL not in devcluster.ceph("osd", "pool", "ls").split()
    # and the crush rule Ceph made for the pool (named after it)
    assert POOL not in devcluster.ceph("osd", "crush", "rule", "ls").split()
    assert PROFILE in devcluster.ceph("osd", "erasure-code-profile", "ls").split()
    spec = runs.curve.parent / "dry.yaml"
    spec.write_text(SPEC.format(profile=PROFILE, ops=LOADS))
    dry = cephscope("sweep", str(spec), "--devcluster", str(devcluster.state_dir), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert (f"  {PROFILE} (pool profile curves-ec): found on the cluster: k=2 m=1 "
            "plugin=jerasure crush-failure-domain=osd") in dry.stdout


def test_a_profile_the_cluster_lacks_is_refused_before_any_change(
        devcluster: DevCluster, tmp_path: Path) -> None:
    before = devcluster.ceph_json("osd", "dump")
    run_dir = tmp_path / "absent"
    done = sweep(devcluster, SPEC.format(profile="cephscope-no-such-profile", ops=LOADS),
                 run_dir)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "invalid spec (nothing was changed on the cluster)" in done.stderr
    assert ("cluster.pool_profiles.curves-ec.erasure_profile: 'cephscope-no-such-profile': no "
            "such erasure-code profile on the cluster") in done.stderr
    assert not run_dir.exists()
    after = devcluster.ceph_json("osd", "dump")
    assert [p["pool_name"] for p in after["pools"]] == [p["pool_name"] for p in before["pools"]]
    assert after["flags"] == before["flags"]  # no scrub flags were set


def test_compare_three_runs(runs: Runs, tmp_path: Path) -> None:
    many = compare_many(runs.curve, runs.short, 10.0, 0.05)
    assert [r.label for r in many.runs] == [p.name for p in runs.short]
    verdicts = []
    for entry, path in zip(many.runs, runs.short, strict=True):
        (comparison,) = entry.comparisons  # the one step both have: concurrent_ops=16
        assert comparison.params == "radosbench concurrent_ops=16"
        iops = entry.figure(comparison.params, "write", "iops")
        assert iops is not None
        assert iops.mean_a == results_by_load(runs.curve)[16][1]["iops"]
        assert iops.mean_b == results_by_load(path)[16][1]["iops"]
        assert sorted(entry.only_in_baseline) == ["radosbench concurrent_ops=1",
                                                  "radosbench concurrent_ops=4"]
        verdicts += [f.verdict for f in comparison.figures]
    # one iteration a side: never a regression; worse beyond 10 % cannot be told (exit 3)
    paths = [str(runs.curve), *(str(p) for p in runs.short)]
    md = cephscope("compare", *paths, "--fail-on-regression", "10", "--plots",
                   str(tmp_path / "plots"))
    expected = 3 if "cannot tell (worse)" in verdicts else 0
    assert "regression" not in verdicts and md.returncode == expected, md.stderr
    header = f"| params | mode | figure | {runs.curve.name} | {runs.short[0].name} | " \
             f"{runs.short[1].name} |"
    assert header in md.stdout
    iops_line = next(line for line in md.stdout.splitlines() if " | IOPS | " in line)
    cells = iops_line.split(" | ")
    for cell, path in zip(cells[4:6], runs.short, strict=True):  # a column per run
        assert cell.startswith(f"{results_by_load(path)[16][1]['iops']:,.0f} (")
    assert sorted(p.name for p in (tmp_path / "plots").glob("*.png")) == [
        "compare-radosbench-write-vs-concurrent_ops.png",
        "compare-response-radosbench-write-concurrent_ops.png"]
