"""`cephscope sweep`: the runner's sweep command, with the dev cluster joined in here.

This module is where the dev cluster (deploy) and the runner meet; neither imports the other.
With `--devcluster STATE_DIR` it builds the runner's `CephTarget` from the dev cluster: its
conf and admin keyring, its admin sockets, its own OSD restart, the client tools of its
release, its RADOS gateway and test user's keys (`devcluster up --rgw`), and
(`devcluster: {release: [...]}`) its rebuild on another release.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cephscope.runner import sweep_cli
from cephscope.runner.cephclient import CephTarget
from cephscope.runner.restart import FunctionRestart
from cephscope.runner.rgw_endpoint import RgwEndpoint, endpoint

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
        rgw=devcluster_rgw(cluster),
    )


def devcluster_rgw(cluster: Any) -> RgwEndpoint | None:
    """The dev cluster's gateway and its user's keys (its rgw.json), None without --rgw."""
    if not cluster.rgw:
        return None
    access = cluster.rgw_access()
    return endpoint("--devcluster", s3_url=access.endpoint, access_key=access.access_key,
                    secret_key=access.secret_key, swift_auth_url=access.swift_auth_url,
                    swift_user=access.swift_user, swift_key=access.swift_key)


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
                             clients=state.clients, release=release, mds=state.mds,
                             rgw=state.rgw)
            new.up()
        return devcluster_target(self.state_dir), rebuild


def run(args: argparse.Namespace) -> int:
    from cephscope.deploy.cluster_layout import DevClusterError

    try:
        target = devcluster_target(args.devcluster) if args.devcluster is not None else None
    except DevClusterError as exc:  # e.g. its rgw.json gone: said, nothing changed
        print(f"cephscope sweep: --devcluster {args.devcluster}: {exc}", file=sys.stderr)
        return 2
    return sweep_cli.run(args, target=target)
