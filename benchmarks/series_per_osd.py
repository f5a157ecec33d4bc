"""Series per OSD of live cephscope-exporter expositions, by collector and metric family.

    .venv/bin/python benchmarks/series_per_osd.py --url http://127.0.0.1:9967/metrics \
        [--url full=http://127.0.0.1:9968/metrics] [--families] \
        [--rados-bench CEPH_CONF [--pool cephscope-bench] [--warmup 10]]

Each `--url` (optionally `NAME=URL`) is scraped once and becomes a column: the mean series
per OSD of each collector (and with `--families`, of each family), the per-OSD total with
its min and max over the OSDs, the series without `ceph_daemon` (per host, and divided by the
OSDs), and other daemons' series (mon, mds: not per OSD). With `--rados-bench`, a 4 KiB
rados bench write (16 in flight) runs against that cluster and the scrapes are taken
`--warmup` seconds into it, so the load-dependent series (priority items, ignored phase
durations, flag points) are there as they would be under load. The last line says whether
the first column holds the default budget (`cephscope.exporter.cardinality`). Figures, not a
test.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.request

from cephscope.exporter.cardinality import BUDGET_SERIES_PER_OSD, SeriesCount, count_series


def fetch(url: str, timeout: float = 30.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def parse_url(text: str) -> tuple[str, str]:
    name, sep, url = text.partition("=")
    if sep and not name.startswith("http"):
        return name, url
    return text, text


def table(counts: dict[str, SeriesCount], families: bool) -> list[str]:
    names = list(counts)
    width = max(12, *(len(n) for n in names))
    keys = sorted({k for c in counts.values() for k in c.families()})
    collectors = sorted({c for c, _f in keys})
    head = f"{'collector':<10} {'family':<58}" + "".join(f" {n[:width]:>{width}}" for n in names)
    lines = [head, "-" * len(head)]
    for collector in collectors:
        lines.append(f"{collector:<10} {'(all families)':<58}" + "".join(
            f" {c.mean_per_osd(collector=collector):>{width}.1f}" for c in counts.values()))
        if families:
            for key in (k for k in keys if k[0] == collector):
                lines.append(f"{'':<10} {key[1][:58]:<58}" + "".join(
                    f" {c.mean_per_osd(key=key):>{width}.1f}" for c in counts.values()))
    lines.append("-" * len(head))
    lines.append(f"{'per OSD':<10} {'total (mean)':<58}" + "".join(
        f" {c.mean_per_osd():>{width}.1f}" for c in counts.values()))
    lines.append(f"{'per OSD':<10} {'min .. max over the OSDs':<58}" + "".join(
        f" {f'{min(c.osd_totals().values(), default=0)} .. {c.max_per_osd()}':>{width}}"
        for c in counts.values()))
    lines.append(f"{'per host':<10} {'series without ceph_daemon':<58}" + "".join(
        f" {sum(c.per_host.values()):>{width}}" for c in counts.values()))
    lines.append(f"{'per host':<10} {'... divided by the OSDs':<58}" + "".join(
        f" {sum(c.per_host.values()) / max(1, len(c.per_osd)):>{width}.1f}"
        for c in counts.values()))
    others = sorted({d for c in counts.values() for d in c.other_daemons})
    for daemon in others:
        lines.append(f"{'daemon':<10} {daemon:<58}" + "".join(
            f" {c.other_daemons.get(daemon, 0):>{width}}" for c in counts.values()))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", action="append", required=True, metavar="[NAME=]URL",
                        help="a /metrics URL (repeat for columns side by side)")
    parser.add_argument("--families", action="store_true", help="one line per metric family")
    parser.add_argument("--rados-bench", metavar="CEPH_CONF",
                        help="run a 4 KiB rados bench write on this cluster while scraping")
    parser.add_argument("--pool", default="cephscope-bench", help="rados bench pool")
    parser.add_argument("--warmup", type=float, default=10.0, metavar="SECONDS",
                        help="seconds of load before the scrapes")
    args = parser.parse_args(argv)
    urls = [parse_url(u) for u in args.url]
    bench = None
    if args.rados_bench:
        seconds = int(args.warmup + 10 + 5 * len(urls))
        bench = subprocess.Popen(
            ["rados", "-c", args.rados_bench, "-p", args.pool, "bench", str(seconds), "write",
             "-b", "4096", "-t", "16", "--no-cleanup"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(args.warmup)
        if bench.poll() is not None:
            err = bench.stderr.read().decode(errors="replace") if bench.stderr else ""
            print(f"rados bench ended early ({bench.returncode}): {err.strip()}", file=sys.stderr)
            return 1
    try:
        counts = {name: count_series(fetch(url)) for name, url in urls}
    finally:
        if bench is not None:
            bench.terminate()
            bench.wait(timeout=30)
    first_name, first = next(iter(counts.items()))
    print(f"series per OSD, {len(first.per_osd)} OSDs ({', '.join(first.osds)})"
          + (" under a 4 KiB rados bench write, 16 in flight" if bench else ""))
    print("\n".join(table(counts, args.families)))
    verdict = "holds" if first.max_per_osd() <= BUDGET_SERIES_PER_OSD else "EXCEEDS"
    print(f"{first_name}: at most {first.max_per_osd()} series per OSD, {verdict} the default "
          f"budget of {BUDGET_SERIES_PER_OSD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
