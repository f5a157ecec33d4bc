"""Host knobs on remote OSD hosts: the multi-host dev cluster's 3 hosts, reached over SSH.

A sweep with `osd_ra: [128, 4096]` x `block_queue: {scheduler: [none, mq-deadline]}`: while each
step runs, each OSD's own loop device, read on its own host over SSH, holds the step's values;
the runner's read-back names exactly those devices on exactly those hosts; no other block
device changes; the pre-sweep values are back after the run.

The hosts are network namespaces, but sysfs and loop devices belong to the whole machine: the
test tells the OSDs' devices from every other device by name, not by where it reads them.
Shares the session's `multihost` cluster (its module runs before the one that takes it down).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cephscope.deploy.devcluster import DevCluster

SPEC = """\
cluster:
  clients: [client1]
osd_ra: [128, 4096]
block_queue:
  scheduler: [none, mq-deadline]
benchmarks:
  radosbench:
    op_size: 4096
    concurrent_ops: 4
    time: 8
    write_only: true
"""


def osd_devices(cluster: DevCluster) -> dict[str, str]:
    """loopN -> the host its OSD runs on."""
    found = {Path(o.loop_device).name: cluster.host_of(f"osd.{o.osd_id}").name
             for o in cluster.load_state().osds if o.loop_device}
    if len(found) != 3:
        pytest.fail(f"the multi-host cluster has not 3 loop-device OSDs: {found}")
    return found


def read_on_host(cluster: DevCluster, host: str, *paths: str) -> list[str]:
    """`cat PATH…` on a host over SSH, as the runner reaches it: one line per file."""
    argv = ["ssh", "-F", str(cluster.ssh_config), "-o", "BatchMode=yes", host, "--", "cat",
            *paths]
    lines = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                           check=True).stdout.splitlines()
    assert len(lines) == len(paths), (host, paths, lines)
    return [line.strip() for line in lines]


def chosen(scheduler_line: str) -> str:
    return scheduler_line[scheduler_line.index("[") + 1:scheduler_line.index("]")]


def on_hosts(cluster: DevCluster, devices: dict[str, str]) -> dict[str, tuple[str, str]]:
    """loopN -> (read_ahead_kb, scheduler), each read on the OSD's own host (hosts at once)."""
    def read(dev: str, host: str) -> tuple[str, str]:
        ra, sched = read_on_host(cluster, host, f"/sys/block/{dev}/queue/read_ahead_kb",
                                 f"/sys/block/{dev}/queue/scheduler")
        return ra, chosen(sched)

    with ThreadPoolExecutor(max_workers=len(devices)) as pool:
        futures = {dev: pool.submit(read, dev, host) for dev, host in devices.items()}
    return {dev: f.result() for dev, f in futures.items()}


