"""`cephscope sweep`: the runner's sweep command, with the dev cluster joined in here.

This module is where the dev cluster (deploy) and the runner meet; neither imports the other.
With `--devcluster STATE_DIR` it builds the runner's `CephTarget` from the dev cluster: its
conf and admin keyring, its admin sockets, its own OSD restart, the client tools of its
release, and (`devcluster: {release: [...]}`) its rebuild on another release.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from cephscope.runner import sweep_cli
from cephscope.runner.cephclient import CephTarget
from cephscope.runner.restart import FunctionRestart

add_arguments = sweep_cli.add_arguments


def devcluster_target(state_dir: Path) -> CephTarget:
    from cephscope.deploy.devcluster import DevCluster

    cluster = DevCluster(state_dir)
    # A multi-host dev cluster's OSD hosts are reached over SSH by their hostnames, as real ones.
    ssh = {"config_file": cluster.ssh_config} if cluster.ssh_config is not None else None
    plain = CephTarget.plain(cluster.conf_path, "client.admin", None, cluster.asok_dir, "ceph",
                             ssh_settings=ssh)
    return CephTarget(
        conf_path=cluster.conf_path,
        client_name="client.admin",
        keyring_path=None,  # the dev cluster's conf names its admin keyring
        osd_asok=cluster.osd_asok,
        host_for=plain.host_for,
        default_restart=FunctionRestart(
            "dev cluster", lambda ids, timeout, on_stopped: cluster.restart_osds(
                ids, timeout=timeout, on_stopped=on_stopped)),
        ssh_config=cluster.ssh_config,
        # A release other than this machine's runs its clients from its root filesystem too.
        tool_prefix=tuple(cluster.admin_command([])),
        releases=DevClusterReleases(state_dir),
    )


class DevClusterReleases:
    """The runner's `ReleaseSwitch` for the dev cluster in `state_dir`: a release other than
    the one it runs means purge and up again with the same shape (OSDs, their size, device
    class, backing, hosts, clients, ports) on that release."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    @staticmethod
    def _runs_on_host_packages(name: str) -> bool:
        from cephscope.deploy import rootfs

        major = rootfs.upstream_major(rootfs.host_ceph_version())
        return major is not None and major == rootfs.release_spec(name).ceph_major

    def running(self) -> str:
        """The release the dev cluster runs now, by name ("host" resolved to its release)."""
        from cephscope.deploy import rootfs
        from cephscope.deploy.devcluster import DevCluster

        name = DevCluster(self.state_dir).release.name
        if name == "host":
            name = next((r for r in rootfs.RELEASES if self._runs_on_host_packages(r)), name)
        return name

    def problems(self, releases: Sequence[str], prepare: bool) -> list[str]:
        from cephscope.deploy import rootfs

        found = []
        for name in releases:
            try:
                rootfs.release_spec(name)
                if not self._runs_on_host_packages(name) and prepare:
                    rootfs.build(name)  # cached after the first time (about 1 minute)
            except rootfs.RootfsError as exc:
                found.append(f"{name}: {exc}")
        return found

    def switch(self, release: str) -> tuple[CephTarget, bool]:
        from cephscope.deploy.devcluster import DevCluster

        rebuild = self.running() != release
        if rebuild:
            old = DevCluster(self.state_dir)
            state = old.load_state()
            old.purge()
            new = DevCluster(self.state_dir, port_base=state.port_base, num_osds=state.num_osds,
                             osd_size_gib=state.osd_size_gib, backing=state.backing,
                             device_class=state.device_class, hosts=state.hosts,
                             clients=state.clients, release=release)
            new.up()
        return devcluster_target(self.state_dir), rebuild


def run(args: argparse.Namespace) -> int:
    target = devcluster_target(args.devcluster) if args.devcluster is not None else None
    return sweep_cli.run(args, target=target)
