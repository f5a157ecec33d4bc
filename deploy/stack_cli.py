"""`cephscope stack up | down | status`: the local monitoring stack without Docker."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cephscope.deploy import devcluster
from cephscope.deploy.stack import Stack, StackError, default_state_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["up", "down", "status", "purge"], help="what to do")
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=default_state_dir(),
        help="configs, TSDB, logs and pid files (default: %(default)s)",
    )
    parser.add_argument(
        "--port-base",
        type=int,
        default=18000,
        help="Prometheus on base, Alertmanager +1, node_exporter +3, exporter +4, "
        "runner target +5 (default: %(default)s)",
    )
    parser.add_argument(
        "--cluster-state-dir",
        type=Path,
        default=devcluster.default_state_dir(),
        help="dev cluster whose admin sockets and conf the exporter reads (default: %(default)s)",
    )
    parser.add_argument("--asok-dir", type=Path, help="admin socket dir (overrides the dev cluster's)")
    parser.add_argument("--ceph-conf", type=Path, help="ceph.conf for the exporter (overrides)")
    parser.add_argument("--no-exporter", action="store_true", help="do not run cephscope-exporter")
    parser.add_argument(
        "--targets-dir", type=Path,
        help="Prometheus file_sd files of the cluster's hosts (exporter.json, node.json; label "
        "`host`); default: the dev cluster's targets/ when it has hosts (see docs/multihost.md)",
    )
    parser.add_argument("--webhook-url", help="URL for Alertmanager's example `webhook` receiver")
    parser.add_argument(
        "--prometheus-release", choices=["2", "3"], default="2",
        help="2: this machine's Prometheus; 3: Prometheus 3.5 from the Debian sid root filesystem "
        "(built and cached like `cephscope devcluster rootfs --release tentacle`)",
    )
    parser.add_argument(
        "--histograms", choices=["classic", "native"], default=None,
        help="how Prometheus stores the exporter's histograms: native = one native histogram "
        "with custom buckets per histogram (Prometheus 3 only, its default), classic = one "
        "series per bucket (Prometheus 2's only way); queries answer the same either way",
    )
    parser.add_argument(
        "--remote-write-url", metavar="URL",
        help="this Prometheus is an edge: it evaluates the per-host recording rules and "
        "forwards what the dashboards, the alerts and the report read to URL (a "
        "--remote-write-receiver stack's /api/v1/write, or Thanos/Mimir/VictoriaMetrics); "
        "see docs/scale.md",
    )
    parser.add_argument(
        "--remote-write-receiver", action="store_true",
        help="this Prometheus is the central store: it receives remote writes, scrapes no "
        "host, evaluates the cluster-wide rules and the alerts (Prometheus + Alertmanager)",
    )
    parser.add_argument(
        "--exporter-web-config", type=Path, metavar="FILE",
        help="the exporter's --web.config.file (TLS, client certificates, basic auth); the "
        "stack's Prometheus scrapes it with --exporter-scrape-config",
    )
    parser.add_argument(
        "--exporter-scrape-config", type=Path, metavar="FILE",
        help="how Prometheus scrapes that exporter, in Prometheus's keys: tls_config (ca_file, "
        "cert_file, key_file, server_name), basic_auth (username, password_file); checked "
        "against the web config before anything starts (see docs/exporter.md)",
    )
    parser.add_argument("--json", action="store_true", help="status as JSON")


def run(args: argparse.Namespace) -> int:
    cluster_dir = args.cluster_state_dir.resolve()
    try:
        stack = make_stack(args, cluster_dir)
    except StackError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 2
    return run_action(args, stack)


def make_stack(args: argparse.Namespace, cluster_dir: Path) -> Stack:
    return Stack(
        args.state_dir,
        port_base=args.port_base,
        asok_dir=args.asok_dir or cluster_dir / "run",
        ceph_conf=args.ceph_conf
        or (cluster_dir / "ceph.conf" if (cluster_dir / "ceph.conf").exists() else None),
        with_exporter=not args.no_exporter,
        webhook_url=args.webhook_url,
        targets_dir=args.targets_dir or (
            cluster_dir / "targets" if (cluster_dir / "targets").is_dir() else None),
        prometheus_release=args.prometheus_release,
        native_histograms=None if args.histograms is None else args.histograms == "native",
        remote_write_url=args.remote_write_url,
        remote_write_receiver=args.remote_write_receiver,
        exporter_web_config=args.exporter_web_config,
        exporter_scrape_config=args.exporter_scrape_config,
    )


def run_action(args: argparse.Namespace, stack: Stack) -> int:
    try:
        if args.action == "up":
            seconds = stack.up()
            print(f"stack: up in {seconds:.1f}s")
            print(f"  Prometheus:     {stack.prometheus_url}")
            if stack.remote_write_receiver:
                print(f"  remote write:   {stack.prometheus_url}/api/v1/write (receiving)")
            if stack.remote_write_url:
                print(f"  forwarding to:  {stack.remote_write_url}")
            print(f"  Alertmanager:   {stack.alertmanager_url}")
            scraping = not stack.remote_write_receiver
            if scraping:
                print(f"  node_exporter:  {stack.node_exporter_url}/metrics")
            if stack.with_exporter and scraping:
                print(f"  exporter:       {stack.exporter_url}/metrics")
            if scraping:
                print(
                    f"  runner target:  127.0.0.1:{stack.runner_port} "
                    f"(cephscope sweep --metrics-port {stack.runner_port})"
                )
        elif args.action == "down":
            stopped = stack.down()
            print(f"stack: stopped {', '.join(stopped)}")
        elif args.action == "purge":
            stack.purge()
            print(f"stack: removed {stack.state_dir}")
        else:
            status = stack.status()
            if args.json:
                print(json.dumps(status, indent=2))
            else:
                for name, info in status["components"].items():
                    state = f"pid {info['pid']}" if info["pid"] else "stopped"
                    print(f"  {name:14} {state:12} {info['url']}")
            return 0 if all(i["pid"] for i in status["components"].values()) else 1
    except StackError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 1
    return 0
