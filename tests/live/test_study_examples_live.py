"""Each study's example spec, as shipped in examples/ (its short dev-cluster values), runs to
its report on a real dev cluster: every step done, summary.csv and report.md written, and each
axis the study sweeps in every step's record, the summary's columns and the report.

The shard and all-flash studies run on the session's 3-OSD cluster; the CBT talk (EC 4+2) and
the EC study (EC 3+3) need 6 OSDs and share one 6-OSD cluster started for this module.
The idle baseline is off (`--idle-baseline 0`): no Prometheus watches these runs. The report
is written without its plots (`--no-plots`): matplotlib costs ~1 min per study on 2 cores, and
the plots have tests of their own.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cephscope.deploy.devcluster import DevCluster
from cephscope.runner.spec import load_spec
from cephscope.runner.steps import generate_steps, label_for_axis

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# spec -> (cluster fixture, the axes the study sweeps)
STUDIES = {
    "shard-thread-study.yaml": ("devcluster", {
        "osd_ra", "ceph_config.osd_op_num_shards", "ceph_config.osd_op_num_threads_per_shard",
        "radosbench.concurrent_ops"}),
    "fio-allflash.yaml": ("devcluster", {"librbdfio.mode", "librbdfio.op_size"}),
    "cbt-talk.yaml": ("devcluster6", {"osd_ra", "radosbench.op_size", "pool_profile"}),
    "ec-study.yaml": ("devcluster6", {"block_queue.iosched/read_expire",
                                      "librbdfio.vol_object_size"}),
}


def cephscope(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cephscope.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def osd_queues(cluster: DevCluster) -> dict[str, tuple[str, str]]:
    """loopN -> (read_ahead_kb, scheduler line) of each OSD's device."""
    found = {}
    for o in cluster.load_state().osds:
        if o.loop_device:
            queue = Path("/sys/block", Path(o.loop_device).name, "queue")
            found[queue.parent.name] = ((queue / "read_ahead_kb").read_text().strip(),
                                        (queue / "scheduler").read_text().strip())
    return found


@pytest.mark.parametrize("name", list(STUDIES))
def test_study_example_runs_to_its_report(name: str, request: pytest.FixtureRequest,
                                          tmp_path: Path) -> None:
    fixture, axes = STUDIES[name]
    cluster: DevCluster = request.getfixturevalue(fixture)
    queues_before = osd_queues(cluster)
    results = tmp_path / tmp_path.name  # the dir name is the run id: unique per session
    started = time.monotonic()
    sweep = cephscope("sweep", str(EXAMPLES / name), "--devcluster", str(cluster.state_dir),
                      "--results-dir", str(results), "--metrics-linger", "0",
                      "--idle-baseline", "0", timeout=600)
    swept = time.monotonic() - started
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    report = cephscope("report", str(results), "--no-plots", timeout=300)
    assert report.returncode == 0, report.stdout + report.stderr
    print(f"\nlive study {name}: sweep {swept:.1f}s, with report "
          f"{time.monotonic() - started:.1f}s")

    steps = json.loads((results / "run.json").read_text())["steps"]
    assert steps
    for s in steps:
        result = json.loads((results / f"step-{s['id']}" / "result.json").read_text())
        assert result["status"] == "done", (s, result)
        assert set(s["axes"]) == axes, s["axes"]
    # every step the spec plans ran, and nothing else
    assert {s["id"] for s in steps} == {s.id for s in generate_steps(load_spec(EXAMPLES / name))}
    with (results / "summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert axes <= set(rows[0]), list(rows[0])
    assert {r["step"] for r in rows} == {s["id"] for s in steps}
    assert all(r["status"] == "done" and float(r["iops"]) > 0 for r in rows), rows
    text = (results / "report.md").read_text()
    for axis in axes:
        assert label_for_axis(axis) in text or axis in text, (axis, text[:2000])
    # host knobs the study turned are back as they were
    assert osd_queues(cluster) == queues_before
