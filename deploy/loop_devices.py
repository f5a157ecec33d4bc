"""The loop devices a dev cluster's OSDs sit on: attach an OSD's image (rotational flag as its
device class says), detach only a device that still points at our image, and, when the record
is lost, find the devices backed by files in our state dir."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from subprocess import CompletedProcess
from typing import Protocol

from cephscope.deploy.cluster_layout import DevClusterError, OsdBacking


class LoopDeviceUser(Protocol):
    """What the dev cluster does with loop devices (a fake records it in unit tests)."""

    def unavailable(self) -> str | None: ...

    def attach(self, image: Path) -> str: ...

    def detach(self, backing: OsdBacking) -> None: ...

    def detach_under(self, directory: Path) -> list[str]: ...


class LoopDevices:
    """Loop devices through this machine's `losetup` (`run_here` runs it outside any namespace
    or release root); `sys_block` is /sys/block."""

    def __init__(self, run_here: Callable[[Sequence[str]], CompletedProcess[bytes]],
                 device_class: str, log: Callable[[str], None],
                 sys_block: Path = Path("/sys/block")) -> None:
        self._run_here = run_here
        self.device_class = device_class
        self._log = log
        self.sys_block = sys_block

    def unavailable(self) -> str | None:
        """None when a loop device can be attached here, else why not."""
        if not shutil.which("losetup"):
            return "losetup not found"
        if not Path("/dev/loop-control").exists():
            return "/dev/loop-control does not exist"
        if not os.access("/dev/loop-control", os.R_OK | os.W_OK):
            return "no permission to use /dev/loop-control"
        return None

    def attach(self, image: Path) -> str:
        proc = self._run_here(["losetup", "--find", "--show", str(image)])
        device = proc.stdout.decode().strip()
        rotational = "1" if self.device_class == "hdd" else "0"
        name = Path(device).name
        try:
            (self.sys_block / name / "queue" / "rotational").write_text(rotational)
        except OSError as exc:
            self._log(f"devcluster: cannot set {name} rotational={rotational}: {exc}")
        return device

    def detach(self, backing: OsdBacking) -> None:
        device = backing.loop_device
        if not device:
            return
        name = Path(device).name
        # Detach only if it still points at our image (someone may have reused the number).
        try:
            backing_file = (self.sys_block / name / "loop" / "backing_file").read_text().strip()
        except OSError:
            return
        if os.path.realpath(backing_file) != os.path.realpath(backing.image):
            self._log(f"devcluster: {device} now backs {backing_file}; leaving it alone")
            return
        try:
            self._run_here(["losetup", "--detach", device])
        except DevClusterError as exc:
            self._log(f"devcluster: {exc}")

    def detach_under(self, directory: Path) -> list[str]:
        """Detach every loop device backed by a file below `directory`; the devices detached."""
        ours = str(directory) + os.sep
        detached = []
        for backing_file in self.sys_block.glob("loop*/loop/backing_file"):
            with contextlib.suppress(OSError, DevClusterError):
                if os.path.realpath(backing_file.read_text().strip()).startswith(ours):
                    device = f"/dev/{backing_file.parent.parent.name}"
                    self._run_here(["losetup", "--detach", device])
                    detached.append(device)
        return detached
