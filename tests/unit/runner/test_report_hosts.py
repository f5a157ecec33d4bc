"""Per-host report tables on a real multi-host run (tests/fixtures/runs/multihost: 3 namespace
hosts x 1 OSD + 2 clients, fio 4K randwrite then rados bench 4K write on both clients, system
metrics pulled from the stack's Prometheus, whose targets carry a `host` label). Figures are
checked against the stored Prometheus series, computed independently here; the same capture
with its `host` labels removed stands for a single-host run (keyed by `instance`)."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner.report.build import likely_bottleneck, load_rows, write_report
from cephscope.runner.report.step_system import mode_window

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "multihost"
HOSTS = ["host1", "host2", "host3"]


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "multihost"
    shutil.copytree(RUN, dest)
    return dest


def _edit_prometheus(run: Path, edit: Any) -> None:
    for path in run.glob("step-*/prometheus.json"):
        data = json.loads(path.read_text())
        edit(data["queries"])
        path.write_text(json.dumps(data))


def _window_mean(step_dir: Path, query: str, **labels: str) -> float:
    """Mean of one stored series' points inside the step's mode window."""
    result = json.loads((step_dir / "result.json").read_text())
    window = mode_window(result, result["results"][0]["mode"])
    assert window is not None
    prom = json.loads((step_dir / "prometheus.json").read_text())
    (series,) = [s for s in prom["queries"][query]["result"]
                 if all(s["metric"].get(k) == v for k, v in labels.items())]
    values = [float(v) for t, v in series["values"] if window[0] <= float(t) <= window[1]]
    return statistics.fmean(values)


def test_tables_are_keyed_by_host_and_name_osd_devices_and_networks() -> None:
    _run, rows = load_rows(RUN)
    assert [r.step.benchmark for r in rows] == ["librbdfio", "radosbench"]
    for row in rows:
        s = row.system
        step_dir = RUN / f"step-{row.step.id}"
        # every OSD host's cluster NIC carried replication traffic, named as the cluster network
        cluster = {n.host: n for n in s.nics if n.network == "cluster"}
        assert sorted(cluster) == HOSTS and all(n.device == "eth1" for n in cluster.values())
        for host, nic in cluster.items():
            assert nic.transmit_bytes_per_second > 0
            assert nic.transmit_bytes_per_second == pytest.approx(_window_mean(
                step_dir, "nic_transmit_bytes_per_second", host=host, device="eth1"))
        assert {(n.host, n.device) for n in s.nics if n.network == "public"} == {
            (h, "eth0") for h in HOSTS}
        # /proc/diskstats is machine-wide in a namespace: each host keeps its own OSD's device
        assert {(d.host, d.device, d.osds) for d in s.devices} == {
            ("host1", "loop0", "osd.0"), ("host2", "loop1", "osd.1"), ("host3", "loop2", "osd.2")}
        host2 = next(d for d in s.devices if d.host == "host2")
        assert host2.util_ratio == pytest.approx(_window_mean(
            step_dir, "disk_util_ratio", host="host2", device="loop1"))
        # CPU by mode per host; the head node's own node_exporter has no `host`: its instance
        assert {"client1", "client2", *HOSTS} <= set(s.cpu_modes)
        assert [h for h in s.cpu_modes if h.startswith("127.0.0.1:")]
        assert s.cpu_modes["host3"]["iowait"] == pytest.approx(_window_mean(
            step_dir, "cpu_mode_ratio", host="host3", mode="iowait"))
        assert {h for h, _d, _g in s.thread_groups} == set(HOSTS)


def test_report_has_per_host_and_per_client_tables(tmp_path: Path) -> None:
    run = _copy(tmp_path)
    text = write_report(run, plots=False).markdown_path.read_text()
    assert "| host | device | network | rx MiB/s | tx MiB/s |" in text
    for i, host in enumerate(HOSTS):
        assert f"| {host} | eth1 | cluster |" in text
        assert f"| {host} | loop{i} | osd.{i} |" in text
    clients = [line for line in text.splitlines() if line.startswith("| client1 | ")]
    result = json.loads((run / "step-aea8b826140a" / "result.json").read_text())
    iops = result["results"][0]["clients"]["client1"]["iops"]
    # the per-step client table (IOPS first) for each step, beside the CPU rows of client1
    assert any(line.startswith(f"| client1 | {iops:,.0f} |") for line in clients), clients


def test_likely_bottleneck_names_the_host_and_device(tmp_path: Path) -> None:
    run = _copy(tmp_path)

    def saturate_host2_disk(queries: dict[str, Any]) -> None:
        for series in queries["disk_util_ratio"]["result"]:
            if series["metric"].get("host") == "host2" and series["metric"]["device"] == "loop1":
                series["values"] = [[t, "0.97"] for t, _v in series["values"]]

    _edit_prometheus(run, saturate_host2_disk)
    _run, rows = load_rows(run)
    assert all(likely_bottleneck(r).startswith("disk loop1 on host2 (97% busy") for r in rows)


def test_without_host_labels_tables_fall_back_to_instance(tmp_path: Path) -> None:
    run = _copy(tmp_path)

    def drop_host(queries: dict[str, Any]) -> None:
        for entry in queries.values():
            for series in entry.get("result", []):
                series["metric"].pop("host", None)

    _edit_prometheus(run, drop_host)
    _run, rows = load_rows(run)
    s = rows[0].system
    assert s.cpu_modes and all(":" in h for h in s.cpu_modes)  # ip:port
    assert all(":" in n.host for n in s.nics) and all(":" in d.host for d in s.devices)
    # by name alone: every node_exporter's loop0..2 are OSD devices, eth1 the cluster NIC
    assert {d.device for d in s.devices} == {"loop0", "loop1", "loop2"}
    assert {d.osds for d in s.devices} == {"osd.0", "osd.1", "osd.2"}
    assert {n.network for n in s.nics if n.device == "eth1"} == {"cluster"}
