"""Loop devices of the dev cluster's OSDs, against a stand-in /sys/block and a recording
`losetup` runner: the rotational flag follows the device class, and a device is detached only
while it still backs our image."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from cephscope.deploy.cluster_layout import DevClusterError, OsdBacking
from cephscope.deploy.loop_devices import LoopDevices


class Losetup:
    def __init__(self, sys_block: Path, fail: bool = False) -> None:
        self.sys_block = sys_block
        self.calls: list[list[str]] = []
        self.fail = fail

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
        self.calls.append(list(argv))
        if self.fail:
            raise DevClusterError("losetup --detach failed (1): busy")
        out = b""
        if "--find" in argv:
            (self.sys_block / "loop7" / "queue").mkdir(parents=True)
            (self.sys_block / "loop7" / "queue" / "rotational").write_text("1")
            out = b"/dev/loop7\n"
        return subprocess.CompletedProcess(list(argv), 0, out, b"")


def backs(sys_block: Path, name: str, image: Path) -> None:
    (sys_block / name / "loop").mkdir(parents=True, exist_ok=True)
    (sys_block / name / "loop" / "backing_file").write_text(f"{image}\n")


def test_attach_marks_an_ssd_non_rotational(tmp_path: Path) -> None:
    losetup = Losetup(tmp_path)
    loops = LoopDevices(losetup, "ssd", log=lambda m: None, sys_block=tmp_path)
    assert loops.attach(tmp_path / "osd.0.img") == "/dev/loop7"
    assert losetup.calls == [["losetup", "--find", "--show", str(tmp_path / "osd.0.img")]]
    assert (tmp_path / "loop7" / "queue" / "rotational").read_text() == "0"


def test_detach_leaves_a_device_that_now_backs_another_file(tmp_path: Path) -> None:
    said: list[str] = []
    losetup = Losetup(tmp_path)
    loops = LoopDevices(losetup, "ssd", log=said.append, sys_block=tmp_path)
    ours = tmp_path / "osd.0.img"
    backs(tmp_path, "loop3", tmp_path / "someone-else.img")
    loops.detach(OsdBacking(0, str(ours), "/dev/loop3"))
    assert losetup.calls == [] and "leaving it alone" in said[0]
    backs(tmp_path, "loop3", ours)
    loops.detach(OsdBacking(0, str(ours), "/dev/loop3"))
    assert losetup.calls == [["losetup", "--detach", "/dev/loop3"]]
    loops.detach(OsdBacking(0, str(ours), "/dev/loop9"))  # gone already: nothing to do
    loops.detach(OsdBacking(0, str(ours), None))
    assert len(losetup.calls) == 1


def test_a_failed_detach_is_said_not_raised(tmp_path: Path) -> None:
    said: list[str] = []
    backs(tmp_path, "loop3", tmp_path / "osd.0.img")
    loops = LoopDevices(Losetup(tmp_path, fail=True), "ssd", log=said.append, sys_block=tmp_path)
    loops.detach(OsdBacking(0, str(tmp_path / "osd.0.img"), "/dev/loop3"))
    assert "busy" in said[0]


def test_detach_under_takes_only_devices_backed_inside_the_directory(tmp_path: Path) -> None:
    sys_block = tmp_path / "sys"
    state_dir = tmp_path / "c"
    backs(sys_block, "loop1", state_dir / "blocks" / "osd.0.img")
    backs(sys_block, "loop2", tmp_path / "c-other" / "blocks" / "osd.0.img")
    losetup = Losetup(sys_block)
    loops = LoopDevices(losetup, "ssd", log=lambda m: None, sys_block=sys_block)
    assert loops.detach_under(state_dir) == ["/dev/loop1"]
    assert losetup.calls == [["losetup", "--detach", "/dev/loop1"]]
