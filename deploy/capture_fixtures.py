"""Capture admin-socket outputs of a real cluster's OSDs (or its MDS and gateways) as test
fixtures.

    python -m cephscope.deploy.capture_fixtures --state-dir DEVCLUSTER_DIR \
        [--out tests/fixtures/asok] [--bench-seconds 20]
    python -m cephscope.deploy.capture_fixtures --state-dir DEVCLUSTER_DIR --services \
        [--swift-auth-url http://127.0.0.1:PORT/auth/1.0 --swift-user USER:SUB --swift-key KEY]

Writes ``<out>/<ceph-version>/<scenario>/osd.N/<command>.json`` for every command in
:data:`CAPTURE_COMMANDS`, byte for byte as the daemon sent it (the fake admin socket of
the unit tests replays these bytes), for two scenarios: ``idle`` and ``load`` (captured
while ``rados bench`` 4 KiB writes run). ``<out>/<ceph-version>/manifest.json`` records
when, how and with which bench result.

``--services`` captures the MDS and gateway sockets instead (:data:`SERVICE_COMMANDS`), into
``services_idle`` (no client) and ``services_load`` (captured while Swift requests go to the
gateway and files are written through a ceph-fuse mount of the cluster's file system,
deploy/service_traffic.py), and adds those scenarios to the manifest. The Swift credentials
default to the dev cluster's gateway user (``<state dir>/rgw.json``, ``devcluster up --rgw``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cephscope.deploy.cluster_layout import RGW_FILE, DevClusterError
from cephscope.deploy.rgw_access import RgwAccess
from cephscope.deploy.service_traffic import (
    BackgroundTraffic,
    CephFuseMount,
    SwiftAccount,
    file_round,
    swift_round,
)
from cephscope.exporter.asok import AsokClient, AsokError, Daemon, discover_daemons

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


# What ceph-exporter and the exporter's perf/labeled collectors read from an MDS or a gateway.
SERVICE_COMMANDS: tuple[tuple[str, dict[str, str]], ...] = (
    ("perf dump", {}),
    ("perf schema", {}),
    ("counter dump", {}),
    ("counter schema", {}),
    ("version", {}),
)
SERVICE_TYPES = ("mds", "rgw")


def fixture_name(prefix: str, args: dict[str, Any] | None = None) -> str:
    """File name of a command's capture: ``perf dump`` -> ``perf_dump.json``,
    ``config get var=x`` -> ``config_get.x.json``."""
    stem = prefix.replace(" ", "_")
    for key in sorted(args or {}):
        if key == "format":
            continue
        stem += "." + re.sub(r"[^A-Za-z0-9_.-]", "_", str(args[key]))  # type: ignore[index]
    return stem + ".json"


def capture_osd(client: AsokClient, dest: Path,
                commands: tuple[tuple[str, dict[str, str]], ...] = CAPTURE_COMMANDS) -> list[str]:
    """Capture every command into ``dest``; returns the commands the daemon refused."""
    dest.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []
    for prefix, args in commands:
        try:
            raw = client.command_raw(prefix, **args)
        except AsokError as err:
            failed.append(f"{prefix}: {err}")
            continue
        # A refusal is kept too: the replay answers as the daemon did (Pacific: no `counter dump`).
        if raw.payload.startswith(b"ERROR"):
            failed.append(f"{prefix}: {raw.payload[:80].decode(errors='replace').strip()}")
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


def capture_services(daemons: list[Daemon], out: Path, scenario: str) -> dict[str, list[str]]:
    """:data:`SERVICE_COMMANDS` of each MDS and gateway into ``out/scenario/<daemon>``."""
    problems: dict[str, list[str]] = {}
    for daemon in daemons:
        failed = capture_osd(AsokClient(daemon.asok_path, timeout=10), out / scenario / daemon.name,
                             SERVICE_COMMANDS)
        if failed:
            problems[daemon.name] = failed
    return problems


GATEWAY_OPTIONS = ("rgw_user_counters_cache", "rgw_bucket_counters_cache")


def gateway_config(client: AsokClient) -> dict[str, str | None]:
    """The gateway's labeled-counter cache options (None where the release has no such option)."""
    values: dict[str, str | None] = {}
    for option in GATEWAY_OPTIONS:
        try:
            values[option] = client.config_get(option)
        except AsokError:
            values[option] = None
    return values


