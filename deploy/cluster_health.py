"""Waiting for a dev cluster: OSDs up in the OSD map, their admin sockets, an MDS active, the
gateway answering HTTP, HEALTH_OK (muting the checks a release raises for reasons outside the
cluster, see deploy/rootfs.py), and every PG active+clean."""

from __future__ import annotations

import contextlib
import http.client
import time
import urllib.error
import urllib.request
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

    def wait_mds_active(self, fs_name: str, mds_name: str, timeout: float) -> None:
        """Until `mds_name` ("a") is up:active for the filesystem `fs_name`."""
        deadline = time.monotonic() + timeout
        state = "not in the MDS map"
        while True:
            with contextlib.suppress(DevClusterError, TypeError, KeyError, AttributeError):
                state = mds_state(self.commands.ceph_json("fs", "dump", timeout=20), fs_name, mds_name)
                if state == "up:active":
                    return
            if time.monotonic() > deadline:
                raise DevClusterError(f"mds.{mds_name} not up:active for {fs_name} after {timeout:.0f}s "
                                      f"({state}); see {self.layout.log_dir}/ceph-mds.{mds_name}.log")
            time.sleep(self.poll_seconds)

    def wait_http(self, url: str, what: str, timeout: float) -> None:
        """Until something answers HTTP at `url` (any status: an answer is all it takes)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5):
                    return
            except urllib.error.HTTPError:
                return
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                if time.monotonic() > deadline:
                    raise DevClusterError(f"{what} does not answer at {url} after {timeout:.0f}s "
                                          f"({getattr(exc, 'reason', exc)}); see {self.layout.log_dir}"
                                          ) from exc
            time.sleep(self.poll_seconds)

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


def mds_state(fs_dump: Any, fs_name: str, mds_name: str) -> str:
    """The state ("up:active", "up:replay", …) of MDS `mds_name` in filesystem `fs_name` of
    `ceph fs dump`'s JSON; a sentence when it holds neither."""
    for fs in fs_dump.get("filesystems", []):
        mdsmap = fs.get("mdsmap", {})
        if mdsmap.get("fs_name") != fs_name:
            continue
        for info in mdsmap.get("info", {}).values():
            if info.get("name") == mds_name:
                return str(info.get("state"))
        return f"no rank held by mds.{mds_name}"
    return f"no filesystem {fs_name}"
