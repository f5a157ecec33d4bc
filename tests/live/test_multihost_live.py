"""A multi-host dev cluster (3 namespace hosts x 1 OSD + 2 clients) and sweeps on both clients.

One session cluster (`multihost` fixture) shared by the tests below, in this order:
hosts and targets, a 2-step sweep on both clients checked against the OSDs' own counters, a
SIGKILL + `--resume`, a fio sweep on librbd client endpoints of both clients with its report,
a restart-only option swept with OSD restarts on every host, a client namespace torn down
mid-step, and `down` leaving nothing.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cephscope.deploy.devcluster import DevCluster, DevClusterError
from cephscope.deploy.procs import proc_cmdline, terminate
from cephscope.runner.clients import close_clients, ssh_control_dir
from cephscope.runner.hostexec import SshHost
from cephscope.runner.report.build import write_report
from cephscope.runner.report.fio_series import step_series_of
from tests.live.cluster_checks import shard_counts

from .sweep_kill import run_sweep_until_step_then_kill

TWO_STEPS = """\
cluster:
  clients: [client1, client2]
benchmarks:
  librbdfio:
    mode: randwrite
    op_size: 4096
    iodepth: 8
    time: {seconds}
    vol_size: 128
  radosbench:
    op_size: 4096
    concurrent_ops: 8
    time: {seconds}
    write_only: true
"""


def sweep_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "cephscope.cli", "sweep", *args]


def ns_pids(netns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True,
                         check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def benchmark_pids(cluster: DevCluster, host_name: str) -> list[tuple[int, str]]:
    """rados / fio processes (and their guards) running in a client's namespace."""
    assert cluster.host_plan is not None
    host = next(h for h in cluster.host_plan.hosts if h.name == host_name)
    found = []
    for pid in ns_pids(host.netns):
        argv = proc_cmdline(pid)
        line = " ".join(argv)
        if argv and (Path(argv[0]).name in ("rados", "fio") or "cephscope-guard" in line):
            found.append((pid, line[:120]))
    return found


def value_at(stack: Any, promql: str, at: float) -> float:
    result = stack.query(promql, at=at)
    assert result, f"no value for {promql} at {at}"
    return float(result[0]["value"][1])


def summed_rate(stack: Any, metric: str, t0: float, t1: float) -> float:
    """Sum over series of (last - first) / dt of the raw samples strictly inside (t0, t1):
    the OSDs' own rate while the step ran, nothing before or after it."""
    raw = stack.query(f"{metric}[{int(t1 - t0) + 30}s]", at=t1)
    total = 0.0
    for series in raw:
        points = [(float(t), float(v)) for t, v in series["values"] if t0 < float(t) < t1]
        assert len(points) >= 2, (metric, series["metric"], points)
        (ta, va), (tb, vb) = points[0], points[-1]
        total += (vb - va) / (tb - ta)
    assert raw, metric
    return total


