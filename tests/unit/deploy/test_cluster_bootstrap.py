"""Making a dev cluster, against commands that answer as Ceph's tools would (nothing runs):
which argv each step runs, on which host, with which release's arguments, and what the
record says after each OSD."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cephscope.deploy.cluster_bootstrap import ClusterBootstrap
from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_layout import ClusterLayout, ClusterState, DevClusterError
from cephscope.deploy.placement import Release
from tests.unit.devcluster_fakes import FakeRunner, Journal, RecordingDaemons, RecordingHealth, RecordingLoops


def bootstrap(layout: ClusterLayout, journal: Journal) -> ClusterBootstrap:
    commands = ClusterCommands(layout, FakeRunner(layout.state_dir, journal))
    return ClusterBootstrap(layout, commands, RecordingDaemons(layout, journal), RecordingLoops(journal),
                            RecordingHealth(layout, commands, journal), log=lambda m: None)


def loop_devices(layout: ClusterLayout) -> list[str | None]:
    return [o.loop_device for o in ClusterState.load(layout.state_file).osds]


def runs(journal: Journal, program: str) -> list[tuple[str, list[str], bytes | None]]:
    return [(host, list(argv), inbuf) for _, host, argv, inbuf in journal.kinds("run") if argv[0] == program]


def test_a_multi_host_cluster_makes_each_osd_on_its_host(tmp_path: Path) -> None:
    journal = Journal()
    layout = ClusterLayout.resolve(tmp_path / "c", num_osds=3, hosts=3, clients=1, osd_size_gib=1)
    maker = bootstrap(layout, journal)
    state = maker.new_state("file")
    assert ClusterState.load(layout.state_file).fsid == state.fsid and state.hosts == 3
    maker.create(state)
    conf = layout.conf_path.read_text()
    assert f"public_network = {layout.host_plan.public_subnet}" in conf  # type: ignore[union-attr]
    assert f"[osd.2]\nadmin_socket = {layout.asok_dir}/host3/$cluster-$name.asok" in conf
    mkfs = runs(journal, "ceph-osd")
    assert sorted((host, argv[argv.index("-i") + 1]) for host, argv, _ in mkfs) == [
        ("host1", "0"), ("host2", "1"), ("host3", "2")]
    for _, argv, _ in mkfs:
        osd = int(argv[argv.index("-i") + 1])
        image = str(layout.osd_image(osd))
        assert argv[argv.index("--bluestore-block-path") + 1] == image and "--bluestore-block-create" in argv
        assert argv[argv.index("--osd-uuid") + 1] == (layout.osd_data(osd) / "fsid").read_text().strip()
    # the cephx secret goes to the mon on stdin, never on a command line
    news = [(argv, inbuf) for _, argv, inbuf in runs(journal, "ceph") if "new" in argv]
    assert len(news) == 3
    assert all(json.loads(inbuf or b"")["cephx_secret"].startswith("AQB") and "-i" in argv
               for argv, inbuf in news)
    assert [o.osd_id for o in ClusterState.load(layout.state_file).osds] == [0, 1, 2]
    pools = [argv for _, argv, _ in runs(journal, "ceph") if "pool" in argv and "create" in argv]
    assert [argv[argv.index("create") + 1] for argv in pools] == ["cephscope-bench", "rbd"]
    image = ["create", "--size", "2048", "rbd/cephscope-img"]
    assert any(argv[3:] == image for _, argv, _ in runs(journal, "rbd"))


def test_the_mon_is_made_with_the_releases_arguments_before_it_starts(tmp_path: Path) -> None:
    journal = Journal()
    layout = ClusterLayout.resolve(tmp_path / "c", num_osds=1)
    layout.release = Release("tentacle", tmp_path / "root")
    maker = bootstrap(layout, journal)
    state = maker.new_state("file")
    maker.write_conf(state.fsid)
    maker.bootstrap_mon(state.fsid)
    authtool = runs(journal, "ceph-authtool")
    admin = next(argv for _, argv, _ in authtool if str(layout.admin_keyring) in argv and "--gen-key" in argv)
    assert admin[-2:] == ["--key-type", "aes"]
    (_, monmap, _), = runs(journal, "monmaptool")
    assert monmap[monmap.index("--fsid") + 1] == state.fsid
    assert f"[v2:127.0.0.1:{layout.port_base}]" in monmap and "--auth-allowed-ciphers" in monmap
    mkfs = journal.indices("run", lambda e: e[2][0] == "ceph-mon")
    assert mkfs and journal.events[-1][:2] == ("start", "mon.a") and mkfs[0] < len(journal.events) - 1
    assert not (layout.state_dir / "monmap.tmp").exists()


def test_loop_backed_osds_are_recorded_as_each_is_attached(tmp_path: Path) -> None:
    journal = Journal()
    layout = ClusterLayout.resolve(tmp_path / "c", num_osds=2, osd_size_gib=1)
    maker = bootstrap(layout, journal)
    state = maker.new_state("loop")
    maker.create_osds(state)
    assert loop_devices(layout) == ["/dev/loop40", "/dev/loop41"]
    assert layout.osd_image(1).stat().st_size == 1 << 30  # sparse, full size
    mkfs = runs(journal, "ceph-osd")
    assert sorted(argv[argv.index("--bluestore-block-path") + 1] for _, argv, _ in mkfs) == [
        "/dev/loop40", "/dev/loop41"]
    device_class = [argv for _, argv, _ in runs(journal, "ceph") if "set-device-class" in argv]
    assert device_class and device_class[0][-3:] == ["ssd", "osd.0", "osd.1"]
    # attached again after a `down`: recorded, and the OSD's block link follows the new number
    for o in state.osds:
        o.loop_device = None
        layout.osd_data(o.osd_id).mkdir(parents=True, exist_ok=True)
    maker.reattach_loops(state)
    assert loop_devices(layout) == ["/dev/loop42", "/dev/loop43"]
    assert (layout.osd_data(0) / "block").readlink() == Path("/dev/loop42")


def test_work_with_the_mon_runs_once_the_mon_is_up_and_its_failure_is_raised(tmp_path: Path) -> None:
    journal = Journal()
    layout = ClusterLayout.resolve(tmp_path / "c", num_osds=1, osd_size_gib=1)
    maker = bootstrap(layout, journal)

    def with_the_mon() -> None:
        journal.add("with_the_mon", [e[1] for e in journal.kinds("start")])
        raise DevClusterError("`ceph fs new` failed: Error EINVAL")

    with pytest.raises(DevClusterError, match="fs new"):
        maker.create(maker.new_state("file"), with_the_mon=with_the_mon)
    (_, started_before), = journal.kinds("with_the_mon")
    assert started_before[:1] == ["mon.a"]
    # the rest of the cluster was still made: the caller's teardown finds it all recorded
    assert [e[1] for e in journal.kinds("start")] == ["mon.a", "mgr.x", "osd.0"]
