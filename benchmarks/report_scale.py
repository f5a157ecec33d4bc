"""Time and size of `cephscope report` for a 10-step run at 10, 100 and 1,000 OSDs.

    .venv/bin/python benchmarks/report_scale.py [--osds 10,100,1000] [--osds-per-host 20]
        [--steps 10] [--step-seconds 20] [--port 19010] [--work DIR] [--keep]

No OSD runs: for each size, a Prometheus is made to hold what the report reads of that many
OSDs, for a run that just ended. The series are the ones the report queries
(runner/system_metrics.py), in the lean default's shape: per OSD its op counters and latency
averages, its thread groups' CPU, its latency histogram (r and w, 100 us .. 26 s) and its
topology info series; per host (`--osds-per-host` OSDs each) node_exporter's CPU (16 cores x
8 modes), one disk per OSD plus a system disk, and three NICs. Their rates and shapes come from
a real dev-cluster run (tests/fixtures/runs/iterations: per-op latency distribution, thread
group CPU split, CPU modes, per-mode IOPS), every OSD a little different. They are written
as OpenMetrics with a sample every 5 s (the stacks' interval) over an idle baseline and the
steps' windows, turned into TSDB blocks by `promtool tsdb create-blocks-from openmetrics`, and
served by Debian's Prometheus from that data dir (scrape interval 5 s, read by the report
from the targets API). The run dir is the fixture run's first `--steps` steps (rados bench
write + seq each) with their timestamps moved onto those windows and no prometheus.json, so
the report pulls every step and the idle baseline from Prometheus, as after a sweep.

Printed per size: series and samples written, then `cephscope report RUN --prometheus-url`
(pulls and writes the report) and again without Prometheus (from the stored pulls): wall
seconds, CPU seconds (user + system: what the machine's other load does not inflate) and peak
RSS of each; the size and lines of report.md, and of the report.md every OSD has its own rows
in (`--top-osds` = the OSDs, as before the per-OSD tables were bounded); the size of
report.html, of the plots and of the stored pulls (prometheus.json of the steps and of the
idle baseline).
Figures, not a test; it needs prometheus and promtool (Debian package prometheus).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cephscope.deploy.procs import port_is_free, terminate
from cephscope.figures import EXPORTER_JOB, NODE_JOB, job_matcher

REPO = Path(__file__).resolve().parents[1]
FIXTURE_RUN = REPO / "tests" / "fixtures" / "runs" / "iterations"
SCRAPE_SECONDS = 5.0
IDLE_SECONDS = 30.0
GAP_SECONDS = 5.0
CPUS_PER_HOST = 16
CPU_MODES = ("user", "system", "iowait", "idle", "irq", "softirq", "steal", "nice")
THREAD_GROUPS = ("tp_osd_tp", "msgr-worker", "bstore_kv_sync", "bstore_kv_final", "bstore_aio",
                 "other")
# The latency buckets of the default exposition: 100 us x 2^k up to 26.2144 s.
LATENCY_LE = tuple(0.0001 * 2**k for k in range(19))
EXPORTER = job_matcher(EXPORTER_JOB)
NODE = job_matcher(NODE_JOB)


@dataclass(frozen=True)
class Segment:
    """A stretch of the timeline: the idle baseline, a gap, or one mode of one step."""

    start: float
    end: float
    mode: str  # "idle", "write" or "seq"
    iops: float  # the fixture step's client IOPS in this mode (0 when idle)


@dataclass(frozen=True)
class Shapes:
    """What the fixture run measured, as shapes and ratios the generator scales."""

    latency_cdf: dict[str, list[float]]  # op -> fraction of ops <= each of LATENCY_LE
    latency_avg: dict[str, float]  # op -> seconds
    thread_share: dict[str, float]  # thread group -> CPU s/s per 1,000 op/s
    cpu_modes: dict[str, float]  # mode -> share of a CPU under load


def fixture_shapes() -> Shapes:
    """Latency distribution, thread CPU and CPU modes of the fixture run's busiest step."""
    step = max(FIXTURE_RUN.glob("step-*/prometheus.json"), key=lambda p: p.stat().st_size)
    queries = json.loads(step.read_text())["queries"]
    increases: dict[str, dict[float, float]] = {}
    for series in queries["osd_op_latency_bucket"]["result"]:
        le = series["metric"]["le"]
        le_value = math.inf if le == "+Inf" else float(le)
        values = series["values"]
        op = increases.setdefault(series["metric"]["op"], {})
        op[le_value] = op.get(le_value, 0.0) + float(values[-1][1]) - float(values[0][1])
    cdf, avg = {}, {}
    for op in ("r", "w"):
        total = increases[op][math.inf]
        cdf[op] = [min(1.0, increases[op].get(le, total) / total) for le in LATENCY_LE]
        # mean of each bucket's midpoint, weighted by its ops
        lower, mean = 0.0, 0.0
        for le, fraction, before in zip(LATENCY_LE, cdf[op], [0.0, *cdf[op][:-1]], strict=True):
            mean += (fraction - before) * (lower + le) / 2
            lower = le
        avg[op] = mean
    ops = sum(float(s["values"][len(s["values"]) // 2][1])
              for s in queries["osd_ops_per_second"]["result"])
    share: dict[str, float] = dict.fromkeys(THREAD_GROUPS, 0.0)
    for series in queries["osd_thread_cpu_seconds_per_second"]["result"]:
        group = series["metric"]["thread_group"]
        value = float(series["values"][len(series["values"]) // 2][1])
        share[group if group in share else "other"] += value * 1000 / max(ops, 1.0)
    modes = {s["metric"]["mode"]: float(s["values"][len(s["values"]) // 2][1])
             for s in queries["cpu_mode_ratio"]["result"]}
    modes["idle"] = max(0.0, 1 - sum(modes.values()))
    return Shapes(cdf, avg, share, {m: modes.get(m, 0.0) for m in CPU_MODES})


def fixture_steps(count: int) -> list[tuple[Path, dict[str, Any]]]:
    """The fixture run's first `count` steps: (step dir, result.json)."""
    run = json.loads((FIXTURE_RUN / "run.json").read_text())
    steps = run["steps"][:count]
    if len(steps) < count:
        raise SystemExit(f"the fixture run has {len(run['steps'])} steps, not {count}")
    return [(FIXTURE_RUN / f"step-{s['id']}",
             json.loads((FIXTURE_RUN / f"step-{s['id']}" / "result.json").read_text()))
            for s in steps]


def timeline(steps: list[tuple[Path, dict[str, Any]]], step_seconds: float, start: float
             ) -> tuple[list[Segment], list[tuple[float, float]], dict[str, float]]:
    """Segments from `start`, each step's (start, end), and the idle baseline window."""
    segments = [Segment(start, start + IDLE_SECONDS, "idle", 0.0)]
    windows = []
    at = start + IDLE_SECONDS
    for _dir, result in steps:
        at += GAP_SECONDS
        segments.append(Segment(at - GAP_SECONDS, at, "idle", 0.0))
        step_start = at
        for entry in result["results"]:
            length = step_seconds / len(result["results"])
            segments.append(Segment(at, at + length, entry["mode"], float(entry["iops"])))
            at += length
        windows.append((step_start, at))
    segments.append(Segment(at, at + 2 * SCRAPE_SECONDS, "idle", 0.0))
    return segments, windows, {"start": start + 2, "end": start + IDLE_SECONDS - 2}


def write_run_dir(path: Path, steps: list[tuple[Path, dict[str, Any]]],
                  windows: list[tuple[float, float]], segments: list[Segment],
                  idle: dict[str, float]) -> None:
    """The fixture run's steps, moved onto the generated windows, without stored pulls."""
    path.mkdir(parents=True)
    run = json.loads((FIXTURE_RUN / "run.json").read_text())
    run["steps"] = run["steps"][:len(steps)]
    run["run_id"] = f"report-scale-{path.parent.name}"
    (path / "run.json").write_text(json.dumps(run))
    for name in ("spec.yaml", "spec.resolved.json"):
        shutil.copy(FIXTURE_RUN / name, path / name)
    (path / "state.json").write_text(json.dumps({"idle_baseline": idle}))
    modes = iter(s for s in segments if s.mode != "idle")
    for (source, result), (start, end) in zip(steps, windows, strict=True):
        target = path / source.name
        target.mkdir()
        shutil.copy(source / "params.json", target / "params.json")
        ts = result["timestamps"]
        ts.update(config_start=start - 0.01, config_applied=start - 0.005, started=start,
                  ended=end)
        for entry in result["results"]:
            segment = next(modes)
            ts["modes"][entry["mode"]] = {"start": segment.start, "end": segment.end}
        (target / "result.json").write_text(json.dumps(result))
        (target / "timestamps.json").write_text(json.dumps(ts))


class Series:
    """Writes OpenMetrics families: every series' samples at the scrape times, in order."""

    def __init__(self, out: Any, times: np.ndarray, segments: list[Segment]) -> None:
        self.out = out
        self.times = times
        # seconds each segment has lasted by each scrape time: counter = rates @ lasted
        self.lasted = np.array([np.clip(times - s.start, 0.0, s.end - s.start)
                                for s in segments])
        self.segments = segments
        self.family = ""
        self.series = 0
        self.samples = 0
        self.stamps = [f"{t:.3f}" for t in times]

    def start_family(self, name: str) -> None:
        self.family = name
        self.out.write(f"# TYPE {name} unknown\n")

    def counter(self, labels: str, rates: np.ndarray, name: str | None = None) -> None:
        self.write(name or self.family, labels, rates @ self.lasted)

    def constant(self, labels: str, value: float = 1.0) -> None:
        self.write(self.family, labels, np.full(len(self.times), value))

    def write(self, name: str, labels: str, values: np.ndarray) -> None:
        prefix = f"{name}{{{labels}}} "
        self.out.write("".join(f"{prefix}{v:.6g} {t}\n" for v, t in zip(
            values.tolist(), self.stamps, strict=True)))
        self.series += 1
        self.samples += len(self.stamps)


def per_op(segments: list[Segment], mode_rate: dict[str, float], scale: float = 1.0
           ) -> np.ndarray:
    """Rate of a counter in each segment: per op of the step's mode (its client IOPS, as
    if every OSD carried it), `mode_rate[mode]` x `scale` each."""
    return np.array([mode_rate.get(s.mode, 0.0) * scale * s.iops for s in segments])


def generate(path: Path, osds: int, per_host: int, segments: list[Segment], shapes: Shapes,
             seed: int = 1) -> tuple[int, int]:
    """Write the OpenMetrics file; returns (series, samples)."""
    rng = random.Random(seed)
    start, end = segments[0].start, segments[-1].end
    times = np.arange(start, end + 1e-9, SCRAPE_SECONDS)
    hosts = math.ceil(osds / per_host)
    weight = [0.7 + 0.6 * rng.random() for _ in range(osds)]  # each OSD a little different
    load = {"write": 1.0, "seq": 1.0}

    def osd_labels(i: int) -> str:
        host = f"host{i // per_host:03d}"
        return f'{EXPORTER},instance="{host}:9967",host="{host}",ceph_daemon="osd.{i}"'

    def node_labels(h: int) -> str:
        return f'{NODE},instance="host{h:03d}:9100",host="host{h:03d}"'

    with path.open("w") as out:
        gen = Series(out, times, segments)
        # OSD op counters and latency averages (ceph-exporter's names)
        gen.start_family("ceph_osd_op")
        for i in range(osds):
            gen.counter(osd_labels(i), per_op(segments, load, weight[i]))
        for op, modes in (("", load), ("r", {"seq": 1.0}), ("w", {"write": 1.0})):
            name = f"ceph_osd_op_{op}_latency" if op else "ceph_osd_op_latency"
            avg = {"seq": shapes.latency_avg["r"], "write": shapes.latency_avg["w"]}
            for suffix in ("sum", "count"):
                gen.start_family(f"{name}_{suffix}")
                for i in range(osds):
                    rate = {m: v * (avg[m] if suffix == "sum" else 1.0) for m, v in modes.items()}
                    gen.counter(osd_labels(i), per_op(segments, rate, weight[i]))
        # thread groups' CPU
        gen.start_family("cephscope_osd_thread_cpu_seconds_total")
        for i in range(osds):
            for group, share in shapes.thread_share.items():
                # a little CPU when idle too: timers, heartbeats
                rates = per_op(segments, load, weight[i] * share / 1000) + 0.002
                gen.counter(f'{osd_labels(i)},thread_group="{group}"', rates)
        # the latency histogram's buckets (the default shape: r and w)
        gen.start_family("cephscope_osd_op_latency_seconds_bucket")
        for i in range(osds):
            for op, mode in (("r", "seq"), ("w", "write")):
                for le, fraction in (*zip(LATENCY_LE, shapes.latency_cdf[op], strict=True),
                                     (math.inf, 1.0)):
                    le_text = "+Inf" if le == math.inf else f"{le:.10g}"
                    gen.counter(f'{osd_labels(i)},op="{op}",le="{le_text}"',
                                per_op(segments, {mode: fraction}, weight[i]))
        # topology
        gen.start_family("cephscope_osd_device_info")
        for i in range(osds):
            host = f"host{i // per_host:03d}"
            gen.constant(f'{osd_labels(i)},role="data",device="sd{i % per_host}",'
                         f'nodename="{host}"')
        gen.start_family("cephscope_osd_network_info")
        for i in range(osds):
            host = f"host{i // per_host:03d}"
            for network, nic in (("public", "eth0"), ("cluster", "eth1")):
                gen.constant(f'{osd_labels(i)},network="{network}",interface="{nic}",'
                             f'nodename="{host}",address="10.{network == "cluster":d}.0.{i}"')
        # node_exporter: CPU per core and mode, disks, NICs
        gen.start_family("node_cpu_seconds_total")
        busy = dict(shapes.cpu_modes)
        for h in range(hosts):
            for cpu in range(CPUS_PER_HOST):
                for mode in CPU_MODES:
                    rates = np.array([busy[mode] if s.mode != "idle" else
                                      (1.0 if mode == "idle" else 0.0) for s in segments])
                    gen.counter(f'{node_labels(h)},cpu="{cpu}",mode="{mode}"', rates)
        disks = {
            "node_disk_reads_completed_total": ({"seq": 1.0}, 1.0),
            "node_disk_writes_completed_total": ({"write": 1.0}, 1.0),
            "node_disk_read_bytes_total": ({"seq": 1.0}, 4096.0),
            "node_disk_written_bytes_total": ({"write": 1.0}, 4096.0),
            "node_disk_read_time_seconds_total": ({"seq": 1.0}, 0.0005),
            "node_disk_write_time_seconds_total": ({"write": 1.0}, 0.002),
            "node_disk_io_time_seconds_total": (load, 0.0004),
        }
        for name, (modes, scale) in disks.items():
            gen.start_family(name)
            for h in range(hosts):
                for d in [*range(min(per_host, osds - h * per_host)), -1]:
                    device = "vda" if d < 0 else f"sd{d}"
                    w = 0.05 if d < 0 else weight[h * per_host + d]
                    rates = per_op(segments, modes, w * scale)
                    if name == "node_disk_io_time_seconds_total":
                        rates = np.minimum(rates, 1.0)  # busy at most all the time
                    gen.counter(f'{node_labels(h)},device="{device}"', rates)
        for name in ("node_network_receive_bytes_total", "node_network_transmit_bytes_total"):
            gen.start_family(name)
            for h in range(hosts):
                for nic, scale in (("eth0", 4096.0 * per_host), ("eth1", 8192.0 * per_host),
                                   ("lo", 100.0)):
                    gen.counter(f'{node_labels(h)},device="{nic}"', per_op(segments, load, scale))
        out.write("# EOF\n")
    return gen.series, gen.samples


def prometheus_config(path: Path, dead_port: int) -> None:
    """5 s scrape interval, read by the report from the targets API: one job whose target
    never answers (its own `up` is the only series it adds)."""
    path.write_text(
        "global:\n  scrape_interval: 5s\n  evaluation_interval: 5s\n"
        "scrape_configs:\n  - job_name: report-scale-interval\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{dead_port}']\n")


def free_port() -> int:
    """A port nothing listens on now, and the one after it free too."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port < 65535 and port_is_free(port + 1):
            return port
    raise SystemExit("no two free ports in a row on 127.0.0.1")


def wait_ready(url: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"Prometheus at {url} not ready after {timeout:.0f} s")
        time.sleep(0.5)


def report(run_dir: Path, prometheus_url: str | None, *flags: str) -> tuple[float, float, float]:
    """`cephscope report` of the run dir: (wall seconds, CPU seconds, peak RSS MiB)."""
    argv = [sys.executable, "-m", "cephscope.cli", "report", str(run_dir), *flags]
    if prometheus_url:
        argv += ["--prometheus-url", prometheus_url]
    log = run_dir.parent / "report.log"
    started = time.monotonic()
    with log.open("w") as output:
        proc = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT)
        # this child's own rusage (RUSAGE_CHILDREN would be the largest of every child)
        _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"cephscope report failed ({code}): {log.read_text()[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def size_mib(paths: Iterator[Path] | Sequence[Path]) -> float:
    return sum(p.stat().st_size for p in paths if p.is_file()) / 2**20


def measure(osds: int, args: argparse.Namespace, work: Path, shapes: Shapes) -> dict[str, Any]:
    here = work / f"osds-{osds}"
    here.mkdir(parents=True)
    steps = fixture_steps(args.steps)
    span = IDLE_SECONDS + len(steps) * (args.step_seconds + GAP_SECONDS) + 2 * SCRAPE_SECONDS
    # ended a minute ago, on a scrape boundary: the blocks are history to Prometheus
    start = math.floor((time.time() - span - 60) / SCRAPE_SECONDS) * SCRAPE_SECONDS
    segments, windows, idle = timeline(steps, args.step_seconds, start)
    run_dir = here / "run"
    write_run_dir(run_dir, steps, windows, segments, idle)
    began = time.monotonic()
    series, samples = generate(here / "data.om", osds, args.osds_per_host, segments, shapes)
    generated = time.monotonic() - began
    began = time.monotonic()
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                    str(here / "data.om"), str(here / "data")], check=True, timeout=3600)
    backfilled = time.monotonic() - began
    openmetrics_mib = size_mib([here / "data.om"])
    (here / "data.om").unlink()
    port = args.port or free_port()
    prometheus_config(here / "prometheus.yml", port + 1)
    url = f"http://127.0.0.1:{port}"
    if not port_is_free(port):
        raise SystemExit(f"port {port} is in use: pick another --port")
    server = subprocess.Popen(
        ["prometheus", f"--config.file={here / 'prometheus.yml'}",
         f"--storage.tsdb.path={here / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
         "--storage.tsdb.retention.time=30d"],
        stdout=subprocess.DEVNULL, stderr=(here / "prometheus.log").open("w"))
    try:
        wait_ready(url)
        time.sleep(2 * SCRAPE_SECONDS)  # the dead target's first scrape: its interval is known
        pulled = report(run_dir, url)
    finally:
        terminate(server.pid, timeout=30)
        server.wait(timeout=30)
    # every OSD in its own rows, as before the per-OSD tables were bounded
    report(run_dir, None, "--top-osds", str(osds), "--no-plots")
    unbounded = run_dir / "report.md"
    unbounded_kib = unbounded.stat().st_size / 1024
    unbounded_lines = len(unbounded.read_text().splitlines())
    offline = report(run_dir, None)
    md = run_dir / "report.md"
    return {
        "osds": osds, "hosts": math.ceil(osds / args.osds_per_host), "series": series,
        "samples": samples, "openmetrics_mib": openmetrics_mib, "generate_s": generated,
        "backfill_s": backfilled, "pull_report_s": pulled[0], "pull_report_cpu_s": pulled[1],
        "pull_report_rss_mib": pulled[2], "report_s": offline[0], "report_cpu_s": offline[1],
        "report_rss_mib": offline[2],
        "md_kib": md.stat().st_size / 1024, "md_lines": len(md.read_text().splitlines()),
        "unbounded_md_kib": unbounded_kib, "unbounded_md_lines": unbounded_lines,
        "html_mib": size_mib([run_dir / "report.html"]),
        "plots_mib": size_mib(list((run_dir / "report-plots").glob("*.png"))),
        "pulls_mib": size_mib([*run_dir.glob("step-*/prometheus.json"),
                               run_dir / "idle_baseline.prometheus.json"]),
    }


COLUMNS = (
    ("OSDs", "osds", "d"), ("hosts", "hosts", "d"), ("series", "series", "d"),
    ("samples", "samples", "d"), ("backfill s", "backfill_s", ".1f"),
    ("pull+report s", "pull_report_s", ".1f"), ("CPU s", "pull_report_cpu_s", ".1f"),
    ("RSS MiB", "pull_report_rss_mib", ".0f"), ("report s", "report_s", ".1f"),
    ("CPU s", "report_cpu_s", ".1f"), ("RSS MiB", "report_rss_mib", ".0f"),
    ("report.md KiB", "md_kib", ".1f"),
    ("md lines", "md_lines", "d"), ("unbounded md KiB", "unbounded_md_kib", ".1f"),
    ("lines", "unbounded_md_lines", "d"), ("html MiB", "html_mib", ".2f"),
    ("plots MiB", "plots_mib", ".2f"),
    ("pulls MiB", "pulls_mib", ".1f"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--osds", default="10,100,1000", help="comma-separated OSD counts")
    parser.add_argument("--osds-per-host", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--step-seconds", type=float, default=20.0,
                        help="length of a step (its write and seq modes share it)")
    parser.add_argument("--port", type=int, default=0,
                        help="Prometheus' port on 127.0.0.1 (default: a free one); the next one "
                             "is its never-answering target")
    parser.add_argument("--work", type=Path, help="work dir (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    args = parser.parse_args(argv)
    for tool in ("prometheus", "promtool"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found: bash deploy/install.sh (Debian package prometheus)")
    counts = [int(n) for n in args.osds.split(",") if n.strip()]
    work = args.work or Path(tempfile.mkdtemp(prefix="report-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    shapes = fixture_shapes()
    print(f"cephscope report of a {args.steps}-step run ({args.step_seconds:g} s steps, write + "
          f"seq), {args.osds_per_host} OSDs per host, samples every {SCRAPE_SECONDS:g} s; "
          f"work dir {work}; {os.cpu_count()} CPUs")
    print(" | ".join(c for c, _k, _f in COLUMNS))
    try:
        for osds in counts:
            row = measure(osds, args, work, shapes)
            print(" | ".join(format(row[k], f) for _c, k, f in COLUMNS), flush=True)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
