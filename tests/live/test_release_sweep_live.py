"""A sweep across Ceph releases for real: examples/release-comparison.yaml, shortened, on a dev
cluster of its own (it is rebuilt, so never the session's), on Pacific (this machine's
packages) and Reef (its cached root filesystem). A stack of its own scrapes the runner.

Checked: the dev cluster runs Reef afterwards (rebuilt, same shape); Prometheus saw the steps'
`cephscope_step_info` with two releases and their real versions (`ceph_version`); summary.csv,
the report's release table and `cephscope compare --across-releases` put them side by side.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cephscope.deploy import rootfs
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.stack import Stack
from tests.live.conftest import free_port_base

REPO = Path(__file__).resolve().parents[2]
RELEASES = ["pacific", "reef"]
STEP_SECONDS = 10  # two 5 s scrapes inside every step


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    if rootfs.upstream_major(rootfs.host_ceph_version()) != 16:
        pytest.fail("this test starts on this machine's Ceph, which must be Pacific (16.2)")
    rootfs.build("reef")  # cached after the first time
    state_dir = tmp_path_factory.mktemp("release-sweep")
    cluster = DevCluster(state_dir, port_base=free_port_base(100), num_osds=3)
    try:
        cluster.up()
        yield cluster
    finally:
        # whatever release the sweep left it on
        again = DevCluster(state_dir)
        if again.state_file.exists():
            again.purge()


def test_release_comparison_example_runs_on_pacific_and_reef(own_cluster: DevCluster,
                                                             tmp_path: Path) -> None:
    cluster = own_cluster
    spec = yaml.safe_load((REPO / "examples" / "release-comparison.yaml").read_text())
    spec["devcluster"]["release"] = RELEASES
    spec["benchmarks"]["librbdfio"].update(time=STEP_SECONDS, ramp=1, vol_size=64)
    spec_path = tmp_path / "release-comparison.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    stack = Stack(tmp_path / "stack", port_base=free_port_base(8, avoid={cluster.port_base}),
                  asok_dir=cluster.asok_dir, ceph_conf=cluster.conf_path)
    results = tmp_path / "run"
    started = time.monotonic()
    try:
        stack.up()
        sweep = subprocess.run(
            [sys.executable, "-m", "cephscope.cli", "sweep", str(spec_path),
             "--devcluster", str(cluster.state_dir), "--results-dir", str(results),
             "--metrics-port", str(stack.runner_port), "--metrics-linger", "8",
             "--idle-baseline", "0"],
            capture_output=True, text=True, timeout=600, cwd=REPO)
        sweep_seconds = time.monotonic() - started
        assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
        print(f"\nlive: release sweep {RELEASES} in {sweep_seconds:.0f}s")
        print("\n".join(line for line in sweep.stdout.splitlines() if "release" in line))

        # The dev cluster was rebuilt on Reef with the same shape.
        now = DevCluster(cluster.state_dir)
        assert now.release.name == "reef" and now.release.root is not None
        assert now.osd_ids() == cluster.osd_ids() and now.port_base == cluster.port_base
        pid = now.osd_pid(0)
        assert pid is not None and os.readlink(f"/proc/{pid}/root") == str(now.release.root)

        # Every step carries its release and the version its cluster reported.
        rows = list(csv.DictReader((results / "summary.csv").open()))
        by_release = {r["devcluster.release"]: r for r in rows}
        assert set(by_release) == set(RELEASES) and all(r["status"] == "done" for r in rows)
        assert by_release["pacific"]["ceph_version"].startswith("16.2.")
        assert by_release["reef"]["ceph_version"].startswith("18.2.")
        for row in rows:
            print(f"live: {row['devcluster.release']} {row['ceph_version']}: "
                  f"{float(row['iops']):.0f} IOPS 4K randwrite, "
                  f"{float(row['latency_avg_seconds']) * 1e3:.2f} ms avg")
            assert float(row["iops"]) > 0

        # Prometheus saw both releases' steps, each with its real version.
        run_id = json.loads((results / "run.json").read_text())["run_id"]
        series = stack.wait_for_series(
            f'count by (release, ceph_version) (max_over_time(cephscope_step_info{{run="{run_id}"}}[15m]))',
            timeout=30)
        seen = {(s["metric"]["release"], s["metric"]["ceph_version"]) for s in series}
        assert seen == {(r, by_release[r]["ceph_version"]) for r in RELEASES}, seen
    finally:
        stack.purge()

    # The report opens with the releases side by side; compare tests reef against pacific.
    report = subprocess.run([sys.executable, "-m", "cephscope.cli", "report", str(results)],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    assert report.returncode == 0, report.stderr[-2000:]
    md = (results / "report.md").read_text()
    section = md.split("## Releases", 1)[1].split("## Steps", 1)[0]
    for release in RELEASES:
        assert f"{release} {by_release[release]['ceph_version']} IOPS" in section
    assert "reef/pacific" in section
    assert (results / "report-plots" / "releases-iops.png").exists()
    compare = subprocess.run([sys.executable, "-m", "cephscope.cli", "compare", str(results),
                              "--across-releases", "--format", "json"],
                             capture_output=True, text=True, timeout=120, cwd=REPO)
    assert compare.returncode == 0, compare.stderr
    reef = json.loads(compare.stdout)["releases"]["reef"]
    assert reef["against"] == "pacific"
    (iops,) = [f for c in reef["comparisons"] for f in c["figures"] if f["figure"] == "iops"]
    assert iops["ratio"] == pytest.approx(float(by_release["reef"]["iops"])
                                          / float(by_release["pacific"]["iops"]))
