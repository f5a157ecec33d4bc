"""Two runs on the real dev cluster that differ in one sysctl changed outside the spec:
`cephscope compare` names it first (md and json). vm.swappiness is global to the machine: it
is changed only for run B's start and put back right after."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

SWAPPINESS = Path("/proc/sys/vm/swappiness")
SPEC = """\
benchmarks:
  radosbench:
    op_size: 4096
    time: 2
    concurrent_ops: 4
    write_only: true
"""


def cephscope(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cephscope.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_compare_names_the_sysctl_that_differs_first(devcluster, tmp_path):
    spec = tmp_path / "env.yaml"
    spec.write_text(SPEC)
    common = ["--devcluster", str(devcluster.state_dir), "--metrics-linger", "0"]
    first = cephscope("sweep", str(spec), "--results-dir", str(tmp_path / "a"), *common)
    assert first.returncode == 0, first.stdout + first.stderr
    before = SWAPPINESS.read_text().strip()
    changed = "1" if before != "1" else "2"
    SWAPPINESS.write_text(changed)
    try:
        second = subprocess.Popen([sys.executable, "-m", "cephscope.cli", "sweep", str(spec),
                                   "--results-dir", str(tmp_path / "b"), *common],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        env_b = tmp_path / "b" / "environment.json"
        deadline = time.monotonic() + 120
        while not env_b.exists() and second.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        SWAPPINESS.write_text(before)  # captured (or failed): the machine gets it back now
    out, _ = second.communicate(timeout=180)
    assert second.returncode == 0, out

    env = json.loads(env_b.read_text())
    (host,) = [h for h in env["hosts"] if env["hosts"][h]["sysctl"]]
    facts = env["hosts"][host]
    assert facts["kernel"] and facts["cpu_count"] >= 1 and facts["memory_kib"] > 0
    assert set(facts["block_queues"]) >= {Path(o.loop_device).name
                                          for o in devcluster.load_state().osds if o.loop_device}
    assert "lo" in facts["nics"]
    cluster = env["cluster"]
    assert "osd" in cluster["versions"] and isinstance(cluster["osd tree"], dict)
    assert set(cluster["osd config diff"]) == {f"osd.{i}" for i in devcluster.osd_ids()}

    md = cephscope("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert md.returncode == 0, md.stdout + md.stderr
    first_change = md.stdout.splitlines()[6]
    assert first_change == f"| `hosts/{host}/sysctl/vm.swappiness` | {before} | {changed} |", \
        md.stdout
    as_json = cephscope("compare", "--format", "json", str(tmp_path / "a"), str(tmp_path / "b"))
    assert json.loads(as_json.stdout)["environment"][0] == {
        "path": f"hosts/{host}/sysctl/vm.swappiness", "a": before, "b": changed}
