"""What an MDS and a RADOS gateway cost a dev cluster: seconds to HEALTH_OK and idle CPU, with
and without `mds=True, rgw=True`.

    .venv/bin/python benchmarks/devcluster_services_cost.py [--rounds 2] [--idle-seconds 60]
        [--settle 10] [--port-base 17000] [--seed 1]

Each round makes two 3-OSD dev clusters one after the other, in a seeded random order: one
plain, one with the MDS and the gateway. For each: the seconds `up()` takes to HEALTH_OK
(pools, filesystem, gateway user included), then, after `--settle` seconds, the CPU its
daemons use while idle for `--idle-seconds` (utime + stime of each daemon's process from
/proc/<pid>/stat, all threads), as % of one core; then it is purged. Printed: every
measurement, and the mean paired difference (services minus plain) of the up time and the
idle CPU. The machine is shared and noisy: compare within one run.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from cephscope.deploy.devcluster import DevCluster

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), in seconds; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def measure(services: bool, port_base: int, settle: float, idle: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="services-cost-") as tmp:
        cluster = DevCluster(Path(tmp) / "c", port_base=port_base, num_osds=3,
                             mds=services, rgw=services, log=lambda msg: None)
        try:
            up_seconds = cluster.up()
            time.sleep(settle)
            pids = cluster.running_daemons()
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            started = time.monotonic()
            time.sleep(idle)
            elapsed = time.monotonic() - started
            used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        finally:
            if cluster.state_file.exists():
                cluster.purge()
    result = {"up_seconds": up_seconds, "idle_cpu_pct": 100 * sum(used.values()) / elapsed}
    for name in ("mds.a", "client.rgw.a"):
        if name in used:
            result[f"{name}_cpu_pct"] = 100 * used[name] / elapsed
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--settle", type=float, default=10)
    parser.add_argument("--port-base", type=int, default=17000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows: list[tuple[int, dict[bool, dict[str, float]]]] = []
    for round_no in range(1, args.rounds + 1):
        order = [False, True]
        rng.shuffle(order)
        results: dict[bool, dict[str, float]] = {}
        for services in order:
            results[services] = measure(services, args.port_base, args.settle, args.idle_seconds)
            figures = "  ".join(f"{k} {v:.2f}" for k, v in results[services].items())
            print(f"round {round_no} {'mds+rgw' if services else 'plain  '}: {figures}", flush=True)
        rows.append((round_no, results))
    for key in ("up_seconds", "idle_cpu_pct"):
        diffs = [r[True][key] - r[False][key] for _, r in rows]
        spread = f" (sd {statistics.stdev(diffs):.2f})" if len(diffs) > 1 else ""
        print(f"mds+rgw minus plain, {key}: mean {statistics.mean(diffs):+.2f}{spread} "
              f"over {len(diffs)} rounds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