def test_hosts_crush_targets_and_listeners(multihost: DevCluster, multihost_stack: Any) -> None:
    tree = multihost.ceph_json("osd", "tree")
    hosts = {n["name"]: n["children"] for n in tree["nodes"] if n["type"] == "host"}
    assert sorted(hosts) == ["host1", "host2", "host3"] and all(len(c) == 1 for c in hosts.values())
    meta = {m["id"]: m["hostname"] for m in multihost.ceph_json("osd", "metadata")}
    assert meta == {i: multihost.host_of(f"osd.{i}").name for i in multihost.osd_ids()}
    pools = {p["pool_name"]: p for p in multihost.ceph_json("osd", "pool", "ls", "detail")}
    assert pools["rbd"]["size"] == 2
    (rule,) = [r for r in multihost.ceph_json("osd", "crush", "rule", "dump")
               if r["rule_id"] == pools["rbd"]["crush_rule"]]
    assert any(s.get("type") == "host" for s in rule["steps"]), rule

    up = multihost_stack.query('up{job="cephscope-exporter"} == 1')
    assert sorted(s["metric"]["host"] for s in up) == ["host1", "host2", "host3"]
    # the stack's own node_exporter (no `host` label) does not count
    uname = multihost_stack.wait_for_series('count(node_uname_info{host!=""}) == 5', timeout=90)
    assert uname
    names = {s["metric"]["host"]: s["metric"]["nodename"]
             for s in multihost_stack.query("node_uname_info") if "host" in s["metric"]}
    assert names == {n: n for n in ["host1", "host2", "host3", "client1", "client2"]}

    # Every socket listening in a host's namespace is on one of its own addresses.
    assert multihost.host_plan is not None
    for host in multihost.host_plan.hosts:
        own = {host.public_addr, host.cluster_addr, "127.0.0.1"}
        out = subprocess.run(["ip", "netns", "exec", host.netns, "ss", "-Hltn"],
                             capture_output=True, text=True, check=True).stdout
        listening = {line.split()[3].rsplit(":", 1)[0] for line in out.splitlines()}
        assert listening and listening <= own, (host.name, listening)
        assert f"{host.public_addr}:22" in out


def test_overlapping_subnet_refused_before_anything_is_made(multihost: DevCluster,
                                                           tmp_path: Path) -> None:
    assert multihost.host_plan is not None
    other = DevCluster(tmp_path / "other", port_base=multihost.port_base + 200, hosts=2,
                       public_subnet=multihost.host_plan.public_subnet,
                       cluster_subnet="10.233.250.0/24", log=lambda m: None)
    with pytest.raises(DevClusterError, match="overlaps an existing route"):
        other.up()
    assert other.host_plan is not None
    assert not [h for h in other.host_plan.hosts if Path("/run/netns", h.netns).exists()]
    assert not Path("/sys/class/net", other.host_plan.public_bridge).exists()


