"""The mon relay (runner/mon_relay.py): a client of another release's librados, driven over
stdin/stdout. Here the relay runs under this machine's Python with a stand-in `rados` module on
its path (prefix `env PYTHONPATH=…`, as a release's prefix is its rootexec argv); the real one
runs in the live release tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cephscope.monclient import MonCallError, MonCommandError, mon_command
from cephscope.runner.cephclient import CephCli, CephError
from cephscope.runner.mon_relay import RelayedRados

STAND_IN = '''
import json

class Rados:
    def __init__(self, conffile, name, conf):
        if "missing" in conffile:
            raise OSError(2, "conf not found: " + conffile)
        self.name = name

    def connect(self, timeout):
        pass

    def mon_command(self, cmd, inbuf, timeout=0):
        prefix = json.loads(cmd)["prefix"]
        if prefix == "boom":
            raise RuntimeError("connection reset")
        if prefix == "config get":
            return -2, b"", "unknown option"
        if prefix == "exit":
            raise SystemExit(3)
        return 0, json.dumps({"who": self.name, "cmd": json.loads(cmd),
                              "bytes": "\\u00e9\\u00ff"}).encode(), ""

    def shutdown(self):
        pass
'''


@pytest.fixture
def prefix(tmp_path: Path) -> tuple[str, ...]:
    (tmp_path / "rados.py").write_text(STAND_IN)
    return ("env", f"PYTHONPATH={tmp_path}")


def test_mon_commands_round_trip_through_the_relay(prefix: tuple[str, ...]) -> None:
    relay = RelayedRados(prefix, "/etc/ceph/ceph.conf", "client.admin", None,
                         python=sys.executable)
    try:
        assert relay.client_info["rados_module"].endswith("rados.py")
        reply = mon_command(relay, "osd pool set", 5, pool="p", var="size", val="2")
        assert reply["who"] == "client.admin"
        assert reply["cmd"] == {"prefix": "osd pool set", "format": "json", "pool": "p",
                                "var": "size", "val": "2"}
        assert reply["bytes"] == "\u00e9\u00ff"  # non-ASCII output comes back intact
        with pytest.raises(MonCommandError, match="ENOENT unknown option"):
            mon_command(relay, "config get", 5)
        with pytest.raises(MonCallError, match="connection reset"):
            mon_command(relay, "boom", 5)
        # a relay that died: an error naming it, for this and every later command
        with pytest.raises(MonCallError, match="ended"):
            mon_command(relay, "exit", 5)
        with pytest.raises(MonCallError, match="gone"):
            mon_command(relay, "status", 5)
    finally:
        relay.shutdown()


def test_a_relay_that_cannot_connect_is_one_clear_error(prefix: tuple[str, ...]) -> None:
    with pytest.raises(MonCommandError, match=r"cannot connect .*missing\.conf.*conf not found"):
        RelayedRados(prefix, "/missing.conf", "client.admin", None, python=sys.executable)


def test_a_prefix_that_cannot_run_the_relay_is_a_ceph_error(tmp_path: Path) -> None:
    cli = CephCli(tmp_path / "ceph.conf", tool_prefix=("false",))
    with pytest.raises(CephError, match="the mon relay ended \\(exit status 1\\)"):
        cli.command("status")
    assert cli.argv("config", "dump")[:2] == ["false", "ceph"]
    assert cli.access().tool_prefix == ("false",)
