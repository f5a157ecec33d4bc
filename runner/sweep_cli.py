"""`cephscope sweep SPEC.yaml`: run a CBT-style parametric sweep (see docs/runner.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cephscope.monclient import DEFAULT_CLUSTER_TIMEOUT_SECONDS
from cephscope.runner.annotations import TOKEN_ENV
from cephscope.runner.cephclient import CephError, CephTarget
from cephscope.runner.clients import SshSettings
from cephscope.runner.crashpoints import CrashPointError, checkpoint_from_environ
from cephscope.runner.hygiene import HygieneOptions
from cephscope.runner.options import (
    DEFAULT_POOL,
    DEFAULT_RBD_POOL,
    DEFAULT_RESTORE_TIMEOUT_SECONDS,
    SweepOptions,
)
from cephscope.runner.results import ResultsError
from cephscope.runner.spec import RESTART_METHODS, SSH_OPTION, SpecError
from cephscope.runner.sweep import Sweep, SweepError
from cephscope.runner.wiring import wiring_for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", nargs="?", type=Path, help="sweep spec (YAML, CBT-compatible)")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR",
                        help="finish an interrupted run: completed steps are kept, not redone")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the steps, the estimated duration, and every change and "
                             "command the sweep would make on every host; change nothing")
    parser.add_argument("--allow-unsafe-spec", action="store_true",
                        help="accept ssh options and sysctls outside the documented safe set "
                             "(docs/security.md): a spec is code, run it only if you trust it")
    parser.add_argument("--results-dir", type=Path,
                        help="directory of this run (default ./results/<run-id>)")
    cluster = parser.add_argument_group("cluster")
    cluster.add_argument("--conf", type=Path,
                         help="ceph.conf (default: the spec's cluster.conf_file, else "
                              "/etc/ceph/ceph.conf)")
    cluster.add_argument("--devcluster", type=Path, metavar="STATE_DIR",
                         help="use the dev cluster in STATE_DIR (conf, restarts, admin sockets)")
    cluster.add_argument("--asok-dir", type=Path, default=Path("/var/run/ceph"),
                         help="admin sockets for verifying config on this host "
                              "(default /var/run/ceph)")
    cluster.add_argument("--client-name", default="client.admin",
                         help="Ceph user the benchmarks and config changes run as "
                              "(default: client.admin)")
    cluster.add_argument("--keyring", type=Path,
                         help="keyring of that user (default: what the ceph.conf says)")
    cluster.add_argument("--restart-method", choices=RESTART_METHODS,
                         help="how to restart OSDs (overrides the spec's restart.method)")
    roll = cluster.add_mutually_exclusive_group()
    roll.add_argument("--rolling", dest="rolling", action="store_true", default=None,
                      help="restart OSDs one at a time (default: all in parallel)")
    roll.add_argument("--parallel", dest="rolling", action="store_false",
                      help="restart all OSDs at once (the default)")
    cluster.add_argument("--pool", default=DEFAULT_POOL,
                         help="pool for rados steps without a pool_profile (created if "
                              f"missing; default {DEFAULT_POOL})")
    cluster.add_argument("--rbd-pool", default=DEFAULT_RBD_POOL,
                         help="pool for librbdfio steps without a pool_profile (default "
                              f"{DEFAULT_RBD_POOL})")
    cluster.add_argument("--keep-pools", action="store_true",
                         help="keep the pools this run created")
    hosts = parser.add_argument_group("clients (benchmarks on other hosts, over SSH)")
    hosts.add_argument("--clients", metavar="HOST[,HOST…]",
                       help="run every step's benchmark on these hosts at once (default: the "
                       "spec's cluster.clients, else this machine)")
    hosts.add_argument("--ssh-config", type=Path, metavar="FILE",
                       help="ssh -F FILE (default: the spec's cluster.ssh_config, or the "
                       "ssh_config of a multi-host --devcluster)")
    hosts.add_argument("--ssh-user", help="remote user (default: spec cluster.user / ssh's)")
    hosts.add_argument("--ssh-port", type=int, help="remote port (default: ssh's)")
    hosts.add_argument("--ssh-identity-file", type=Path, metavar="FILE", help="private key")
    hosts.add_argument("--ssh-option", action="append", default=[], metavar="KEY=VALUE",
                       help="extra ssh -o option (repeatable)")
    hosts.add_argument("--ssh-connect-timeout", type=int, default=10, metavar="SECONDS",
                       help="ssh ConnectTimeout (default: %(default)s)")
    hosts.add_argument("--no-ssh-multiplex", dest="ssh_multiplex", action="store_false",
                       help="a new SSH connection per command instead of one multiplexed "
                       "master connection per client for the run")
    obs = parser.add_argument_group("observability")
    obs.add_argument("--metrics-port", type=int,
                     help="serve the runner's /metrics on 127.0.0.1:PORT (phase tagging)")
    obs.add_argument("--metrics-linger", type=float, default=30.0, metavar="SECONDS",
                     help="keep /metrics up this long after the last step so Prometheus scrapes "
                          "the end (default 30 = 2 x a 15 s scrape interval)")
    obs.add_argument("--prometheus-url",
                     help="pull system metrics of every step window into the results dir")
    obs.add_argument("--prometheus-rate-window", default="auto", metavar="DURATION",
                     help="rate() window for those queries (default auto: 4 x Prometheus' "
                          "scrape interval)")
    obs.add_argument("--grafana-url", help="write a region annotation per step")
    obs.add_argument("--grafana-token",
                     help=f"Grafana API token (default: ${TOKEN_ENV})")
    obs.add_argument("--grafana-dashboard-uid",
                     help="attach annotations to this dashboard (default: organisation-wide)")
    obs.add_argument("--baseline", type=Path, metavar="RUN_DIR",
                     help="publish this earlier run's per-step results as baseline metrics")
    hygiene = parser.add_argument_group("run hygiene (each on by default)")
    hygiene.add_argument("--no-drop-caches", dest="drop_caches", action="store_false",
                         help="do not sync + drop the page cache on OSD hosts and the client "
                              "before each step's measurement")
    hygiene.add_argument("--no-scrub-guard", dest="scrub_guard", action="store_false",
                         help="do not set noscrub/nodeep-scrub for the run nor wait for running "
                              "scrubs before each step")
    hygiene.add_argument("--no-health-gate", dest="health_gate", action="store_false",
                         help="do not wait for settled PGs and no unexpected health check")
    hygiene.add_argument("--health-timeout", type=float, default=120.0, metavar="SECONDS",
                         help="how long a step waits for the health gate (default 120)")
    hygiene.add_argument("--health-allow", action="append", default=[], metavar="CHECK",
                         help="a health check that does not stop a step (repeatable), "
                              "e.g. POOL_NO_REDUNDANCY")
    hygiene.add_argument("--idle-baseline", type=float, metavar="SECONDS",
                         help="quiet window at run start, tagged as a phase (default: the "
                              "spec's CBT idle_monitor_sleep, else 30; 0 = off; needs "
                              "--metrics-port or --prometheus-url to be of use)")
    hygiene.add_argument("--quiet-gap", type=non_negative_seconds, metavar="SECONDS",
                         help="no client I/O from the runner this long before and after every "
                              "measurement, so the scrapes around a step count only its own "
                              "OSD ops (default: Prometheus' scrape interval + 1 s with "
                              "--prometheus-url, else 0)")
    parser.add_argument("--step-timeout", type=float, metavar="SECONDS",
                        help="kill a step's benchmark after this long (default: 3 x estimate, "
                             "at least 600 s)")
    parser.add_argument("--cluster-timeout", type=positive_seconds,
                        default=DEFAULT_CLUSTER_TIMEOUT_SECONDS, metavar="SECONDS",
                        help="every call to the cluster gives up after this long (mon commands, "
                             "connecting, the ceph CLI, the benchmarks' librados); a call no mon "
                             "answered in time stops the run (default %(default)g)")
    parser.add_argument("--restore-timeout", type=positive_seconds,
                        default=DEFAULT_RESTORE_TIMEOUT_SECONDS, metavar="SECONDS",
                        help="after Ctrl-C/SIGTERM, the restore gives up after this long and says "
                             "what it left for --resume (default %(default)g)")
    parser.add_argument("--stop-on-failure", action="store_true",
                        help="stop at the first failed step (default: continue, exit 1)")


def non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r}: seconds, 0 or more")
    return value


def positive_seconds(text: str) -> float:
    value = non_negative_seconds(text)
    if value < 1:  # librados' timeouts are whole seconds, 0 meaning "none"
        raise argparse.ArgumentTypeError(f"{text!r}: seconds, 1 or more")
    return value


def options_from_args(args: argparse.Namespace, target: CephTarget | None = None) -> SweepOptions:
    """Raises CrashPointError for a bad test hook value (see cephscope.runner.crashpoints)."""
    return SweepOptions(
        spec_path=args.spec, resume_dir=args.resume, results_dir=args.results_dir,
        dry_run=args.dry_run, allow_unsafe_spec=args.allow_unsafe_spec, conf=args.conf,
        target=target,
        hygiene=HygieneOptions(drop_caches=args.drop_caches, scrub_guard=args.scrub_guard,
                               health_gate=args.health_gate,
                               idle_baseline_seconds=args.idle_baseline,
                               health_timeout_seconds=args.health_timeout,
                               health_allow=tuple(args.health_allow),
                               quiet_gap_seconds=args.quiet_gap),
        asok_dir=args.asok_dir, client_name=args.client_name, keyring=args.keyring,
        metrics_port=args.metrics_port, metrics_linger_seconds=args.metrics_linger,
        grafana_url=args.grafana_url,
        grafana_token=args.grafana_token or os.environ.get(TOKEN_ENV),
        grafana_dashboard_uid=args.grafana_dashboard_uid,
        prometheus_url=args.prometheus_url, prometheus_rate_window=args.prometheus_rate_window,
        baseline_dir=args.baseline, keep_pools=args.keep_pools, pool=args.pool, rbd_pool=args.rbd_pool,
        restart_method=args.restart_method, rolling=args.rolling,
        step_timeout_seconds=args.step_timeout, stop_on_failure=args.stop_on_failure,
        cluster_timeout_seconds=args.cluster_timeout,
        restore_timeout_seconds=args.restore_timeout,
        clients=tuple(n for n in args.clients.split(",") if n) if args.clients else None,
        ssh=SshSettings(config_file=args.ssh_config, user=args.ssh_user, port=args.ssh_port,
                        identity_file=args.ssh_identity_file, options=tuple(args.ssh_option),
                        connect_timeout=args.ssh_connect_timeout,
                        multiplex=args.ssh_multiplex),
        checkpoint=checkpoint_from_environ(os.environ),
    )


def run(args: argparse.Namespace, target: CephTarget | None = None) -> int:
    """`target`: how to reach the cluster when the caller built it (the `cephscope` command
    does for --devcluster; the runner itself never imports the dev cluster)."""
    if args.devcluster is not None and target is None:
        print("cephscope sweep: --devcluster is wired by the `cephscope` command "
              "(cephscope.sweep_command)", file=sys.stderr)
        return 2
    bad_options = [o for o in args.ssh_option if not SSH_OPTION.fullmatch(o)]
    if bad_options:
        print(f"cephscope sweep: --ssh-option {bad_options[0]!r}: not a Key=Value ssh option",
              file=sys.stderr)
        return 2
    if (args.spec is None) == (args.resume is None):
        print("cephscope sweep: give either SPEC or --resume RUN_DIR", file=sys.stderr)
        return 2
    if args.baseline is not None and not (args.baseline / "run.json").exists():
        print(f"cephscope sweep: --baseline {args.baseline}: not a run dir (no run.json)",
              file=sys.stderr)
        return 2
    try:
        opts = options_from_args(args, target)
    except CrashPointError as exc:
        print(f"cephscope sweep: {exc}", file=sys.stderr)
        return 2
    def log(message: str) -> None:
        print(message, flush=True)

    sweep = Sweep(opts, wiring_for(opts, log), log=log)
    try:
        return sweep.run()
    except SpecError as exc:
        print("cephscope sweep: invalid spec (nothing was changed on the cluster):",
              file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    except (SweepError, ResultsError, CephError, OSError) as exc:
        print(f"cephscope sweep: {exc}", file=sys.stderr)
        return 1
