"""Map an OSD's network addresses to the host interface carrying them.

Sources, best first: `ip -j addr show` (iproute2, every address with its prefix), else
SIOCGIFCONF (primary IPv4 address per interface) plus /proc/net/if_inet6 for IPv6.
Interface names are what node_exporter's ``node_network_*{device}`` label uses.
"""

from __future__ import annotations

import array
import fcntl
import ipaddress
import json
import logging
import os
import re
import socket
import struct
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

_SIOCGIFCONF = 0x8912
_IFREQ_SIZE = 40  # struct ifreq on 64-bit Linux
# one address inside a Ceph entity_addr(vec) text: "v2:10.0.0.1:6800/123", "[v2:[::1]:6800/0"
_CEPH_ADDR = re.compile(r"(?:v[12]:|any:)?(\[[0-9a-fA-F:.]+\]|[0-9.]+):\d+(?:/\d+)?")


@dataclass(frozen=True)
class InterfaceAddress:
    interface: str
    address: str
    prefixlen: int


def parse_ceph_addrs(text: str) -> list[str]:
    """IP addresses in a Ceph address (vector) string, in order, without duplicates.

    ``[v2:127.0.0.1:6802/12,v1:127.0.0.1:6803/12]`` -> ``["127.0.0.1"]``. Unbound (0.0.0.0,
    ::) and unparsable parts are dropped.
    """
    found: list[str] = []
    for match in _CEPH_ADDR.finditer(text or ""):
        host = match.group(1).strip("[]")
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            continue
        if ip.is_unspecified:
            continue
        if str(ip) not in found:
            found.append(str(ip))
    return found


def parse_ip_json(text: str) -> list[InterfaceAddress]:
    """Parse `ip -j addr show` output."""
    result: list[InterfaceAddress] = []
    for link in json.loads(text):
        name = link.get("ifname", "")
        for info in link.get("addr_info", []):
            if "local" in info and name:
                result.append(InterfaceAddress(name, info["local"], int(info.get("prefixlen", 0))))
    return result


def parse_if_inet6(text: str) -> list[InterfaceAddress]:
    """Parse /proc/net/if_inet6 (hex address, ifindex, prefixlen, scope, flags, name)."""
    result: list[InterfaceAddress] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 6 or len(fields[0]) != 32:
            continue
        addr = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
        result.append(InterfaceAddress(fields[5], str(addr), int(fields[2], 16)))
    return result


def _ipv4_by_ioctl() -> list[InterfaceAddress]:
    """Primary IPv4 address of every interface that has one (no prefix: use /32)."""
    buf_size = 128 * _IFREQ_SIZE
    names = array.array("B", b"\0" * buf_size)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifconf = struct.pack("iL", buf_size, names.buffer_info()[0])
        out = fcntl.ioctl(sock.fileno(), _SIOCGIFCONF, ifconf)
    length = struct.unpack("iL", out)[0]
    raw = names.tobytes()[:length]
    result = []
    for off in range(0, length, _IFREQ_SIZE):
        name = raw[off : off + 16].split(b"\0", 1)[0].decode()
        addr = socket.inet_ntoa(raw[off + 20 : off + 24])
        result.append(InterfaceAddress(name.split(":")[0], addr, 32))
    return result


def local_addresses(
    proc_root: str = "/proc",
    run_ip: Callable[[], str] | None = None,
) -> list[InterfaceAddress]:
    """Every address configured on this host, with its interface."""
    try:
        text = run_ip() if run_ip else subprocess.run(
            ["ip", "-j", "addr", "show"], capture_output=True, text=True, timeout=5, check=True
        ).stdout
        return parse_ip_json(text)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        log.debug("ip -j addr failed (%s); using SIOCGIFCONF and if_inet6", exc)
    addrs: list[InterfaceAddress] = []
    try:
        addrs.extend(_ipv4_by_ioctl())
    except OSError as exc:
        log.debug("SIOCGIFCONF failed: %s", exc)
    try:
        with open(os.path.join(proc_root, "net", "if_inet6"), encoding="ascii") as f:
            addrs.extend(parse_if_inet6(f.read()))
    except OSError:
        pass
    return addrs


def interface_for(address: str, table: Sequence[InterfaceAddress]) -> str | None:
    """Interface holding `address`: exact match, else the longest prefix containing it
    (127.0.0.2 is on `lo` through 127.0.0.0/8)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    best: tuple[int, str] | None = None
    for entry in table:
        try:
            net = ipaddress.ip_interface(f"{entry.address}/{entry.prefixlen}")
        except ValueError:
            continue
        if net.ip == ip:
            return entry.interface
        if ip in net.network and net.network.prefixlen > 0 and (
            best is None or net.network.prefixlen > best[0]
        ):
            best = (net.network.prefixlen, entry.interface)
    return best[1] if best else None


def link_speed_bytes(interface: str, sys_root: str = "/sys") -> float | None:
    """Link speed in bytes/s from /sys/class/net/IF/speed (Mb/s); None where the kernel
    does not know it (lo and virtual links: EINVAL; down links: -1)."""
    try:
        with open(os.path.join(sys_root, "class", "net", interface, "speed"), encoding="ascii") as f:
            mbit = int(f.read().strip())
    except (OSError, ValueError):
        return None
    if mbit <= 0:
        return None
    return mbit * 1_000_000 / 8
