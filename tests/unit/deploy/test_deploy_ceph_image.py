"""Ceph images from release root filesystems: the tag follows the root's build marker, so a
rebuilt root gets a new image and an unchanged one is never imported twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.deploy.ceph_image import image_tag
from cephscope.deploy.container import ContainerError
from cephscope.deploy.rootfs import MARKER, RootfsError


def test_tag_follows_the_roots_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    root = tmp_path / "cephscope/rootfs/tentacle"
    root.mkdir(parents=True)
    (root / MARKER).write_text('{"ceph_version": "20.2.4+ds-2", "built_at": "a"}')
    first = image_tag("tentacle")
    assert first.startswith("localhost/cephscope-ceph:tentacle-")
    assert image_tag("tentacle") == first
    (root / MARKER).write_text('{"ceph_version": "20.2.4+ds-2", "built_at": "b"}')
    assert image_tag("tentacle") != first


def test_missing_root_says_how_to_build_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(ContainerError, match="cephscope devcluster rootfs --release reef"):
        image_tag("reef")


def test_unknown_release_is_refused() -> None:
    with pytest.raises(RootfsError, match="unknown release"):
        image_tag("quincy; rm")
