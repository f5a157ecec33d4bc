"""`devcluster down` with a damaged state.json still stops what it can find, in the order a
whole cluster stops."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cephscope.deploy.devcluster import DevCluster
from tests.unit.devcluster_fakes import Journal, RecordingDaemons, recording_parts


def test_down_with_a_damaged_state_file_stops_the_daemons_its_pid_files_name(tmp_path: Path):
    state_dir = tmp_path / "cluster"
    (state_dir / "run").mkdir(parents=True)
    conf = state_dir / "ceph.conf"
    conf.write_text("[global]\n")
    # what a results dir written over the state dir left behind
    (state_dir / "state.json").write_text(json.dumps({"created_pools": [],
                                                      "created_erasure_profiles": []}))
    # a stand-in daemon whose command line names our conf (as `ceph-osd -c CONF` does), and a
    # stranger that the pid file of another daemon points at
    ours = subprocess.Popen(["/bin/sh", "-c", "sleep 60", str(conf)])
    stranger = subprocess.Popen(["/bin/sh", "-c", "sleep 60"])
    try:
        (state_dir / "run" / "osd.0.pid").write_text(f"{ours.pid}\n")
        (state_dir / "run" / "mgr.x.pid").write_text(f"{stranger.pid}\n")
        said: list[str] = []
        cluster = DevCluster(state_dir, log=said.append)
        assert cluster.down() == ["osd.0"]
        assert ours.wait(timeout=10) is not None
        assert stranger.poll() is None
        assert "is damaged" in said[0] and "osd.0" in said[0]
    finally:
        for proc in (ours, stranger):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_with_a_damaged_state_file_the_gateway_and_mds_stop_before_the_osds(tmp_path: Path) -> None:
    state_dir = tmp_path / "cluster"
    (state_dir / "run").mkdir(parents=True)
    (state_dir / "state.json").write_text("{damaged")
    names = ("client.rgw.a", "mds.a", "osd.0", "mon.a")
    for name in names:
        (state_dir / "run" / f"{name}.pid").write_text("1\n")
    journal = Journal()
    cluster = DevCluster(state_dir, log=lambda m: None, parts=recording_parts(journal))
    daemons = cluster.daemons
    assert isinstance(daemons, RecordingDaemons)
    daemons.running.update({name: 100 + i for i, name in enumerate(names)})
    assert sorted(cluster.down()) == sorted(names)
    stops = [e[1] for e in journal.kinds("stop")]
    assert sorted(stops[:2]) == ["client.rgw.a", "mds.a"] and stops[2:] == ["osd.0", "mon.a"]
