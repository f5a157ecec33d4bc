"""The foundation for real: the dev cluster takes I/O, the stack scrapes it, and a second
cluster runs beside it and leaves nothing behind when it goes down."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.procs import pid_alive
from cephscope.deploy.stack import Stack
from tests.live.conftest import free_port_base


def listening_ports() -> set[int]:
    out = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True, check=True).stdout
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if line.strip()}


def loop_devices_backing(directory: Path) -> list[str]:
    out = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                         capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if str(directory) in line]


def test_rados_bench_runs_and_node_exporter_sees_the_osd_loop_devices(
    devcluster: DevCluster, stack: Stack
) -> None:
    assert devcluster.ceph_json("health")["status"] == "HEALTH_OK"
    bench = subprocess.run(
        devcluster.rados_argv("-p", devcluster.bench_pool, "bench", "5", "write", "-b", "4096",
                              "-t", "16"),
        capture_output=True, text=True, timeout=120, check=True,
    )
    iops = float(re.search(r"Average IOPS:\s+([\d.]+)", bench.stdout).group(1))
    assert iops > 100, bench.stdout
    subprocess.run(devcluster.rados_argv("-p", devcluster.bench_pool, "cleanup"),
                   capture_output=True, timeout=120, check=True)

    loops = loop_devices_backing(devcluster.state_dir)
    assert len(loops) == 3
    # The writes reached the loop devices, and Prometheus scraped that from node_exporter.
    devices = "|".join(Path(d).name for d in loops)
    deadline = time.monotonic() + 30
    while True:
        series = stack.query(f'increase(node_disk_writes_completed_total{{device=~"{devices}"}}[1m])')
        if len(series) == 3 and all(float(s["value"][1]) > 0 for s in series):
            break
        assert time.monotonic() < deadline, series
        time.sleep(2)
    assert stack.query('up{job="node"}')[0]["value"][1] == "1"
    # All Ceph traffic is on lo here: node_exporter must not drop it.
    assert stack.query('node_network_transmit_bytes_total{device="lo"}')
    assert stack.query('up{job="cephscope-exporter"}')[0]["value"][1] == "1"


def test_second_cluster_beside_the_first_then_down_leaves_nothing(
    devcluster: DevCluster, tmp_path: Path
) -> None:
    other = DevCluster(tmp_path / "other", port_base=free_port_base(100, avoid={devcluster.port_base}),
                       num_osds=1, osd_size_gib=2)
    try:
        seconds = other.up()
        assert seconds < 60
        assert other.ceph_json("health")["status"] == "HEALTH_OK"
        pids = list(other.running_daemons().values())
        assert len(pids) == 3
        ports_before_down = listening_ports()
        assert other.mon_port in ports_before_down
        assert len(loop_devices_backing(other.state_dir)) == 1
        # The first cluster is untouched by the second one.
        assert devcluster.ceph_json("health")["status"] == "HEALTH_OK"

        stopped = other.down()
        assert sorted(stopped) == ["mgr.x", "mon.a", "osd.0"]
        assert not any(pid_alive(p) for p in pids)
        assert loop_devices_backing(other.state_dir) == []
        low, high = other.msgr_port_range
        ours = {other.mon_port, *range(low, high + 1)}
        assert not (listening_ports() & ours)
        assert not list(other.asok_dir.glob("*.asok"))
        assert devcluster.ceph_json("health")["status"] == "HEALTH_OK"
    finally:
        other.purge()


def test_restart_osd_returns_when_it_is_up_again(devcluster: DevCluster) -> None:
    old_pid = devcluster.osd_pid(1)
    seconds = devcluster.restart_osd(1)
    new_pid = devcluster.osd_pid(1)
    assert new_pid and new_pid != old_pid
    up = {o["osd"]: o["up"] for o in devcluster.ceph_json("osd", "dump")["osds"]}
    assert up[1] == 1
    assert devcluster.osd_asok(1).exists()
    assert seconds < 60
    devcluster.wait_pgs_active_clean(timeout=60)
