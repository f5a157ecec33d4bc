"""The dev cluster's waits, against scripted `ceph` answers: OSDs up, an MDS active, HEALTH_OK
with the release's known checks muted, and what a timeout says; the gateway's HTTP answer
against a real local server."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_health import ClusterHealth
from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.deploy.placement import DevHost, Placement, PlacementError, Release


class ScriptedCeph(Placement):
    """Answers `ceph … --format json` from a script of replies (the last one repeats);
    an Exception in the script is raised as the command's failure."""

    def __init__(self, state_dir: Path, replies: list[Any]) -> None:
        super().__init__(state_dir)
        self.replies = replies
        self.calls: list[list[str]] = []

    def run(self, host: DevHost, release: Release, argv: Sequence[str], timeout: float = 60,
            input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        self.calls.append(list(argv))
        if "--format" not in argv:
            return subprocess.CompletedProcess(list(argv), 0, b"detail line 1\ndetail line 2\n", b"")
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise PlacementError(str(reply))
        return subprocess.CompletedProcess(list(argv), 0, json.dumps(reply).encode(), b"")


def health(tmp_path: Path, replies: list[Any], release: Release | None = None,
           said: list[str] | None = None) -> tuple[ClusterHealth, ScriptedCeph]:
    layout = ClusterLayout.resolve(tmp_path / "c")
    if release is not None:
        layout.release = release
    ceph = ScriptedCeph(layout.state_dir, replies)
    return ClusterHealth(layout, ClusterCommands(layout, ceph), log=(said if said is not None else []).append,
                         poll_seconds=0.01), ceph


def osd_dump(*up: int) -> dict[str, Any]:
    return {"osds": [{"osd": i, "up": 1 if i in up else 0} for i in range(3)]}


def test_wait_osds_up_rides_out_a_failing_mon_until_all_are_up(tmp_path: Path) -> None:
    waits, ceph = health(tmp_path, [Exception("connection refused"), osd_dump(0), osd_dump(0, 2)])
    waits.wait_osds_up([0, 2], timeout=5)
    assert len(ceph.calls) == 3


def test_wait_osds_up_names_the_ones_that_did_not_come(tmp_path: Path) -> None:
    waits, _ = health(tmp_path, [osd_dump(0)])
    with pytest.raises(DevClusterError, match=r"OSDs \[1, 2\] not up after 0s; see .*/log"):
        waits.wait_osds_up([0, 1, 2], timeout=0.05)


def test_health_ok_mutes_only_the_releases_known_checks(tmp_path: Path) -> None:
    said: list[str] = []
    warn = {"status": "HEALTH_WARN", "checks": {"MGR_MODULE_DEPENDENCY": {}, "OSD_DOWN": {}}}
    waits, ceph = health(tmp_path, [warn, {"status": "HEALTH_OK"}], release=Release("reef", tmp_path),
                         said=said)
    waits.wait_health_ok(timeout=5)
    mutes = [argv for argv in ceph.calls if "mute" in argv]
    assert [argv[argv.index("mute") + 1] for argv in mutes] == ["MGR_MODULE_DEPENDENCY"]
    assert "--sticky" in mutes[0] and "expected for reef" in said[0]


def test_no_health_ok_says_the_health_detail(tmp_path: Path) -> None:
    waits, ceph = health(tmp_path, [{"status": "HEALTH_WARN", "checks": {"OSD_DOWN": {}}}])
    with pytest.raises(DevClusterError, match=r"no HEALTH_OK after 0s: detail line 1 \| detail line 2"):
        waits.wait_health_ok(timeout=0.05)
    assert not any("mute" in argv for argv in ceph.calls)  # the host's packages mute nothing


def fs_dump(state: str | None, fs_name: str = "cephfs") -> dict[str, Any]:
    info = {"gid_4200": {"name": "a", "state": state}} if state else {}
    return {"filesystems": [{"mdsmap": {"fs_name": fs_name, "info": info}}]}


def test_wait_mds_active_waits_through_creating_until_active(tmp_path: Path) -> None:
    waits, ceph = health(tmp_path, [Exception("mon restarting"), {"filesystems": []}, fs_dump(None),
                                    fs_dump("up:creating"), fs_dump("up:active")])
    waits.wait_mds_active("cephfs", "a", timeout=5)
    assert len(ceph.calls) == 5 and all(argv[-4:-2] == ["fs", "dump"] for argv in ceph.calls)


@pytest.mark.parametrize(("dump", "said"), [
    (fs_dump("up:replay"), r"\(up:replay\)"),
    (fs_dump("up:active", fs_name="other"), r"\(no filesystem cephfs\)"),
    (fs_dump(None), r"\(no rank held by mds\.a\)"),
    ("garbage", r"\(not in the MDS map\)"),
])
def test_wait_mds_active_says_what_the_mds_was_doing(tmp_path: Path, dump: Any, said: str) -> None:
    waits, _ = health(tmp_path, [dump])
    with pytest.raises(DevClusterError, match=r"mds\.a not up:active for cephfs after 0s " + said):
        waits.wait_mds_active("cephfs", "a", timeout=0.05)


def test_wait_http_takes_any_answer_and_names_what_does_not_answer(tmp_path: Path) -> None:
    class Forbidden(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(403)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Forbidden)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    waits, _ = health(tmp_path, [{}])
    try:
        waits.wait_http(f"http://127.0.0.1:{server.server_address[1]}/", "client.rgw.a", timeout=5)
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # bound, never listening: connections are refused
        said = (rf"client.rgw.a does not answer at http://127.0.0.1:{port}/ after 0s "
                r"\(.*refused.*\); see .*/log")
        with pytest.raises(DevClusterError, match=said):
            waits.wait_http(f"http://127.0.0.1:{port}/", "client.rgw.a", timeout=0.05)
