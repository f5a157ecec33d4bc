"""What cephscope-exporter costs the cluster it watches: 4 KiB write IOPS and p99 latency with
the exporter off, on, and on with a longer `--collector.opqueue.min-interval`.

    .venv/bin/python benchmarks/cluster_cost.py [--rounds 5] [--seconds 20]
        [--opqueue-min-interval 60] [--devcluster STATE_DIR] [--seed 1] [--cpu-scrapes 100]

Starts a 3-OSD dev cluster on free ports (or uses `--devcluster`) and a pool of its own. Each
round runs the three conditions in a seeded random order, back to back:
- off: no exporter;
- on: cephscope-exporter with every collector, scraped every 5 s (as the stack's Prometheus
  does) for the whole measurement;
- on+mi: the same with `--collector.opqueue.min-interval` (`dump_op_pq_state` takes every
  shard's lock; by default it runs every scrape).
The load is fio's `rados` engine: 4 KiB object writes, iodepth 16, through librados like
rados bench (rados bench keeps no latency histogram, fio reports the p99). Printed: each
round's IOPS and p99 per condition, and per condition the mean paired difference against
`off` of the same round with its standard deviation and a 95 % interval: the machine is
shared and noisy, and the interval says whether the effect is above the noise.

The paired IOPS difference is only as fine as the run-to-run noise (±10-15 % on 2 cores), so
the CPU the exporter takes is also counted directly, which noise barely touches: on the idle
cluster, `--cpu-scrapes` back-to-back scrapes with every collector reading afresh (threads
and opqueue min-interval 0), the OSDs' CPU seconds (/proc/<pid>/stat) against an idle window
as long, and the exporter's own; then the CPU the OSDs and fio use per second of the `off`
runs. Their ratio, at one scrape per 5 s, is the share of the cluster's CPU the exporter
takes: where the load is CPU-bound (it is here), the IOPS it can cost.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.procs import exporter_binary, port_is_free, terminate

POOL = "cephscope-cost"
SCRAPE_INTERVAL_SECONDS = 5.0
COLLECTORS = ("perf", "labeled", "histogram", "opqueue", "ops", "threads", "topology")
# two-sided 95 % Student t quantiles by degrees of freedom
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
       10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 30: 2.04}


def t95(df: int) -> float:
    return T95[max(k for k in T95 if k <= df)] if df >= 1 else float("nan")


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of these processes (proc(5)), in seconds."""
    ticks = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def osd_pids(cluster: DevCluster) -> list[int]:
    return [pid for name, pid in cluster.running_daemons().items() if name.startswith("osd.")]


def scrape_cpu(cluster: DevCluster, log_dir: Path, scrapes: int) -> tuple[float, float, float]:
    """(OSD CPU s, exporter CPU s, wall s) per scrape: ``scrapes`` back-to-back scrapes with
    every collector reading afresh, the OSDs' CPU minus an idle window as long."""
    osds = osd_pids(cluster)
    fresh = ["--collector.threads.min-interval=0", "--collector.opqueue.min-interval=0"]
    with exporter(cluster, log_dir, fresh) as (url, exporter_pid):
        for _ in range(3):  # schemas cached, topology read
            with urllib.request.urlopen(url, timeout=30) as reply:
                reply.read()
        osd0, exp0, wall0 = cpu_seconds(osds), cpu_seconds([exporter_pid]), time.monotonic()
        for _ in range(scrapes):
            with urllib.request.urlopen(url, timeout=30) as reply:
                reply.read()
        osd1, exp1, wall = cpu_seconds(osds), cpu_seconds([exporter_pid]), time.monotonic() - wall0
    idle0 = cpu_seconds(osds)
    time.sleep(wall)
    idle = cpu_seconds(osds) - idle0
    return (osd1 - osd0 - idle) / scrapes, (exp1 - exp0) / scrapes, wall / scrapes


def free_port() -> int:
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(33000, 39000)
        if port_is_free(port):
            return port
    raise SystemExit("no free port")