def other_devices(devices: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Every other block device of the machine with a queue: read-ahead and scheduler line."""
    others = {}
    for queue in sorted(Path("/sys/block").glob("*/queue")):
        if queue.parent.name in devices or not (queue / "read_ahead_kb").exists():
            continue
        sched = queue / "scheduler"
        others[queue.parent.name] = ((queue / "read_ahead_kb").read_text().strip(),
                                     sched.read_text().strip() if sched.exists() else "")
    return others


@pytest.fixture
def restored(multihost: DevCluster) -> Iterator[tuple[dict[str, str], dict[str, tuple[str, str]]]]:
    devices = osd_devices(multihost)
    before = on_hosts(multihost, devices)
    yield devices, before
    for dev, (ra, sched) in before.items():  # whatever happened: the machine gets them back
        Path(f"/sys/block/{dev}/queue/read_ahead_kb").write_text(ra)
        Path(f"/sys/block/{dev}/queue/scheduler").write_text(sched)


def test_osd_ra_and_scheduler_on_each_osds_own_device_over_ssh(
        multihost: DevCluster, restored, tmp_path: Path) -> None:
    devices, before = restored
    others_before = other_devices(devices)
    # each axis moves off the pre-sweep value at least once, so "restored" means something
    assert any(ra != "128" for ra, _ in before.values()) or \
        any(ra != "4096" for ra, _ in before.values())
    spec = tmp_path / "knobs.yaml"
    spec.write_text(SPEC)
    results = tmp_path / tmp_path.name
    started = time.monotonic()
    sweep = subprocess.Popen(
        [sys.executable, "-m", "cephscope.cli", "sweep", str(spec), "--devcluster",
         str(multihost.state_dir), "--results-dir", str(results), "--metrics-linger", "0",
         "--idle-baseline", "0", "--no-drop-caches"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen_mid_step: dict[str, dict[str, tuple[str, str]]] = {}
    try:
        deadline = time.monotonic() + 360
        steps: list[dict] = []
        while sweep.poll() is None and time.monotonic() < deadline:
            run = results / "run.json"
            if run.exists() and not steps:
                steps = json.loads(run.read_text())["steps"]
            for s in steps:
                if s["id"] in seen_mid_step:
                    continue
                ts_file = results / f"step-{s['id']}" / "timestamps.json"
                if not ts_file.exists() or "started" not in ts_file.read_text():
                    continue
                if "ended" not in json.loads(ts_file.read_text()):
                    # mid-step: read every OSD's device on its own host; kept only if the
                    # step was still running when the reads were done
                    values = on_hosts(multihost, devices)
                    if "ended" not in json.loads(ts_file.read_text()):
                        seen_mid_step[s["id"]] = values
            time.sleep(0.2)
        out, _ = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait(10)
    elapsed = time.monotonic() - started
    assert sweep.returncode == 0, out
    print(f"\nlive multihost knobs: 4-step sweep {elapsed:.1f}s")
    assert "restored the pre-sweep host settings (block_queue.scheduler, osd_ra)" in out, out

    steps = json.loads((results / "run.json").read_text())["steps"]
    assert {(s["knobs"]["osd_ra"], s["knobs"]["block_queue.scheduler"]) for s in steps} == {
        (128, "none"), (128, "mq-deadline"), (4096, "none"), (4096, "mq-deadline")}
    want_keys = {f"{kind} {host}:{dev}" for dev, host in devices.items()
                 for kind in ("osd_ra", "block_queue.scheduler")}
    # a step's read-back by the runner is checked below for every step; these are the test's
    # own reads while steps ran (an SSH round trip can take seconds on a loaded machine)
    print(f"live multihost knobs: {len(seen_mid_step)} of 4 steps read mid-step over SSH")
    assert len(seen_mid_step) >= 2, f"only {len(seen_mid_step)} of 4 steps caught mid-step"
    for s in steps:
        ra, sched = str(s["knobs"]["osd_ra"]), s["knobs"]["block_queue.scheduler"]
        result = json.loads((results / f"step-{s['id']}" / "result.json").read_text())
        assert result["status"] == "done"
        verified = result["timestamps"]["knobs"]
        # the runner read back exactly each OSD's device on its own host, and nothing else
        assert {k for k in verified if not k.startswith("ceph_config")} == want_keys, verified
        assert {v for k, v in verified.items() if k.startswith("osd_ra ")} == {ra}
        assert {v for k, v in verified.items() if k.startswith("block_queue.")} == {sched}
        if s["id"] in seen_mid_step:
            assert seen_mid_step[s["id"]] == dict.fromkeys(devices, (ra, sched)), (s, seen_mid_step)

    saved = json.loads((results / "pre_sweep_knobs.json").read_text())
    assert {(e["setting"], e["host"], e["path"]) for e in saved} == {
        (setting, host, f"/sys/block/{dev}/queue/{attr}") for dev, host in devices.items()
        for setting, attr in (("osd_ra", "read_ahead_kb"), ("block_queue.scheduler", "scheduler"))}
    # after the run: the pre-sweep values on every OSD's device, and no other device touched
    assert on_hosts(multihost, devices) == before
    # (devices attached or detached meanwhile by anything else on the machine do not count)
    others_after = other_devices(devices)
    common = others_before.keys() & others_after.keys()
    assert {d: others_after[d] for d in common} == {d: others_before[d] for d in common}
    summary = (results / "summary.csv").read_text().splitlines()
    assert "osd_ra" in summary[0] and "block_queue.scheduler" in summary[0]
