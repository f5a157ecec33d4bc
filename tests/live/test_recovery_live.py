"""A blocking recovery test on the real dev cluster (CBT's `recovery_test`): rados bench writes
to a size-2 pool while osd.1 is marked down and out, the cluster recovers, the OSD comes back
and backfills. Degraded objects rise above 0 and return to 0; the phases are tagged in
Prometheus; the report has client IOPS per phase and the recovery time."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cephscope.dashboards.config import DEFAULT_CONFIG

SPEC = """\
pool_profiles:
  rep2: {replication: 2, pg_size: 8}
recovery_test:
  osds: [1]
  pre_time: 6
  post_time: 6
benchmarks:
  radosbench:
    op_size: 4096
    concurrent_ops: 8
    time: 20
    write_only: true
    pool_profile: rep2
    recov_test_type: blocking
"""


def restore_cluster(devcluster) -> list[str]:
    """Whatever the test left: flags off, every OSD up and in, laggy PGs re-peered, HEALTH_OK
    (the session cluster serves every later live test)."""
    done = []
    dump = devcluster.ceph_json("osd", "dump")
    for flag in ("noup", "noout", "noin", "nodown"):
        if flag in dump.get("flags", ""):
            devcluster.ceph("osd", "unset", flag)
            done.append(f"unset {flag}")
    for osd in dump["osds"]:
        if not osd["in"]:
            devcluster.ceph("osd", "in", str(osd["osd"]))
            done.append(f"osd.{osd['osd']} in")
        if not osd["up"] and devcluster.osd_pid(osd["osd"]) is None:
            devcluster.restart_osd(osd["osd"])
            done.append(f"osd.{osd['osd']} restarted")
    for pg in (devcluster.ceph_json("pg", "ls", "laggy") or {}).get("pg_stats", []):
        devcluster.ceph("pg", "repeer", pg["pgid"])
        done.append(f"PG {pg['pgid']} re-peered")
    devcluster.wait_health_ok(timeout=180)
    return done


@pytest.fixture
def restored(devcluster):
    yield devcluster
    done = restore_cluster(devcluster)
    print(f"\nlive: recovery test cleanup: {', '.join(done) or 'nothing to undo'}")


def run_sweep(spec_text: str, devcluster, stack, tmp_path: Path
              ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The spec swept to its end on the session cluster (it must succeed); its results dir."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text)
    results = tmp_path / tmp_path.name  # the dir name is the run id: unique per session
    proc = subprocess.run(
        [sys.executable, "-m", "cephscope.cli", "sweep", str(spec), "--devcluster",
         str(devcluster.state_dir), "--results-dir", str(results), "--metrics-port",
         str(stack.runner_port), "--metrics-linger", "0", "--idle-baseline", "0"],
        capture_output=True, text=True, timeout=420, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, results


def test_blocking_recovery_test_phases_and_report(restored, devcluster, stack, tmp_path):
    _, results = run_sweep(SPEC, devcluster, stack, tmp_path)
    (step,) = json.loads((results / "run.json").read_text())["steps"]
    rec = json.loads((results / f"step-{step['id']}" / "result.json").read_text())[
        "timestamps"]["recovery"]
    assert [p["phase"] for p in rec["phases"]] == ["healthy", "degraded", "recovering",
                                                   "backfilling", "recovered"]
    assert rec["error"] is None
    spans = [(p["phase"], round(p["end"] - p["start"], 1)) for p in rec["phases"]]
    print(f"\nlive: recovery test phases {spans}, max degraded {rec['max_degraded_objects']:.0f}")
    # Ceph 16.2 can leave a PG laggy after the OSD returns; the test re-peers it and says so
    for stuck in rec["repeered_pgs"]:
        print(f"\nlive: PG {stuck['pgid']} stayed laggy {stuck['laggy_seconds']:.0f}s after "
              f"the OSD came back; re-peered ({stuck['slow_ops'] or 'no slow ops'})")
    degraded = [c["degraded_objects"] for c in rec["counts"]]
    assert max(degraded) > 0 and degraded[-1] == 0
    assert rec["recovery_seconds"] > 0 and rec["backfill_seconds"] > 0
    assert rec["client"]["healthy"]["iops_mean"] > 0
    # the OSD is back: up and in, noup unset
    dump = json.loads(subprocess.run(devcluster.ceph_argv("osd", "dump", "--format", "json"),
                                     capture_output=True, text=True, check=True).stdout)
    osd1 = next(o for o in dump["osds"] if o["osd"] == 1)
    assert osd1["up"] == 1 and osd1["in"] == 1 and "noup" not in dump["flags"]

    run_id = json.loads((results / "run.json").read_text())["run_id"]
    deadline = time.monotonic() + 60
    while True:
        seen = {r["metric"]["phase"] for r in
                stack.query(f'cephscope_run_phase{{run="{run_id}"}}[30m]')}
        if {"recovery_healthy", "recovery_recovered"} <= seen or time.monotonic() > deadline:
            break
        time.sleep(2)
    # 6 s phases are always scraped (5 s interval); shorter ones when a scrape falls in them
    assert {"recovery_healthy", "recovery_recovered"} <= seen, seen

    report = subprocess.run([sys.executable, "-m", "cephscope.cli", "report", str(results)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert report.returncode == 0, report.stderr
    md = (results / "report.md").read_text()
    assert "## Recovery tests" in md
    assert f"| {step['id']} | healthy |" in md and "recovery " in md and " s, backfill " in md


BACKGROUND_SPEC = """\
pool_profiles:
  rep2: {replication: 2, pg_size: 8, prefill_recovery_objects: 400,
         prefill_recovery_object_size: 65536, prefill_recovery_threads: 8}
