"""Names the cluster hands the runner: OSD host names and device names from `osd metadata`.

They are untrusted input. A containerised OSD reports `NODE_NAME` as its hostname, any string
its deployer (or anyone who can restart it) sets; `devices` is whatever the OSD host says. The
runner turns a host name into an ssh destination and a device name into a path under
/sys/block that root writes to, so both are accepted only in the shape the kernel and DNS give
them, and a sweep refuses a cluster that reports anything else before it changes anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# RFC 1123 labels, dot-separated. Underscores are allowed as well: they are not valid DNS
# names but occur in real /etc/hosts setups, and cannot make a name an option or a path. What
# matters is that no label starts with `-` (an ssh option) and nothing else (space, `=`, `/`,
# `%`, `@`) can change what ssh or a shell makes of the name.
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
HOST_NAME_MAX = 253
# A kernel block device name as /sys/block lists it (sda, nvme0n1, dm-3, loop7, md127,
# cciss!c0d0 is the one historic exception with `!`, not accepted here).
DEVICE_NAME = re.compile(r"[A-Za-z0-9._:-]+")


def host_name_ok(name: str) -> bool:
    return len(name) <= HOST_NAME_MAX and HOST_NAME.fullmatch(name) is not None


def device_name_ok(name: str) -> bool:
    return (DEVICE_NAME.fullmatch(name) is not None and ".." not in name
            and name not in (".",) and not name.startswith("-"))


def host_name_problem(osd: str, name: str) -> str | None:
    """Why an OSD's metadata host name cannot be used; None when it can."""
    if host_name_ok(name):
        return None
    return (f"{osd}: osd metadata reports hostname {name!r}, which is not a valid host name "
            f"(letters, digits, '-', '_' and dots; no label starting with '-'); refusing to "
            f"use it as an ssh destination")


def device_name_problem(osd: str, name: str) -> str | None:
    """Why a device name from an OSD's metadata cannot be used; None when it can."""
    if device_name_ok(name):
        return None
    return (f"{osd}: osd metadata lists device {name!r}, which is not a kernel device name "
            f"(letters, digits, '.', '_', ':', '-'; no '..'); refusing to use it as a path "
            f"under /sys/block")


def devices_of(entry: Mapping[str, Any]) -> list[str]:
    """The `devices` field of one OSD's metadata (comma-separated)."""
    return [d for d in str(entry.get("devices") or "").split(",") if d]


def metadata_problems(metadata: Iterable[Any]) -> list[str]:
    """One line per OSD whose metadata names a host or device the runner refuses to use."""
    problems: list[str] = []
    for entry in metadata:
        if not isinstance(entry, dict):
            continue
        osd = f"osd.{entry.get('id')}"
        host = entry.get("hostname")
        if host is not None and str(host) != "":
            problem = host_name_problem(osd, str(host))
            if problem:
                problems.append(problem)
        for device in devices_of(entry):
            problem = device_name_problem(osd, device)
            if problem:
                problems.append(problem)
    return problems
