"""How a sweep reaches the cluster and its hosts, built before the sweep starts and handed to
it: the ceph CLI, the config manager with its restart method, the clients the benchmarks run
on, host knobs and run hygiene. No command is sent while building."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cephscope.runner.cephclient import CephCli, CephTarget
from cephscope.runner.clients import ClientsError, build_clients, ssh_control_dir
from cephscope.runner.hostexec import HostExec, LocalHost
from cephscope.runner.hygiene import Hygiene
from cephscope.runner.knobs.ceph_config import ConfigManager
from cephscope.runner.knobs.host import CLIENT_HOST, HostKnobs
from cephscope.runner.options import DEFAULT_CONF, SweepOptions
from cephscope.runner.restart import RestartJournal, make_restart_method
from cephscope.runner.rgw_endpoint import RgwEndpoint, RgwEndpointError, resolve
from cephscope.runner.spec import Spec

Log = Callable[[str], None]


class WiringError(RuntimeError):
    """The cluster or a client cannot be reached as asked (said before any change)."""


def local_host(name: str) -> HostExec:
    return LocalHost()


@dataclass
class ClusterParts:
    """What talks to the cluster. `host_knobs` and `hygiene` are None where no host can be
    reached (unit tests' in-memory cluster)."""
    cli: CephCli
    config: ConfigManager
    host_knobs: HostKnobs | None = None
    hygiene: Hygiene | None = None


@dataclass
class Collaborators:
    """Everything a sweep works through. `cluster` is None only for a dry run whose ceph conf
    does not exist (it plans without a cluster)."""
    target: CephTarget
    cluster: ClusterParts | None
    clients: list[HostExec] = field(default_factory=list)  # empty: benchmarks run here
    ssh_control_dir: Path | None = None  # the clients' multiplexing sockets
    client_hosts: list[str] = field(default_factory=lambda: [CLIENT_HOST])
    host_for: Callable[[str], HostExec] = local_host
    # the RADOS Gateway and its keys, from the spec, the target and the flags (empty: none)
    rgw: RgwEndpoint = field(default_factory=RgwEndpoint)


# (spec, target or None for the options' own, the run's restart journal) -> collaborators;
# called at the start and again after a release rebuild hands a new target
Wire = Callable[[Spec, CephTarget | None, RestartJournal], Collaborators]


def wire(opts: SweepOptions, spec: Spec, target: CephTarget | None, journal: RestartJournal,
         log: Log) -> Collaborators:
    """The real collaborators for `spec` run with `opts` (`target`: how to reach the cluster
    when the caller decided it, e.g. the dev cluster)."""
    o = opts
    target = target or o.target
    if target is None:
        target = CephTarget.plain(o.conf or Path(spec.conf_file or DEFAULT_CONF),
                                  o.client_name, o.keyring, o.asok_dir, spec.cluster_name)
    try:
        rgw = resolve(spec.rgw, target.rgw, o.rgw)
    except RgwEndpointError as exc:
        raise WiringError(str(exc)) from exc
    names = o.clients if o.clients is not None else spec.hosts.clients
    ssh = o.ssh.merged(spec.hosts, target.ssh_config)
    control_dir = None
    try:
        if names and ssh.multiplex and not o.dry_run:
            run_key = o.resume_dir or o.results_dir or o.spec_path
            control_dir = ssh_control_dir(Path(run_key or "."))
        clients = build_clients(names, ssh, control_dir=control_dir)
    except ClientsError as exc:
        raise WiringError(str(exc)) from exc
    if not Path(target.conf_path).exists():
        if o.dry_run:  # a dry run can plan without a cluster
            return Collaborators(target, None, clients, control_dir, rgw=rgw)
        raise WiringError(f"ceph conf {target.conf_path} does not exist (use --conf or "
                          f"--devcluster)")
    cli = CephCli(target.conf_path, client_name=target.client_name,
                  keyring_path=target.keyring_path, tool_prefix=target.tool_prefix,
                  timeout_seconds=o.cluster_timeout_seconds)
    method = o.restart_method or spec.restart.method
    if method is None and target.default_restart is not None:
        method = "devcluster"
    restart = (make_restart_method(method, cli, target.default_restart, spec.restart.command,
                                   fsid=spec.restart.fsid)
               if method else None)
    rolling = spec.restart.rolling if o.rolling is None else o.rolling
    config = ConfigManager(cli, restart, target.osd_asok, rolling=rolling,
                           timeout_seconds=spec.restart.timeout_seconds, log=log,
                           checkpoint=o.checkpoint, restart_journal=journal)
    # host knobs, cache drops and the environment reach the clients the benchmarks run on
    by_name = {c.name: c for c in clients}
    client_hosts = list(by_name) or [CLIENT_HOST]
    reach = target  # bound for the closure (target is rebound above)

    def host_for(name: str) -> HostExec:
        return by_name.get(name) or reach.host_for(name)

    host_knobs = HostKnobs(cli, host_for, spec.sysctl_on, client_hosts=client_hosts)
    hygiene = Hygiene(cli, host_for, host_knobs.devices, o.hygiene, log=log,
                      client_hosts=client_hosts)
    return Collaborators(target, ClusterParts(cli, config, host_knobs, hygiene), clients,
                         control_dir, client_hosts, host_for, rgw)


def wiring_for(opts: SweepOptions, log: Log) -> Wire:
    """The `Wire` the CLI hands a sweep."""
    return lambda spec, target, journal: wire(opts, spec, target, journal, log)
