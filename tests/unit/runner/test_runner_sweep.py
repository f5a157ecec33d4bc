"""The sweep end to end on the in-memory cluster: results dir, resume after a kill, restore."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner.benchmarks.base import BenchContext
from cephscope.runner.results import ResultsError, RunDir, load_baseline
from cephscope.runner.sweep import SweepOptions
from tests.unit.runner_fakes import SPEC, CountingBench, FakeCluster, Recorder, fake_sweep, run_sweep


@pytest.fixture(autouse=True)
def _reset_counter():
    CountingBench.runs = []
    CountingBench.fail_step = None


def test_full_run_writes_results_and_restores(tmp_path):
    cluster = FakeCluster()
    rc, results = run_sweep(tmp_path, cluster)
    assert rc == 0
    rd = RunDir(results)
    steps = rd.steps()
    assert len(steps) == 4 and all(rd.is_done(s) for s in steps)
    assert sorted(CountingBench.runs) == sorted(s.id for s in steps)
    # one restart per shard value (grouped), one for the restore
    assert len(cluster.restarts) == 3
    assert cluster.db == {}
    assert all(cluster.started_with[i]["osd_op_num_shards"] == "0" for i in range(3))
    assert cluster.pools == {}  # the default pool was created by the run, and removed
    for s in steps:
        d = rd.step_dir(s)
        assert json.loads((d / "params.json").read_text())["id"] == s.id
        result = json.loads((d / "result.json").read_text())
        assert result["results"][0]["iops"] == pytest.approx(1e6 / s.params["op_size"])
        ts = result["timestamps"]
        assert ts["config_start"] <= ts["started"] <= ts["ended"]
        assert ts["dead_time_seconds"] == pytest.approx(ts["started"] - ts["config_start"])
        assert result["config"]["osd.1"]["osd_op_num_shards"] == str(
            s.ceph_config["osd_op_num_shards"])
        assert (d / "write.out").exists()
    summary = json.loads((results / "summary.json").read_text())
    assert summary["steps_done"] == 4
    csv = (results / "summary.csv").read_text().splitlines()
    assert csv[0].startswith("step,benchmark,iteration,ceph_config.osd_op_num_shards,"
                             "radosbench.op_size,ceph_version,status,mode,iops")
    assert len(csv) == 5
    # the version the cluster's daemons reported (`ceph versions`), per step
    assert all(line.split(",")[5] == "16.2.15" for line in csv[1:])
    assert json.loads((results / "pre_sweep_config.json").read_text())["db"] == {
        "osd_op_num_shards": None}


def test_resume_after_kill_runs_each_missing_step_once(tmp_path):
    cluster = FakeCluster()
    rc, results = run_sweep(tmp_path, cluster)
    assert rc == 0
    rd = RunDir(results)
    steps = rd.steps()
    # Make it look like a SIGKILL during step 2: step 1 done, step 2 half-written (raw output,
    # no result.json, a stale temp file), steps 3-4 never started; cluster left mid-sweep.
    kept = (rd.step_dir(steps[0]) / "result.json").read_bytes()
    (rd.step_dir(steps[1]) / "result.json").unlink()
    (rd.step_dir(steps[1]) / ".result.json.abc.tmp").write_text("{")
    for s in steps[2:]:
        shutil.rmtree(rd.step_dir(s))
    (results / "summary.json").unlink()
    cluster.command("config set", who="osd", name="osd_op_num_shards", value="2")
    cluster.restart([0, 1, 2], 1)
    cluster.restarts.clear()
    CountingBench.runs = []

    rc, _ = run_sweep(tmp_path, cluster, resume_dir=results)
    assert rc == 0
    assert CountingBench.runs == [s.id for s in steps[1:]]  # each once, in order
    assert (rd.step_dir(steps[0]) / "result.json").read_bytes() == kept  # untouched
    assert all(rd.is_done(s) for s in steps)
    assert not (rd.step_dir(steps[1]) / ".result.json.abc.tmp").exists()
    assert json.loads((results / "summary.json").read_text())["steps_done"] == 4
    # restored to the ORIGINAL pre-sweep state recorded by the first run, not the killed one's
    assert cluster.db == {}
    assert all(cluster.started_with[i]["osd_op_num_shards"] == "0" for i in range(3))

    # resuming a finished run does nothing
    CountingBench.runs = []
    rc, _ = run_sweep(tmp_path, cluster, resume_dir=results)
    assert rc == 0 and CountingBench.runs == []


def test_failed_step_is_recorded_and_retried_on_resume(tmp_path):
    cluster = FakeCluster()
    spec_path = tmp_path / "shards.yaml"
    spec_path.write_text(SPEC)
    # find the id of the 2nd step via a dry run of the same spec
    from cephscope.runner.spec import load_spec
    from cephscope.runner.steps import generate_steps

    ids = [s.id for s in generate_steps(load_spec(spec_path, benchmarks={
        "radosbench": CountingBench}))]
    CountingBench.fail_step = ids[1]
    rc, results = run_sweep(tmp_path, cluster)
    assert rc == 1
    rd = RunDir(results)
    failed = [s for s in rd.steps() if not rd.is_done(s)]
    assert [s.id for s in failed] == [ids[1]]
    failure = rd.step_failure(failed[0])
    assert failure is not None and "tool exited 1" in failure["error"]
    assert cluster.db == {}  # restored despite the failure
    CountingBench.fail_step = None
    CountingBench.runs = []
    rc, _ = run_sweep(tmp_path, cluster, resume_dir=results)
    assert rc == 0 and CountingBench.runs == [ids[1]]


def test_unknown_ceph_option_rejected_before_any_change(tmp_path):
    cluster = FakeCluster()
    (tmp_path / "shards.yaml").write_text(SPEC.replace("osd_op_num_shards", "osd_op_num_shardz"))
    from cephscope.runner.spec import SpecError

    with pytest.raises(SpecError) as info:
        run_sweep(tmp_path, cluster)
    assert info.value.problems == [
        f"{tmp_path / 'shards.yaml'}:2: ceph_config.osd_op_num_shardz: [2, 4]: unknown ceph "
        "option (`ceph config help osd_op_num_shardz` does not know it)"]
    assert {p for p, _ in cluster.commands} == {"config help", "osd metadata"}  # reads only
    assert not (tmp_path / "run").exists()


def test_dry_run_changes_nothing(tmp_path, capsys):
    cluster = FakeCluster()
    spec_path = tmp_path / "shards.yaml"
    spec_path.write_text(SPEC)
    lines: list[str] = []
    sweep = fake_sweep(SweepOptions(spec_path=spec_path, dry_run=True), cluster)
    sweep.log = lines.append
    assert sweep.run() == 0
    assert lines[0].startswith("4 steps, 2 OSD restart(s) (restart options: osd_op_num_shards)")
    assert len(lines) == 5 + 9  # the steps, then the changes and commands
    assert "  osd_op_num_shards: config db not set, running 0 → 2, 4 (OSD restart)" in lines
    assert {p for p, _ in cluster.commands} <= {"config help", "osd dump", "osd metadata",
                                                "config dump"}
    assert cluster.restarts == [] and CountingBench.runs == []


def test_baseline_loaded_per_step_and_mode(tmp_path):
    cluster = FakeCluster()
    _, results = run_sweep(tmp_path, cluster)
    baseline = load_baseline(results)
    assert len(baseline) == 4
    some: Mapping[str, Any] = next(iter(baseline.values()))
    assert set(some) == {"write"}
    assert some["write"]["iops"] > 0 and some["write"]["latency_avg_seconds"] > 0


def test_interrupt_mid_step_restores_and_exits_130(tmp_path):
    from cephscope.runner.sweep import Interrupted

    class InterruptingBench(CountingBench):
        def run(self, mode: str, ctx: BenchContext) -> list[Path]:
            if len(CountingBench.runs) == 1:
                raise Interrupted("SIGTERM")  # what the SIGTERM/SIGINT handler raises
            return super().run(mode, ctx)

    cluster = FakeCluster()
    spec_path = tmp_path / "shards.yaml"
    spec_path.write_text(SPEC)
    sweep = fake_sweep(SweepOptions(spec_path=spec_path, results_dir=tmp_path / "run",
                                   metrics_linger_seconds=0, tty=False), cluster)
    sweep.benchmarks = {"radosbench": InterruptingBench}
    assert sweep.run() == 130
    assert len(CountingBench.runs) == 1
    assert cluster.db == {}
    assert all(cluster.started_with[i]["osd_op_num_shards"] == "0" for i in range(3))
    rd = RunDir(tmp_path / "run")
    assert sum(rd.is_done(s) for s in rd.steps()) == 1
    CountingBench.runs = []
    assert run_sweep(tmp_path, cluster, resume_dir=tmp_path / "run")[0] == 0
    assert len(CountingBench.runs) == 3


def test_sweep_annotates_every_step_in_grafana(tmp_path):
    rec = Recorder()
    try:
        cluster = FakeCluster()
        rc, results = run_sweep(tmp_path, cluster, grafana_url=rec.url, grafana_token="t0k")
        assert rc == 0
    finally:
        rec.stop()
    rd = RunDir(results)
    assert len(rec.calls) == 4
    for s, call in zip(rd.steps(), rec.calls, strict=True):
        ts = rd.step_result(s)["timestamps"]
        body = call["body"]
        assert body["time"] == int(ts["started"] * 1000)
        assert body["timeEnd"] == int(ts["ended"] * 1000)
        assert f"step:{s.id}" in body["tags"] and f"run:{rd.run_id}" in body["tags"]
        assert f"osd_op_num_shards:{s.ceph_config['osd_op_num_shards']}" in body["tags"]
        assert f"op_size:{s.params['op_size']}" in body["tags"]
        assert call["headers"]["Authorization"] == "Bearer t0k"


def test_grafana_down_does_not_fail_the_sweep(tmp_path):
    cluster = FakeCluster()
    rc, results = run_sweep(tmp_path, cluster, grafana_url="http://127.0.0.1:9")
    assert rc == 0
    assert all(RunDir(results).is_done(s) for s in RunDir(results).steps())


def test_results_dir_names_the_run_and_a_foreign_dir_is_refused(tmp_path):
    cluster = FakeCluster()
    rc, results = run_sweep(tmp_path, cluster)
    assert rc == 0 and RunDir(results).run_id == results.name == "run"
    # a directory holding other files (a dev cluster's state dir, say) is never written into
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "state.json").write_text('{"fsid": "x"}')
    opts = SweepOptions(spec_path=tmp_path / "shards.yaml", results_dir=foreign,
                        metrics_linger_seconds=0, tty=False)
    with pytest.raises(ResultsError, match="not empty and not a cephscope run dir"):
        fake_sweep(opts, FakeCluster()).run()
    assert (foreign / "state.json").read_text() == '{"fsid": "x"}'
    assert sorted(p.name for p in foreign.iterdir()) == ["state.json"]


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_hostile_osd_host_name_is_refused_before_anything_changes(tmp_path, dry_run):
    """An OSD whose metadata reports an option-like hostname (its container's NODE_NAME) makes
    the sweep stop at start, naming the OSD and the name: the only command sent is the read of
    `osd metadata`; no config, pool, restart or run dir."""
    from cephscope.runner.sweep import SweepError

    cluster = FakeCluster()
    cluster.metadata[1]["hostname"] = "-oProxyCommand=touch /tmp/x"
    with pytest.raises(SweepError, match=r"osd\.1: osd metadata reports hostname "
                                         r"'-oProxyCommand=touch /tmp/x'"):
        run_sweep(tmp_path, cluster, dry_run=dry_run)
    assert [p for p, _ in cluster.commands] == ["osd metadata"]
    assert cluster.db == {} and cluster.pools == {} and cluster.restarts == []
    assert not (tmp_path / "run").exists() and CountingBench.runs == []


def test_unsafe_spec_keys_need_the_flag(tmp_path):
    """`--allow-unsafe-spec` reaches the spec loader: without it a sysctl outside the safe set
    stops the sweep before the cluster is asked anything."""
    from cephscope.runner.spec import SpecError

    (tmp_path / "shards.yaml").write_text(SPEC + "sysctl:\n  kernel.core_pattern: /tmp/x\n")
    cluster = FakeCluster()
    with pytest.raises(SpecError, match=r"sysctl kernel\.core_pattern can name a program"):
        run_sweep(tmp_path, cluster, dry_run=True)
    assert cluster.commands == []
    assert run_sweep(tmp_path, cluster, dry_run=True, allow_unsafe_spec=True)[0] == 0