recovery_test:
  osds: [2]
  pre_time: 2
benchmarks:
  radosbench:
    op_size: 4096
    concurrent_ops: 8
    time: 10
    write_only: true
    pool_profile: rep2
    recov_test_type: background
"""


def test_background_recovery_test_client_runs_only_during_backfill(restored, devcluster,
                                                                   stack, tmp_path):
    """CBT's background mode: the recovery pool is written while osd.2 is out; the client
    starts on its own pool only once the OSD is back in and backfilling."""
    proc, results = run_sweep(BACKGROUND_SPEC, devcluster, stack, tmp_path)
    assert "writing 400 objects of 65536 B to cephscope-rep2-recovery" in proc.stdout
    (step,) = json.loads((results / "run.json").read_text())["steps"]
    result = json.loads((results / f"step-{step['id']}" / "result.json").read_text())
    rec = result["timestamps"]["recovery"]
    assert rec["error"] is None
    assert [p["phase"] for p in rec["phases"]] == ["healthy", "degraded", "recovering",
                                                   "backfilling", "recovered"]
    backfill = next(p for p in rec["phases"] if p["phase"] == "backfilling")
    # no client I/O before the OSD came back: the write mode began in the backfill phase
    assert result["timestamps"]["modes"]["write"]["start"] >= backfill["start"]
    assert rec["client"]["backfilling"]["iops_mean"] > 0
    assert rec["client"]["healthy"]["samples"] == 0
    # The prefilled recovery pool gave the OSD coming back something to move. Not read from
    # the phase's `pg stat` samples: the mgr refreshes them every second or two and 400 small
    # objects recover in about as long, so the samples can miss the whole move; and an OSD that
    # kept its (stale) copies is recovered from the PG log, counted as degraded, not misplaced.
    # The OSDs' recovery_ops counters (ops started, log recovery and backfill alike) only grow.
    before = recovery_ops_at(stack, backfill["start"])
    after = recovery_ops_after(stack, backfill["end"])
    moved = sum(after[osd] - before[osd] for osd in after.keys() & before.keys())
    trace = [(round(c["t"] - backfill["start"], 1), c["degraded_objects"],
              c["misplaced_objects"]) for c in rec["counts"]]
    print(f"\nlive: backfill phase {backfill['end'] - backfill['start']:.1f}s, {moved:.0f} "
          f"recovery ops started; (s, degraded, misplaced) samples {trace}")
    assert moved > 0, f"recovery_ops {before} at the backfill's start, {after} after; {trace}"


# every OSD's count of recovery ops it started (the exporter's perf collector), per daemon
RECOVERY_OPS = f"ceph_osd_recovery_ops{{{DEFAULT_CONFIG.exporter_job_selector}}}"


def osd_key(series: dict) -> str:
    return f"{series['metric']['ceph_daemon']}@{series['metric'].get('instance', '')}"


def recovery_ops_at(stack, at: float) -> dict[str, float]:
    """Each OSD's recovery_ops as last scraped at or before `at`."""
    return {osd_key(r): float(r["value"][1]) for r in stack.query(RECOVERY_OPS, at=at)}


def recovery_ops_after(stack, t: float, timeout: float = 60) -> dict[str, float]:
    """Each OSD's recovery_ops from the first scrapes after `t` (waits for every OSD)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {osd_key(r): float(r["value"][1])
                for r in stack.query(f"timestamp({RECOVERY_OPS})")}
        if seen and min(seen.values()) > t:
            return recovery_ops_at(stack, max(seen.values()))
        assert time.monotonic() < deadline, f"no scrape of {RECOVERY_OPS} after {t}: {seen}"
        time.sleep(1)
