"""The EC study's shape on a 6-OSD dev cluster: fio on RBD images whose data lives in an
erasure-coded pool (k=3, m=3, failure domain osd, stripe unit 4 KiB) with allow_ec_overwrites;
image metadata in a replicated pool (`rbd create --data-pool`).

A cluster of its own (6 OSDs, `devcluster6`), started for this module only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cephscope.deploy.devcluster import DevCluster

SPEC = """\
pool_profiles:
  meta: {replication: 1, pg_size: 8}
  ec33: {replication: erasure, erasure_profile: ec33, pg_size: 8}
erasure_profiles:
  ec33: {erasure_k: 3, erasure_m: 3, failure_domain: osd, stripe_unit: 4096}
benchmarks:
  librbdfio:
    mode: randwrite
    op_size: 65536
    iodepth: 4
    vol_size: 64
    vol_object_size: 1048576
    time: 8
    pool_profile: meta
    data_pool_profile: ec33
"""


def shard_writes(cluster: DevCluster) -> dict[int, int]:
    """Writes completed by each OSD's own loop device (/proc/diskstats)."""
    device_of = {Path(o.loop_device).name: o.osd_id for o in cluster.load_state().osds
                 if o.loop_device}
    assert len(device_of) == 6, "the 6-OSD cluster runs on loop devices"
    counts = {}
    for line in Path("/proc/diskstats").read_text().splitlines():
        fields = line.split()
        if fields[2] in device_of:
            counts[device_of[fields[2]]] = int(fields[7])
    return counts


def test_librbdfio_on_an_ec_3_3_data_pool(devcluster6, tmp_path):
    spec = tmp_path / "ec.yaml"
    spec.write_text(SPEC)
    results = tmp_path / tmp_path.name  # the dir name is the run id: unique per session
    before = shard_writes(devcluster6)
    sweep = subprocess.Popen([sys.executable, "-m", "cephscope.cli", "sweep", str(spec),
                              "--devcluster", str(devcluster6.state_dir), "--results-dir",
                              str(results), "--metrics-linger", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    info: dict[str, Any] = {}
    deadline = time.monotonic() + 240
    while sweep.poll() is None and not info and time.monotonic() < deadline:
        ls = subprocess.run(devcluster6.rbd_argv("ls", "--format", "json", "cephscope-meta"),
                            capture_output=True, text=True, check=False)
        images = json.loads(ls.stdout) if ls.returncode == 0 and ls.stdout.strip() else []
        if images:
            out = subprocess.run(devcluster6.rbd_argv("info", "--format", "json",
                                                      f"cephscope-meta/{images[0]}"),
                                 capture_output=True, text=True, check=False)
            if out.returncode == 0:
                info = json.loads(out.stdout)
        time.sleep(0.5)
    output, _ = sweep.communicate(timeout=300)
    assert sweep.returncode == 0, output
    # the image's data lives in the EC pool
    assert info.get("data_pool") == "cephscope-ec33", info
    after = shard_writes(devcluster6)
    # k+m = 6 shards on 6 OSDs: every OSD wrote
    assert all(after[i] > before[i] for i in before), (before, after)

    (step,) = json.loads((results / "run.json").read_text())["steps"]
    result = json.loads((results / f"step-{step['id']}" / "result.json").read_text())
    pools = result["timestamps"]["pools"]
    ec = pools["cephscope-ec33"]
    assert ec["type"] == 3 and "ec_overwrites" in ec["flags_names"]
    settings = ec["erasure_code_profile_settings"]
    assert (settings["k"], settings["m"], settings["crush-failure-domain"],
            settings["stripe_unit"]) == ("3", "3", "osd", "4096")
    assert pools["cephscope-meta"]["type"] == 1
    (write,) = result["results"]
    assert write["iops"] > 0
    # pools the run created are gone again
    left = subprocess.run(devcluster6.ceph_argv("osd", "pool", "ls"), capture_output=True,
                          text=True, check=True).stdout.split()
    assert "cephscope-ec33" not in left and "cephscope-meta" not in left
    assert Path(results / "summary.csv").exists()
