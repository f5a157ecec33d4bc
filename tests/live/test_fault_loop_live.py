"""Faults while a sweep runs and Prometheus scrapes every 5 s, on the session dev cluster.

For 2 minutes an OSD is killed with SIGKILL (by its pid file's pid) and started again every
20 s, in turn (each OSD twice), while `cephscope sweep` runs rados bench steps over a runtime option. Then:
- every Prometheus scrape of the exporter was answered within its timeout and `up` stayed 1;
- right after each kill the exporter reports exactly the killed OSD down, the others up, and
  Prometheus never saw any other daemon down;
- the exporter never restarted (same pid, same start time);
- the runner finished and the pre-sweep config is back; each step is done, or failed with its
  reason while a fault was on (the policy: config verification waits up to 30 s for an OSD
  that does not answer; a step a fault breaks beyond that fails, `--resume` retries it), and
  at least half of the steps are done.
Then the mon is killed for 30 s: the OSDs' series go on from the admin sockets, topology falls
back to the OSDs' own config (`cephscope_topology_mon_up` 0, `cephscope_osd_info` kept) and
recovers once the mon is back. The cluster is left HEALTH_OK.

This test uses its own stack (topology refreshed every 5 s, to see the fallback within 30 s).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cephscope.deploy.procs import pid_alive
from cephscope.deploy.stack import EXPORTER_JOB, Stack, http_get
from tests.live.cluster_checks import osd_db_entries

from .conftest import free_port_base

LOOP_SECONDS = 120
KILL_EVERY_SECONDS = 20
MON_DOWN_SECONDS = 30
SPEC = """\
iterations: 3
ceph_config:
  osd_max_backfills: [1, 2]
benchmarks:
  radosbench:
    op_size: 4096
    time: 10
    concurrent_ops: 8
    write_only: true
