"""Host knobs on the real dev cluster's loop-device OSDs: osd_ra and block_queue axes and a
sysctl, applied and read back on exactly the OSDs' devices, restored after a SIGKILL + resume;
a scheduler the devices do not offer is refused before anything changes.

`vm.swappiness` is global to the machine: the sweep changes it for a few seconds only, and the
fixture puts it back whatever happens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .sweep_kill import run_sweep_until_step_then_kill

SWAPPINESS = Path("/proc/sys/vm/swappiness")

SPEC = """\
osd_ra: [128, 4096]
block_queue:
  scheduler: [none, mq-deadline]
sysctl:
  vm.swappiness: {swappiness}
benchmarks:
  radosbench:
    op_size: 4096
    time: 3
    concurrent_ops: 8
    write_only: true
"""


def sweep_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "cephscope.cli", "sweep", *args]


def loop_devices(devcluster: Any) -> list[str]:
    names = [Path(o.loop_device).name for o in devcluster.load_state().osds if o.loop_device]
    if not names:
        pytest.fail("the session dev cluster has no loop-device OSDs (backing=file here?)")
    return sorted(names)


def queue(dev: str, attr: str) -> str:
    return Path(f"/sys/block/{dev}/queue/{attr}").read_text().strip()


def scheduler(dev: str) -> str:
    text = queue(dev, "scheduler")
    return text[text.index("[") + 1:text.index("]")]


def host_state(devs: list[str]) -> dict[str, Any]:
    return {"ra": {d: queue(d, "read_ahead_kb") for d in devs},
            "sched": {d: scheduler(d) for d in devs},
            "swappiness": SWAPPINESS.read_text().strip()}


@pytest.fixture
def knobs_restored(devcluster):
    devs = loop_devices(devcluster)
    before = host_state(devs)
    yield devs, before
    # whatever the test did: the machine gets its values back
    SWAPPINESS.write_text(before["swappiness"])
    for d in devs:
        Path(f"/sys/block/{d}/queue/read_ahead_kb").write_text(before["ra"][d])
        Path(f"/sys/block/{d}/queue/scheduler").write_text(before["sched"][d])


def test_bad_scheduler_is_refused_before_any_change(devcluster, knobs_restored, tmp_path):
    devs, before = knobs_restored
    spec = tmp_path / "bad.yaml"
    spec.write_text(SPEC.format(swappiness=int(before["swappiness"]) ^ 1)
                    .replace("[none, mq-deadline]", "[none, elevator9]"))
    proc = subprocess.run(sweep_argv(str(spec), "--devcluster", str(devcluster.state_dir),
                                     "--results-dir", str(tmp_path / "run")),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "block_queue.scheduler: 'elevator9'" in proc.stderr
    assert f"{devs[0]} offers the schedulers" in proc.stderr and "mq-deadline" in proc.stderr
    assert host_state(devs) == before
    assert not (tmp_path / "run").exists()


def test_knob_axes_applied_verified_and_restored_after_kill_and_resume(
        devcluster, stack, knobs_restored, tmp_path):
    devs, before = knobs_restored
    other_devs = sorted(p.name for p in Path("/sys/block").iterdir()
                        if p.name not in devs and (p / "queue" / "read_ahead_kb").exists())
    others_before = {d: queue(d, "read_ahead_kb") for d in other_devs}
    swappiness = 1 if before["swappiness"] != "1" else 2
    spec = tmp_path / "knobs.yaml"
    spec.write_text(SPEC.format(swappiness=swappiness))
    results = tmp_path / tmp_path.name  # the dir name is the run id: unique per session
    common = ["--devcluster", str(devcluster.state_dir), "--metrics-port",
              str(stack.runner_port), "--metrics-linger", "0", "--idle-baseline", "6"]

    def mid_step_2(steps: list[dict[str, Any]]) -> None:
        # the run's scrub guard is on while it runs
        flags = json.loads(subprocess.run(devcluster.ceph_argv("osd", "dump", "--format", "json"),
                                          capture_output=True, text=True, check=True).stdout)
        assert {"noscrub", "nodeep-scrub"} <= set(flags["flags"].split(","))
        # mid-step 2: the step's values are on the devices
        knobs2 = steps[1]["knobs"]
        assert {d: queue(d, "read_ahead_kb") for d in devs} == \
            dict.fromkeys(devs, str(knobs2["osd_ra"]))
        assert {d: scheduler(d) for d in devs} == \
            dict.fromkeys(devs, knobs2["block_queue.scheduler"])

    steps = run_sweep_until_step_then_kill(
        sweep_argv(str(spec), "--results-dir", str(results), *common), results,
        tmp_path / "first.log", 2, timeout=180, before_kill=mid_step_2).steps
    assert SWAPPINESS.read_text().strip() == str(swappiness)  # not restored: killed
    saved = json.loads((results / "pre_sweep_knobs.json").read_text())
    assert {(e["setting"], e["path"]) for e in saved} >= {
        ("osd_ra", f"/sys/block/{d}/queue/read_ahead_kb") for d in devs}
    time.sleep(3)  # the killed run's rados bench finishes

    resumed = subprocess.run(sweep_argv("--resume", str(results), *common),
                             capture_output=True, text=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "restored the pre-sweep host settings (block_queue.scheduler, osd_ra, " \
           "sysctl.vm.swappiness)" in resumed.stdout
    # everything back: the loop devices, the sysctl, and no other device was ever touched
    assert host_state(devs) == before
    assert {d: queue(d, "read_ahead_kb") for d in other_devs} == others_before

    run_id = json.loads((results / "run.json").read_text())["run_id"]
    seen = set()
    for s in steps:
        result = json.loads((results / f"step-{s['id']}" / "result.json").read_text())
        assert result["status"] == "done"
        verified = result["timestamps"]["knobs"]
        ra = {k.split(" ", 1)[1]: v for k, v in verified.items() if k.startswith("osd_ra ")}
        # exactly the OSDs' loop devices, each read back with the step's value
        assert sorted(w.split(":", 1)[1] for w in ra) == devs
        assert set(ra.values()) == {str(s["knobs"]["osd_ra"])}
        sched = {v for k, v in verified.items() if k.startswith("block_queue.scheduler ")}
        assert sched == {s["knobs"]["block_queue.scheduler"]}
        assert {v for k, v in verified.items() if k.startswith("sysctl.vm.swappiness ")} == \
            {str(swappiness)}
        seen.add((s["knobs"]["osd_ra"], s["knobs"]["block_queue.scheduler"]))
    assert seen == {(128, "none"), (128, "mq-deadline"), (4096, "none"), (4096, "mq-deadline")}
    summary = (results / "summary.csv").read_text().splitlines()
    assert "osd_ra" in summary[0] and "block_queue.scheduler" in summary[0]

    # hygiene: each step waited for scrubs and health, dropped caches; flags unset after
    for s in steps:
        hygiene = json.loads((results / f"step-{s['id']}" / "result.json").read_text())[
            "timestamps"]["hygiene"]
        assert set(hygiene) == {"scrub_wait", "health_gate", "drop_caches"}
    flags = json.loads(subprocess.run(devcluster.ceph_argv("osd", "dump", "--format", "json"),
                                      capture_output=True, text=True, check=True).stdout)
    assert not {"noscrub", "nodeep-scrub"} & set(flags["flags"].split(","))
    idle = json.loads((results / "state.json").read_text())["idle_baseline"]
    assert 5.5 < idle["end"] - idle["start"] < 30
    phases = stack.query(f'cephscope_run_phase{{run="{run_id}"}}[30m]')
    assert "idle_baseline" in {r["metric"]["phase"] for r in phases}, phases

    # the step info carries the knob values as labels (a 3 s step may fall between scrapes:
    # most, not all, steps are seen)
    expected = {(str(ra), sched) for ra, sched in seen}
    deadline = time.monotonic() + 60
    while True:
        series = stack.query(f'cephscope_step_info{{run="{run_id}"}}[30m]')
        labels = {(r["metric"].get("osd_ra"), r["metric"].get("scheduler")) for r in series}
        if len(labels) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert len(labels) >= 2 and labels <= expected, labels
