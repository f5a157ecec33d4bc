"""The ceph.conf of a dev cluster: one template for the single-host and the multi-host shape."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ConfNetwork:
    """A multi-host cluster's networks and where each daemon keeps its admin socket."""

    public_subnet: str
    cluster_subnet: str
    asok_dirs: Mapping[str, Path]  # "osd.3" -> that daemon's host's admin socket dir


@dataclass(frozen=True)
class ConfGateway:
    """A RADOS gateway: its daemon name (`client.rgw.<id>`) and where its beast frontend listens."""

    name: str
    endpoint: str  # ADDR:PORT
    # boolean options turned on in its section (the release's `gateway_flags`)
    flags: tuple[str, ...] = ()


def dev_global_settings(chooseleaf: int) -> str:
    """[global] lines every dev cluster layout shares: small pools, fast PG stats, no noise."""
    return f"""\
osd_pool_default_min_size = 1
osd_pool_default_pg_autoscale_mode = off
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
osd_crush_chooseleaf_type = {chooseleaf}
mon_warn_on_pool_no_redundancy = false
mon_data_avail_warn = 2
mon_data_avail_crit = 1
mon_max_pg_per_osd = 1000
# PG stats every second: waiting for active+clean after an OSD restart takes ~1 s, not ~5 s.
mgr_stats_period = 1
# Only what the product needs: `restful` (a default) would listen on all addresses.
mgr_initial_modules = iostat
"""


def dev_osd_settings(osd_size_gib: int) -> str:
    """[osd] lines every dev cluster layout shares: bluestore of this size, 1 GiB of memory."""
    return f"""\
osd_objectstore = bluestore
osd_memory_target = 1073741824
bluestore_block_size = {osd_size_gib << 30}
osd_crush_update_on_start = true
"""


def render_conf(s: Path, fsid: str, mon_addr: str, mon_port: int, port_range: tuple[int, int],
                osd_size_gib: int, network: ConfNetwork | None = None, mds: bool = False,
                gateway: ConfGateway | None = None) -> str:
    """ceph.conf text; everything lives under the state dir `s`.

    Single host: every daemon on 127.0.0.1, pools of size 1, CRUSH failure domain osd.
    Multi-host: daemons pick their address from the public / cluster networks (one of each per
    namespace), pools of size 2 with failure domain host, admin sockets per host.
    `mds`: the MDS's data dir and keyring; `gateway`: the RADOS gateway's section.
    """
    low, high = port_range
    if network is None:
        network_lines = "public_network = 127.0.0.1/32\npublic_addr = 127.0.0.1\n"
        pool_size, chooseleaf = 1, 0
    else:
        network_lines = (f"public_network = {network.public_subnet}\n"
                         f"cluster_network = {network.cluster_subnet}\n")
        pool_size, chooseleaf = 2, 1
    conf = f"""\
# Written by `cephscope devcluster`; everything lives under {s}.
[global]
fsid = {fsid}
mon_host = v2:{mon_addr}:{mon_port}
{network_lines}ms_bind_msgr1 = false
ms_bind_port_min = {low}
ms_bind_port_max = {high}
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
run_dir = {s}/run
pid_file = {s}/run/$name.pid
admin_socket = {s}/run/$cluster-$name.asok
log_file = {s}/log/$cluster-$name.log
crash_dir = {s}/crash
mon_data = {s}/mon/$cluster-$id
mgr_data = {s}/mgr/$cluster-$id
osd_data = {s}/osd/$cluster-$id
osd_pool_default_size = {pool_size}
{dev_global_settings(chooseleaf)}
[mon]
keyring = $mon_data/keyring
auth_allow_insecure_global_id_reclaim = false

[mgr]
keyring = $mgr_data/keyring

[osd]
keyring = $osd_data/keyring
{dev_osd_settings(osd_size_gib)}
[client]
keyring = {s}/keyring
# Clients (rados bench, fio) would otherwise leave admin sockets in run_dir.
admin_socket =
log_file = {s}/log/$cluster-$name.$pid.log
"""
    if mds:
        conf += f"""
[mds]
mds_data = {s}/mds/$cluster-$id
keyring = $mds_data/keyring
"""
    asok_dirs = dict(network.asok_dirs) if network is not None else {}
    if gateway is not None:
        # A client section of its own: [client]'s keyring, empty admin socket and per-pid log
        # are for short-lived tools, not for a daemon.
        conf += f"""
[{gateway.name}]
rgw_data = {s}/rgw/$cluster-$id
keyring = $rgw_data/keyring
admin_socket = {asok_dirs.pop(gateway.name, Path(s, "run"))}/$cluster-$name.asok
log_file = {s}/log/$cluster-$name.log
rgw_frontends = beast endpoint={gateway.endpoint}
"""
        conf += "".join(f"{flag} = true\n" for flag in gateway.flags)
    for daemon, asok_dir in sorted(asok_dirs.items()):
        conf += f"\n[{daemon}]\nadmin_socket = {asok_dir}/$cluster-$name.asok\n"
    return conf