class Scraper:
    """GETs /metrics every 5 s in a thread; keeps each scrape's duration."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.durations: list[float] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as reply:
                    reply.read()
                self.durations.append(time.monotonic() - started)
            except OSError:
                self.errors += 1
            self._stop.wait(max(0.0, SCRAPE_INTERVAL_SECONDS - (time.monotonic() - started)))

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)


@contextmanager
def exporter(cluster: DevCluster, log_dir: Path, extra: list[str]) -> Iterator[tuple[str, int]]:
    port = free_port()
    argv = [exporter_binary(), f"--web.listen-address=127.0.0.1:{port}",
            f"--ceph.asok-dir={cluster.asok_dir}", f"--ceph.conf={cluster.conf_path}",
            *(f"--collector.{name}" for name in COLLECTORS), *extra]
    with (log_dir / "exporter.log").open("ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as reply:
                    reply.read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"exporter did not start; see {log_dir / 'exporter.log'}") from None
                time.sleep(0.2)
        yield url, proc.pid
    finally:
        terminate(proc.pid, 10)
        proc.wait(10)


def write_load(cluster: DevCluster, seconds: int, name: str) -> tuple[float, float, float]:
    """(IOPS, p99 completion latency in ms, CPU s per s of the OSDs and fio) of 4 KiB rados
    object writes."""
    osds = osd_pids(cluster)
    osd0, fio0, wall0 = cpu_seconds(osds), children_cpu_seconds(), time.monotonic()
    argv = ["fio", f"--name={name}", "--ioengine=rados", "--clientname=admin", f"--pool={POOL}",
            f"--conf={cluster.conf_path}", "--rw=write", "--bs=4k", "--size=256m",
            "--iodepth=16", "--time_based", f"--runtime={seconds}", "--ramp_time=2",
            "--output-format=json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120,
                          check=False, env=cluster.env())
    if done.returncode != 0:
        raise SystemExit(f"fio failed ({done.returncode}): {done.stderr[-500:]}")
    cpu = (cpu_seconds(osds) - osd0 + children_cpu_seconds() - fio0) / (time.monotonic() - wall0)
    job = json.loads(done.stdout[done.stdout.index("{"):])["jobs"][0]["write"]
    return float(job["iops"]), float(job["clat_ns"]["percentile"]["99.000000"]) / 1e6, cpu


def summarize(name: str, diffs: list[float]) -> str:
    mean = statistics.fmean(diffs)
    sd = statistics.stdev(diffs) if len(diffs) > 1 else float("nan")
    half = t95(len(diffs) - 1) * sd / len(diffs) ** 0.5
    return (f"{name:<26} mean {mean:+6.2f} %  sd {sd:5.2f}  95% CI [{mean - half:+6.2f}, "
            f"{mean + half:+6.2f}] %  (n={len(diffs)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="off/on/on+mi rounds (>= 5)")
    parser.add_argument("--seconds", type=int, default=20, help="measured seconds per run")
    parser.add_argument("--opqueue-min-interval", type=float, default=60.0)
    parser.add_argument("--devcluster", type=Path, help="use this running dev cluster")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpu-scrapes", type=int, default=100,
                        help="back-to-back scrapes for the CPU count (0: skip it)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cluster-cost-"))
    own = args.devcluster is None
    cluster = DevCluster(args.devcluster or work / "cluster",
                         port_base=random.Random().randrange(20000, 32000, 100), num_osds=3)
    if own:
        print(f"starting a 3-OSD dev cluster in {work / 'cluster'}", flush=True)
        cluster.up()
    conditions = {
        "off": None,
        "on": [],
        "on+mi": [f"--collector.opqueue.min-interval={args.opqueue_min_interval:g}"],
    }
    figures: dict[str, list[tuple[float, float, float]]] = {c: [] for c in conditions}
    scrape_ms: dict[str, list[float]] = {c: [] for c in conditions if c != "off"}
    rng = random.Random(args.seed)
    try:
        cluster.ceph("osd", "pool", "create", POOL, "32")
        cluster.ceph("osd", "pool", "application", "enable", POOL, "rados")
        cluster.wait_pgs_active_clean()
        write_load(cluster, 5, "warmup")
        per_scrape = scrape_cpu(cluster, work, args.cpu_scrapes) if args.cpu_scrapes else None
        for r in range(1, args.rounds + 1):
            order = list(conditions)
            rng.shuffle(order)
            line = []
            for cond in order:
                extra = conditions[cond]
                if extra is None:
                    result = write_load(cluster, args.seconds, f"r{r}-{cond}")
                else:
                    with exporter(cluster, work, extra) as (url, _), Scraper(url) as scraper:
                        time.sleep(1)  # a first scrape before the load starts
                        result = write_load(cluster, args.seconds, f"r{r}-{cond}")
                    scrape_ms[cond] += [d * 1000 for d in scraper.durations]
                figures[cond].append(result)
                line.append(f"{cond} {result[0]:7.0f} IOPS p99 {result[1]:6.2f} ms")
            print(f"round {r} ({'/'.join(order)}): " + "; ".join(line), flush=True)
    finally:
        with contextlib.suppress(Exception):  # a cluster that never came up has no pool
            cluster.ceph("osd", "pool", "rm", POOL, POOL, "--yes-i-really-really-mean-it")
        if own:
            cluster.purge()
    print()
    for cond in ("on", "on+mi"):
        iops = [100 * (on[0] - off[0]) / off[0] for on, off in zip(figures[cond], figures["off"],
                                                                    strict=True)]
        p99 = [100 * (on[1] - off[1]) / off[1] for on, off in zip(figures[cond], figures["off"],
                                                                   strict=True)]
        print(summarize(f"IOPS {cond} vs off", iops))
        print(summarize(f"p99 {cond} vs off", p99))
        ms = sorted(scrape_ms[cond])
        print(f"{'scrapes ' + cond:<26} {len(ms)} scrapes, median {statistics.median(ms):.0f} ms,"
              f" max {ms[-1]:.0f} ms")
    if per_scrape is not None:
        osd_cpu, exporter_cpu, wall = per_scrape
        load_cpu = statistics.fmean(f[2] for f in figures["off"])
        share = (max(osd_cpu, 0.0) + exporter_cpu) / SCRAPE_INTERVAL_SECONDS / load_cpu
        print(f"{'CPU per scrape':<26} OSDs {osd_cpu * 1000:.1f} ms, exporter "
              f"{exporter_cpu * 1000:.1f} ms ({args.cpu_scrapes} back-to-back scrapes, "
              f"{wall * 1000:.0f} ms each, every collector reading afresh; OSDs minus an idle "
              "window as long)")
        print(f"{'CPU share at 5 s':<26} {100 * share:.2f} % of the {load_cpu:.2f} CPU s/s the "
              "OSDs and fio use under the write load (the IOPS it can cost when CPU-bound)")
    off = [f[0] for f in figures["off"]]
    print(f"{'noise: off runs':<26} IOPS mean {statistics.fmean(off):.0f}, sd "
          f"{statistics.stdev(off):.0f} ({100 * statistics.stdev(off) / statistics.fmean(off):.1f}"
          f" % of the mean)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
