"""`cephscope sweep`: the runner's sweep command, with the dev cluster joined in here.

This module is where the dev cluster (deploy) and the runner meet; neither imports the other.
With `--devcluster STATE_DIR` it builds the runner's `CephTarget` from the dev cluster: its
conf and admin keyring, its admin sockets, and its own OSD restart.
"""

from __future__ import annotations

import argparse
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
            "dev cluster", lambda ids, timeout: cluster.restart_osds(ids, timeout=timeout)),
        ssh_config=cluster.ssh_config,
        # A release other than this machine's runs its clients from its root filesystem too.
        tool_prefix=tuple(cluster.admin_command([])),
    )


def run(args: argparse.Namespace) -> int:
    target = devcluster_target(args.devcluster) if args.devcluster is not None else None
    return sweep_cli.run(args, target=target)
