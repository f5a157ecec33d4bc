"""The namespace hosts of a multi-host dev cluster, as one part: their network (namespaces,
bridges, veths; deploy/hosts.py), their services (sshd, exporter, node_exporter;
deploy/hostdaemons.py), and tearing both down, including whatever a runner left running in
them. A single-host cluster has none of this."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.deploy.hostdaemons import HostDaemons, ssh_reachable
from cephscope.deploy.hosts import HostNetwork, HostNetworkError, HostPlan
from cephscope.deploy.procs import pid_alive, terminate


class NamespaceHosts:
    """The hosts of `plan` for the cluster laid out by `layout`."""

    def __init__(self, layout: ClusterLayout, plan: HostPlan, log: Callable[[str], None]) -> None:
        self.layout = layout
        self.plan = plan
        self._log = log
        self.daemons = HostDaemons(layout.state_dir, plan, layout.conf_path, layout.asok_dir_of, log=log)

    def up_network(self) -> None:
        """Namespaces, bridges, veths and ssh files of every host. The plan is saved first, so
        that `down` after a partial `up` finds what to remove."""
        plan = self.plan
        plan.save(self.layout.hosts_file)
        for host in plan.osd_hosts:
            self.layout.asok_dir_of(host.name).mkdir(parents=True, exist_ok=True)
        try:
            HostNetwork(plan, log=self._log).create()
        except HostNetworkError as exc:
            raise DevClusterError(str(exc)) from exc
        self.daemons.write_ssh_files()
        self._log(f"devcluster: {len(plan.osd_hosts)} hosts + {len(plan.clients)} clients on "
                  f"{plan.public_subnet} (public), {plan.cluster_subnet} (cluster)")

    def start_services(self) -> None:
        """sshd, exporter and node_exporter on every host; the Prometheus targets files."""
        daemons = self.daemons
        for host in self.plan.hosts:
            daemons.start(host)
        daemons.write_targets()
        deadline = time.monotonic() + 30
        while failing := ssh_reachable(self.plan.hosts, daemons.ssh_config):
            if time.monotonic() > deadline:
                raise DevClusterError(f"sshd not reachable on {', '.join(failing)}; "
                                      f"see {self.layout.log_dir}")
            time.sleep(0.5)

    def namespaces_present(self) -> list[str]:
        return [h.netns for h in self.plan.hosts if Path("/run/netns", h.netns).exists()]

    def down(self) -> dict[str, int]:
        """Stop the host services and whatever else runs in our namespaces, then remove the
        network; what was stopped (name -> pid, 0 when not known)."""
        stopped: dict[str, int] = {name: 0 for name in self.daemons.stop()}
        network = HostNetwork(self.plan, log=self._log)
        # Whatever else still runs in our namespaces was started there through us (a
        # benchmark a runner left behind): the namespaces cannot go while it lives.
        for host in self.plan.hosts:
            for pid in network.namespace_pids(host):
                if pid_alive(pid):
                    with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                        terminate(pid, 10, log=self._log)
                    stopped[f"pid {pid}@{host.name}"] = pid
        network.remove()
        return stopped

    def status(self) -> dict[str, Any]:
        return {
            "hosts": {
                h.name: {"role": h.role, "netns": h.netns, "public_addr": h.public_addr,
                         "cluster_addr": h.cluster_addr,
                         "up": Path("/run/netns", h.netns).exists()}
                for h in self.plan.hosts
            },
            "host_services": self.daemons.running(),
            "ssh_config": str(self.daemons.ssh_config),
        }
