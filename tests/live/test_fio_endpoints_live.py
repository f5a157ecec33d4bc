"""CBT's fio benchmark for real on the session cluster (with its MDS) and stack: a sweep on
rbd-fuse endpoints and one on cephfs-fuse endpoints, each with its report (fio's own time series
beside Prometheus'), the MDS's series recorded for each cephfs-fuse step, every FUSE mount gone
afterwards; a runner SIGKILLed mid-step leaves its mount, which `--resume` unmounts; rawfio on a
loop device, and an OSD's device refused before any change. (librbd endpoints across the
multi-host cluster's clients: test_multihost_live.py; cephfs-fuse across Tentacle's namespace
clients: test_devcluster_services_live.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cephscope.dashboards.rule_names import STEP_MDS_REQUESTS
from cephscope.deploy.devcluster import DevCluster
from cephscope.runner.report.build import load_rows, write_report
from cephscope.runner.report.fio_series import step_series_of
from tests.live.sweep_kill import run_sweep_until_step_then_kill
from tests.live.sweeps import REPO, step_maxima

RBD_FUSE = """\
client_endpoints:
  fuse:
    driver: rbd-fuse
    endpoints_per_client: 2
    endpoint_size: 64
benchmarks:
  fio:
    client_endpoints: fuse
    mode: randwrite
    bs: 4k
    iodepth: [1, 8]
    size: 32
    time: 5
    time_based: true
    prefill: false
    log_avg_msec: 1000
"""

CEPHFS_FUSE = """\
pool_profiles:
  rep1: {replication: 1, pg_size: 8}
cluster:
  cephfs_pools: {cephfs_data: rep1, cephfs_metadata: rep1}
client_endpoints:
  fs:
    driver: cephfs-fuse
    endpoints_per_client: 2
    endpoint_size: 64
benchmarks:
  fio:
    client_endpoints: fs
    bs: 4k
    size: 16
    time: 5
    time_based: true
    log_avg_msec: 1000
    workloads:
      precondition: {mode: randwrite, iodepth: [4], time: 2}
      randwrite: {mode: randwrite, iodepth: [1, 8]}
"""


def fuse_mounts() -> list[str]:
    """Mount points of FUSE filesystems in this mount namespace."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype.startswith("fuse.") and fstype != "fuse.gvfsd-fuse":
            found.append(fields[4])
    return found


def under(paths: list[str], root: Path) -> list[str]:
    prefix = str(root.resolve())
    return [p for p in paths if p == prefix or p.startswith(prefix + "/")]


def sweep_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "cephscope.cli", "sweep", *args]


# short: no idle baseline, no quiet gaps around the measurements, no lingering
QUICK = ("--metrics-linger", "0", "--no-drop-caches", "--quiet-gap", "0", "--idle-baseline", "0")


