"""The knob seam: every kind of setting a sweep can turn is one small class.

A kind reads, validates (reads only, before the first change), applies, verifies by reading
back, restores, and says whether OSDs must restart. The sweep treats kinds alike: values are
recorded before the first change (in the run dir, so a SIGKILLed run restores on `--resume`),
applied per step, restored at the end and on Ctrl-C.

Step knob settings are flat: `osd_ra` -> 4096, `block_queue.scheduler` -> "none",
`sysctl.vm.swappiness` -> 10 (the axis names; `ceph_config` options keep their own section).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

KIND_OSD_RA = "osd_ra"
KIND_BLOCK_QUEUE = "block_queue"
KIND_SYSCTL = "sysctl"
HOST_KINDS = (KIND_OSD_RA, KIND_BLOCK_QUEUE, KIND_SYSCTL)


def kind_of(setting: str) -> str:
    """`block_queue.scheduler` -> `block_queue`; `osd_ra` -> `osd_ra`."""
    return setting.split(".", 1)[0]


def key_of(setting: str) -> str:
    """`sysctl.vm.swappiness` -> `vm.swappiness`; `osd_ra` -> `read_ahead_kb`."""
    kind, _, key = setting.partition(".")
    return key or ("read_ahead_kb" if kind == KIND_OSD_RA else "")


class KnobError(RuntimeError):
    """A knob could not be read, applied, verified or restored; names host, device and key."""


class Knob(Protocol):
    kind: str

    def validate(self, values: Mapping[str, list[Any]]) -> list[str]:
        """Problems with these settings (setting -> every value the sweep will use); reads."""
        ...

    def needs_restart(self, setting: str) -> bool:
        ...

    def snapshot(self, settings: list[str]) -> list[dict[str, Any]]:
        """What the touched settings are now, JSON-able, enough to restore them later."""
        ...

    def apply(self, settings: Mapping[str, Any]) -> dict[str, str]:
        """Set and verify by reading back; returns `where -> value read back`."""
        ...

    def restore(self, snapshot: list[dict[str, Any]]) -> list[str]:
        """Put the snapshot back; returns problems (never raises)."""
        ...
