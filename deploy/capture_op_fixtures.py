"""Capture OSD op-state admin-socket outputs and OSD /proc trees as test fixtures.

    python -m cephscope.deploy.capture_op_fixtures --state-dir DEVCLUSTER_DIR \
        [--scenario ops_load] [--bench-seconds 15] [--concurrency 64]

For the ``opqueue``, ``ops`` and ``threads`` collectors. Unlike ``capture_fixtures`` (one
snapshot of every command) this captures the op state *at its busiest*: while a deep
``rados bench`` 4 KiB write load runs it polls ``dump_op_pq_state``, ``dump_ops_in_flight``
and ``dump_blocked_ops`` for ``--poll-seconds`` and keeps, per command and OSD, the answer
with the most queued / in-flight / blocked ops (queues are usually empty in a random
snapshot). ``--complaint-time`` lowers ``osd_op_complaint_time`` on the cluster during the
capture (removed afterwards) so that ``dump_blocked_ops`` has ops in it. Two
``dump_historic_ops`` a second apart go into ``<scenario>`` and ``<scenario>_later`` (the
de-duplication of ops across scrapes is tested on them).

Writes (file names as ``capture_fixtures.fixture_name``):
  ``<asok-out>/<version>/<scenario>[_later]/osd.N/<command>.json``
  ``<proc-out>/<scenario>_before/<pid>/...`` and ``<scenario>_after/<pid>/...``: each OSD's
  ``stat``, ``statm``, ``status``, ``comm``, ``cmdline`` and ``task/<tid>/{stat,comm}``,
  before and after the load (so thread CPU growth is in the fixtures).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cephscope.deploy.capture_fixtures import ceph_version, fixture_name
from cephscope.exporter.asok import AsokClient, Daemon, discover_daemons

PROC_FILES = ("stat", "statm", "status", "comm", "cmdline")
TASK_FILES = ("stat", "comm")


def _queued(doc: Any) -> int:
    if not isinstance(doc, dict):
        return -1
    total = 0
    for shard in doc.values():
        if isinstance(shard, dict):
            for key in ("queues", "high_queues"):
                entries = shard.get(key)
                if isinstance(entries, list):
                    total += sum(e.get("num_keys", 0) for e in entries if isinstance(e, dict))
    return total


def _num(key: str) -> Callable[[Any], int]:
    return lambda doc: int(doc.get(key, -1)) if isinstance(doc, dict) else -1


# command -> how "busy" an answer is: the busiest one is kept.
POLLED: dict[str, Callable[[Any], int]] = {
    "dump_op_pq_state": _queued,
    "dump_ops_in_flight": _num("num_ops"),
    "dump_blocked_ops": _num("num_blocked_ops"),
}
SNAPSHOT: tuple[tuple[str, dict[str, str]], ...] = (
    ("version", {}),
    ("status", {}),
    ("config get", {"var": "osd_op_num_shards"}),
    ("config get", {"var": "osd_op_num_shards_hdd"}),
    ("config get", {"var": "osd_op_num_shards_ssd"}),
    ("config get", {"var": "osd_op_num_threads_per_shard"}),
    ("config get", {"var": "osd_op_num_threads_per_shard_hdd"}),
    ("config get", {"var": "osd_op_num_threads_per_shard_ssd"}),
    ("config get", {"var": "osd_op_queue"}),
    ("config get", {"var": "osd_op_history_size"}),
)


def copy_proc(pid: int, dest: Path, proc_root: Path = Path("/proc")) -> int:
    """Copy the files the threads collector reads; returns the number of threads copied."""
    src = proc_root / str(pid)
    target = dest / str(pid)
    if target.exists():
        shutil.rmtree(target)
    (target / "task").mkdir(parents=True)
    for name in PROC_FILES:
        (target / name).write_bytes((src / name).read_bytes())
    copied = 0
    for task in sorted((src / "task").iterdir()):
        try:
            contents = {name: (task / name).read_bytes() for name in TASK_FILES}
        except OSError:
            continue  # the thread exited meanwhile
        (target / "task" / task.name).mkdir()
        for name, data in contents.items():
            (target / "task" / task.name / name).write_bytes(data)
        copied += 1
    return copied


def osd_pids(osds: list[Daemon]) -> dict[str, int]:
    pids = {}
    for daemon in osds:
        raw = AsokClient(daemon.asok_path).command_raw("version")
        if not raw.peer_pid:
            raise SystemExit(f"capture: cannot see the pid behind {daemon.asok_path}")
        pids[daemon.name] = raw.peer_pid
    return pids


def poll_busiest(osds: list[Daemon], seconds: float) -> dict[tuple[str, str], tuple[int, bytes]]:
    clients = {d.name: AsokClient(d.asok_path, timeout=5) for d in osds}
    best: dict[tuple[str, str], tuple[int, bytes]] = {}
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for name, client in clients.items():
            for command, busy in POLLED.items():
                payload = client.command_raw(command).payload
                score = busy(json.loads(payload))
                if (name, command) not in best or score > best[(name, command)][0]:
                    best[(name, command)] = (score, payload)
    return best


def write_snapshot(client: AsokClient, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for prefix, args in SNAPSHOT:
        (dest / fixture_name(prefix, args)).write_bytes(client.command_raw(prefix, **args).payload)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, required=True,
                        help="dev cluster state dir (has ceph.conf and run/)")
    parser.add_argument("--asok-out", type=Path, default=Path("tests/fixtures/asok"))
    parser.add_argument("--proc-out", type=Path, default=Path("tests/fixtures/proc"))
    parser.add_argument("--scenario", default="ops_load")
    parser.add_argument("--pool", default="cephscope-bench")
    parser.add_argument("--bench-seconds", type=int, default=15)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--poll-seconds", type=float, default=4.0)
    parser.add_argument("--complaint-time", type=float, default=0.02,
                        help="osd_op_complaint_time during the capture (0: leave as is)")
    parser.add_argument("--no-proc", action="store_true", help="skip the /proc captures")
    args = parser.parse_args(argv)

    conf = args.state_dir / "ceph.conf"
    osds = discover_daemons(args.state_dir / "run", ["osd"])
    if not conf.exists() or not osds:
        print(f"capture: no ceph.conf or OSD sockets under {args.state_dir}", file=sys.stderr)
        return 2
    version = ceph_version(AsokClient(osds[0].asok_path))
    asok_out = args.asok_out / version
    pids = osd_pids(osds)
    if not args.no_proc:
        for pid in pids.values():
            copy_proc(pid, args.proc_out / f"{args.scenario}_before")

    ceph = ["ceph", "-c", str(conf)]
    if args.complaint_time > 0:
        subprocess.run([*ceph, "config", "set", "osd", "osd_op_complaint_time",
                        str(args.complaint_time)], check=True, capture_output=True)
    bench = subprocess.Popen(
        ["rados", "-c", str(conf), "-p", args.pool, "bench", str(args.bench_seconds), "write",
         "-b", "4096", "-t", str(args.concurrency), "--no-cleanup"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(min(3.0, args.bench_seconds / 4))
        best = poll_busiest(osds, args.poll_seconds)
        for daemon in osds:
            client = AsokClient(daemon.asok_path, timeout=5)
            dest = asok_out / args.scenario / daemon.name
            write_snapshot(client, dest)
            for command in POLLED:
                score, payload = best[(daemon.name, command)]
                (dest / fixture_name(command)).write_bytes(payload)
                print(f"capture: {daemon.name} {command}: {score}")
            (dest / fixture_name("dump_historic_ops")).write_bytes(
                client.command_raw("dump_historic_ops").payload)
        time.sleep(1.0)
        for daemon in osds:
            client = AsokClient(daemon.asok_path, timeout=5)
            dest = asok_out / f"{args.scenario}_later" / daemon.name
            write_snapshot(client, dest)
            for command in (*POLLED, "dump_historic_ops"):
                (dest / fixture_name(command)).write_bytes(client.command_raw(command).payload)
        output, _ = bench.communicate(timeout=args.bench_seconds + 60)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        if args.complaint_time > 0:
            subprocess.run([*ceph, "config", "rm", "osd", "osd_op_complaint_time"],
                           check=False, capture_output=True)
    if not args.no_proc:
        for name, pid in pids.items():
            threads = copy_proc(pid, args.proc_out / f"{args.scenario}_after")
            print(f"capture: {name} pid {pid}: {threads} threads")
    print(output.decode(errors="replace").strip().splitlines()[-1] if output else "")
    print(f"capture: wrote {asok_out}/{args.scenario}{{,_later}}"
          + ("" if args.no_proc else f" and {args.proc_out}/{args.scenario}_{{before,after}}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
