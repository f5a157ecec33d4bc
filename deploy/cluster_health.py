"""Waiting for a dev cluster: OSDs up in the OSD map, their admin sockets, HEALTH_OK (muting
the checks a release raises for reasons outside the cluster, see deploy/rootfs.py), and every
PG active+clean."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any

from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.monclient import PgWaitTimeout, wait_pgs_active_clean


class ClusterHealth:
    """Health waits of the cluster laid out by `layout`, asked through `commands`."""

    def __init__(self, layout: ClusterLayout, commands: ClusterCommands,
                 log: Callable[[str], None], poll_seconds: float = 0.5) -> None:
        self.layout = layout
        self.commands = commands
        self._log = log
        self.poll_seconds = poll_seconds

    def wait_osds_up(self, ids: Iterable[int], timeout: float) -> None:
        wanted = set(ids)
        deadline = time.monotonic() + timeout
        while True:
            try:
                dump = self.commands.ceph_json("osd", "dump", timeout=20)
                up = {o["osd"] for o in dump["osds"] if o["up"] == 1}
                if wanted <= up:
                    return
            except DevClusterError:
                up = set()
            if time.monotonic() > deadline:
                raise DevClusterError(
                    f"OSDs {sorted(wanted - up)} not up after {timeout:.0f}s; see {self.layout.log_dir}"
                )
            time.sleep(self.poll_seconds)

    def wait_asok(self, ids: Iterable[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for osd_id in ids:
            while not self.layout.osd_asok(osd_id).exists():
                if time.monotonic() > deadline:
                    raise DevClusterError(f"osd.{osd_id} admin socket did not appear")
                time.sleep(0.1)

    def muted_health_checks(self) -> tuple[str, ...]:
        """Checks this cluster's release raises for reasons outside the cluster (see rootfs.py)."""
        return self.layout.release_spec_field("muted_health_checks")

    def wait_health_ok(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            try:
                health = self.commands.ceph_json("health", timeout=20)
                last = health.get("status", "")
                if last == "HEALTH_OK":
                    return
                self._mute_known_checks(health)
            except DevClusterError as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                detail = ""
                with contextlib.suppress(DevClusterError):
                    detail = self.commands.ceph("health", "detail", timeout=20).strip().replace("\n", " | ")
                raise DevClusterError(f"no HEALTH_OK after {timeout:.0f}s: {detail or last}")
            time.sleep(self.poll_seconds)

    def _mute_known_checks(self, health: dict[str, Any]) -> None:
        muted = self.muted_health_checks()
        for code in health.get("checks", {}):
            if code in muted and not health["checks"][code].get("muted"):
                self._log(f"devcluster: muting {code} (expected for {self.layout.release.name}; "
                          "deploy/rootfs.py says why)")
                self.commands.ceph("health", "mute", code, "--sticky", timeout=20)

    def wait_pgs_active_clean(self, timeout: float = 120) -> None:
        try:
            wait_pgs_active_clean(lambda: self.commands.ceph_json("pg", "dump", "pgs", timeout=20),
                                  timeout, transient=(DevClusterError, OSError))
        except PgWaitTimeout as exc:
            raise DevClusterError(str(exc)) from exc
