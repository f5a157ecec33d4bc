"""The collaborators of one `DevCluster`, and the factory that makes the real ones.

`DevCluster` takes a `PartsFactory` (layout, log -> `ClusterParts`): `process_parts` is what
`cephscope devcluster` and the test fixtures use -- daemons as processes on this machine or on
namespace hosts, loop devices through losetup. A variant that places daemons elsewhere (in
containers) hands in its own factory; the unit tests hand in recording fakes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cephscope.deploy.cluster_bootstrap import ClusterBootstrap
from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_health import ClusterHealth
from cephscope.deploy.cluster_hosts import NamespaceHosts
from cephscope.deploy.cluster_layout import ClusterLayout
from cephscope.deploy.cluster_preflight import ClusterPreflight
from cephscope.deploy.cluster_services import ClusterServices
from cephscope.deploy.daemon_supervisor import DaemonPlacement, ProcessDaemons
from cephscope.deploy.loop_devices import LoopDevices, LoopDeviceUser
from cephscope.deploy.placement import Placement


@dataclass
class ClusterParts:
    commands: ClusterCommands
    daemons: DaemonPlacement
    loops: LoopDeviceUser
    health: ClusterHealth
    preflight: ClusterPreflight
    bootstrap: ClusterBootstrap
    services: ClusterServices
    hosts: NamespaceHosts | None  # None: a single-host cluster


PartsFactory = Callable[[ClusterLayout, Callable[[str], None]], ClusterParts]


def process_parts(layout: ClusterLayout, log: Callable[[str], None]) -> ClusterParts:
    """Daemons as processes on their hosts, from the cluster's release."""
    commands = ClusterCommands(layout, Placement(layout.state_dir))
    daemons = ProcessDaemons(layout, commands, log)
    loops = LoopDevices(commands.run_here, layout.device_class, log)
    health = ClusterHealth(layout, commands, log)
    return ClusterParts(
        commands=commands,
        daemons=daemons,
        loops=loops,
        health=health,
        preflight=ClusterPreflight(layout, loops.unavailable, log),
        bootstrap=ClusterBootstrap(layout, commands, daemons, loops, health, log),
        services=ClusterServices(layout, commands, daemons, health, log),
        hosts=NamespaceHosts(layout, layout.host_plan, log) if layout.host_plan is not None else None,
    )