def sweep(cluster: DevCluster, spec_text: str, run_dir: Path, stack: Any = None) -> str:
    """Run `cephscope sweep` for real (scraped by `stack` when given); its output."""
    spec = run_dir.parent / f"{run_dir.name}.yaml"
    spec.write_text(spec_text)
    observed = (["--metrics-port", str(stack.runner_port), "--prometheus-url",
                 stack.prometheus_url] if stack is not None else [])
    done = subprocess.run(sweep_argv(str(spec), "--devcluster", str(cluster.state_dir),
                                     "--results-dir", str(run_dir), *observed, *QUICK),
                          capture_output=True, text=True, timeout=300, check=False, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def check_report(run_dir: Path, prometheus_url: str | None) -> list[dict[str, Any]]:
    """The report with fio's series beside the cluster's; the steps' figures."""
    report = write_report(run_dir, prometheus_url)
    rows = [r for r in report.rows if r.status == "done"]
    assert rows and len(rows) == len(report.rows)
    series_plots = [p for p in report.plots if p.name.startswith("fio-series-")]
    assert len(series_plots) == len(rows)
    figures = []
    _run, loaded = load_rows(run_dir)
    for row in loaded:
        found = step_series_of(row, run_dir)
        assert found is not None and len(found.fio_iops) >= 3, row.step.id
        if prometheus_url:  # the OSDs' own op rate over the same window, from Prometheus
            assert found.osd_ops and max(v for _t, v in found.osd_ops) > 0, row.step.id
        figures.append({"step": row.step.id, "axes": row.step.short_params(),
                        "iops": round(row.figure("iops") or 0),
                        "lat_ms": round((row.figure("latency_avg_seconds") or 0) * 1e3, 2),
                        "p99_ms": round((row.percentile("99") or 0) * 1e3, 2),
                        "fio_log_mean_iops": round(row.result["extra"]["time_series"]
                                                   ["mean_iops"] or 0)})
    return figures


def test_rbd_fuse_sweep_with_its_report(devcluster: DevCluster, stack: Any,
                                        tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    sweep(devcluster, RBD_FUSE, run_dir, stack)
    figures = check_report(run_dir, stack.prometheus_url)
    print(f"\nlive fio rbd-fuse: {figures}")
    assert all(f["iops"] > 0 for f in figures)
    assert under(fuse_mounts(), tmp_path) == []
    assert json.loads((run_dir / "state.json").read_text())["endpoints"] == []
    listed = subprocess.run(["rbd", "-c", str(devcluster.conf_path), "ls", "rbd"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert not [i for i in listed if i.startswith("cephscope-") and i != "cephscope-img"]
    for step in json.loads((run_dir / "run.json").read_text())["steps"]:
        result = json.loads((run_dir / f"step-{step['id']}" / "result.json").read_text())
        # two endpoints, one fio process each, on the image files of their own mounts
        assert result["results"][0]["extra"]["processes"] == 2


def test_cephfs_fuse_sweep_with_its_report(devcluster: DevCluster, stack: Any,
                                           tmp_path: Path) -> None:
    cluster = devcluster
    fs_before = cluster.ceph_json("fs", "ls")
    assert [f["name"] for f in fs_before] == [cluster.cephfs_name]
    run_dir = tmp_path / "run"
    out = sweep(cluster, CEPHFS_FUSE, run_dir, stack)
    # the data pool of the cephfs_data profile went into the filesystem for the run
    assert "filesystem cephfs: the step's files go to pool cephscope-rep1-cephfs-data" in out
    figures = check_report(run_dir, stack.prometheus_url)
    # the MDS served each step: its request rate recorded with the step's labels
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    mds = step_maxima(stack, STEP_MDS_REQUESTS, run_id, [f["step"] for f in figures])
    for figure in figures:
        figure["mds_req_s"] = round(mds.get(figure["step"], 0))
    print(f"\nlive fio cephfs-fuse: {figures}")
    assert all(f["iops"] > 0 and f["mds_req_s"] > 0 for f in figures), (figures, mds)
    for step in json.loads((run_dir / "run.json").read_text())["steps"]:
        step_dir = run_dir / f"step-{step['id']}"
        assert json.loads((step_dir / "precondition.json").read_text())["iops"] > 0
        ts = json.loads((step_dir / "timestamps.json").read_text())
        assert ts["prepare_start"] < ts["preconditioned"] <= ts["started"]
    # ... and out of it after, the pool deleted; nothing mounted
    assert cluster.ceph_json("fs", "ls") == fs_before
    assert "cephscope-rep1-cephfs-data" not in cluster.ceph_json("osd", "pool", "ls")
    assert under(fuse_mounts(), tmp_path) == []
    assert json.loads((run_dir / "state.json").read_text())["endpoints"] == []


def test_a_killed_runner_leaves_its_mount_and_resume_unmounts_it(devcluster: DevCluster,
                                                                tmp_path: Path) -> None:
    spec = tmp_path / "fuse.yaml"
    # long enough to be killed in (its benchmark runs for 8 s), short to run again
    spec.write_text(RBD_FUSE.replace("iodepth: [1, 8]", "iodepth: 4").replace(
        "endpoints_per_client: 2", "endpoints_per_client: 1").replace("time: 5", "time: 8"))
    results = tmp_path / "run"
    common = ["--devcluster", str(devcluster.state_dir), *QUICK]
    run_sweep_until_step_then_kill(
        sweep_argv(str(spec), "--results-dir", str(results), *common), results,
        tmp_path / "first.log", 1, timeout=180, settle=1)
    left = under(fuse_mounts(), tmp_path)
    assert len(left) == 1, left  # the killed runner's rbd-fuse mount stays
    journal = json.loads((results / "state.json").read_text())["endpoints"]
    assert [e["path"] for e in journal] == left
    resumed = subprocess.run(sweep_argv("--resume", str(results), *common), capture_output=True,
                             text=True, timeout=300, check=False, cwd=REPO)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "the previous run left 1 mount(s): unmounting" in resumed.stdout
    assert under(fuse_mounts(), tmp_path) == []
    assert json.loads((results / "state.json").read_text())["endpoints"] == []


def test_rawfio_on_a_loop_device_and_an_osds_device_refused(devcluster: DevCluster,
                                                            tmp_path: Path) -> None:
    backing = tmp_path / "raw.img"
    with backing.open("wb") as f:
        f.truncate(128 << 20)
    loop = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True,
                          text=True, check=True).stdout.strip()
    try:
        spec = tmp_path / "raw.yaml"
        spec.write_text(f"benchmarks:\n  rawfio:\n    block_devices: [{loop}]\n    time: 3\n"
                        "    mode: [randwrite]\n    op_size: 4096\n    iodepth: 8\n"
                        "    vol_size: 64\n    log_avg_msec: 1000\n")
        common = ["--devcluster", str(devcluster.state_dir), *QUICK]
        done = subprocess.run(sweep_argv(str(spec), "--results-dir", str(tmp_path / "run"),
                                         *common), capture_output=True, text=True, timeout=180,
                              check=False, cwd=REPO)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        (row,) = summary["rows"]
        print(f"\nlive rawfio {loop}: {row['iops']:.0f} IOPS, "
              f"{row['latency_avg_seconds'] * 1e3:.2f} ms")
        assert row["iops"] > 0
        # an OSD's own device (the dev cluster's loop device) is refused before any change
        osd_device = devcluster.ceph_json("osd", "metadata", "0")["bluestore_bdev_dev_node"]
        spec.write_text(spec.read_text().replace(loop, osd_device))
        refused = subprocess.run(sweep_argv(str(spec), "--results-dir", str(tmp_path / "r2"),
                                            *common), capture_output=True, text=True,
                                 timeout=120, check=False, cwd=REPO)
        assert refused.returncode != 0
        assert f"rawfio target {osd_device}" in refused.stderr + refused.stdout
        # BlueStore opens its device exclusively (and flocks it)
        assert "in exclusive use" in refused.stderr + refused.stdout
        assert not (tmp_path / "r2").exists()
    finally:
        subprocess.run(["losetup", "-d", loop], check=False)
