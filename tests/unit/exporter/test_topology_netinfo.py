"""Address -> interface mapping and link speeds (captures from the CI machine + fixture tree)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.exporter.netinfo import (
    InterfaceAddress,
    interface_for,
    link_speed_bytes,
    local_addresses,
    parse_ceph_addrs,
    parse_if_inet6,
    parse_ip_json,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOST1 = FIXTURES / "sysfs" / "host1"
IP_JSON = (FIXTURES / "topology" / "ip_addr_show.json").read_text()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v2:127.0.0.1:44018/30795", ["127.0.0.1"]),  # Pacific front_addr on the dev cluster
        ("[v2:10.0.0.1:6802/1234,v1:10.0.0.1:6803/1234]", ["10.0.0.1"]),
        ("[v2:[2001:db8::11]:6800/0,v1:[2001:db8::11]:6801/0]", ["2001:db8::11"]),
        ("10.1.2.3:6800/77", ["10.1.2.3"]),  # pre-Nautilus legacy form
        ("v2:127.0.0.1:0/0", ["127.0.0.1"]),  # `config get public_addr` (port not bound)
        ("[v2:0.0.0.0:0/0,v1:0.0.0.0:0/0]", []),  # unbound
        ("-", []),
        ("", []),
        ("garbage:not-an-addr", []),
        ("v2:999.1.1.1:6800/0", []),
    ],
)
def test_parse_ceph_addrs(text: str, expected: list[str]) -> None:
    assert parse_ceph_addrs(text) == expected


def test_parse_ip_json_capture() -> None:
    table = parse_ip_json(IP_JSON)
    assert InterfaceAddress("lo", "127.0.0.1", 8) in table
    assert InterfaceAddress("lo", "::1", 128) in table
    assert {e.interface for e in table} == {"lo", "eth0"}


def test_parse_if_inet6_fixture() -> None:
    table = parse_if_inet6((HOST1 / "proc" / "net" / "if_inet6").read_text())
    assert InterfaceAddress("lo", "::1", 128) in table
    assert InterfaceAddress("ens1f0", "2001:db8::11", 64) in table
    assert parse_if_inet6("short line\n") == []


def test_interface_for() -> None:
    table = parse_ip_json(IP_JSON) + parse_if_inet6((HOST1 / "proc" / "net" / "if_inet6").read_text())
    assert interface_for("127.0.0.1", table) == "lo"
    assert interface_for("127.0.0.53", table) == "lo"  # inside lo's 127.0.0.0/8
    assert interface_for("::1", table) == "lo"
    assert interface_for("2001:db8::11", table) == "ens1f0"
    assert interface_for("2001:db8::99", table) == "ens1f0"  # same /64
    assert interface_for("198.51.100.7", table) is None
    assert interface_for("not an ip", table) is None


def test_longest_prefix_wins() -> None:
    table = [InterfaceAddress("bond0", "10.0.0.1", 8), InterfaceAddress("vlan20", "10.20.0.1", 16)]
    assert interface_for("10.20.3.4", table) == "vlan20"
    assert interface_for("10.30.3.4", table) == "bond0"


def test_link_speed_from_sysfs_fixture() -> None:
    sys_root = str(HOST1 / "sys")
    assert link_speed_bytes("ens1f0", sys_root) == 25_000 * 1_000_000 / 8
    assert link_speed_bytes("eth0", sys_root) is None  # -1: unknown
    assert link_speed_bytes("lo", sys_root) is None  # no speed attribute
    assert link_speed_bytes("nosuch0", sys_root) is None


def test_local_addresses_falls_back_without_ip_command() -> None:
    def broken_ip() -> str:
        raise OSError("ip: not found")

    table = local_addresses(proc_root=str(HOST1 / "proc"), run_ip=broken_ip)
    # IPv6 from the fixture's if_inet6, IPv4 from SIOCGIFCONF on this machine (always has lo)
    assert InterfaceAddress("ens1f0", "2001:db8::11", 64) in table
    assert interface_for("127.0.0.1", table) == "lo"


def test_local_addresses_on_this_host() -> None:
    assert interface_for("127.0.0.1", local_addresses()) == "lo"
