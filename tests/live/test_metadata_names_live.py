"""Issue 23 finding 1, end to end: an OSD that reports a hostile host name.

A containerised OSD reports its `NODE_NAME` as its hostname in `osd metadata`. One OSD of the
shared dev cluster is restarted with CONTAINER_NAME and NODE_NAME set so that it reports
`-oProxyCommand=touch <marker>`; a real `cephscope sweep` against the cluster must then exit
non-zero naming the OSD and the name, never run the injected command (the default cache drop
would have: `ssh … NAME -- sync`), and change nothing on the cluster. The OSD is restarted
without that environment afterwards, whatever happened, so later tests see the usual cluster.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

SPEC = """\
cluster:
  use_existing: true
ceph_config:
  osd_max_backfills: [3]
osd_ra: [256]
benchmarks:
  radosbench:
    op_size: [4096]
    time: 2
    write_only: true
"""


def metadata_hostname(devcluster: Any, osd_id: int) -> str:
    return str(devcluster.ceph_json("osd", "metadata", str(osd_id))["hostname"])


def wait_hostname(devcluster: Any, osd_id: int, want: str, timeout: float = 60) -> str:
    """The metadata comes with the OSD's boot message: poll until the mon has the new one."""
    deadline = time.monotonic() + timeout
    while True:
        got = metadata_hostname(devcluster, osd_id)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def cluster_state(devcluster: Any) -> dict[str, Any]:
    return {
        "config": devcluster.ceph_json("config", "dump"),
        "pools": sorted(p["pool_name"] for p in devcluster.ceph_json("osd", "pool", "ls",
                                                                     "detail")),
        "flags": devcluster.ceph_json("osd", "dump")["flags"],
        "pids": {i: devcluster.osd_pid(i) for i in devcluster.osd_ids()},
    }


def test_hostile_osd_hostname_is_refused_before_anything_runs(devcluster, tmp_path):
    osd_id = devcluster.osd_ids()[-1]
    normal = metadata_hostname(devcluster, osd_id)
    marker = tmp_path / "pwned"
    hostile = f"-oProxyCommand=touch {marker}"
    spec = tmp_path / "hostile.yaml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    try:
        devcluster.restart_osds([osd_id], env={"CONTAINER_NAME": "ceph-osd-hostile",
                                               "NODE_NAME": hostile})
        # Ceph takes the hostname from NODE_NAME when it believes it runs in a container
        assert wait_hostname(devcluster, osd_id, hostile) == hostile
        before = cluster_state(devcluster)
        proc = subprocess.run(
            [sys.executable, "-m", "cephscope.cli", "sweep", str(spec), "--conf",
             str(devcluster.conf_path), "--results-dir", str(results), "--asok-dir",
             str(devcluster.asok_dir), "--metrics-linger", "0"],
            capture_output=True, text=True, timeout=180, check=False)
        assert proc.returncode != 0, proc.stdout + proc.stderr
        assert f"osd.{osd_id}: osd metadata reports hostname {hostile!r}" in proc.stderr, \
            proc.stdout + proc.stderr
        assert not marker.exists(), "the injected ProxyCommand ran on the runner host"
        assert not results.exists(), "the sweep created its run dir before refusing"
        assert cluster_state(devcluster) == before
    finally:
        devcluster.restart_osds([osd_id])  # without the environment: its own name again
        assert wait_hostname(devcluster, osd_id, normal) == normal
        devcluster.wait_pgs_active_clean()
    assert not marker.exists()
