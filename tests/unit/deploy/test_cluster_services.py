"""CephFS and the gateway of a dev cluster, against commands that answer as Ceph's tools would
(nothing runs): their conf sections, what the keys and pools look like, and radosgw-admin
answers that are not a user with keys."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from cephscope.deploy.cluster_bootstrap import ClusterBootstrap
from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.deploy.cluster_services import ClusterServices, write_keyring
from cephscope.deploy.placement import Release
from tests.unit.devcluster_fakes import FakeRunner, Journal, RecordingDaemons, RecordingHealth, RecordingLoops


def parts(layout: ClusterLayout, journal: Journal,
          rgw_answer: bytes | None = None) -> tuple[ClusterBootstrap, ClusterServices]:
    commands = ClusterCommands(layout, FakeRunner(layout.state_dir, journal, rgw_answer))
    daemons = RecordingDaemons(layout, journal)
    health = RecordingHealth(layout, commands, journal)
    return (ClusterBootstrap(layout, commands, daemons, RecordingLoops(journal), health, log=lambda m: None),
            ClusterServices(layout, commands, daemons, health, log=lambda m: None))


def sections(conf: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)  # strict: no section twice
    parser.read_string(conf)
    return parser


def test_the_conf_gives_the_mds_and_gateway_their_dirs_keyrings_and_frontend(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c", port_base=21000, mds=True, rgw=True)
    maker, _ = parts(layout, Journal())
    maker.new_state("file")
    maker.write_conf("f")
    conf = sections(layout.conf_path.read_text())
    s = layout.state_dir
    assert conf["global"]["ms_bind_port_max"] == "21098"  # the gateway's port is kept free
    assert conf["mds"]["mds_data"] == f"{s}/mds/$cluster-$id"
    assert conf["mds"]["keyring"] == "$mds_data/keyring"
    gateway = conf["client.rgw.a"]
    assert gateway["rgw_frontends"] == "beast endpoint=127.0.0.1:21099"
    assert gateway["admin_socket"] == f"{s}/run/$cluster-$name.asok"
    assert gateway["rgw_data"] == f"{s}/rgw/$cluster-$id" and gateway["keyring"] == "$rgw_data/keyring"
    assert layout.rgw_data == s / "rgw" / "ceph-rgw.a"  # $id of client.rgw.a is rgw.a
    assert conf["client"]["admin_socket"] == ""  # short-lived tools still leave no socket


def test_the_gateway_turns_on_the_labeled_op_counters_of_releases_that_have_them(
        tmp_path: Path) -> None:
    flags = ("rgw_user_counters_cache", "rgw_bucket_counters_cache")
    for release, expected in (("host", None), ("reef", None), ("tentacle", "true")):
        layout = ClusterLayout.resolve(tmp_path / release, port_base=21000, rgw=True)
        layout.release = Release(release, None if release == "host" else tmp_path / "root")
        maker, _ = parts(layout, Journal())
        maker.new_state("file")
        maker.write_conf("f")
        gateway = sections(layout.conf_path.read_text())["client.rgw.a"]
        assert [gateway.get(flag) for flag in flags] == [expected, expected], release


def test_without_services_the_conf_is_as_before(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c", port_base=21000)
    maker, _ = parts(layout, Journal())
    maker.new_state("file")
    maker.write_conf("f")
    conf = sections(layout.conf_path.read_text())
    assert conf["global"]["ms_bind_port_max"] == "21099"
    assert not conf.has_section("mds") and not conf.has_section("client.rgw.a")


def test_a_multi_host_gateway_listens_on_the_first_hosts_public_address(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c", port_base=21000, num_osds=2, hosts=2, clients=1,
                                   mds=True, rgw=True)
    maker, services = parts(layout, Journal())
    maker.new_state("file")
    maker.write_conf("f")
    conf = sections(layout.conf_path.read_text())
    first = layout.hosts[0]
    assert conf["client.rgw.a"]["rgw_frontends"] == f"beast endpoint={first.public_addr}:21099"
    assert conf["client.rgw.a"]["admin_socket"] == f"{layout.asok_dir}/{first.name}/$cluster-$name.asok"
    assert conf["mds.a"]["admin_socket"] == f"{layout.asok_dir}/{first.name}/$cluster-$name.asok"
    assert services.rgw_endpoint == f"http://{first.public_addr}:21099"


def test_service_pools_are_small_and_keys_go_to_keyrings_in_the_data_dirs(tmp_path: Path) -> None:
    journal = Journal()
    layout = ClusterLayout.resolve(tmp_path / "c", mds=True, rgw=True)
    _, services = parts(layout, journal)
    layout.state_dir.mkdir(parents=True)
    services.prepare()
    creates = [c for _, _, c in journal.mon_commands("osd pool create")]
    assert len(creates) == 9
    assert all((c["pg_num"], c["pgp_num"], c["pool_type"]) == (8, 8, "replicated") for c in creates)
    # only a name beginning with "." is confirmed (newer mons make nothing without it)
    assert [c["pool"] for c in creates if c.get("yes_i_really_mean_it")] == [".rgw.root"]
    (_, _, mds_key), = [k for k in journal.mon_commands("auth get-or-create") if k[2]["entity"] == "mds.a"]
    assert "allow profile mds" in mds_key["caps"] and mds_key["format"] == "json"
    # the keys came back on the batch's stdout and went to the daemons' keyrings, owner only
    for keyring, entity in ((layout.mds_data / "keyring", "mds.a"),
                            (layout.rgw_data / "keyring", "client.rgw.a")):
        assert keyring.read_text().startswith(f"[{entity}]\n\tkey = AQBkey")
        assert keyring.stat().st_mode & 0o777 == 0o600
    batch, = [e[2] for e in journal.kinds("run") if e[2][0] == "/usr/bin/python3"]
    assert not any("AQBkey" in word for word in batch)


@pytest.mark.parametrize("answer", [
    [{"entity": "mds.a", "key": "AQB+/x==\n[client.admin]\n\tkey = stolen"}],
    [{"entity": "client.admin", "key": "AQBvalid=="}],
    [],
    "text",
])
def test_a_keyring_is_written_only_from_a_clean_key_of_its_own_entity(tmp_path: Path, answer: object) -> None:
    with pytest.raises(DevClusterError, match=r"answered `auth get-or-create mds\.a` without its key"):
        write_keyring(tmp_path / "keyring", "mds.a", answer)
    assert not (tmp_path / "keyring").exists()


@pytest.mark.parametrize(("answer", "problem"), [
    (b"radosgw-admin: could not create user", "user create: radosgw-admin answered no JSON"),
    (b'["not", "an", "object"]', "answered no JSON object"),
    (b'{"keys": [{"user": "someone-else", "access_key": "A", "secret_key": "S"}]}', "without keys"),
    (b'{"keys": "not a list"}', "without keys"),
])
def test_radosgw_admin_answers_that_are_no_user_with_keys_are_refused(tmp_path: Path, answer: bytes,
                                                                      problem: str) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c", rgw=True)
    layout.state_dir.mkdir(parents=True)
    _, services = parts(layout, Journal(), rgw_answer=answer)
    with pytest.raises(DevClusterError, match=problem):
        services.create_rgw_user()
    assert not layout.rgw_file.exists()
