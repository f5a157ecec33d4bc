"""Release root filesystems: cache lookup, interrupted builds, a clear error without the archive
(no build is started in these tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cephscope.deploy import rootfs
from cephscope.deploy.placement import Release, release_command


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "cephscope" / "rootfs"


def test_unreachable_archive_is_a_clear_error_before_any_build(cache: Path) -> None:
    with pytest.raises(rootfs.RootfsError) as err:
        rootfs.build("reef", mirror="http://127.0.0.1:9/debian")
    message = str(err.value)
    assert "cannot reach Debian's archive for reef" in message
    assert "http://127.0.0.1:9/debian/dists/trixie/InRelease" in message
    assert not (cache / "reef").exists()
    assert not list(cache.glob(".reef.build-*"))


def test_unknown_release_and_missing_cache_name_what_to_do(cache: Path) -> None:
    with pytest.raises(rootfs.RootfsError, match="unknown release 'quincy'"):
        rootfs.release_spec("quincy")
    with pytest.raises(rootfs.RootfsError, match="cephscope devcluster rootfs --release tentacle"):
        rootfs.find_release("tentacle")


def test_a_tree_without_the_marker_is_never_used_and_stale_builds_go(cache: Path) -> None:
    (cache / "reef" / "usr").mkdir(parents=True)  # an interrupted or damaged tree
    with pytest.raises(rootfs.RootfsError, match="no root filesystem for reef"):
        rootfs.find_release("reef")
    stale = cache / ".reef.build-999999999"  # no such pid: its builder is gone
    (stale / "usr").mkdir(parents=True)
    logged: list[str] = []
    rootfs._remove_stale_builds(cache, "reef", logged.append)
    assert not stale.exists() and any("interrupted build" in m for m in logged)
    (cache / "reef" / rootfs.MARKER).write_text(json.dumps({"release": "reef"}))
    with pytest.raises(rootfs.RootfsError, match="without a package it now needs"):
        rootfs.find_release("reef")  # a marker from before packages were recorded
    wanted = rootfs.wanted_packages(rootfs.release_spec("reef"))
    (cache / "reef" / rootfs.MARKER).write_text(
        json.dumps({"release": "reef", "packages": [p for p in wanted if p != "radosgw"]}))
    with pytest.raises(rootfs.RootfsError, match="without a package it now needs"):
        rootfs.find_release("reef")
    (cache / "reef" / rootfs.MARKER).write_text(
        json.dumps({"release": "reef", "packages": [*wanted, "extra"]}))
    assert rootfs.find_release("reef") == Release("reef", cache / "reef")


def test_host_packages_serve_their_own_release(cache: Path) -> None:
    major = rootfs.upstream_major(rootfs.host_ceph_version())
    assert major is not None  # this machine has Debian's ceph-osd
    name = next(n for n, spec in rootfs.RELEASES.items() if spec.ceph_major == major)
    assert rootfs.find_release(name).root is None
    assert rootfs.upstream_major("16.2.15+ds-0+deb12u1") == 16
    assert rootfs.upstream_major("2:20.2.4-1") == 20


def test_release_command_wraps_only_a_root_filesystem_release(tmp_path: Path) -> None:
    assert release_command(Release("host", None), ["ceph", "-s"], [tmp_path]) == ["ceph", "-s"]
    argv = release_command(Release("reef", tmp_path / "root"), ["ceph-osd", "-i", "0"], [tmp_path])
    assert argv[1:5] == ["-m", "cephscope.deploy.rootexec", "--root", str(tmp_path / "root")]
    assert argv[5] == f"--bind={tmp_path}" and argv[6:] == ["--", "ceph-osd", "-i", "0"]
