"""Where an OSD's topology facts come from: the mon (`osd metadata`) or, when the mon cannot
be reached, the OSD's own admin socket (`config show`) and data directory.

Both sources are reduced to one :class:`OsdFacts` so the collector does not care which one
answered. Key names are the ones Ceph writes (src/osd/OSD.cc ``_collect_metadata``,
BlueStore/BlueFS ``collect_metadata`` with prefixes ``bluestore_bdev_``, ``bluefs_db_``,
``bluefs_wal_``; KernelDevice adds ``access_mode``, ``partition_path``, ``dev_node`` for
block devices and ``path`` for files).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from cephscope.monclient import MonCallError, MonCommandError, MonTimeout, connect, mon_command

log = logging.getLogger(__name__)

ROLES = ("data", "db", "wal")
_PREFIX = {"data": "bluestore_bdev_", "db": "bluefs_db_", "wal": "bluefs_wal_"}
_DATA_DIR_LINK = {"data": "block", "db": "block.db", "wal": "block.wal"}
_CONFIG_PATH = {
    "data": "bluestore_block_path",
    "db": "bluestore_block_db_path",
    "wal": "bluestore_block_wal_path",
}


@dataclass
class OsdFacts:
    """What the collector needs about one OSD, whatever the source."""

    osd_id: str
    source: str  # "mon" or "asok"
    hostname: str = ""
    objectstore: str = ""
    device_class: str = ""
    ceph_version: str = ""
    # role -> candidate paths, best first (device node, partition path, data-dir link)
    device_paths: dict[str, list[str]] = field(default_factory=dict)
    # "public"/"cluster" -> Ceph address vector text, and the OSD's own idea of the iface
    addrs: dict[str, str] = field(default_factory=dict)
    ifaces: dict[str, str] = field(default_factory=dict)


def _usable(value: Any) -> str:
    text = str(value or "").strip()
    return "" if text in ("unknown", "-") else text


def _version_short(metadata: Mapping[str, Any]) -> str:
    short = _usable(metadata.get("ceph_version_short"))
    if short:
        return short
    # "ceph version 16.2.15 (618f4...) pacific (stable)" -> 16.2.15
    words = str(metadata.get("ceph_version", "")).split()
    return words[2] if len(words) > 2 and words[0] == "ceph" else _usable(metadata.get("ceph_version"))


def facts_from_metadata(
    osd_id: str, metadata: Mapping[str, Any], device_class: str = ""
) -> OsdFacts:
    """Reduce one `osd metadata` entry (mon) to OsdFacts."""
    facts = OsdFacts(
        osd_id=osd_id,
        source="mon",
        hostname=_usable(metadata.get("hostname")),
        objectstore=_usable(metadata.get("osd_objectstore")),
        device_class=device_class or _usable(metadata.get("default_device_class")),
        ceph_version=_version_short(metadata),
    )
    osd_data = _usable(metadata.get("osd_data"))
    for role in ROLES:
        prefix = _PREFIX[role]
        # BlueFS may report its DB/WAL device even when it is the shared main device;
        # only dedicated ones are devices of their own.
        if role != "data" and str(metadata.get(f"bluefs_dedicated_{role}", "0")) != "1":
            continue
        paths: list[str] = []
        if _usable(metadata.get(prefix + "access_mode")) == "file":
            paths.append(_usable(metadata.get(prefix + "path")))
        paths += [_usable(metadata.get(prefix + "partition_path")),
                  _usable(metadata.get(prefix + "dev_node"))]
        if osd_data:
            paths.append(os.path.join(osd_data, _DATA_DIR_LINK[role]))
        facts.device_paths[role] = _dedup(paths)
    if facts.objectstore == "filestore":
        facts.device_paths["data"] = _dedup(
            [_usable(metadata.get("backend_filestore_partition_path")), osd_data]
        )
    facts.addrs = {
        "public": _usable(metadata.get("front_addr")),
        "cluster": _usable(metadata.get("back_addr")),
    }
    facts.ifaces = {
        "public": _usable(metadata.get("front_iface")),
        "cluster": _usable(metadata.get("back_iface")),
    }
    return facts


def facts_from_config(
    osd_id: str,
    config: Mapping[str, Any],
    version: Mapping[str, Any],
    hostname: str,
    lexists: Callable[[str], bool] = os.path.lexists,
) -> OsdFacts:
    """Reduce an OSD's `config show` (+ `version`) to OsdFacts (mon unreachable)."""
    facts = OsdFacts(
        osd_id=osd_id,
        source="asok",
        # `host` is empty unless set; Ceph then reports the node name like we do.
        hostname=_usable(config.get("host")) or hostname,
        objectstore=_usable(config.get("osd_objectstore")),
        ceph_version=_usable(version.get("version")),
    )
    osd_data = _usable(config.get("osd_data"))
    for role in ROLES:
        configured = _usable(config.get(_CONFIG_PATH[role]))
        link = os.path.join(osd_data, _DATA_DIR_LINK[role]) if osd_data else ""
        if role != "data" and not configured and not (link and lexists(link)):
            continue  # no dedicated DB/WAL device
        facts.device_paths[role] = _dedup([configured, link])
    public = _usable(config.get("public_addr"))
    cluster = _usable(config.get("cluster_addr")) or public
    facts.addrs = {"public": public, "cluster": cluster}
    return facts


