"""The commands of one dev cluster: the argv of its client tools (`ceph`, `rados`, `rbd`) and
the one way it runs a program, on a host of its own and from its own release
(`Placement`, deploy/placement.py), with failures as `DevClusterError`."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.deploy.mon_batch import MonBatchError, batch_argv, batch_input, read_answers
from cephscope.deploy.placement import HOST_RELEASE, DevHost, Placement, PlacementError


class ClusterCommands:
    """Builds and runs the commands of the cluster laid out by `layout` through `placement`."""

    def __init__(self, layout: ClusterLayout, placement: Placement) -> None:
        self.layout = layout
        self.placement = placement

    # ---- argv ------------------------------------------------------------------------------

    def admin_command(self, argv: Sequence[str]) -> list[str]:
        """The argv that runs a client tool of this cluster's release from the admin host."""
        return self.placement.command(self.layout.admin_host, self.layout.release, argv)

    def ceph_cmd(self, *args: str) -> list[str]:
        return ["ceph", "-c", str(self.layout.conf_path), "--connect-timeout", "15", *args]

    def ceph_argv(self, *args: str) -> list[str]:
        return self.admin_command(self.ceph_cmd(*args))

    def rados_argv(self, *args: str) -> list[str]:
        return self.admin_command(["rados", "-c", str(self.layout.conf_path), *args])

    def rbd_argv(self, *args: str) -> list[str]:
        return self.admin_command(["rbd", "-c", str(self.layout.conf_path), *args])

    def env(self) -> dict[str, str]:
        """Environment for tools that read CEPH_CONF (fio's rbd engine)."""
        return {**os.environ, "CEPH_CONF": str(self.layout.conf_path)}

    # ---- running ---------------------------------------------------------------------------

    def run_on(
        self,
        host: DevHost,
        argv: Sequence[str],
        timeout: float = 60,
        input_bytes: bytes | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a command of this cluster's release on `host` (the one way processes start)."""
        try:
            return self.placement.run(host, self.layout.release, argv, timeout=timeout,
                                      input_bytes=input_bytes)
        except PlacementError as exc:
            raise DevClusterError(str(exc)) from exc

    def run(
        self, argv: Sequence[str], timeout: float = 60, input_bytes: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a command of this cluster's release on the admin host."""
        return self.run_on(self.layout.admin_host, argv, timeout=timeout, input_bytes=input_bytes)

    def run_here(self, argv: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
        """Run one of this machine's own tools (losetup) outside any namespace or release root."""
        try:
            return self.placement.run(self.layout.admin_host, HOST_RELEASE, argv, timeout=timeout)
        except PlacementError as exc:
            raise DevClusterError(str(exc)) from exc

    def ceph_json(self, *args: str, timeout: float = 60) -> Any:
        out = self.run(self.ceph_cmd(*args, "--format", "json"), timeout=timeout).stdout
        return json.loads(out) if out.strip() else None

    def ceph(self, *args: str, timeout: float = 60) -> str:
        return self.run(self.ceph_cmd(*args), timeout=timeout).stdout.decode()

    def mon_waves(self, waves: Sequence[Sequence[Mapping[str, Any]]],
                  timeout: float = 120) -> list[list[Any]]:
        """Mon commands ({"prefix": …, args}) in waves, every command of a wave in flight at
        once, from one process of the cluster's release on the admin host
        (deploy/mon_batch.py); each command's JSON reply, wave by wave."""
        sent = [[{**command, "format": "json"} for command in wave] for wave in waves if wave]
        if not sent:
            return []
        proc = self.run(batch_argv(str(self.layout.conf_path)), timeout=timeout,
                        input_bytes=batch_input(sent))
        try:
            return read_answers(sent, proc.stdout)
        except MonBatchError as exc:
            raise DevClusterError(str(exc)) from exc
