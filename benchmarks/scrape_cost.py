"""Scrape cost of cephscope-exporter against N fake OSDs replaying real captures.

    .venv/bin/python benchmarks/scrape_cost.py [--osds 1,12,24,60] [--scrapes 30]
        [--collectors perf,histogram]

For each N: a child process serves N fake OSD admin sockets (tests/unit/fake_asok.py,
replaying tests/fixtures/asok/<version>/load), and this process scrapes them the way the
HTTP handler does (discover, collect in parallel, render). Printed per N: median and p99
wall time per scrape, CPU seconds of this process per scrape, bytes per scrape, and the
raw floor: the same commands per daemon (``perf dump`` + ``perf histogram dump``) read in
parallel on raw sockets and parsed with json.loads, nothing else. Figures, not a test.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cephscope.exporter.asok import discover_daemons, request_raw
from cephscope.exporter.collectors import collector_classes, enabled_collectors
from cephscope.exporter.exposition import render
from cephscope.exporter.main import build_parser, settings_from_args
from cephscope.exporter.scrape import Scraper, tune_gc_for_scrapes

REPO_ROOT = Path(__file__).resolve().parents[1]
FAKE_SERVER = REPO_ROOT / "tests" / "unit" / "fake_asok.py"
FLOOR_COMMANDS = ("perf dump", "perf histogram dump")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def start_fakes(directory: Path, osds: int) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--dir", str(directory), "--osds", str(osds)],
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None
    if child.stdout.readline().strip() != b"ready":
        child.kill()
        raise SystemExit("fake admin sockets did not start")
    return child


def measure(directory: Path, collectors: list[str], scrapes: int, parallel: int) -> dict:
    """Exporter scrapes and floor rounds alternately, so load from elsewhere on the machine
    hits both alike."""
    names = [cls.name for cls in collector_classes()]
    flags = [f"--collector.{n}" if n in collectors else f"--no-collector.{n}" for n in names]
    args = build_parser().parse_args(
        ["--ceph.asok-dir", str(directory), "--scrape.max-parallel", str(parallel), *flags]
    )
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    daemons = discover_daemons(directory, ["osd"])
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=parallel)

    def floor_one(path: str) -> None:
        for prefix in FLOOR_COMMANDS:
            payload = request_raw(path, {"prefix": prefix, "format": "json"}, timeout=10).payload
            json.loads(payload)

    def floor_round() -> None:
        list(pool.map(floor_one, [d.asok_path for d in daemons]))

    out: dict[str, list[float]] = {k: [] for k in ("wall", "cpu", "bytes", "fwall", "fcpu")}
    try:
        body = render(scraper.scrape(time.monotonic() + 30))  # warm-up: schemas cached
        floor_round()
        for _ in range(scrapes):
            cpu0, wall0 = time.process_time(), time.perf_counter()
            body = render(scraper.scrape(time.monotonic() + 30))
            out["wall"].append(time.perf_counter() - wall0)
            out["cpu"].append(time.process_time() - cpu0)
            out["bytes"].append(len(body))
            cpu0, wall0 = time.process_time(), time.perf_counter()
            floor_round()
            out["fwall"].append(time.perf_counter() - wall0)
            out["fcpu"].append(time.process_time() - cpu0)
        if body.count(b"cephscope_daemon_up{") != len(daemons) or b'"} 0\n' in body.split(
            b"# TYPE cephscope_daemon_up gauge\n"
        )[-1].split(b"# HELP")[0]:
            print("warning: some daemon was down during the benchmark", file=sys.stderr)
    finally:
        scraper.close()
        pool.shutdown()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--osds", default="1,12,24,60")
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--collectors", default="perf,histogram")
    parser.add_argument("--parallel", type=int, default=16, help="--scrape.max-parallel")
    args = parser.parse_args()
    collectors = [c.strip() for c in args.collectors.split(",") if c.strip()]
    tune_gc_for_scrapes()  # as cephscope-exporter's main() does
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"cephscope-exporter scrape cost: collectors {','.join(collectors)}, "
          f"{args.scrapes} scrapes per N, {os.cpu_count()} CPUs (load average {load}), "
          f"max-parallel {args.parallel}")
    header = (f"{'OSDs':>5} {'median ms':>10} {'p99 ms':>8} {'CPU s/scrape':>13} "
              f"{'KiB/scrape':>11} | {'floor med ms':>12} {'floor p99':>9} {'floor CPU':>9} "
              f"{'ratio':>6}")
    print(header)
    print("-" * len(header))
    for osds in [int(n) for n in args.osds.split(",")]:
        with tempfile.TemporaryDirectory(prefix="cephscope-bench-") as tmp:
            directory = Path(tmp)
            child = start_fakes(directory, osds)
            try:
                m = measure(directory, collectors, args.scrapes, args.parallel)
            finally:
                child.terminate()
                child.wait(timeout=30)
        med = statistics.median(m["wall"]) * 1000
        floor_med = statistics.median(m["fwall"]) * 1000
        print(
            f"{osds:>5} {med:>10.1f} {percentile(m['wall'], 0.99) * 1000:>8.1f} "
            f"{statistics.median(m['cpu']):>13.4f} {statistics.median(m['bytes']) / 1024:>11.0f} | "
            f"{floor_med:>12.1f} {percentile(m['fwall'], 0.99) * 1000:>9.1f} "
            f"{statistics.median(m['fcpu']):>9.4f} {med / floor_med:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
