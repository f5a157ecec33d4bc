"""A blocking recovery test on the real dev cluster (CBT's `recovery_test`): rados bench writes
to a size-2 pool while osd.1 is marked down and out, the cluster recovers, the OSD comes back
and backfills. Degraded objects rise above 0 and return to 0; the phases are tagged in
Prometheus; the report has client IOPS per phase and the recovery time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

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


# Opt-in, not part of `make test`: in one of three full runs on Ceph 16.2, after osd.1 came
# back, a client write stayed blocked on osd.0 for good (one PG active+clean+laggy); the sweep
# hung and the shared session cluster stayed unhealthy for every later test.
# Run it alone with CEPHSCOPE_LIVE_RECOVERY=1 until that is understood.
@pytest.mark.skipif(not os.environ.get("CEPHSCOPE_LIVE_RECOVERY"),
                    reason="opt-in (CEPHSCOPE_LIVE_RECOVERY=1): can leave a PG laggy with a "
                           "blocked op on Ceph 16.2 and hang the shared session cluster")
def test_blocking_recovery_test_phases_and_report(devcluster, stack, tmp_path):
    spec = tmp_path / "recovery.yaml"
    spec.write_text(SPEC)
    results = tmp_path / tmp_path.name  # the dir name is the run id: unique per session
    proc = subprocess.run(
        [sys.executable, "-m", "cephscope.cli", "sweep", str(spec), "--devcluster",
         str(devcluster.state_dir), "--results-dir", str(results), "--metrics-port",
         str(stack.runner_port), "--metrics-linger", "0", "--idle-baseline", "0"],
        capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (step,) = json.loads((results / "run.json").read_text())["steps"]
    rec = json.loads((results / f"step-{step['id']}" / "result.json").read_text())[
        "timestamps"]["recovery"]
    assert [p["phase"] for p in rec["phases"]] == ["healthy", "degraded", "recovering",
                                                   "backfilling", "recovered"]
    assert rec["error"] is None
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
