"""Topology for real: the dev cluster's OSDs on loop devices, the stack's exporter and
node_exporter, the recording rules of alerts/osd_devices.rules.yml evaluated by Prometheus."""

from __future__ import annotations

import math
import os
import subprocess
import time
from pathlib import Path

from cephscope.dashboards import rule_names as names
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.stack import Stack
from cephscope.exporter.asok import discover_daemons
from cephscope.exporter.collector import HostContext
from cephscope.exporter.collectors.topology import TopologyCollector
from cephscope.exporter.exposition import MetricSink, render
from cephscope.exporter.settings import CephSettings, HostSettings


def osd_loop_devices(devcluster: DevCluster) -> dict[str, str]:
    """ceph_daemon -> loopN, as the dev cluster attached them (the ground truth)."""
    state = devcluster.load_state()
    assert state.backing == "loop", "the dev cluster fell back to plain files"
    return {f"osd.{o.osd_id}": Path(o.loop_device or "").name for o in state.osds}


def by_daemon(series: list[dict]) -> dict[str, dict]:
    return {s["metric"]["ceph_daemon"]: s for s in series}


def test_each_osd_maps_to_its_own_loop_device(devcluster: DevCluster, stack: Stack) -> None:
    expected = osd_loop_devices(devcluster)
    assert len(set(expected.values())) == len(expected) == len(devcluster.osd_ids())
    series = stack.wait_for_series('count(cephscope_osd_device_info{role="data"}) >= 3', 60)
    assert series
    found = by_daemon(stack.query('cephscope_osd_device_info{role="data"}'))
    assert {d: s["metric"]["device"] for d, s in found.items()} == expected
    [uname] = stack.query('node_uname_info{job="node"}')
    for labels in (s["metric"] for s in found.values()):
        assert labels["transport"] == "loop"
        assert labels["kind"] == "loop"
        # the dev cluster flags its loop devices non-rotational; the OSD calls them ssd
        assert labels["rotational"] == "0"
        # the join key with node_exporter
        assert labels["nodename"] == uname["metric"]["nodename"]
    # node_exporter reports each of these devices under exactly that name
    for device in expected.values():
        assert stack.query(f'node_disk_writes_completed_total{{device="{device}"}}'), device
    info = by_daemon(stack.query("cephscope_osd_info"))
    assert set(info) == set(expected)
    assert {s["metric"]["device_class"] for s in info.values()} == {"ssd"}
    assert stack.query("cephscope_topology_mon_up")[0]["value"][1] == "1"


def test_public_interface_of_127_0_0_1_is_lo(devcluster: DevCluster, stack: Stack) -> None:
    stack.wait_for_series('cephscope_osd_network_info{network="public"}', 60)
    found = by_daemon(stack.query('cephscope_osd_network_info{network="public"}'))
    assert set(found) == set(osd_loop_devices(devcluster))
    for labels in (s["metric"] for s in found.values()):
        assert (labels["interface"], labels["address"]) == ("lo", "127.0.0.1")
    # lo has no link speed: no speed series rather than a made-up one
    assert stack.query('cephscope_osd_network_speed_bytes{interface="lo"}') == []


def test_recording_rules_see_each_osd_write_during_rados_bench(
    devcluster: DevCluster, stack: Stack
) -> None:
    expected = set(osd_loop_devices(devcluster))
    stack.wait_for_series('count(cephscope_osd_device_info{role="data"}) >= 3', 60)
    bench = subprocess.Popen(
        devcluster.rados_argv("-p", devcluster.bench_pool, "bench", "12", "write", "-b", "4096",
                              "-t", "16"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            iops = by_daemon(stack.query(f'{names.DEVICE_WRITES}{{role="data"}}'))
            awaits = by_daemon(stack.query(f'{names.DEVICE_WRITE_AWAIT}{{role="data"}}'))
            tx = by_daemon(stack.query(f'{names.NETWORK_TRANSMIT_BYTES}{{network="public"}}'))
            if (set(iops) == expected and all(float(s["value"][1]) > 0 for s in iops.values())
                    and set(awaits) == expected and set(tx) == expected):
                break
            assert time.monotonic() < deadline, (iops, awaits, tx)
            time.sleep(2)
    finally:
        out, _ = bench.communicate(timeout=120)
    assert bench.returncode == 0, out
    for daemon in expected:
        assert float(iops[daemon]["value"][1]) > 0, daemon
        await_seconds = float(awaits[daemon]["value"][1])
        assert math.isfinite(await_seconds) and 0 <= await_seconds < 10, (daemon, await_seconds)
        assert float(tx[daemon]["value"][1]) > 0  # lo carried the bench's traffic
    # the other rules of the file produce a finite figure per OSD too
    for rule in (names.DEVICE_UTIL, names.DEVICE_QUEUE_SIZE, names.DEVICE_WRITTEN_BYTES,
                 names.DEVICE_READ_AWAIT):
        got = by_daemon(stack.query(f'{rule}{{role="data"}}'))
        assert set(got) == expected, rule
        assert all(math.isfinite(float(s["value"][1])) for s in got.values()), (rule, got)


def collect_once(devcluster: DevCluster, conf: str) -> str:
    collector = TopologyCollector(host=HostSettings(ceph=CephSettings(conf=conf)))
    ctx = HostContext(
        discover_daemons(devcluster.asok_dir, ["osd"]),
        asok_dir=str(devcluster.asok_dir),
        deadline=time.monotonic() + 20,
        call_timeout=5.0,
        max_response_bytes=1 << 26,
    )
    sink = MetricSink()
    collector.collect_host(ctx, sink)
    collector.mon.close()
    return render(sink.families.values()).decode()


def test_admin_socket_fallback_gives_the_same_mapping_as_the_mon(
    devcluster: DevCluster, tmp_path: Path
) -> None:
    via_mon = collect_once(devcluster, str(devcluster.conf_path))
    assert "cephscope_topology_mon_up 1" in via_mon
    # a conf whose mon nobody listens on: the fallback must answer within the mon timeout
    dead_conf = tmp_path / "dead-mon.conf"
    dead_conf.write_text(f"[global]\nmon_host = v2:127.0.0.1:1\nkeyring = "
                         f"{devcluster.admin_keyring}\n")
    started = time.monotonic()
    via_asok = collect_once(devcluster, str(dead_conf))
    assert time.monotonic() - started < 15
    assert "cephscope_topology_mon_up 0" in via_asok

    def device_lines(text: str) -> list[str]:
        return sorted(line for line in text.splitlines()
                      if line.startswith(("cephscope_osd_device_info", "cephscope_osd_info",
                                          "cephscope_osd_network_info{")))

    assert device_lines(via_asok) == device_lines(via_mon)
    assert len([line for line in device_lines(via_mon)
                if line.startswith("cephscope_osd_device_info")]) == len(devcluster.osd_ids())
    assert os.uname().nodename in via_mon