def test_two_clients_per_client_and_aggregate_against_osd_counters(
        multihost: DevCluster, multihost_stack: Any, tmp_path: Path) -> None:
    spec = tmp_path / "two.yaml"
    spec.write_text(TWO_STEPS.format(seconds=20))
    results = tmp_path / "run"
    proc = subprocess.run(
        sweep_argv(str(spec), "--devcluster", str(multihost.state_dir), "--results-dir",
                   str(results), "--metrics-port", str(multihost_stack.runner_port),
                   "--metrics-linger", "12", "--prometheus-url", multihost_stack.prometheus_url,
                   "--idle-baseline", "0"),
        capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = json.loads((results / "run.json").read_text())["steps"]
    assert [s["benchmark"] for s in steps] == ["librbdfio", "radosbench"]
    skews, dead = [], []
    for s in steps:
        result = json.loads((results / f"step-{s['id']}" / "result.json").read_text())
        (agg,) = result["results"]
        per = agg["clients"]
        assert sorted(per) == ["client1", "client2"]
        assert all(r["iops"] > 0 for r in per.values())
        assert agg["iops"] == pytest.approx(sum(r["iops"] for r in per.values()), rel=1e-9)
        assert agg["ops"] == sum(r["ops"] for r in per.values())
        assert agg["bandwidth_bytes_per_second"] == pytest.approx(
            sum(r["bandwidth_bytes_per_second"] for r in per.values()), rel=1e-9)
        assert agg["latency_max_seconds"] == max(r["latency_max_seconds"] for r in per.values())
        ts = result["timestamps"]
        mode = ts["modes"][agg["mode"]]
        assert sorted(mode["clients"]) == ["client1", "client2"]
        skews.append(mode["start_skew_seconds"])
        dead.append(ts["dead_time_seconds"])

        # The OSDs counted the clients' writes: op_w at the primaries (within 20 %), replica
        # writes in subop_w, and replication traffic on every host's cluster NIC.
        # op_w: its rate from samples inside the step (past the first seconds' ramp), so
        # neither the previous step nor this one's cleanup (rados deletes are writes) counts.
        # That rate spans two to three scrapes (~15 s) stamped when Prometheus began each
        # scrape, not when the exporter read the counters: with another worker's cluster busy
        # on the same 2 cores it came out 0.86-0.88 of rados bench's own IOPS (0.97 for fio).
        # A host or client not counted, or replicas counted as client writes, is 0.67x or 2x.
        op_w = summed_rate(multihost_stack, "ceph_osd_op_w", ts["started"] + 2, ts["ended"])
        assert op_w == pytest.approx(agg["iops"], rel=0.20), (s["benchmark"], op_w, agg["iops"])
        start, end = ts["started"] - 0.5, ts["ended"] + 6  # one scrape (5 s) past the end
        time.sleep(max(0.0, end - time.time()))
        subop = value_at(multihost_stack, "sum(ceph_osd_subop_w)", end) - \
            value_at(multihost_stack, "sum(ceph_osd_subop_w)", start)
        assert subop > 0
        for host in ("host1", "host2", "host3"):
            for direction in ("receive", "transmit"):
                q = f'node_network_{direction}_bytes_total{{host="{host}",device="eth1"}}'
                moved = value_at(multihost_stack, q, end) - value_at(multihost_stack, q, start)
                assert moved > 100_000, (host, direction, moved)

    with (results / "summary-clients.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert sorted((r["benchmark"], r["client"]) for r in rows) == [
        ("librbdfio", "client1"), ("librbdfio", "client2"),
        ("radosbench", "client1"), ("radosbench", "client2")]
    with (results / "summary.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == 2  # one aggregate row per step

    run_id = json.loads((results / "run.json").read_text())["run_id"]
    raw = multihost_stack.query(f'cephscope_step_info{{run="{run_id}"}}[30m]')
    assert {s["metric"]["step"] for s in raw} == {s["id"] for s in steps}
    # live per-client figures on the runner's /metrics, as Prometheus scraped them
    for name in ("ops_per_second", "bytes_per_second", "latency_seconds"):
        raw = multihost_stack.query(f'cephscope_step_client_{name}{{run="{run_id}"}}[30m]')
        seen = {(s["metric"]["step"], s["metric"]["client"]) for s in raw
                if any(float(v) > 0 for _t, v in s["values"])}
        assert seen == {(s["id"], c) for s in steps for c in ("client1", "client2")}, (name, seen)

    # the report: per-host tables keyed by the targets' `host` label
    report = write_report(results, plots=False)
    for row in report.rows:
        nics = {(n.host, n.device): n for n in row.system.nics}
        cluster = {h: n for (h, _d), n in nics.items() if n.network == "cluster"}
        assert sorted(cluster) == ["host1", "host2", "host3"], sorted(nics)
        assert all(n.transmit_bytes_per_second > 0 for n in cluster.values()), cluster
        assert {d.host: d.osds for d in row.system.devices} == {
            h: f"osd.{i}" for i, h in ((i, multihost.host_of(f"osd.{i}").name)
                                       for i in multihost.osd_ids())}
        assert {"host1", "host2", "host3", "client1", "client2"} <= set(row.system.cpu_modes)
    text = report.markdown_path.read_text()
    assert "| host1 | eth1 | cluster |" in text and "| client2 |" in text
    print(f"\nlive multihost: start skew {[round(x, 3) for x in skews]} s, "
          f"dead time {[round(x, 2) for x in dead]} s")
    assert all(x is not None and x <= 1.0 for x in skews), skews


def test_ssh_command_cost_with_and_without_multiplexing(multihost: DevCluster,
                                                        tmp_path: Path) -> None:
    """What one command on a client costs with a multiplexing master and without (printed);
    the master is ended by `close` and its socket goes with it."""
    assert multihost.ssh_config is not None
    control = ssh_control_dir(tmp_path / "run")
    muxed = SshHost("client1", control_dir=control, config_file=multihost.ssh_config)
    plain = SshHost("client1", config_file=multihost.ssh_config)
    muxed.run(["true"], timeout=30)  # sets the master up
    costs = {}
    for name, host in (("multiplexed", muxed), ("one connection each", plain)):
        started = time.monotonic()
        for _ in range(5):
            host.run(["true"], timeout=30)
        costs[name] = (time.monotonic() - started) / 5
    assert list(control.iterdir())  # the master's socket
    close_clients([muxed], control)
    assert not control.exists()
    print("\nlive multihost: one ssh command " +
          ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in costs.items()))


def test_sigkill_then_resume_leaves_no_benchmark_on_any_client(
        multihost: DevCluster, tmp_path: Path) -> None:
    spec = tmp_path / "two.yaml"
    spec.write_text(TWO_STEPS.format(seconds=10))
    results = tmp_path / "run"
    common = ["--devcluster", str(multihost.state_dir), "--metrics-linger", "0",
              "--no-drop-caches"]

    def benchmarks_on_both_clients(_steps: list[dict[str, Any]]) -> None:
        assert benchmark_pids(multihost, "client1") and benchmark_pids(multihost, "client2")

    steps = run_sweep_until_step_then_kill(
        sweep_argv(str(spec), "--results-dir", str(results), *common), results,
        tmp_path / "first.log", 2, timeout=240, settle=2,
        before_kill=benchmarks_on_both_clients).steps
    # The runner is gone: each client's guard sees its SSH session end and ends its tool.
    deadline = time.monotonic() + 15
    while any(benchmark_pids(multihost, c) for c in ("client1", "client2")):
        assert time.monotonic() < deadline, {c: benchmark_pids(multihost, c)
                                             for c in ("client1", "client2")}
        time.sleep(0.2)
    step1 = results / f"step-{steps[0]['id']}" / "result.json"
    done_at = step1.stat().st_mtime_ns

    resumed = subprocess.run(sweep_argv("--resume", str(results), *common), capture_output=True,
                             text=True, timeout=400, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "1/2 steps already done" in resumed.stdout
    assert step1.stat().st_mtime_ns == done_at
    for s in steps:
        result = json.loads((results / f"step-{s['id']}" / "result.json").read_text())
        assert result["status"] == "done" and sorted(result["results"][0]["clients"]) == [
            "client1", "client2"]
    assert not benchmark_pids(multihost, "client1") and not benchmark_pids(multihost, "client2")


FIO_LIBRBD = """\
cluster:
  clients: [client1, client2]
client_endpoints:
  images:
    driver: librbd
    endpoints_per_client: 2
    endpoint_size: 64
benchmarks:
  fio:
    client_endpoints: images
    mode: randwrite
    bs: 4k
    total_iodepth: [1, 8]
    size: 32
    time: 5
    time_based: true
    prefill: false
    log_avg_msec: 1000
"""


def test_fio_on_librbd_endpoints_of_both_clients_with_its_report(
        multihost: DevCluster, multihost_stack: Any, tmp_path: Path) -> None:
    """CBT's fio benchmark across the clients: each client's images, its fio processes, its
    fio logs (written on the client, copied into the step dir), per-client and aggregate
    results, and the report with fio's time series beside the OSDs' (Prometheus)."""
    spec = tmp_path / "fio.yaml"
    spec.write_text(FIO_LIBRBD)
    results = tmp_path / "run"
    proc = subprocess.run(
        sweep_argv(str(spec), "--devcluster", str(multihost.state_dir), "--results-dir",
                   str(results), "--metrics-port", str(multihost_stack.runner_port),
                   "--prometheus-url", multihost_stack.prometheus_url, "--metrics-linger", "0",
                   "--idle-baseline", "0", "--quiet-gap", "0", "--no-drop-caches"),
        capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = json.loads((results / "run.json").read_text())["steps"]
    figures = []
    for s in steps:
        step_dir = results / f"step-{s['id']}"
        result = json.loads((step_dir / "result.json").read_text())
        (agg,) = result["results"]
        assert sorted(agg["clients"]) == ["client1", "client2"]
        assert all(r["iops"] > 0 for r in agg["clients"].values())
        # total_iodepth 1 per client: one of its two endpoints runs, at depth 1; 8: both at 4
        depths = {1: [1], 8: [4, 4]}[s["params"]["total_iodepth"]]
        assert agg["extra"]["endpoint"]["iodepths"] == depths
        logs = {p.name.split("_")[0] for p in step_dir.glob("*_iops.1.log")}
        assert logs == {f"fio-randwrite.client{c}.{i}" for c in (1, 2)
                        for i in range(len(depths))}
        figures.append((s["params"]["total_iodepth"], round(agg["iops"]),
                        round(agg["latency_avg_seconds"] * 1e3, 2),
                        {c: round(r["iops"]) for c, r in agg["clients"].items()}))
    assert not list((results / "client-work").rglob("*.log"))  # taken off the clients
    report = write_report(results, multihost_stack.prometheus_url)
    assert len([p for p in report.plots if p.name.startswith("fio-series-")]) == 2
    for row in report.rows:  # fio's series beside the OSDs' op rate Prometheus recorded
        found = step_series_of(row, results)
        assert found is not None and len(found.fio_iops) >= 3 and found.osd_ops, row.step.id
    listed = subprocess.run(["rbd", "-c", str(multihost.conf_path), "ls", "rbd"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert not [i for i in listed if i.startswith("cephscope-") and i != "cephscope-img"]
    print(f"\nlive multihost fio librbd (total_iodepth, IOPS, ms, per client): {figures}")


SHARDS_ON_TWO_CLIENTS = """\
cluster:
  clients: [client1, client2]
ceph_config:
  osd_op_num_shards: [2, 3]
benchmarks:
  radosbench:
    op_size: 4096
    concurrent_ops: 4
    time: 4
    write_only: true
"""


def test_osd_restarts_across_hosts_are_verified_and_restored(multihost: DevCluster,
                                                             tmp_path: Path) -> None:
    """A restart-only option swept on the 3-host cluster: the dev cluster restarts each OSD on
    its own namespace host, the running shard count is read back from every OSD per step, and
    the pre-sweep value is restored (and running) at the end."""
    before = shard_counts(multihost)
    db_before = [e for e in multihost.ceph_json("config", "dump") if e["section"] == "osd"]
    spec = tmp_path / "shards.yaml"
    spec.write_text(SHARDS_ON_TWO_CLIENTS)
    results = tmp_path / "run"
    try:
        proc = subprocess.run(
            sweep_argv(str(spec), "--devcluster", str(multihost.state_dir), "--results-dir",
                       str(results), "--metrics-linger", "0", "--no-drop-caches"),
            capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        steps = json.loads((results / "run.json").read_text())["steps"]
        assert sorted(s["ceph_config"]["osd_op_num_shards"] for s in steps) == [2, 3]
        for s in steps:
            result = json.loads((results / f"step-{s['id']}" / "result.json").read_text())
            shards = str(s["ceph_config"]["osd_op_num_shards"])
            # read back from every OSD, each on its own host
            assert set(result["config"]) == {f"osd.{i}" for i in multihost.osd_ids()}
            assert all(v["osd_op_num_shards"] == shards for v in result["config"].values()), \
                result["config"]
            assert result["timestamps"]["config"]["restarted"] is True
            assert sorted(result["results"][0]["clients"]) == ["client1", "client2"]
        assert "restored the pre-sweep ceph config" in proc.stdout
        assert shard_counts(multihost) == before
        assert [e for e in multihost.ceph_json("config", "dump")
                if e["section"] == "osd"] == db_before
        hosts = {multihost.host_of(f"osd.{i}").name for i in multihost.osd_ids()}
        assert hosts == {"host1", "host2", "host3"}
    finally:
        if shard_counts(multihost) != before:  # leave the session cluster as it was
            with contextlib.suppress(Exception):
                multihost.ceph("config", "rm", "osd", "osd_op_num_shards")
            multihost.restart_osds(multihost.osd_ids())
            multihost.wait_pgs_active_clean()


def test_client_namespace_torn_down_mid_step(multihost: DevCluster, tmp_path: Path) -> None:
    spec = tmp_path / "long.yaml"
    spec.write_text("""\
cluster:
  clients: [client1, client2]
benchmarks:
  radosbench:
    op_size: 4096
    concurrent_ops: 4
    time: 60
    write_only: true
""")
    results = tmp_path / "run"
    sweep = subprocess.Popen(
        sweep_argv(str(spec), "--devcluster", str(multihost.state_dir), "--results-dir",
                   str(results), "--metrics-linger", "0", "--no-drop-caches"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        # environment capture and hygiene come first: minutes on a loaded 2-core machine
        deadline = time.monotonic() + 300
        # mid-step: the tool itself runs (its guard waits for the start barrier before)
        while not [p for p, line in benchmark_pids(multihost, "client2")
                   if Path(line.split()[0]).name == "rados"]:
            assert sweep.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(2)
        assert multihost.host_plan is not None
        client2 = next(h for h in multihost.host_plan.hosts if h.name == "client2")
        torn_down = time.time()
        for pid in ns_pids(client2.netns):  # the host goes away: everything on it, then it
            with contextlib.suppress(ProcessLookupError):  # a guard ends with its sshd
                terminate(pid, 5)
        subprocess.run(["ip", "netns", "del", client2.netns], check=True)
        out, _ = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            os.kill(sweep.pid, signal.SIGKILL)
            sweep.wait(10)
    assert sweep.returncode == 1, out
    (step,) = json.loads((results / "run.json").read_text())["steps"]
    failure_file = results / f"step-{step['id']}" / "failure.json"
    failure = json.loads(failure_file.read_text())
    assert "client2" in failure["error"], failure
    ts = failure["timestamps"]
    assert ts["ended"] - ts["started"] < 50, "the step waited for its full 60 s"
    # noticed at once (the session's end, or keep-alives within 3 x 2 s), not at step end
    noticed = failure_file.stat().st_mtime - torn_down
    print(f"\nlive multihost: client teardown began, step failed {noticed:.1f}s later")
    assert noticed < 15, noticed
    assert "0/1 steps done, 1 failed" in out
    # the other client's tool was ended: its guard saw the runner's ssh go
    deadline = time.monotonic() + 15
    while benchmark_pids(multihost, "client1"):
        assert time.monotonic() < deadline, benchmark_pids(multihost, "client1")
        time.sleep(0.2)


def test_down_leaves_nothing(multihost: DevCluster) -> None:
    plan = multihost.host_plan
    assert plan is not None
    images = {o.image for o in multihost.load_state().osds}
    multihost.down()
    assert not [h.netns for h in plan.hosts if Path("/run/netns", h.netns).exists()]
    links = {p.name for p in Path("/sys/class/net").iterdir()}
    assert not {n for n in links if n.startswith(f"cs{plan.tag}")}
    mounts = Path("/proc/self/mountinfo").read_text()
    assert not [h for h in plan.hosts if h.uts_file in mounts]
    ours = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
            if str(multihost.state_dir) in " ".join(proc_cmdline(pid))]
    assert not ours, [(p, proc_cmdline(p)) for p in ours]
    loops = subprocess.run(["losetup", "-J"], capture_output=True, text=True).stdout
    attached = [d["back-file"] for d in (json.loads(loops)["loopdevices"] if loops.strip() else [])]
    assert not [f for f in attached if f.split(" ")[0] in images]
    assert not multihost.running_daemons() and not multihost.host_daemons.running()  # type: ignore[union-attr]