def _dedup(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if p and p not in out:
            out.append(p)
    return out


class MonClient:
    """`osd metadata` and `osd tree` through python-rados, with short timeouts.

    A failed connection is not retried before ``retry_seconds`` have passed, so a dead mon
    costs one timeout per retry period, not one per refresh. Not thread-safe: the caller
    (a cached host collector) serialises refreshes.
    """

    def __init__(
        self,
        conffile: str,
        name: str,
        keyring: str = "",
        timeout: float = 3.0,
        retry_seconds: float = 300.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        import time

        self.conffile = conffile
        self.name = name
        self.keyring = keyring
        self.timeout = timeout
        self.retry_seconds = retry_seconds
        self._clock = clock or time.monotonic
        self._cluster: Any = None
        self._failed_at: float | None = None
        self.last_error = ""
        self.fsid = ""  # cluster fsid, known once connected

    def _connect(self) -> Any:
        if self._cluster is not None:
            return self._cluster
        if self._failed_at is not None and self._clock() - self._failed_at < self.retry_seconds:
            # Same text as the failure itself, so callers can log a problem once.
            raise ConnectionError(self.last_error)
        try:
            cluster = self._open()
        except Exception as exc:  # rados raises its own hierarchy (and OSError/TypeError)
            self._fail(f"cannot connect to the mon with {self.conffile} as {self.name}: {exc}")
        self._cluster = cluster
        self._failed_at = None
        self.last_error = ""
        return cluster

    def _open(self) -> Any:
        """A connected rados.Rados handle (raises when the mon cannot be reached)."""
        try:
            return connect(self.conffile, self.name, self.keyring or None, self.timeout,
                           quiet=True)
        except MonCommandError as exc:
            raise ConnectionError(str(exc)) from None

    def _fail(self, message: str) -> NoReturn:
        self._failed_at = self._clock()
        self.last_error = message
        raise ConnectionError(message)

    def command(self, prefix: str, **args: Any) -> Any:
        cluster = self._connect()
        try:
            return mon_command(cluster, prefix, self.timeout, **args)
        except MonTimeout as exc:
            # No mon answered in time: the handle hunts for a mon by itself, so keep it and
            # ask again at the next refresh (a restarted mon is back within seconds).
            raise ConnectionError(str(exc)) from None
        except MonCallError as exc:  # the handle may be broken: reconnect next time
            self.close()
            self._fail(str(exc))
        except MonCommandError as exc:
            raise ConnectionError(str(exc)) from None

    def close(self) -> None:
        if self._cluster is not None:
            try:
                self._cluster.shutdown()
            except Exception as exc:  # shutting down a broken handle: nothing left to do
                log.debug("rados shutdown: %s", exc)
            self._cluster = None

    def osd_facts(self) -> dict[str, OsdFacts]:
        """Facts of every OSD the mon knows, keyed by id ("3")."""
        metadata = self.command("osd metadata")
        try:
            self.fsid = str(self._connect().get_fsid())
        except Exception as exc:  # only used to cross-check the OSDs' own fsid
            log.debug("get_fsid: %s", exc)
            self.fsid = ""
        classes: dict[str, str] = {}
        try:
            tree = self.command("osd tree")
            for node in tree.get("nodes", []):
                if node.get("type") == "osd" and node.get("device_class"):
                    classes[str(node["id"])] = str(node["device_class"])
        except ConnectionError as exc:
            log.debug("osd tree: %s", exc)
        if not isinstance(metadata, list):
            raise ConnectionError(f"osd metadata returned {type(metadata).__name__}, not a list")
        result: dict[str, OsdFacts] = {}
        for entry in metadata:
            if isinstance(entry, dict) and "id" in entry:
                osd_id = str(entry["id"])
                result[osd_id] = facts_from_metadata(osd_id, entry, classes.get(osd_id, ""))
        return result
