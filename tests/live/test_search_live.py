"""A halving search over shards x threads on the real dev cluster + stack.

Space osd_op_num_shards [1, 2] x osd_op_num_threads_per_shard [1, 2] (both need an OSD
restart), rados bench 4 KiB write; the grid would be 4 candidates x 4 iterations x 6 s = 96
benchmark-seconds, the search gets a third of it (4 x 2 s, then 2 x 2 x 6 s). The real
`cephscope sweep` is SIGKILLed while its third step runs and finished with `--resume`: the
steps done before are answered from the results dir (not redone), the search's decisions are
the same (driving it once more from the results dir asks exactly the recorded steps, in order,
and runs nothing), its steps are tagged in Prometheus, and `cephscope recommend` answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from cephscope.runner.results import RunDir
from cephscope.runner.search.live import make_plan, run_live_search
from cephscope.runner.spec import load_spec
from cephscope.runner.steps import generate_steps
from tests.live.cluster_checks import osd_db_entries

from .sweep_kill import run_sweep_until_step_then_kill

SPEC = """\
name: search-halving
iterations: 4
ceph_config:
  osd_op_num_shards: [1, 2]
  osd_op_num_threads_per_shard: [1, 2]
benchmarks:
  radosbench:
    op_size: 4096
    concurrent_ops: 16
    time: 6
    write_only: true
search:
  method: halving
  maximize: iops
  budget: {fraction: 1/3}
  eta: 3
  min_seconds: 2
  rank_check: 2
  restart_seconds: 0     # budget in benchmark-seconds only, as the schedule below assumes
"""
RESTART_OPTIONS = {"osd_op_num_shards", "osd_op_num_threads_per_shard"}


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "cephscope.cli", *args]


def test_halving_search_killed_resumed_and_recommended(devcluster, stack, tmp_path,
                                                       restore_shards):
    _, db_before = restore_shards
    spec_path = tmp_path / "search.yaml"
    spec_path.write_text(SPEC)
    results = tmp_path / tmp_path.name  # the dir name is the run id: unique per session
    common = ["--devcluster", str(devcluster.state_dir), "--metrics-port",
              str(stack.runner_port), "--metrics-linger", "12", "--idle-baseline", "0"]

    dry = subprocess.run(cli("sweep", str(spec_path), "--dry-run", *common), capture_output=True,
                         text=True, timeout=120, check=False)
    assert dry.returncode == 0, dry.stderr
    assert "halving rungs: 4 candidates x 1 x 2s, 2 candidates x 2 x 6s" in dry.stdout
    assert "expected: 8 steps, 32 benchmark-seconds, up to 6 restart(s)" in dry.stdout
    assert "full grid: 16 steps, 96 benchmark-seconds, 4 restart(s) x 0 s = 96 s" in dry.stdout

    # kill while the third step's benchmark runs
    steps = run_sweep_until_step_then_kill(
        cli("sweep", str(spec_path), "--results-dir", str(results), *common), results,
        tmp_path / "first.log", 3, timeout=240, settle=0.5).steps
    before = {s["id"]: (results / f"step-{s['id']}" / "result.json").stat().st_mtime_ns
              for s in steps if (results / f"step-{s['id']}" / "result.json").exists()}
    assert len(before) == 2, "exactly two steps were done at the kill"
    time.sleep(2)  # the killed run's orphaned rados bench finishes

    resumed = subprocess.run(cli("sweep", "--resume", str(results), *common),
                             capture_output=True, text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "search: 2 finished step(s) answered from the results dir" in resumed.stdout

    rd = RunDir(results)
    all_steps = rd.steps()
    assert [s.id for s in all_steps[:3]] == [s["id"] for s in steps[:3]]  # same decisions
    assert len(all_steps) == 8 and all(rd.is_done(s) for s in all_steps)
    for sid, mtime in before.items():  # not redone
        assert (results / f"step-{sid}" / "result.json").stat().st_mtime_ns == mtime
    assert sorted(s.params["time"] for s in all_steps) == [2] * 4 + [6] * 4
    for s in all_steps:  # every OSD ran the step's values
        cfg = rd.step_result(s)["config"]
        assert all(v["osd_op_num_shards"] == str(s.ceph_config["osd_op_num_shards"])
                   for v in cfg.values())

    # Driving the search once more from the results dir asks exactly the recorded steps.
    spec = load_spec(spec_path)
    plan = make_plan(generate_steps(spec), RESTART_OPTIONS, spec.search, spec.iterations,
                     spec.adaptive)

    def must_not_run(step):  # type: ignore[no-untyped-def]
        raise AssertionError(f"step {step.id} would run again")

    outcome = run_live_search(rd, plan, must_not_run, None, lambda m: None)
    assert outcome.steps == 8 and outcome.bench_seconds == 32
    outcome_file = json.loads((results / "search.json").read_text())
    assert outcome_file["grid"] == {"steps": 16, "bench_seconds": 96.0, "restarts": 4,
                                    "total_seconds": 96.0}
    assert outcome_file["rank_check"]["short_seconds"] == 2

    # Steps are tagged in Prometheus like any other: cephscope_step_info while a step runs
    # (a full-length step outlasts the 5 s scrape interval, a 2 s one may fall between two
    # scrapes), start timestamps for every step the resumed runner ran.
    run_id = rd.run_id
    raw = stack.query(f'cephscope_step_info{{run="{run_id}"}}[30m]')
    tagged = {series["metric"]["step"]: series["metric"] for series in raw}
    long_steps = [s for s in all_steps if s.params["time"] == 6]
    assert {s.id for s in long_steps} <= set(tagged)
    for s in long_steps:
        assert tagged[s.id]["osd_op_num_threads_per_shard"] == str(
            s.ceph_config["osd_op_num_threads_per_shard"])
        assert tagged[s.id]["osd_op_num_shards"] == str(s.ceph_config["osd_op_num_shards"])
    starts = stack.query(f'cephscope_step_start_timestamp_seconds{{run="{run_id}"}}[30m]')
    started = {series["metric"]["step"] for series in starts}
    assert {s.id for s in all_steps[2:]} <= started

    rec = subprocess.run(cli("recommend", str(results)), capture_output=True, text=True,
                         timeout=120, check=False)
    assert rec.returncode == 0, rec.stderr
    assert "recommended: osd_op_num_shards=" in rec.stdout
    assert "ceph config set osd osd_op_num_shards" in rec.stdout
    assert "search (halving): 8 steps, 32 benchmark-seconds" in rec.stdout

    assert osd_db_entries(devcluster) == db_before
