"""Capture admin-socket outputs of a real cluster's OSDs as test fixtures.

    python -m cephscope.deploy.capture_fixtures --state-dir DEVCLUSTER_DIR \
        [--out tests/fixtures/asok] [--bench-seconds 20]

Writes ``<out>/<ceph-version>/<scenario>/osd.N/<command>.json`` for every command in
:data:`CAPTURE_COMMANDS`, byte for byte as the daemon sent it (the fake admin socket of
the unit tests replays these bytes), for two scenarios: ``idle`` and ``load`` (captured
while ``rados bench`` 4 KiB writes run). ``<out>/<ceph-version>/manifest.json`` records
when, how and with which bench result.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cephscope.exporter.asok import AsokClient, AsokError, discover_daemons

# (prefix, args) of every capture. config get entries are the options the runner verifies.
CAPTURE_COMMANDS: tuple[tuple[str, dict[str, str]], ...] = (
    ("perf dump", {}),
    ("perf schema", {}),
    ("perf histogram dump", {}),
    ("perf histogram schema", {}),
    ("dump_op_pq_state", {}),
    ("dump_ops_in_flight", {}),
    ("dump_blocked_ops", {}),
    ("dump_historic_ops", {}),
    ("dump_historic_ops_by_duration", {}),
    ("dump_historic_slow_ops", {}),
    ("status", {}),
    ("version", {}),
    ("config show", {}),
    ("config get", {"var": "osd_op_num_shards"}),
    ("config get", {"var": "osd_op_num_threads_per_shard"}),
    ("config get", {"var": "osd_op_queue"}),
    ("config get", {"var": "osd_mclock_profile"}),
    # Labeled perf counters (Reef and later; Pacific refuses them).
    ("counter dump", {}),
    ("counter schema", {}),
    ("get_command_descriptions", {}),
)


def fixture_name(prefix: str, args: dict[str, Any] | None = None) -> str:
    """File name of a command's capture: ``perf dump`` -> ``perf_dump.json``,
    ``config get var=x`` -> ``config_get.x.json``."""
    stem = prefix.replace(" ", "_")
    for key in sorted(args or {}):
        if key == "format":
            continue
        stem += "." + re.sub(r"[^A-Za-z0-9_.-]", "_", str(args[key]))  # type: ignore[index]
    return stem + ".json"


def capture_osd(client: AsokClient, dest: Path) -> list[str]:
    """Capture every command into ``dest``; returns the commands the daemon refused."""
    dest.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []
    for prefix, args in CAPTURE_COMMANDS:
        try:
            raw = client.command_raw(prefix, **args)
        except AsokError as err:
            failed.append(f"{prefix}: {err}")
            continue
        (dest / fixture_name(prefix, args)).write_bytes(raw.payload)
    return failed


def ceph_version(client: AsokClient) -> str:
    version = client.command("version")
    text = str(version.get("version", "")) if isinstance(version, dict) else ""
    match = re.match(r"(\d+\.\d+\.\d+)", text)
    if not match:
        raise SystemExit(f"capture: cannot read a version from {client.path}: {version!r}")
    return match.group(1)


def capture_scenario(asok_dir: str, out: Path, scenario: str) -> dict[str, list[str]]:
    osds = discover_daemons(asok_dir, ["osd"])
    if not osds:
        raise SystemExit(f"capture: no OSD admin sockets in {asok_dir}")
    problems: dict[str, list[str]] = {}
    for daemon in osds:
        failed = capture_osd(AsokClient(daemon.asok_path, timeout=10), out / scenario / daemon.name)
        if failed:
            problems[daemon.name] = failed
    return problems


def parse_bench_output(text: str) -> dict[str, float]:
    """The summary figures of ``rados bench`` (IOPS, latencies in seconds)."""
    wanted = {
        "Average IOPS": "average_iops",
        "Average Latency(s)": "average_latency_s",
        "Max latency(s)": "max_latency_s",
        "Min latency(s)": "min_latency_s",
        "Bandwidth (MB/sec)": "bandwidth_mb_s",
        "Total writes made": "total_writes",
    }
    result: dict[str, float] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in wanted:
            try:
                result[wanted[key.strip()]] = float(value.strip())
            except ValueError:
                continue
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, required=True,
                        help="dev cluster state dir (has ceph.conf and run/)")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/asok"))
    parser.add_argument("--pool", default="cephscope-bench")
    parser.add_argument("--bench-seconds", type=int, default=20)
    parser.add_argument("--capture-after", type=float, default=8.0,
                        help="seconds into the bench when the load capture starts")
    args = parser.parse_args(argv)
    conf = args.state_dir / "ceph.conf"
    asok_dir = str(args.state_dir / "run")
    if not conf.exists():
        print(f"capture: {conf} does not exist", file=sys.stderr)
        return 2
    osds = discover_daemons(asok_dir, ["osd"])
    if not osds:
        print(f"capture: no OSD sockets in {asok_dir}", file=sys.stderr)
        return 2
    version = ceph_version(AsokClient(osds[0].asok_path))
    out = args.out / version
    manifest: dict[str, Any] = {
        "ceph_version": version,
        "captured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "osds": [d.name for d in osds],
        "commands": [fixture_name(p, a) for p, a in CAPTURE_COMMANDS],
        "scenarios": {},
    }
    problems = capture_scenario(asok_dir, out, "idle")
    manifest["scenarios"]["idle"] = {"description": "no client I/O", "refused": problems}

    bench_argv = ["rados", "-c", str(conf), "-p", args.pool, "bench", str(args.bench_seconds),
                  "write", "-b", "4096", "-t", "16", "--no-cleanup"]
    bench = subprocess.Popen(bench_argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        time.sleep(args.capture_after)
        if bench.poll() is not None:
            print(f"capture: rados bench ended early: {bench.stdout.read().decode()[-500:]}",  # type: ignore[union-attr]
                  file=sys.stderr)
            return 1
        problems = capture_scenario(asok_dir, out, "load")
        output, _ = bench.communicate(timeout=args.bench_seconds + 60)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    manifest["scenarios"]["load"] = {
        "description": f"captured {args.capture_after:.0f}s into rados bench 4 KiB writes, "
                       "16 in flight",
        "bench_argv": bench_argv[0:1] + bench_argv[3:],
        "bench_result": parse_bench_output(output.decode(errors="replace")),
        "refused": problems,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"capture: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