"""
SAMPLE = re.compile(r'^(\w+)(?:\{([^}]*)\})? (\S+)$')


def scrape(stack: Stack) -> dict[str, dict[str, float]]:
    """metric -> ceph_daemon label (or '') -> value, from one direct scrape."""
    text = http_get(f"{stack.exporter_url}/metrics", timeout=10).decode()
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            out.setdefault(m.group(1), {})[labels.get("ceph_daemon", "")] = float(m.group(3))
    return out


def start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


@pytest.fixture
def fault_stack(devcluster: Any, tmp_path: Path) -> Any:
    stack = Stack(tmp_path / "stack", port_base=free_port_base(8, avoid={devcluster.port_base}),
                  asok_dir=devcluster.asok_dir, ceph_conf=devcluster.conf_path,
                  exporter_args=["--collector.topology.refresh-interval=5"])
    try:
        stack.up()
        stack.wait_for_series(f'up{{job="{EXPORTER_JOB}"}} == 1', timeout=60)
        yield stack
    finally:
        stack.purge()


def test_osd_kill_loop_during_a_sweep_then_mon_down(devcluster, fault_stack, tmp_path):
    stack = fault_stack
    osds = devcluster.osd_ids()
    daemons = {f"osd.{i}" for i in osds}
    exporter_pid = stack.running()["exporter"]
    exporter_started = start_time(exporter_pid)
    db_before = osd_db_entries(devcluster)
    spec = tmp_path / "faults.yaml"
    spec.write_text(SPEC)
    results = tmp_path / tmp_path.name
    sweep_log = tmp_path / "sweep.log"
    t_begin = time.time()
    kills: list[tuple[str, float, float]] = []  # (daemon, killed at, back at)
    with sweep_log.open("w") as log:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "cephscope.cli", "sweep", str(spec), "--results-dir",
             str(results), "--devcluster", str(devcluster.state_dir), "--metrics-port",
             str(stack.runner_port), "--metrics-linger", "0", "--idle-baseline", "0",
             "--health-timeout", "60", "--step-timeout", "90"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            n = 0
            while time.time() - t_begin < LOOP_SECONDS:
                next_kill = t_begin + (n + 1) * KILL_EVERY_SECONDS
                time.sleep(max(0.0, next_kill - time.time()))
                osd = osds[n % len(osds)]
                n += 1
                pid = devcluster.osd_pid(osd)
                assert pid is not None, f"osd.{osd} not running before its kill"
                killed_at = time.time()
                os.kill(pid, signal.SIGKILL)
                while pid_alive(pid):
                    time.sleep(0.05)
                # the exporter names exactly the killed OSD down
                up = scrape(stack)["cephscope_daemon_up"]
                assert {d: v for d, v in up.items() if d in daemons} == {
                    d: (0.0 if d == f"osd.{osd}" else 1.0) for d in daemons}, (osd, up)
                assert all(v == 1.0 for d, v in up.items() if d not in daemons), up
                devcluster.restart_osds([osd], timeout=90)
                kills.append((f"osd.{osd}", killed_at, time.time()))
            returncode = sweep.wait(timeout=400)
        finally:
            if sweep.poll() is None:
                os.kill(sweep.pid, signal.SIGKILL)
                sweep.wait(10)
    t_loop_end = time.time()
    out = sweep_log.read_text()
    assert returncode in (0, 1), out
    assert "restored the pre-sweep ceph config" in out, out
    assert osd_db_entries(devcluster) == db_before
    steps = json.loads((results / "run.json").read_text())["steps"]
    done, failed = [], []
    for s in steps:
        d = results / f"step-{s['id']}"
        if (d / "result.json").exists():
            done.append(s["id"])
        else:
            failure = json.loads((d / "failure.json").read_text())
            assert failure["error"].strip(), failure  # failed with its reason
            failed.append((s["id"], failure["error"][:100]))
            # a fault fails only the step it hits: this one ran while an OSD was down or
            # coming back (config verification waits up to 30 s for an OSD to answer)
            began = failure["timestamps"]["config_start"]
            ended = (d / "failure.json").stat().st_mtime
            assert any(began - 1 <= back + 35 and ended >= killed - 1
                       for _d, killed, back in kills), (s["id"], began, ended, kills)
    assert len(done) >= len(steps) // 2, (done, failed)
    assert returncode == (1 if failed else 0)

    # Prometheus: every scrape in time, the target never down, no daemon but a killed OSD down
    window = int(t_loop_end - t_begin) + 10
    timeout = stack.scrape_interval_seconds - 1
    at = t_loop_end + 6
    time.sleep(max(0.0, at - time.time()))
    worst = stack.query(f'max_over_time(scrape_duration_seconds{{job="{EXPORTER_JOB}"}}'
                        f'[{window}s])', at=at)
    assert worst and float(worst[0]["value"][1]) < timeout, worst
    ups = stack.query(f'up{{job="{EXPORTER_JOB}"}}[{window}s]', at=at)
    samples = [float(v) for _t, v in ups[0]["values"]]
    assert min(samples) == 1.0 and len(samples) >= window // stack.scrape_interval_seconds - 2
    for series in stack.query(f'cephscope_daemon_up{{job="{EXPORTER_JOB}"}}[{window}s]', at=at):
        daemon = series["metric"]["ceph_daemon"]
        for t, v in series["values"]:
            if float(v) == 0.0:
                assert any(d == daemon and k - 1 <= float(t) <= b + 1 for d, k, b in kills), \
                    (daemon, t, kills)
    assert stack.running()["exporter"] == exporter_pid
    assert start_time(exporter_pid) == exporter_started

    # The mon down for 30 s: OSD series go on, topology falls back, then recovers.
    mon = next(name for name in devcluster.running_daemons() if name.startswith("mon."))
    mon_pid = devcluster.running_daemons()[mon]
    mon_killed = time.time()
    os.kill(mon_pid, signal.SIGKILL)
    fallback_seen = False
    while time.time() - mon_killed < MON_DOWN_SECONDS:
        t0 = time.monotonic()
        metrics = scrape(stack)
        assert time.monotonic() - t0 < timeout, "a scrape with the mon down took too long"
        assert {d for d, v in metrics["cephscope_daemon_up"].items() if v == 1.0} >= daemons
        assert set(metrics["ceph_osd_op_w"]) == daemons
        assert set(metrics["cephscope_osd_info"]) == daemons  # topology kept, from fallback
        fallback_seen |= metrics["cephscope_topology_mon_up"][""] == 0.0
        time.sleep(5)
    assert fallback_seen, "topology never noticed the mon was gone"
    devcluster.start_daemon(mon)
    mon_back = time.time()
    deadline = time.monotonic() + 120
    while scrape(stack)["cephscope_topology_mon_up"][""] != 1.0:
        assert time.monotonic() < deadline, "topology did not recover from the mon"
        time.sleep(2)
    recovered = time.time() - mon_back
    at = time.time() + 6
    time.sleep(6)
    span = int(at - mon_killed) + 5
    worst = stack.query(f'max_over_time(scrape_duration_seconds{{job="{EXPORTER_JOB}"}}'
                        f'[{span}s])', at=at)
    assert float(worst[0]["value"][1]) < timeout, worst
    assert stack.query(f'min_over_time(up{{job="{EXPORTER_JOB}"}}[{span}s]) == 1', at=at)
    assert start_time(exporter_pid) == exporter_started
    devcluster.wait_health_ok(timeout=120)
    print(f"\nlive faults: {len(kills)} OSD kills, steps done {len(done)}, failed {failed}; "
          f"worst scrape {float(worst[0]['value'][1]):.2f}s; topology back {recovered:.1f}s "
          f"after the mon; total {time.time() - t_begin:.0f}s")
