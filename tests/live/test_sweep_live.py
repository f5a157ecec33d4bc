"""The sweep runner on the real dev cluster + stack.

One 2 x 2 sweep (osd_op_num_shards [2, 4] x op_size [4096, 65536], rados bench write, 5 s),
run as the real `cephscope sweep` subprocess, SIGKILLed during step 2 and finished with
`--resume`. Then: every step done exactly once, shard count verified on every OSD, IOPS > 0,
Prometheus holds cephscope_step_info for every step inside that step's window, and the shared
cluster is back to its pre-sweep shard count. Bad specs are rejected before any change.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.live.cluster_checks import osd_db_entries, shard_counts

from .sweep_kill import run_sweep_until_step_then_kill

SPEC = """\
cluster:
  use_existing: true
  head: "head"
ceph_config:
  osd_op_num_shards: [2, 4]
benchmarks:
  radosbench:
    op_size: [4096, 65536]
    time: 5
    concurrent_ops: 16
    write_only: true
"""


def sweep_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "cephscope.cli", "sweep", *args]


def test_bad_specs_rejected_before_the_cluster_is_touched(devcluster, tmp_path):
    pids = {i: devcluster.osd_pid(i) for i in devcluster.osd_ids()}
    db_before = osd_db_entries(devcluster)
    cases = {
        "unknown key": (SPEC + "colour: blue\n", "colour: 'blue': unknown key"),
        "wrong type": (SPEC.replace("time: 5", "time: five"),
                       "benchmarks.radosbench.time: 'five': wrong type str"),
        "empty axis": (SPEC.replace("[2, 4]", "[]"),
                       "ceph_config.osd_op_num_shards: []: empty list"),
        "negative time": (SPEC.replace("time: 5", "time: -5"),
                          "benchmarks.radosbench.time: -5: must not be negative"),
        "unknown ceph option": (SPEC.replace("osd_op_num_shards", "osd_op_num_shardz"),
                                "ceph_config.osd_op_num_shardz: [2, 4]: unknown ceph option"),
        "shell metacharacters": (SPEC.replace("concurrent_ops: 16",
                                              "concurrent_ops: 16\n    readmode: 'seq;reboot'"),
                                 "benchmarks.radosbench.readmode: 'seq;reboot': holds shell"),
    }
    for name, (text, expected) in cases.items():
        spec = tmp_path / f"{name.replace(' ', '_')}.yaml"
        spec.write_text(text)
        results = tmp_path / f"results-{name.replace(' ', '_')}"
        proc = subprocess.run(sweep_argv(str(spec), "--devcluster", str(devcluster.state_dir),
                                         "--results-dir", str(results)),
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
        assert "invalid spec (nothing was changed on the cluster)" in proc.stderr, name
        assert expected in proc.stderr, (name, proc.stderr)
        assert f"{spec}:" in proc.stderr, name  # file:line
        assert not results.exists(), name
    assert osd_db_entries(devcluster) == db_before
    assert {i: devcluster.osd_pid(i) for i in devcluster.osd_ids()} == pids


def test_sweep_killed_and_resumed(devcluster, stack, tmp_path, restore_shards):
    shards_before, db_before = restore_shards
    spec = tmp_path / "shards.yaml"
    spec.write_text(SPEC)
    results = tmp_path / tmp_path.name  # the dir name is the run id: unique per session
    common = ["--devcluster", str(devcluster.state_dir), "--metrics-port",
              str(stack.runner_port), "--metrics-linger", "12",
              "--prometheus-url", stack.prometheus_url, "--prometheus-rate-window", "15s"]
    # SIGKILL the runner 1.5 s into step 2's benchmark
    killed = run_sweep_until_step_then_kill(
        sweep_argv(str(spec), "--results-dir", str(results), *common), results,
        tmp_path / "first.log", 2, timeout=180, settle=1.5)
    steps = killed.steps
    killed_window = killed.step_window()
    step_ids = [s["id"] for s in steps]
    done_before = {sid: (results / f"step-{sid}" / "result.json").stat().st_mtime_ns
                   for sid in step_ids if (results / f"step-{sid}" / "result.json").exists()}
    assert list(done_before) == step_ids[:1], "exactly step 1 was done at the kill"
    time.sleep(3)  # the killed run's rados bench (an orphan now) finishes its 5 s

    resumed = subprocess.run(sweep_argv("--resume", str(results), *common),
                             capture_output=True, text=True, timeout=400, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "1/4 steps already done" in resumed.stdout

    # all steps done, step 1 not redone, none lost
    for sid in step_ids:
        result = json.loads((results / f"step-{sid}" / "result.json").read_text())
        assert result["step"] == sid and result["status"] == "done"
    for sid, mtime in done_before.items():
        assert (results / f"step-{sid}" / "result.json").stat().st_mtime_ns == mtime
    summary = json.loads((results / "summary.json").read_text())
    assert summary["steps_done"] == 4
    assert sorted(r["step"] for r in summary["rows"]) == sorted(step_ids)

    windows: dict[str, tuple[float, float]] = {}
    for s in steps:
        result = json.loads((results / f"step-{s['id']}" / "result.json").read_text())
        shards = s["ceph_config"]["osd_op_num_shards"]
        # verified on every OSD, by the running shard count
        assert set(result["config"]) == {f"osd.{i}" for i in devcluster.osd_ids()}
        assert all(v["osd_op_num_shards"] == str(shards) for v in result["config"].values())
        (write,) = result["results"]
        assert write["mode"] == "write" and write["iops"] > 0
        ts = result["timestamps"]
        windows[s["id"]] = (ts["started"], ts["ended"])
        assert 0 <= ts["dead_time_seconds"] < 60
        prom = json.loads((results / f"step-{s['id']}" / "prometheus.json").read_text())
        assert "cpu_busy_ratio" in prom["queries"]

    # Prometheus: cephscope_step_info for every step, only inside that step's window (the
    # killed attempt of step 2 had its own window).
    run_id = json.loads((results / "run.json").read_text())["run_id"]
    raw = stack.query(f'cephscope_step_info{{run="{run_id}"}}[30m]')
    seen: dict[str, list[float]] = {}
    for series in raw:
        labels = series["metric"]
        assert labels["benchmark"] == "radosbench" and labels["mode"] == "write"
        sid = labels["step"]
        step = next(s for s in steps if s["id"] == sid)
        assert labels["osd_op_num_shards"] == str(step["ceph_config"]["osd_op_num_shards"])
        assert labels["op_size"] == str(step["params"]["op_size"])
        seen.setdefault(sid, []).extend(float(t) for t, _v in series["values"])
    assert set(seen) == set(step_ids), seen
    slack = 1.0  # a scrape's timestamp is taken just before the runner renders
    for sid, stamps in seen.items():
        allowed = [windows[sid]]
        if sid == step_ids[1]:
            allowed.append((killed_window["started"], killed_window["ended"]))
        for t in stamps:
            assert any(a - slack <= t <= b for a, b in allowed), (sid, t, allowed)
        a, b = windows[sid]
        assert any(a - slack <= t <= b for t in stamps), f"no sample inside {sid}'s final window"
    starts = stack.query(f'cephscope_step_start_timestamp_seconds{{run="{run_id}"}}')
    by_step = {r["metric"]["step"]: float(r["value"][1]) for r in starts}
    for sid in step_ids:
        if sid in by_step:  # the last scrape of the resumed run holds every step it ran
            assert by_step[sid] == pytest.approx(windows[sid][0], abs=0.01)
    assert set(step_ids[1:]) <= set(by_step)

    # the shared cluster is back as it was
    assert osd_db_entries(devcluster) == db_before
    assert shard_counts(devcluster) == shards_before
    assert "restored the pre-sweep ceph config" in resumed.stdout
