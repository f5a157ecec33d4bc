"""The real parts' factory: one shared command runner and placement, namespace hosts only for
a multi-host cluster, and `DevCluster` using whatever factory it is handed."""

from __future__ import annotations

from pathlib import Path

from cephscope.deploy.cluster_parts import process_parts
from cephscope.deploy.daemon_supervisor import ProcessDaemons
from cephscope.deploy.devcluster import DevCluster
from tests.unit.devcluster_fakes import Journal, RecordingDaemons, recording_parts


def test_process_parts_share_one_runner_and_add_hosts_only_when_multi_host(tmp_path: Path) -> None:
    single = DevCluster(tmp_path / "s", log=lambda m: None, parts=process_parts)
    parts = single.parts
    assert isinstance(parts.daemons, ProcessDaemons) and parts.daemons.commands is parts.commands
    assert parts.health.commands is parts.commands and parts.bootstrap.daemons is parts.daemons
    assert parts.hosts is None and single.host_daemons is None and single.ssh_config is None
    multi = DevCluster(tmp_path / "m", num_osds=2, hosts=2, clients=1, log=lambda m: None)
    assert multi.parts.hosts is not None
    assert multi.ssh_config == multi.state_dir / "ssh" / "ssh_config"


def test_the_coordinator_asks_the_handed_in_placement(tmp_path: Path) -> None:
    cluster = DevCluster(tmp_path / "c", parts=recording_parts(Journal()), log=lambda m: None)
    assert isinstance(cluster.daemons, RecordingDaemons)
    cluster.daemons.running["mon.a"] = 4242
    assert cluster.running_daemons() == {"mon.a": 4242}
