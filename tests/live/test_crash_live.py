"""The runner killed by SIGKILL at each stage, then `--resume`, on the real dev cluster.

A tiny sweep: two iterations of one restart-only setting (osd_op_num_shards 2, so one OSD
restart for the steps and one for the restore), rados bench 4 KiB write for 2 s. The runner
kills itself at the stage (the `CEPHSCOPE_TEST_CRASH_AT` test hook, see
cephscope.runner.crashpoints): a real process death, nothing of the runner's own cleanup runs.
Then: no benchmark process outlives it; `--resume` finishes with every step done exactly once
(the steps done before the kill are not redone), the pre-sweep config and shard count back on
every OSD, and the run's OSD flags unset. Killed inside the dev cluster's restart (its OSDs
stopped, none started), the OSDs are really down until `--resume` restarts them first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cephscope.deploy.procs import proc_cmdline
from cephscope.runner.crashpoints import CRASH_ENV
from tests.live.cluster_checks import osd_db_entries, shard_counts

SPEC = """\
iterations: 2
ceph_config:
  osd_op_num_shards: [2]
benchmarks:
  radosbench:
    op_size: 4096
    time: 2
    concurrent_ops: 8
    write_only: true
"""
# stage -> (the hook's value, steps done when the runner dies)
CRASHES = {
    "config_apply": ("config_apply:2", 1),  # step 2's config set, before its verification
    "osd_stopped": ("osd_stopped:1", 0),  # step 1's OSDs all stopped, none started again
    "osd_restart": ("osd_restart:1", 0),  # step 1's OSDs restarted, PGs not yet waited for
    "benchmark": ("benchmark:2", 1),  # step 2's rados bench running
    "result_write": ("result_write:2", 1),  # step 2 measured, its result not written
    "restore": ("restore:1", 2),  # config db restored, OSDs not yet restarted for it
}


def sweep_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "cephscope.cli", "sweep", *args]


def benchmark_processes(devcluster: Any) -> list[tuple[int, list[str]]]:
    """rados bench processes on this machine working on this dev cluster (its conf in their
    argv)."""
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        argv = proc_cmdline(pid)
        if "bench" in argv and any(Path(a).name == "rados" for a in argv) \
                and str(devcluster.conf_path) in argv:
            found.append((pid, argv))
    return found


def osd_flags(devcluster: Any) -> set[str]:
    return set(devcluster.ceph_json("osd", "dump")["flags"].split(","))


def osds_up(devcluster: Any) -> dict[int, bool]:
    """osd id -> up, as the mon has it."""
    return {o["osd"]: o["up"] == 1 for o in devcluster.ceph_json("osd", "dump")["osds"]}


def start_stopped_osds(devcluster: Any) -> None:
    """Whatever happened in the test: no OSD of the shared cluster left stopped."""
    stopped = [i for i in devcluster.osd_ids() if devcluster.osd_pid(i) is None]
    if stopped:
        devcluster.restart_osds(stopped)
        devcluster.wait_pgs_active_clean()


@pytest.mark.parametrize("stage", list(CRASHES))
def test_runner_killed_at_stage_then_resumed(devcluster, tmp_path: Path, stage: str,
                                             restore_shards) -> None:
    spec = tmp_path / "crash.yaml"
    spec.write_text(SPEC)
    results = tmp_path / f"crash-{stage}-{os.getpid()}"
    common = ["--devcluster", str(devcluster.state_dir), "--metrics-linger", "0",
              "--idle-baseline", "0"]
    started = time.monotonic()
    try:
        check_kill_and_resume(devcluster, results, spec, stage, common, restore_shards)
    finally:
        start_stopped_osds(devcluster)
    print(f"\nlive crash at {stage}: kill + resume in {time.monotonic() - started:.1f}s")


def check_kill_and_resume(devcluster: Any, results: Path, spec: Path, stage: str,
                          common: list[str], restore_shards: Any) -> None:
    shards_before, db_before = restore_shards
    hook, done_at_crash = CRASHES[stage]
    first = subprocess.run(sweep_argv(str(spec), "--results-dir", str(results), *common),
                           env={**os.environ, CRASH_ENV: hook}, capture_output=True, text=True,
                           timeout=300, check=False)
    assert first.returncode == -9, first.stdout + first.stderr  # died by SIGKILL, at the hook
    # nothing of the killed runner's benchmark goes on
    deadline = time.monotonic() + 2
    while benchmark_processes(devcluster):
        assert time.monotonic() < deadline, benchmark_processes(devcluster)
        time.sleep(0.1)

    steps = json.loads((results / "run.json").read_text())["steps"]
    assert len(steps) == 2
    done_before = {s["id"]: (results / f"step-{s['id']}" / "result.json").stat().st_mtime_ns
                   for s in steps if (results / f"step-{s['id']}" / "result.json").exists()}
    assert len(done_before) == done_at_crash, (stage, first.stdout)
    if stage != "restore":
        assert "noscrub" in osd_flags(devcluster)  # the killed run left its flags set
    restarted_osds = devcluster.osd_ids()  # a step's shard count: every OSD restarts
    if stage == "osd_stopped":
        # killed between stop and start: no OSD process, and the mon has them down
        assert [i for i in restarted_osds if devcluster.osd_pid(i) is not None] == []
        deadline = time.monotonic() + 30
        while any(osds_up(devcluster).values()):
            assert time.monotonic() < deadline, osds_up(devcluster)
            time.sleep(0.5)

    resumed = subprocess.run(sweep_argv("--resume", str(results), *common), capture_output=True,
                             text=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"{done_at_crash}/2 steps already done" in resumed.stdout
    interrupted = (f"a restart of {', '.join(f'osd.{i}' for i in restarted_osds)} was "
                   f"interrupted by the previous run: restarting them")
    # the restart the kill cut short is done again first; no other kill leaves one behind
    assert (interrupted in resumed.stdout) == (stage in ("osd_stopped", "osd_restart")), \
        resumed.stdout
    assert json.loads((results / "state.json").read_text()).get("restarting_osds", []) == []
    # each step not done before ran exactly once now; the others not at all
    assert resumed.stdout.count(": starting") == 2 - done_at_crash, resumed.stdout
    for s in steps:
        result = json.loads((results / f"step-{s['id']}" / "result.json").read_text())
        assert result["status"] == "done" and result["results"][0]["iops"] > 0
        assert {v["osd_op_num_shards"] for v in result["config"].values()} == {"2"}
    for sid, mtime in done_before.items():
        assert (results / f"step-{sid}" / "result.json").stat().st_mtime_ns == mtime
    summary = json.loads((results / "summary.json").read_text())
    assert summary["steps_done"] == 2
    assert sorted(r["step"] for r in summary["rows"]) == sorted(s["id"] for s in steps)

    # the cluster as before the sweep, and nothing left running
    assert "restored the pre-sweep ceph config" in resumed.stdout
    assert osd_db_entries(devcluster) == db_before
    assert shard_counts(devcluster) == shards_before
    assert not {"noscrub", "nodeep-scrub"} & osd_flags(devcluster)
    assert not benchmark_processes(devcluster)
    assert all(osds_up(devcluster).values()), osds_up(devcluster)
