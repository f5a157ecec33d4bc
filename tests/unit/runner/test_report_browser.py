"""The report of a 16-step grid (osd_op_num_shards {1,5,10,20} x osd_op_num_threads_per_shard
{1,2,3,4}, the shard-tuning study's shape) opened in a real browser (Debian's chromium through
chromium-driver and Selenium) at 1280 px: nothing runs off the page, every plot loads, every
table's rows stay short, and a screenshot is kept. The run is synthetic: the recorded demo run's
step files (tests/fixtures/runs/demo-a) copied into 16 steps with their figures scaled, so the
test needs no cluster (a live 16-step sweep would take ~6 minutes)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cephscope.runner.report.build import write_report
from tests.report_browser import assert_reads_at

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
SHARDS, THREADS = (1, 5, 10, 20), (1, 2, 3, 4)


def grid16(tmp_path: Path) -> Path:
    """A 16-step run built from demo-a's first step (its results, timestamps and stored
    Prometheus window), the cluster's pre-sweep values resolved (0 = the _ssd variant)."""
    src = RUNS / "demo-a"
    run_dir = tmp_path / "grid16"
    run_dir.mkdir()
    run = json.loads((src / "run.json").read_text())
    template = run["steps"][0]
    template_dir = src / f"step-{template['id']}"
    steps = []
    for i, (shards, threads) in enumerate((s, t) for s in SHARDS for t in THREADS):
        config = {"osd_op_num_shards": shards, "osd_op_num_threads_per_shard": threads}
        step = {**template, "id": f"{i:02d}a{shards:03d}b{threads:03d}"[:12],
                "axes": {f"ceph_config.{k}": v for k, v in config.items()},
                "ceph_config": config}
        steps.append(step)
        shutil.copytree(template_dir, run_dir / f"step-{step['id']}")
        result_path = run_dir / f"step-{step['id']}" / "result.json"
        result = json.loads(result_path.read_text())
        scale = 1 + 0.02 * shards - 0.01 * threads
        result.update(step=step["id"], axes=step["axes"], config=config)
        for entry in result["results"]:
            for key in ("iops", "bandwidth_bytes_per_second"):
                entry[key] = entry[key] * scale
            entry["latency_avg_seconds"] = entry["latency_avg_seconds"] / scale
        result_path.write_text(json.dumps(result))
        params = run_dir / f"step-{step['id']}" / "params.json"
        params.write_text(json.dumps(step))
    run.update(steps=steps, run_id="grid16")
    (run_dir / "run.json").write_text(json.dumps(run))
    for name in ("spec.resolved.json", "spec.yaml", "state.json"):
        shutil.copy(src / name, run_dir / name)
    pre = {"db": {"osd_op_num_shards": None, "osd_op_num_threads_per_shard": None},
           "running": {o: {f"osd.{i}": "0" for i in range(3)}
                       for o in ("osd_op_num_shards", "osd_op_num_threads_per_shard")},
           "effective": {o: {f"osd.{i}": {"value": v, "from": f"{o}_ssd"} for i in range(3)}
                         for o, v in (("osd_op_num_shards", "8"),
                                      ("osd_op_num_threads_per_shard", "2"))}}
    (run_dir / "pre_sweep_config.json").write_text(json.dumps(pre))
    return run_dir


def test_16_step_grid_report_reads_at_1280px(tmp_path: Path) -> None:
    run_dir = grid16(tmp_path)
    report = write_report(run_dir)
    md = report.markdown_path.read_text()
    # the markdown keeps the page's order: steps first, details last
    assert md.index("## Steps") < md.index("## Plots") < md.index("## System per step")
    # the baseline named by what the OSDs ran with
    assert ("osd_op_num_shards=8 (0 = osd_op_num_shards_ssd), "
            "osd_op_num_threads_per_shard=2 (0 = osd_op_num_threads_per_shard_ssd)") in md
    facts = assert_reads_at(report.html_path, tmp_path / "browser", steps=16)
    assert len(facts.images) == len(report.plots)


def test_demo_report_reads_at_1280px(tmp_path: Path) -> None:
    run_dir = tmp_path / "demo-a"
    shutil.copytree(RUNS / "demo-a", run_dir)
    report = write_report(run_dir)
    assert_reads_at(report.html_path, tmp_path / "browser", steps=4)


def test_recommendation_compares_against_the_effective_baseline(tmp_path: Path) -> None:
    run_dir = grid16(tmp_path)
    pre_path = run_dir / "pre_sweep_config.json"
    pre = json.loads(pre_path.read_text())
    # the OSDs started (0 each) as 20 shards x 1 thread: a measured configuration
    for option, value in (("osd_op_num_shards", "20"), ("osd_op_num_threads_per_shard", "1")):
        for entry in pre["effective"][option].values():
            entry["value"] = value
    pre_path.write_text(json.dumps(pre))
    md = write_report(run_dir, plots=False).markdown_path.read_text()
    rec = md.split("## Recommendation")[1].split("\n## ")[0]
    assert "recommended: osd_op_num_shards=20 osd_op_num_threads_per_shard=1" in rec
    assert ("baseline (the cluster's values before the sweep: osd_op_num_shards=20 "
            "(0 = osd_op_num_shards_ssd)") in rec
    assert "is the best configuration: no change recommended" in rec


def test_response_curve_report_reads_at_1280px(tmp_path: Path) -> None:
    """The recorded fio queue-depth sweep: the response-curve section (its knee sentence, the
    table of every point with mean ± sd, the plot) fits the page like the rest."""
    run_dir = tmp_path / "iodepth"
    shutil.copytree(RUNS / "iodepth", run_dir)
    report = write_report(run_dir)
    facts = assert_reads_at(report.html_path, tmp_path / "browser", steps=14)
    curves = [t for t in facts.tables if t["title"].startswith("Latency against IOPS")]
    assert len(curves) == 1 and len(curves[0]["rows"]) == 1 + 7
    assert len(facts.images) == len(report.plots) == 2
