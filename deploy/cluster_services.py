"""A dev cluster's services beyond RADOS, for CephFS and object-store benchmarks: one MDS
(`mds.a`) serving the filesystem `cephfs`, and one RADOS gateway (`client.rgw.a`, beast on the
cluster's last port, on the first host's public address) with a user `cephscope` that has S3
keys and a Swift subuser `cephscope:swift`, written to `rgw.json`.

Their keys, pools and filesystem need only the mon (`prepare`, done while the OSDs are made);
the daemons start after the OSDs, on a new cluster and on a later `up`. The coordinator
(deploy/devcluster.py) decides when, this part does the work; daemons start through the
injected `DaemonPlacement`, like the others.
"""

from __future__ import annotations

import json
import os
import re
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
KEY = re.compile(r"[A-Za-z0-9+/]+={0,2}")


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

    def prepare(self) -> None:
        """Keys, pools and the filesystem: the mon is all they need (their PGs become active
        once OSDs exist)."""
        layout = self.layout
        if not layout.service_names():
            return
        # Two waves (ClusterCommands.mon_waves): what needs nothing but the mon, then what
        # needs the pools.
        first: list[dict[str, Any]] = []
        then: list[dict[str, Any]] = []
        keyrings: dict[int, Path] = {}  # index in `first` -> where its key goes
        if layout.mds:
            keyrings[len(first)] = layout.mds_data / "keyring"
            first += [
                key_command(f"mds.{MDS_ID}", ["mon", "allow profile mds", "osd", "allow rw tag cephfs *=*",
                                              "mds", "allow", "mgr", "allow profile mds"]),
                pool_command(CEPHFS_METADATA_POOL),
                pool_command(CEPHFS_DATA_POOL),
            ]
            # `fs new` tags both pools for cephfs. One MDS and never a standby: the mon leaves
            # the filesystem's standby_count_wanted unset (it sets 1 only once a standby
            # exists), so no MDS_INSUFFICIENT_STANDBY keeps the cluster from HEALTH_OK.
            then.append({"prefix": "fs new", "fs_name": CEPHFS_NAME,
                         "metadata": CEPHFS_METADATA_POOL, "data": CEPHFS_DATA_POOL})
        if layout.rgw:
            keyrings[len(first)] = layout.rgw_data / "keyring"
            first.append(key_command(RGW_NAME, ["mon", "allow rw", "osd", "allow rwx", "mgr", "allow rw"]))
            first += [pool_command(pool) for pool in RGW_POOLS]
            # A pool without an application raises POOL_APP_NOT_ENABLED.
            then += [{"prefix": "osd pool application enable", "pool": pool, "app": "rgw"}
                     for pool in RGW_POOLS]
        answers = self.commands.mon_waves([first, then])
        for index, keyring in keyrings.items():
            write_keyring(keyring, first[index]["entity"], answers[0][index])

    def create(self) -> None:
        """After `prepare` and once the OSDs are up: the daemons, then the gateway's user."""
        if not self.layout.service_names():
            return
        t0 = time.monotonic()
        self.start()
        if self.layout.rgw:
            self.create_rgw_user()
        self._log(f"devcluster: {' and '.join(self.layout.service_names())} up "
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


def pool_command(pool: str) -> dict[str, Any]:
    command = {"prefix": "osd pool create", "pool": pool, "pg_num": SERVICE_POOL_PGS,
               "pgp_num": SERVICE_POOL_PGS, "pool_type": "replicated"}
    if pool.startswith("."):
        # Reef and later keep names beginning with "." for Ceph's own pools and, without this,
        # answer success having made nothing; the gateway's .rgw.root is one of Ceph's own.
        command["yes_i_really_mean_it"] = True
    return command


def key_command(entity: str, caps: list[str]) -> dict[str, Any]:
    return {"prefix": "auth get-or-create", "entity": entity, "caps": caps}


def write_keyring(path: Path, entity: str, answer: Any) -> None:
    """The daemon's keyring from the mon's answer to `auth get-or-create` (readable by its owner
    only); a key that is not one base64 word is refused rather than written."""
    entry = answer[0] if isinstance(answer, list) and answer else {}
    key = entry.get("key") if isinstance(entry, dict) else None
    if not isinstance(key, str) or not KEY.fullmatch(key) or entry.get("entity") != entity:
        raise DevClusterError(f"the mon answered `auth get-or-create {entity}` without its key")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"[{entity}]\n\tkey = {key}\n")


def key_of(answer: dict[str, Any], section: str, user: str) -> dict[str, Any]:
    """The key entry of `user` in radosgw-admin's `keys` / `swift_keys` list ({} if none)."""
    entries = answer.get(section)
    if isinstance(entries, list):
        for entry in entries:
            if isinstance(entry, dict) and entry.get("user") == user:
                return entry
    return {}
