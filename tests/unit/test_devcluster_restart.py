"""`DevCluster.restart_osds(env=…)`: the extra environment reaches the restarted OSD's argv
(through `env`, no shell) and only that start; the next restart runs without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cephscope.deploy.devcluster import DevCluster


def test_restart_env_reaches_only_that_start(tmp_path: Path, monkeypatch):
    cluster = DevCluster(tmp_path / "cluster", log=lambda m: None)
    started: list[list[str]] = []

    def run_on(host: Any, argv: list[str], **kw: Any) -> None:
        started.append(list(argv))

    monkeypatch.setattr(cluster, "osd_ids", lambda: [0, 1])
    monkeypatch.setattr(cluster, "_stop_daemon", lambda daemon: True)
    monkeypatch.setattr(cluster, "_run_on", run_on)
    monkeypatch.setattr(cluster, "_daemon_pid", lambda daemon: 4242)
    monkeypatch.setattr(cluster, "_wait_osds_up", lambda ids, timeout: None)
    monkeypatch.setattr(cluster, "_wait_asok", lambda ids, timeout: None)

    hostile = "-oProxyCommand=touch /tmp/x"
    cluster.restart_osds([1], env={"CONTAINER_NAME": "c", "NODE_NAME": hostile})
    cluster.restart_osds([1])
    with_env, without = started
    assert with_env[:3] == ["env", "CONTAINER_NAME=c", f"NODE_NAME={hostile}"]
    assert with_env[3:] == without and without[0] == "ceph-osd" and "1" in without
