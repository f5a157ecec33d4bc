"""`cephscope sweep SPEC.yaml`: run a CBT-style parametric sweep (see docs/runner.md)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from cephscope.runner.rgw_endpoint import ENV_ACCESS_KEY, ENV_SECRET_KEY, ENV_SWIFT_KEY, RgwFlags
from cephscope.runner.spec import RESTART_METHODS, SSH_OPTION, SpecError
from cephscope.runner.sweep import Sweep, SweepError
from cephscope.runner.wiring import wiring_for


@dataclass(frozen=True)
class Flag:
    """One runner option, declared once: its command-line flag and where its value goes in
    `SweepOptions` (`to`: a field, `hygiene.X` / `ssh.X` for the nested settings; None: the
    command's own, or a flag sharing another's destination)."""
    names: tuple[str, ...]
    to: str | None
    group: str | None = None  # the help's argument group (None: the top level)
    exclusive: bool = False  # one of the mutually exclusive flags of its group
    convert: Callable[[Any], Any] | None = None  # the parsed value -> the option's value
    kwargs: Mapping[str, Any] = field(default_factory=dict)  # argparse's own

    @property
    def dest(self) -> str:
        name = self.names[0]
        return str(self.kwargs.get("dest") or name.lstrip("-").replace("-", "_"))


def flag(*names: str, to: str | None, group: str | None = None, exclusive: bool = False,
         convert: Callable[[Any], Any] | None = None, **kwargs: Any) -> Flag:
    return Flag(names, to, group, exclusive, convert, kwargs)


CLUSTER = "cluster"
CLIENTS = "clients (benchmarks on other hosts, over SSH)"
OBSERVABILITY = "observability"
HYGIENE = "run hygiene (each on by default)"
RGW = (f"RADOS Gateway (swiftbench, hsbench, getput; keys never on the command line: "
       f"--rgw-keys-file or ${ENV_ACCESS_KEY}, ${ENV_SECRET_KEY}, ${ENV_SWIFT_KEY})")


def _client_names(text: str | None) -> tuple[str, ...] | None:
    return tuple(n for n in text.split(",") if n) if text else None


def _grafana_token(token: str | None) -> str | None:
    return token or os.environ.get(TOKEN_ENV)


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


FLAGS: tuple[Flag, ...] = (
    flag("spec", to="spec_path", nargs="?", type=Path,
         help="sweep spec (YAML, CBT-compatible)"),
    flag("--resume", to="resume_dir", type=Path, metavar="RUN_DIR",
         help="finish an interrupted run: completed steps are kept, not redone"),
    flag("--dry-run", to="dry_run", action="store_true",
         help="list the steps, the estimated duration, and every change and command the "
              "sweep would make on every host; change nothing"),
    flag("--allow-unsafe-spec", to="allow_unsafe_spec", action="store_true",
         help="accept ssh options and sysctls outside the documented safe set "
              "(docs/security.md): a spec is code, run it only if you trust it"),
    flag("--results-dir", to="results_dir", type=Path,
         help="directory of this run (default ./results/<run-id>)"),
    flag("--conf", to="conf", group=CLUSTER, type=Path,
         help="ceph.conf (default: the spec's cluster.conf_file, else /etc/ceph/ceph.conf)"),
    flag("--devcluster", to=None, group=CLUSTER, type=Path, metavar="STATE_DIR",
         help="use the dev cluster in STATE_DIR (conf, restarts, admin sockets)"),
    flag("--asok-dir", to="asok_dir", group=CLUSTER, type=Path, default=Path("/var/run/ceph"),
         help="admin sockets for verifying config on this host (default /var/run/ceph)"),
    flag("--client-name", to="client_name", group=CLUSTER, default="client.admin",
         help="Ceph user the benchmarks and config changes run as (default: client.admin)"),
    flag("--keyring", to="keyring", group=CLUSTER, type=Path,
         help="keyring of that user (default: what the ceph.conf says)"),
    flag("--restart-method", to="restart_method", group=CLUSTER, choices=RESTART_METHODS,
         help="how to restart OSDs (overrides the spec's restart.method)"),
    flag("--rolling", to="rolling", group=CLUSTER, exclusive=True, dest="rolling",
         action="store_true", default=None,
         help="restart OSDs one at a time (default: all in parallel)"),
    flag("--parallel", to=None, group=CLUSTER, exclusive=True, dest="rolling",
         action="store_false",
         help="restart all OSDs at once (the default)"),
    flag("--pool", to="pool", group=CLUSTER, default=DEFAULT_POOL,
         help="pool for rados steps without a pool_profile (created if "
              f"missing; default {DEFAULT_POOL})"),
    flag("--rbd-pool", to="rbd_pool", group=CLUSTER, default=DEFAULT_RBD_POOL,
         help="pool for librbdfio steps without a pool_profile (default "
              f"{DEFAULT_RBD_POOL})"),
    flag("--keep-pools", to="keep_pools", group=CLUSTER, action="store_true",
         help="keep the pools this run created"),
    flag("--clients", to="clients", group=CLIENTS, convert=_client_names, metavar="HOST[,HOST…]",
         help="run every step's benchmark on these hosts at once (default: the spec's "
              "cluster.clients, else this machine)"),
    flag("--ssh-config", to="ssh.config_file", group=CLIENTS, type=Path, metavar="FILE",
         help="ssh -F FILE (default: the spec's cluster.ssh_config, or the ssh_config of a "
              "multi-host --devcluster)"),
    flag("--ssh-user", to="ssh.user", group=CLIENTS,
         help="remote user (default: spec cluster.user / ssh's)"),
    flag("--ssh-port", to="ssh.port", group=CLIENTS, type=int,
         help="remote port (default: ssh's)"),
    flag("--ssh-identity-file", to="ssh.identity_file", group=CLIENTS, type=Path, metavar="FILE",
         help="private key"),
    flag("--ssh-option", to="ssh.options", group=CLIENTS, convert=tuple, action="append",
         default=[], metavar="KEY=VALUE",
         help="extra ssh -o option (repeatable)"),
    flag("--ssh-connect-timeout", to="ssh.connect_timeout", group=CLIENTS, type=int, default=10,
         metavar="SECONDS",
         help="ssh ConnectTimeout (default: %(default)s)"),
    flag("--no-ssh-multiplex", to="ssh.multiplex", group=CLIENTS, dest="ssh_multiplex",
         action="store_false",
         help="a new SSH connection per command instead of one multiplexed master connection "
              "per client for the run"),
    flag("--metrics-port", to="metrics_port", group=OBSERVABILITY, type=int,
         help="serve the runner's /metrics on 127.0.0.1:PORT (phase tagging)"),
    flag("--metrics-linger", to="metrics_linger_seconds", group=OBSERVABILITY, type=float,
         default=30.0, metavar="SECONDS",
         help="keep /metrics up this long after the last step so Prometheus scrapes the end "
              "(default 30 = 2 x a 15 s scrape interval)"),
    flag("--prometheus-url", to="prometheus_url", group=OBSERVABILITY,
         help="pull system metrics of every step window into the results dir"),
    flag("--prometheus-rate-window", to="prometheus_rate_window", group=OBSERVABILITY,
         default="auto", metavar="DURATION",
         help="rate() window for those queries (default auto: 4 x Prometheus' scrape "
              "interval)"),
    flag("--grafana-url", to="grafana_url", group=OBSERVABILITY,
         help="write a region annotation per step"),
    flag("--grafana-token", to="grafana_token", group=OBSERVABILITY, convert=_grafana_token,
         help=f"Grafana API token (default: ${TOKEN_ENV})"),
    flag("--grafana-dashboard-uid", to="grafana_dashboard_uid", group=OBSERVABILITY,
         help="attach annotations to this dashboard (default: organisation-wide)"),
    flag("--baseline", to="baseline_dir", group=OBSERVABILITY, type=Path, metavar="RUN_DIR",
         help="publish this earlier run's per-step results as baseline metrics"),
    flag("--rgw-endpoint", to="rgw.endpoint", group=RGW, metavar="URL",
         help="the gateway's S3 endpoint, e.g. http://rgw1:8080 (default: the dev cluster's, "
              "else the spec's rgw.endpoint)"),
    flag("--rgw-swift-auth-url", to="rgw.swift_auth_url", group=RGW, metavar="URL",
         help="the gateway's Swift auth URL, e.g. http://rgw1:8080/auth/v1.0"),
    flag("--rgw-swift-user", to="rgw.swift_user", group=RGW, metavar="ACCOUNT:SUBUSER",
         help="the Swift user, e.g. bench:swift"),
    flag("--rgw-keys-file", to="rgw.keys_file", group=RGW, type=Path, metavar="FILE",
         help="JSON or YAML with any of endpoint, access_key, secret_key, swift_auth_url, "
              "swift_user, swift_key (a dev cluster's rgw.json is one); overrides the spec "
              "and the dev cluster"),
    flag("--no-drop-caches", to="hygiene.drop_caches", group=HYGIENE, dest="drop_caches",
         action="store_false",
         help="do not sync + drop the page cache on OSD hosts and the client before each "
              "step's measurement"),
    flag("--no-scrub-guard", to="hygiene.scrub_guard", group=HYGIENE, dest="scrub_guard",
         action="store_false",
         help="do not set noscrub/nodeep-scrub for the run nor wait for running scrubs "
              "before each step"),
    flag("--no-health-gate", to="hygiene.health_gate", group=HYGIENE, dest="health_gate",
         action="store_false",
         help="do not wait for settled PGs and no unexpected health check"),
    flag("--health-timeout", to="hygiene.health_timeout_seconds", group=HYGIENE, type=float,
         default=120.0, metavar="SECONDS",
         help="how long a step waits for the health gate (default 120)"),
    flag("--health-allow", to="hygiene.health_allow", group=HYGIENE, convert=tuple,
         action="append", default=[], metavar="CHECK",
         help="a health check that does not stop a step (repeatable), e.g. POOL_NO_REDUNDANCY"),
    flag("--idle-baseline", to="hygiene.idle_baseline_seconds", group=HYGIENE, type=float,
         metavar="SECONDS",
         help="quiet window at run start, tagged as a phase (default: the spec's CBT "
              "idle_monitor_sleep, else 30; 0 = off; needs --metrics-port or "
              "--prometheus-url to be of use)"),
    flag("--quiet-gap", to="hygiene.quiet_gap_seconds", group=HYGIENE, type=non_negative_seconds,
         metavar="SECONDS",
         help="no client I/O from the runner this long before and after every measurement, "
              "so the scrapes around a step count only its own OSD ops (default: Prometheus' "
              "scrape interval + 1 s with --prometheus-url, else 0)"),
    flag("--step-timeout", to="step_timeout_seconds", type=float, metavar="SECONDS",
         help="kill a step's benchmark after this long (default: 3 x estimate, at least 600 "
              "s)"),
    flag("--cluster-timeout", to="cluster_timeout_seconds", type=positive_seconds,
         default=DEFAULT_CLUSTER_TIMEOUT_SECONDS, metavar="SECONDS",
         help="every call to the cluster gives up after this long (mon commands, connecting, "
              "the ceph CLI, the benchmarks' librados); a call no mon answered in time stops "
              "the run (default %(default)g)"),
    flag("--restore-timeout", to="restore_timeout_seconds", type=positive_seconds,
         default=DEFAULT_RESTORE_TIMEOUT_SECONDS, metavar="SECONDS",
         help="after Ctrl-C/SIGTERM, the restore gives up after this long and says what it "
              "left for --resume (default %(default)g)"),
    flag("--stop-on-failure", to="stop_on_failure", action="store_true",
         help="stop at the first failed step (default: continue, exit 1)"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    groups: dict[str, Any] = {}
    exclusive: dict[str, Any] = {}
    for f in FLAGS:
        where: Any = parser
        if f.group is not None:
            if f.group not in groups:
                groups[f.group] = parser.add_argument_group(f.group)
            where = groups[f.group]
            if f.exclusive:
                if f.group not in exclusive:
                    exclusive[f.group] = where.add_mutually_exclusive_group()
                where = exclusive[f.group]
        where.add_argument(*f.names, **f.kwargs)


def options_from_args(args: argparse.Namespace, target: CephTarget | None = None) -> SweepOptions:
    """The options the flags set (FLAGS). Raises CrashPointError for a bad test hook value
    (see cephscope.runner.crashpoints)."""
    values: dict[str, dict[str, Any]] = {"": {}, "hygiene": {}, "ssh": {}, "rgw": {}}
    for f in FLAGS:
        if f.to is None:
            continue
        value = getattr(args, f.dest)
        section, _, name = f.to.rpartition(".")
        values[section][name] = f.convert(value) if f.convert is not None else value
    return SweepOptions(**values[""], target=target,
                        hygiene=HygieneOptions(**values["hygiene"]),
                        ssh=SshSettings(**values["ssh"]), rgw=RgwFlags(**values["rgw"]),
                        checkpoint=checkpoint_from_environ(os.environ))


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
