"""capture_fixtures --services refuses, before any traffic, a cluster it cannot capture: no MDS
or no gateway socket, no Swift credentials. (The captures themselves were made on real
clusters; the replay tests read them.)"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cephscope.deploy import capture_fixtures
from tests.unit.fake_asok import FakeDaemon, capture_dir, load_capture


@pytest.fixture
def state_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="capture-", dir="/tmp") as tmp:
        state = Path(tmp)
        (state / "run").mkdir()
        (state / "ceph.conf").write_text("[global]\n")
        yield state


def serve(state: Path, *daemons: str) -> list[FakeDaemon]:
    sockets = {"mds.a": "ceph-mds.a.asok", "rgw.a": "ceph-client.rgw.a.asok",
               "osd.0": "ceph-osd.0.asok"}
    return [FakeDaemon(state / "run" / sockets[d],
                       load_capture(capture_dir("services_load" if d != "osd.0" else "load", d)))
            for d in daemons]


def test_services_capture_needs_an_mds_and_a_gateway(state_dir: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    fakes = serve(state_dir, "osd.0", "mds.a")
    try:
        code = capture_fixtures.main(["--state-dir", str(state_dir), "--services",
                                      "--out", str(state_dir / "out")])
    finally:
        for fake in fakes:
            fake.stop()
    assert code == 2
    assert "needs an MDS and a gateway socket; found ['mds.a']" in capsys.readouterr().err
    assert not (state_dir / "out").exists()


def test_services_capture_needs_swift_credentials(state_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fakes = serve(state_dir, "mds.a", "rgw.a")
    try:
        code = capture_fixtures.main(["--state-dir", str(state_dir), "--services",
                                      "--out", str(state_dir / "out")])
    finally:
        for fake in fakes:
            fake.stop()
    assert code == 2
    err = capsys.readouterr().err
    assert "rgw.json is missing" in err and "--swift-auth-url" in err
    assert not (state_dir / "out").exists()
