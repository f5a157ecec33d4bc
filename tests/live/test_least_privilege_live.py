"""The exporter needs no root: as the ``ceph`` user, owning the admin sockets (as the daemons'
own user does on a packaged or cephadm host) and with a cephx key of ``mon 'allow r'`` only,
it exports every series the root exporter with client.admin exports.

The dev cluster's daemons run as root and its state dir sits under pytest's 0700 base dir,
so the test hands the ``ceph`` user what a real host gives it: the sockets (chowned for the
test, restored after), a path to them (a bind mount in a private mount namespace), a
ceph.conf with the mon address and its own keyring (in a directory of its own). The one
things it cannot do here, both because the dev cluster runs as root under root-only dirs:
- resolve a root OSD's paths through its ``/proc/<pid>/root`` (ptrace access): the topology
  collector resolves them in its own view instead (the same mount namespace here) and logs
  that once;
- stat a loop device's backing file (the OSD images lie under pytest's 0700 base dir): the
  loop device's ``parent`` label is then the loop device itself instead of the disk that
  holds the image. Every other series is the same.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cephscope.deploy.devcluster import DevCluster
from tests.unit.fake_asok import parse_samples

EXPORTER = Path(sys.executable).parent / "cephscope-exporter"
READ_ONLY_USER = "client.cephscope-least-privilege-test"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        return resp.read().decode()


def _wait_up(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, f"exporter exited: {log.read_text()[-2000:]}"
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
            return
        except OSError:
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)


def _series(text: str) -> set[str]:
    return set(parse_samples(text))


def _label(series: str, name: str) -> str:
    return series.split(f'{name}="', 1)[1].split('"', 1)[0]


def _without_loop_parent(series: str) -> str:
    """A loop device's device_info series without ``parent`` (anything else: unchanged, so
    any other difference stays a difference)."""
    if not series.startswith("cephscope_osd_device_info{") or 'kind="loop"' not in series:
        return series
    return series.replace(f',parent="{_label(series, "parent")}"', "")


@pytest.fixture
def read_only_key(devcluster: DevCluster) -> Iterator[str]:
    """A keyring of a cephx user with ``mon 'allow r'`` and nothing else; removed after."""
    keyring = devcluster.ceph("auth", "get-or-create", READ_ONLY_USER, "mon", "allow r")
    try:
        yield keyring
    finally:
        devcluster.ceph("auth", "rm", READ_ONLY_USER)


def test_exporter_as_ceph_user_with_mon_allow_r_exports_what_root_exports(
    devcluster: DevCluster, read_only_key: str
) -> None:
    ceph = pwd.getpwnam("ceph")  # Debian's ceph-common/ceph-base create it
    caps = devcluster.ceph_json("auth", "get", READ_ONLY_USER)[0]["caps"]
    assert caps == {"mon": "allow r"}
    # A dir of its own outside pytest's 0700 base dir: conf, keyring, the sockets' mount point.
    home = Path(tempfile.mkdtemp(prefix="cephscope-lp-"))
    sockets = sorted(devcluster.asok_dir.glob("*.asok"))
    assert any(p.name.startswith("ceph-osd.") for p in sockets)
    owners = {p: p.stat() for p in sockets}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        (home / "asok").mkdir()
        fsid = devcluster.ceph_json("fsid")["fsid"]
        mon_host = next(line.split("=", 1)[1].strip()
                        for line in devcluster.conf_path.read_text().splitlines()
                        if line.startswith("mon_host"))
        (home / "ceph.conf").write_text(
            f"[global]\nfsid = {fsid}\nmon_host = {mon_host}\nms_bind_msgr1 = false\n"
            "auth_client_required = cephx\nadmin_socket =\nlog_file = /dev/null\n")
        (home / "keyring").write_text(read_only_key)
        (home / "keyring").chmod(0o600)
        for path in (home, home / "asok", home / "ceph.conf", home / "keyring"):
            os.chown(path, ceph.pw_uid, ceph.pw_gid)
        for path in sockets:  # the daemons' user owns its sockets on a real host
            os.chown(path, ceph.pw_uid, ceph.pw_gid)

        common = ["--collector.perf.priority=0", "--log.level=info"]
        root_port, ceph_port = _free_port(), _free_port()
        root_log, ceph_log = home / "root.log", home / "ceph-user.log"
        with root_log.open("wb") as out:
            procs.append(subprocess.Popen(
                [str(EXPORTER), f"--web.listen-address=127.0.0.1:{root_port}",
                 f"--ceph.asok-dir={devcluster.asok_dir}", f"--ceph.conf={devcluster.conf_path}",
                 *common], stdout=out, stderr=out))
        # Private mount namespace: bind the socket dir where the ceph user can reach it, then
        # drop to the ceph user with no capabilities and no way to regain any.
        script = ('mount --bind "$1" "$2" && shift 2 && exec setpriv --reuid="$0" --regid="$0" '
                  '--clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- "$@"')
        with ceph_log.open("wb") as out:
            procs.append(subprocess.Popen(
                ["unshare", "--mount", "--propagation=private", "--", "sh", "-c", script,
                 str(ceph.pw_uid), str(devcluster.asok_dir), str(home / "asok"),
                 str(EXPORTER), f"--web.listen-address=127.0.0.1:{ceph_port}",
                 f"--ceph.asok-dir={home / 'asok'}", f"--ceph.conf={home / 'ceph.conf'}",
                 f"--ceph.name={READ_ONLY_USER}", f"--ceph.keyring={home / 'keyring'}",
                 *common], stdout=out, stderr=out))
        _wait_up(root_port, procs[0], root_log)
        _wait_up(ceph_port, procs[1], ceph_log)
        status = Path(f"/proc/{procs[1].pid}/status").read_text()
        assert f"Uid:\t{ceph.pw_uid}\t{ceph.pw_uid}\t{ceph.pw_uid}\t{ceph.pw_uid}" in status
        assert "CapEff:\t0000000000000000" in status and "CapBnd:\t0000000000000000" in status

        # Two rounds each (the first fills schema and topology caches), same request history.
        for _ in range(2):
            as_root, as_ceph = _scrape(root_port), _scrape(ceph_port)
        root_samples, ceph_samples = parse_samples(as_root), parse_samples(as_ceph)
        assert ceph_samples["cephscope_topology_mon_up"] == 1, "osd metadata with mon 'allow r'"
        failed = {k for k, v in ceph_samples.items()
                  if k.startswith("cephscope_scrape_collector_success") and v != 1}
        assert not failed, ceph_log.read_text()[-3000:]
        osds = {f"osd.{i}" for i in devcluster.osd_ids()}
        for osd in osds:
            assert ceph_samples[f'cephscope_daemon_up{{ceph_daemon="{osd}"}}'] == 1
        only_root, only_ceph = _series(as_root) - _series(as_ceph), _series(as_ceph) - _series(as_root)
        # The one difference: a loop device's parent is the disk holding its backing file,
        # and the dev cluster's images lie under pytest's root-only (0700) base dir.
        unreachable = {_label(k, "device") for k in only_root | only_ceph}
        for device in unreachable:
            backing = Path(f"/sys/block/{device}/loop/backing_file").read_text().strip()
            look = subprocess.run(
                ["setpriv", f"--reuid={ceph.pw_uid}", f"--regid={ceph.pw_gid}", "--clear-groups",
                 "--", "stat", "--", backing], capture_output=True, text=True, timeout=10)
            assert look.returncode != 0 and "Permission denied" in look.stderr, (backing, look)
        assert {_without_loop_parent(k) for k in only_root} == {
            _without_loop_parent(k) for k in only_ceph}, (
            f"series only as root: {sorted(only_root)[:20]}; only as ceph: {sorted(only_ceph)[:20]}")
        assert len(root_samples) > 500
        # What the ceph user could not do, and said: read a root OSD's /proc/<pid>/root.
        cannot = [line for line in ceph_log.read_text().splitlines() if "cannot" in line]
        assert cannot and all("/root" in line and "Permission denied" in line
                              for line in cannot), cannot
        print("\nceph-user exporter says:", *cannot, sep="\n  ")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(15)
        for path, st in owners.items():
            if path.exists():
                os.chown(path, st.st_uid, st.st_gid)
        shutil.rmtree(home, ignore_errors=True)