def services_main(args: argparse.Namespace, conf: Path, asok_dir: str) -> int:
    daemons = discover_daemons(asok_dir, SERVICE_TYPES)
    found = {d.type for d in daemons}
    if found != set(SERVICE_TYPES):
        print(f"capture: {asok_dir} needs an MDS and a gateway socket; found "
              f"{[d.name for d in daemons] or 'none'}", file=sys.stderr)
        return 2
    if args.swift_auth_url and args.swift_user and args.swift_key:
        account = SwiftAccount(args.swift_auth_url, args.swift_user, args.swift_key)
    else:
        try:
            access = RgwAccess.load(args.state_dir / RGW_FILE)
        except DevClusterError as err:
            print(f"capture: {err}; or give --swift-auth-url, --swift-user and --swift-key",
                  file=sys.stderr)
            return 2
        account = SwiftAccount(access.swift_auth_url, access.swift_user, access.swift_key)
    version = ceph_version(AsokClient(daemons[0].asok_path))
    out = args.out / version
    manifest_path = out / "manifest.json"
    manifest: dict[str, Any] = (json.loads(manifest_path.read_text()) if manifest_path.exists()
                                else {"ceph_version": version, "scenarios": {}})
    manifest["services"] = {
        "captured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "daemons": [d.name for d in daemons],
        "commands": [fixture_name(p, a) for p, a in SERVICE_COMMANDS],
        # Tentacle's per-user / per-bucket op counters exist only with these caches on.
        "gateway_config": {d.name: gateway_config(AsokClient(d.asok_path))
                           for d in daemons if d.type == "rgw"},
    }
    problems = capture_services(daemons, out, "services_idle")
    manifest["scenarios"]["services_idle"] = {"description": "MDS and gateway, no client I/O",
                                              "refused": problems}
    with tempfile.TemporaryDirectory(prefix="cephscope-capture-") as tmp, \
            CephFuseMount(conf, Path(tmp) / "mnt", argv_prefix=args.fuse_argv) as mountpoint:
        # One round first: a gateway's first bucket creates its pools (seconds), which would
        # otherwise leave the capture with a request or two counted.
        swift_round(account, "capture-warmup")
        file_round(mountpoint)
        traffic = BackgroundTraffic(account, mountpoint, interval=0.2).start()
        try:
            time.sleep(args.capture_after)
            problems = capture_services(daemons, out, "services_load")
        finally:
            traffic.stop()
    manifest["scenarios"]["services_load"] = {
        "description": f"after one warm-up round, captured {args.capture_after:.0f}s into Swift "
                       "rounds (PUT, GET, list, DELETE of 64 KiB objects) and file rounds "
                       "(write+fsync, read, rename, unlink of 64 KiB files) through ceph-fuse, "
                       "back to back",
        "swift": vars(traffic.counts),
        "files": traffic.files_done,
        "refused": problems,
    }
    out.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"capture: wrote {out} (services)")
    return 0


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
                        help="seconds into the bench (or the service traffic) when the load "
                        "capture starts")
    parser.add_argument("--services", action="store_true",
                        help="capture the MDS and gateway sockets under Swift and ceph-fuse "
                        "traffic instead of the OSDs")
    parser.add_argument("--swift-auth-url", help="the gateway's Swift v1 auth URL (--services)")
    parser.add_argument("--swift-user", help="Swift user, USER:SUBUSER (--services)")
    parser.add_argument("--swift-key", help="Swift key (--services)")
    parser.add_argument("--fuse-argv", nargs="+", default=["ceph-fuse"],
                        help="how to run ceph-fuse (--services)")
    args = parser.parse_args(argv)
    conf = args.state_dir / "ceph.conf"
    asok_dir = str(args.state_dir / "run")
    if not conf.exists():
        print(f"capture: {conf} does not exist", file=sys.stderr)
        return 2
    if args.services:
        return services_main(args, conf, asok_dir)
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
