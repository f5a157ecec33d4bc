"""A dev cluster's services beyond RADOS, for CephFS and object-store benchmarks: one MDS
(`mds.a`) serving the filesystem `cephfs`, and one RADOS gateway (`client.rgw.a`, beast on the
cluster's last port, on the first host's public address) with a user `cephscope` that has S3
keys and a Swift subuser `cephscope:swift`, written to `rgw.json`.

They are made after the OSDs (their pools need them) and started after them on a later `up`;
the coordinator (deploy/devcluster.py) decides when, this part does the work. Daemons start
through the injected `DaemonPlacement`, like the others.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_health import ClusterHealth
from cephscope.deploy.cluster_layout import MDS_ID, RGW_NAME, ClusterLayout, DevClusterError
from cephscope.deploy.daemon_supervisor import DaemonPlacement
from cephscope.deploy.rgw_access import SWIFT_AUTH_PATH, RgwAccess

CEPHFS_NAME = "cephfs"
CEPHFS_METADATA_POOL = "cephfs_metadata"
CEPHFS_DATA_POOL = "cephfs_data"
# PG autoscaling is off on the dev cluster, so every pool keeps the PGs it is made with: these
# pools hold little, and few PGs keep idle OSD work and peering time small.
SERVICE_POOL_PGS = 8
# The pools of the gateway's default zone (the same names from 16.2 to 20.2). Made here because
# the gateway would make each with the mon's default pg_num (32: 224 more PGs on the OSDs).
RGW_POOLS = (
    ".rgw.root",
    "default.rgw.log",
    "default.rgw.control",
    "default.rgw.meta",
    "default.rgw.buckets.index",
    "default.rgw.buckets.data",
    "default.rgw.buckets.non-ec",
)
RGW_USER = "cephscope"
SWIFT_SUBUSER = f"{RGW_USER}:swift"
START_TIMEOUT = 90


class ClusterServices:
    """The MDS and the gateway of the cluster laid out by `layout` (as it has them)."""

    def __init__(self, layout: ClusterLayout, commands: ClusterCommands, daemons: DaemonPlacement,
                 health: ClusterHealth, log: Callable[[str], None]) -> None:
        self.layout = layout
        self.commands = commands
        self.daemons = daemons
        self.health = health
        self._log = log

    @property
    def rgw_endpoint(self) -> str:
        return f"http://{self.layout.rgw_addr}:{self.layout.rgw_port}"

    def create(self) -> None:
        """Keys, pools and the filesystem; then the daemons; then the gateway's user."""
        layout = self.layout
        if not layout.service_names():
            return
        t0 = time.monotonic()
        # Two rounds of commands sent together (ClusterCommands.ceph_together): what needs
        # nothing but the OSDs, then what needs the pools.
        first: list[list[str]] = []
        then: list[list[str]] = []
        if layout.mds:
            layout.mds_data.mkdir(parents=True, exist_ok=True)
            first += [
                key_command(f"mds.{MDS_ID}", layout.mds_data,
                            ["mon", "allow profile mds", "osd", "allow rw tag cephfs *=*",
                             "mds", "allow", "mgr", "allow profile mds"]),
                pool_command(CEPHFS_METADATA_POOL),
                pool_command(CEPHFS_DATA_POOL),
            ]
            # `fs new` tags both pools for cephfs. One MDS and never a standby: the mon leaves
            # the filesystem's standby_count_wanted unset (it sets 1 only once a standby
            # exists), so no MDS_INSUFFICIENT_STANDBY keeps the cluster from HEALTH_OK.
            then.append(["fs", "new", CEPHFS_NAME, CEPHFS_METADATA_POOL, CEPHFS_DATA_POOL])
        if layout.rgw:
            layout.rgw_data.mkdir(parents=True, exist_ok=True)
            first.append(key_command(RGW_NAME, layout.rgw_data,
                                     ["mon", "allow rw", "osd", "allow rwx", "mgr", "allow rw"]))
            first += [pool_command(pool) for pool in RGW_POOLS]
            # A pool without an application raises POOL_APP_NOT_ENABLED.
            then += [["osd", "pool", "application", "enable", pool, "rgw"] for pool in RGW_POOLS]
        self.commands.ceph_together(first)
        self.commands.ceph_together(then)
        self.start()
        if layout.rgw:
            self.create_rgw_user()
        self._log(f"devcluster: {' and '.join(layout.service_names())} up "
                  f"({time.monotonic() - t0:.1f}s)")

    def start(self) -> None:
        """Start the MDS and the gateway; return once the MDS is up:active and the gateway
        answers HTTP."""
        for name in self.layout.service_names():
            self.daemons.start(name)
        if self.layout.mds:
            self.health.wait_mds_active(CEPHFS_NAME, MDS_ID, timeout=START_TIMEOUT)
        if self.layout.rgw:
            self.health.wait_http(self.rgw_endpoint + "/", RGW_NAME, timeout=START_TIMEOUT)

    def create_rgw_user(self) -> RgwAccess:
        """The user with generated S3 keys, its Swift subuser with a generated secret, written to
        rgw.json."""
        admin = ["radosgw-admin", "-c", str(self.layout.conf_path)]
        user = self._admin_json([*admin, "user", "create", "--uid", RGW_USER,
                                 "--display-name", "cephscope benchmarks"])
        subuser = self._admin_json([*admin, "subuser", "create", "--uid", RGW_USER,
                                    "--subuser", SWIFT_SUBUSER, "--access", "full",
                                    "--key-type", "swift", "--gen-secret"])
        s3 = key_of(user, "keys", RGW_USER)
        swift = key_of(subuser, "swift_keys", SWIFT_SUBUSER)
        access = RgwAccess(
            endpoint=self.rgw_endpoint,
            access_key=str(s3.get("access_key") or ""),
            secret_key=str(s3.get("secret_key") or ""),
            swift_auth_url=self.rgw_endpoint + SWIFT_AUTH_PATH,
            swift_user=SWIFT_SUBUSER,
            swift_key=str(swift.get("secret_key") or ""),
        )
        if not (access.access_key and access.secret_key and access.swift_key):
            raise DevClusterError("radosgw-admin made the gateway's user without keys")
        access.save(self.layout.rgw_file)
        return access

    def _admin_json(self, argv: list[str]) -> dict[str, Any]:
        out = self.commands.run(argv, timeout=60).stdout
        try:
            answer = json.loads(out)
        except ValueError as exc:
            raise DevClusterError(f"{' '.join(argv[3:5])}: radosgw-admin answered no JSON") from exc
        if not isinstance(answer, dict):
            raise DevClusterError(f"{' '.join(argv[3:5])}: radosgw-admin answered no JSON object")
        return answer

    def rgw_access(self) -> RgwAccess:
        if not self.layout.rgw:
            raise DevClusterError(f"the dev cluster in {self.layout.state_dir} has no RADOS gateway "
                                  f"(make one with --rgw)")
        return RgwAccess.load(self.layout.rgw_file)


def pool_command(pool: str) -> list[str]:
    return ["osd", "pool", "create", pool, str(SERVICE_POOL_PGS), str(SERVICE_POOL_PGS), "replicated"]


def key_command(name: str, data_dir: Path, caps: list[str]) -> list[str]:
    """The daemon's key, written to its keyring in its data dir (never on a command line)."""
    return ["auth", "get-or-create", name, *caps, "-o", str(data_dir / "keyring")]


def key_of(answer: dict[str, Any], section: str, user: str) -> dict[str, Any]:
    """The key entry of `user` in radosgw-admin's `keys` / `swift_keys` list ({} if none)."""
    entries = answer.get(section)
    if isinstance(entries, list):
        for entry in entries:
            if isinstance(entry, dict) and entry.get("user") == user:
                return entry
    return {}
