"""`cephscope devcluster up | down | status | restart-osd N | purge | rootfs` (`up --mds --rgw`:
with CephFS and a RADOS gateway)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cephscope.deploy import rootfs
from cephscope.deploy.cluster_parts import process_parts
from cephscope.deploy.devcluster import DevCluster, DevClusterError, default_state_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", choices=["up", "down", "status", "restart-osd", "purge", "rootfs"], help="what to do"
    )
    parser.add_argument("osd_id", nargs="?", type=int, help="OSD id (restart-osd)")
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=default_state_dir(),
        help="all state of this cluster lives here (default: %(default)s)",
    )
    parser.add_argument(
        "--port-base",
        type=int,
        default=17000,
        help="mon port; daemons bind base+10..base+99 (default: %(default)s)",
    )
    parser.add_argument("--osds", type=int, default=3, help="number of OSDs (default: %(default)s)")
    parser.add_argument(
        "--osd-size-gib", type=int, default=10, help="sparse size of each OSD (default: %(default)s)"
    )
    parser.add_argument(
        "--backing",
        choices=["auto", "loop", "file"],
        default="auto",
        help="OSD block device: loop devices (auto falls back to plain files)",
    )
    parser.add_argument(
        "--device-class",
        choices=["ssd", "hdd"],
        default="ssd",
        help="rotational flag of the loop devices and CRUSH device class",
    )
    parser.add_argument(
        "--hosts", type=int, default=1,
        help="OSD hosts; more than 1 (or any --clients) makes each host a network namespace "
        "with its own sshd, exporter and node_exporter (default: %(default)s)",
    )
    parser.add_argument("--clients", type=int, default=0,
                        help="client hosts (namespaces) for benchmarks (default: %(default)s)")
    parser.add_argument("--public-subnet", help="public network of the hosts (default: a /24 in "
                        "10.231.0.0/16 derived from the state dir)")
    parser.add_argument("--cluster-subnet", help="cluster network of the OSD hosts (default: a /24 "
                        "in 10.232.0.0/16 derived from the state dir)")
    parser.add_argument(
        "--release",
        choices=sorted(rootfs.RELEASES),
        help="Ceph release of a new cluster (default: this machine's packages); other releases "
        "run from a root filesystem built from Debian's archive (`rootfs` builds it)",
    )
    parser.add_argument("--mds", action="store_true",
                        help="a new cluster gets an MDS (mds.a) and the filesystem `cephfs`")
    parser.add_argument("--rgw", action="store_true",
                        help="a new cluster gets a RADOS gateway (client.rgw.a, beast on port "
                        "base+99) and a user whose S3 and Swift keys go to STATE_DIR/rgw.json")
    parser.add_argument("--json", action="store_true", help="status as JSON")


def run_rootfs(release: str | None) -> int:
    if release is None:
        print("devcluster: rootfs needs --release", file=sys.stderr)
        return 2
    try:
        path = rootfs.build(release, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    except rootfs.RootfsError as exc:
        print(f"devcluster: {exc}", file=sys.stderr)
        return 1
    marker = rootfs.read_marker(path) or {}
    print(path)
    print(f"  ceph {marker.get('ceph_version')}  (Debian {marker.get('suite')})", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.action == "rootfs":
        return run_rootfs(args.release)
    if args.osds < 1:
        print("devcluster: --osds must be at least 1", file=sys.stderr)
        return 2
    if not 1024 <= args.port_base <= 65535 - 100:
        print("devcluster: --port-base must be between 1024 and 65435", file=sys.stderr)
        return 2
    if args.hosts < 1 or args.clients < 0:
        print("devcluster: --hosts must be at least 1 and --clients at least 0", file=sys.stderr)
        return 2
    try:
        cluster = DevCluster(
            args.state_dir,
            port_base=args.port_base,
            num_osds=args.osds,
            osd_size_gib=args.osd_size_gib,
            backing=args.backing,
            device_class=args.device_class,
            hosts=args.hosts,
            clients=args.clients,
            public_subnet=args.public_subnet,
            cluster_subnet=args.cluster_subnet,
            release=args.release,
            mds=args.mds,
            rgw=args.rgw,
            parts=process_parts,  # daemons as processes on this machine or its namespace hosts
        )
    except DevClusterError as exc:
        print(f"devcluster: {exc}", file=sys.stderr)
        return 2
    try:
        if args.action == "up":
            seconds = cluster.up()
            print(f"devcluster: HEALTH_OK in {seconds:.1f}s")
            print(f"  release:  {cluster.release.name} (ceph {cluster.ceph_version()})")
            for code in cluster.muted_health_checks():
                print(f"  muted:    {code} (expected for this release; deploy/rootfs.py says why)")
            print(f"  conf:     {cluster.conf_path}")
            print(f"  sockets:  {cluster.asok_dir}")
            print(f"  mon:      v2:{cluster.mon_addr}:{cluster.mon_port}")
            print(
                f"  pools:    {cluster.bench_pool} (rados bench), "
                f"{cluster.rbd_pool}/{cluster.rbd_image} (fio rbd)"
            )
            if cluster.mds:
                print(f"  cephfs:   {cluster.cephfs_name} (mds.a; ceph-fuse -c {cluster.conf_path} "
                      f"--client_fs {cluster.cephfs_name} MOUNTPOINT)")
            if cluster.rgw:
                print(f"  rgw:      {cluster.rgw_endpoint} (S3 and Swift keys in "
                      f"{cluster.layout.rgw_file})")
            print(f"  try:      ceph -c {cluster.conf_path} -s")
            if cluster.ssh_config is not None:
                print(f"  hosts:    {', '.join(h.name for h in cluster.hosts)}; clients: "
                      f"{', '.join(cluster.client_names) or 'none'}")
                print(f"  ssh:      ssh -F {cluster.ssh_config} {cluster.hosts[0].name}")
                print(f"  targets:  {cluster.state_dir / 'targets'} (Prometheus file_sd)")
        elif args.action == "down":
            stopped = cluster.down()
            print(f"devcluster: stopped {', '.join(stopped) or 'nothing'}; loop devices detached")
        elif args.action == "status":
            status = cluster.status()
            if args.json:
                print(json.dumps(status, indent=2))
            else:
                print(f"state dir: {status['state_dir']}  fsid {status['fsid']}")
                print(
                    f"mon {status['mon']}  msgr ports {status['msgr_ports']}  "
                    f"backing {status['backing']}  health {status['health'] or 'unreachable'}"
                )
                for name, pid in status["daemons"].items():
                    print(f"  {name:12} {'pid ' + str(pid) if pid else 'stopped'}")
                if status["cephfs"]:
                    print(f"cephfs {status['cephfs']} (mds.a)")
                if status["rgw_endpoint"]:
                    print(f"rgw {status['rgw_endpoint']} (client.rgw.a)")
                for name, host in status.get("hosts", {}).items():
                    print(f"  {name:8} {host['role']:6} {host['public_addr']:15} "
                          f"{'up' if host['up'] else 'down'}")
            return 0 if status["health"] else 1
        elif args.action == "restart-osd":
            if args.osd_id is None:
                print("devcluster: restart-osd needs an OSD id", file=sys.stderr)
                return 2
            seconds = cluster.restart_osd(args.osd_id)
            print(f"devcluster: osd.{args.osd_id} up again in {seconds:.1f}s")
        elif args.action == "purge":
            cluster.purge()
            print(f"devcluster: removed {cluster.state_dir}")
    except DevClusterError as exc:
        print(f"devcluster: {exc}", file=sys.stderr)
        return 1
    return 0
