"""Shared unit-test fixtures."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.fake_asok import FakeCluster

SYSFS_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"


@pytest.fixture(scope="session")
def sysfs_host1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sysfs fixture tree as build_tree.py writes it.

    Built afresh rather than read from the checked-in copy: git keeps no empty directories,
    and sysfs meaning lives in some (`mq/N` counts hardware queues, empty `holders/`)."""
    spec = importlib.util.spec_from_file_location("build_tree", SYSFS_FIXTURES / "build_tree.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = tmp_path_factory.mktemp("sysfs") / "host1"
    module.build(str(root))
    return root


@pytest.fixture
def one_osd(tmp_path: Path) -> Iterator[FakeCluster]:
    """One fake OSD socket (osd.0) replaying real captures."""
    fake = FakeCluster(tmp_path / "run")
    fake.add_osd(0)
    yield fake
    fake.stop()
