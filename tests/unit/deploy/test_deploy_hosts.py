"""Planning a multi-host dev cluster: names, addresses, subnet checks, conf, targets, and the
command that enters a host. Nothing here creates a namespace."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from cephscope.deploy.devcluster import DevCluster, DevClusterError
from cephscope.deploy.devconf import ConfNetwork, render_conf
from cephscope.deploy.hostdaemons import HostDaemonError, HostDaemons
from cephscope.deploy.hosts import (
    IFNAMSIZ,
    HostNetworkError,
    HostPlan,
    overlapping_routes,
    plan_hosts,
)
from cephscope.deploy.placement import HOST_RELEASE, DevHost, Placement, Release
from cephscope.deploy.stack import EXPORTER_JOB, NODE_JOB, Stack


def test_plan_names_fit_ifnamsiz_and_differ_between_state_dirs(tmp_path: Path) -> None:
    a = plan_hosts(tmp_path / "a", hosts=3, clients=2)
    b = plan_hosts(tmp_path / "b", hosts=3, clients=2)
    names_a = {a.public_bridge, a.cluster_bridge, *(h.public_veth for h in a.hosts),
               *(h.cluster_veth for h in a.hosts if h.cluster_veth)}
    names_b = {b.public_bridge, b.cluster_bridge, *(h.public_veth for h in b.hosts),
               *(h.cluster_veth for h in b.hosts if h.cluster_veth)}
    assert all(len(n) <= IFNAMSIZ for n in names_a | names_b)
    assert len(names_a) == 2 + 5 + 3  # clients have no cluster NIC
    assert not names_a & names_b
    assert not {h.netns for h in a.hosts} & {h.netns for h in b.hosts}
    assert [h.name for h in a.hosts] == ["host1", "host2", "host3", "client1", "client2"]


def test_plan_addresses_and_roles(tmp_path: Path) -> None:
    plan = plan_hosts(tmp_path, hosts=2, clients=1, public_subnet="10.250.7.0/24",
                      cluster_subnet="10.251.7.0/24")
    assert plan.admin_addr == "10.250.7.1"
    host1, host2, client1 = plan.hosts
    assert (host1.public_addr, host1.cluster_addr) == ("10.250.7.11", "10.251.7.11")
    assert host2.public_addr == "10.250.7.12"
    assert client1.role == "client" and client1.cluster_addr is None
    assert client1.public_addr == "10.250.7.101"
    path = tmp_path / "hosts.json"
    plan.save(path)
    assert HostPlan.load(path) == plan


@pytest.mark.parametrize(
    ("public", "cluster", "message"),
    [
        ("10.250.0.0/24", "10.250.0.0/25", "overlaps cluster subnet"),
        ("8.8.8.0/24", "10.251.0.0/24", "private"),
        ("10.250.0.0/29", "10.251.0.0/24", "too small"),
        ("10.250.0.0/33", "10.251.0.0/24", "bad subnet"),
    ],
)
def test_plan_refuses_bad_subnets(tmp_path: Path, public: str, cluster: str, message: str) -> None:
    with pytest.raises(HostNetworkError, match=message):
        plan_hosts(tmp_path, hosts=3, clients=2, public_subnet=public, cluster_subnet=cluster)


def test_overlapping_routes_ignores_default_and_our_own_bridges() -> None:
    routes = [
        {"dst": "default", "gateway": "192.0.2.1", "dev": "eth0"},
        {"dst": "192.0.2.0/24", "dev": "eth0"},
        {"dst": "10.250.0.0/16", "dev": "wg0"},
        {"dst": "10.251.0.0/24", "dev": "csabcdefclu"},
        {"type": "local", "dst": "10.251.0.1", "dev": "csabcdefclu"},
    ]
    clashes = overlapping_routes(["10.250.3.0/24", "10.251.0.0/24"], routes, ["csabcdefclu"])
    assert clashes == ["10.250.0.0/16 dev wg0 overlaps 10.250.3.0/24"]
    assert overlapping_routes(["192.0.2.128/25"], routes) == ["192.0.2.0/24 dev eth0 overlaps 192.0.2.128/25"]


def test_devcluster_refuses_bad_host_counts_before_creating_anything(tmp_path: Path) -> None:
    with pytest.raises(DevClusterError, match="hosts must be at least 1"):
        DevCluster(tmp_path / "c", hosts=0, clients=1)
    assert not (tmp_path / "c").exists()


def test_multi_host_devcluster_places_daemons_and_sockets_per_host(tmp_path: Path) -> None:
    cluster = DevCluster(tmp_path / "c", num_osds=4, hosts=3, clients=2)
    assert [h.name for h in cluster.hosts] == ["host1", "host2", "host3"]
    assert cluster.host_of("mon.a").name == "host1"
    assert [cluster.host_of(f"osd.{i}").name for i in range(4)] == ["host1", "host2", "host3", "host1"]
    assert cluster.osd_asok(1) == cluster.asok_dir / "host2" / "ceph-osd.1.asok"
    assert cluster.mon_addr == cluster.hosts[0].public_addr
    assert cluster.client_names == ["client1", "client2"]
    single = DevCluster(tmp_path / "single")
    assert single.host_plan is None and single.osd_asok(1) == single.asok_dir / "ceph-osd.1.asok"


def test_conf_multi_host_has_networks_size_two_and_per_host_sockets(tmp_path: Path) -> None:
    network = ConfNetwork("10.250.0.0/24", "10.251.0.0/24",
                          {"osd.0": tmp_path / "run/host1", "osd.1": tmp_path / "run/host2"})
    conf = render_conf(tmp_path, "fsid", "10.250.0.11", 7000, (7010, 7099), 10, network)
    assert "public_network = 10.250.0.0/24\ncluster_network = 10.251.0.0/24\n" in conf
    assert "public_addr" not in conf
    assert "osd_pool_default_size = 2" in conf and "osd_crush_chooseleaf_type = 1" in conf
    assert f"[osd.1]\nadmin_socket = {tmp_path}/run/host2/$cluster-$name.asok" in conf
    single = render_conf(tmp_path, "fsid", "127.0.0.1", 7000, (7010, 7099), 10)
    assert "public_addr = 127.0.0.1" in single and "osd_pool_default_size = 1" in single
    assert "[osd.0]" not in single


def test_placement_enters_network_and_uts_namespace_around_the_release_wrapper(tmp_path: Path) -> None:
    host = DevHost("host2", "cephscope-abc-host2", "10.0.0.12", "10.1.0.12", uts_file=tmp_path / "h.uts")
    placement = Placement(tmp_path)
    assert placement.command(host, HOST_RELEASE, ["ceph-osd", "-i", "1"]) == [
        "nsenter", "--net=/run/netns/cephscope-abc-host2", f"--uts={tmp_path}/h.uts", "--",
        "ceph-osd", "-i", "1"]
    chrooted = placement.command(host, Release("reef", tmp_path / "root"), ["ceph-osd"])
    assert chrooted[:4] == ["nsenter", "--net=/run/netns/cephscope-abc-host2",
                            f"--uts={tmp_path}/h.uts", "--"]
    assert "cephscope.deploy.rootexec" in chrooted and chrooted[-1] == "ceph-osd"


def test_ssh_files_and_targets(tmp_path: Path) -> None:
    if not shutil.which("ssh-keygen"):
        pytest.fail("ssh-keygen missing (openssh-client)")
    plan = plan_hosts(tmp_path, hosts=2, clients=1, public_subnet="10.250.9.0/24",
                      cluster_subnet="10.251.9.0/24")
    daemons = HostDaemons(tmp_path, plan, tmp_path / "ceph.conf", lambda name: tmp_path / "run" / name,
                          keys_root=tmp_path / "keys")
    daemons.write_ssh_files()
    config = daemons.ssh_config.read_text()
    assert "Host client1\n  HostName 10.250.9.101\n" in config
    assert f"UserKnownHostsFile {daemons.known_hosts}" in config
    known = daemons.known_hosts.read_text().splitlines()
    assert [line.split()[0] for line in known] == ["host1,10.250.9.11", "host2,10.250.9.12",
                                                   "client1,10.250.9.101"]
    sshd = (daemons.ssh_dir / "hosts" / "host2" / "sshd_config").read_text()
    assert "ListenAddress 10.250.9.12:22\n" in sshd and "PasswordAuthentication no" in sshd
    # `ssh -G` resolves a host through the written config as a user's ssh would.
    resolved = subprocess.run(["ssh", "-G", "-F", str(daemons.ssh_config), "host2"],
                              capture_output=True, text=True, check=True).stdout
    assert "hostname 10.250.9.12" in resolved and "stricthostkeychecking true" in resolved
    files = daemons.write_targets()
    exporter = json.loads(files["exporter"].read_text())
    assert [(t["targets"], t["labels"]["host"]) for t in exporter] == [
        (["10.250.9.11:9967"], "host1"), (["10.250.9.12:9967"], "host2")]
    node = json.loads(files["node"].read_text())
    assert [t["labels"]["host"] for t in node] == ["host1", "host2", "client1"]


def test_stack_scrapes_file_sd_targets_instead_of_a_local_exporter(tmp_path: Path) -> None:
    targets = tmp_path / "targets"
    targets.mkdir()
    (targets / "exporter.json").write_text("[]")
    (targets / "node.json").write_text("[]")
    stack = Stack(tmp_path / "s", port_base=23000, targets_dir=targets)
    assert not stack.with_exporter
    config = stack.prometheus_config()
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert jobs[EXPORTER_JOB]["file_sd_configs"][0]["files"] == [str(targets / "exporter.json")]
    assert "static_configs" not in jobs[EXPORTER_JOB]
    assert jobs[NODE_JOB]["file_sd_configs"][0]["files"] == [str(targets / "node.json")]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(["promtool", "check", "config", "--syntax-only", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _one_host_daemons(state: Path, keys_root: Path | None = None) -> HostDaemons:
    plan = plan_hosts(state, hosts=1, clients=0, public_subnet="10.250.9.0/24",
                      cluster_subnet="10.251.9.0/24")
    extra = {"keys_root": keys_root} if keys_root is not None else {}
    return HostDaemons(state, plan, state / "ceph.conf", lambda name: state / "run" / name,
                       **extra)


@pytest.mark.parametrize("made_by", ["another user", "group-writable", "symlink"])
def test_ssh_dir_someone_else_could_have_filled_is_refused(tmp_path: Path, made_by: str) -> None:
    # Whoever can put a key in it logs in to every dev host as root.
    ssh_dir = tmp_path / "ssh"
    if made_by == "symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        ssh_dir.symlink_to(tmp_path / "elsewhere")
    else:
        ssh_dir.mkdir(mode=0o700)
        if made_by == "another user":
            os.chown(ssh_dir, 1000, 1000)
        else:
            ssh_dir.chmod(0o770)
    daemons = _one_host_daemons(tmp_path, keys_root=tmp_path / "keys")
    with pytest.raises(HostDaemonError, match=f"{ssh_dir} (belongs to uid 1000|has mode 0770|"
                                              "is not a directory)"):
        daemons.write_ssh_files()
    assert not (tmp_path / "elsewhere" / "id_ed25519").exists()
    assert not (daemons.authorized_keys).exists()


def test_sshd_keeps_strict_modes_and_accepts_the_key_with_the_state_dir_under_tmp(
    tmp_path: Path,
) -> None:
    sshd = Path("/usr/sbin/sshd")
    assert sshd.exists() and shutil.which("ssh"), "openssh-server/-client missing (install.sh)"
    state = tmp_path / "state"  # under /tmp (mode 1777): StrictModes refuses keys below it
    state.mkdir()
    daemons = _one_host_daemons(state)
    daemons.write_ssh_files()
    (host,) = daemons.plan.hosts
    config = (daemons.ssh_dir / "hosts" / host.name / "sshd_config").read_text()
    assert "StrictModes" not in config  # sshd's default: yes
    assert daemons.authorized_keys.is_relative_to(Path("/run"))
    # The host's sshd as written, but on 127.0.0.1 (no namespace in a unit test).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    local = tmp_path / "sshd_config"
    local.write_text("".join(
        f"ListenAddress 127.0.0.1:{port}\n" if line.startswith("ListenAddress ")
        else f"PidFile {tmp_path / 'sshd.pid'}\n" if line.startswith("PidFile ") else line
        for line in config.splitlines(keepends=True)))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = tmp_path / "sshd.log"
    proc = subprocess.Popen([str(sshd), "-D", "-e", "-f", str(local)],
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    try:
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        login = subprocess.run(
            ["ssh", "-F", str(daemons.ssh_config), "-o", "BatchMode=yes", "-o",
             "HostName=127.0.0.1", "-o", f"Port={port}", "-o", f"HostKeyAlias={host.name}",
             host.name, "true"],
            capture_output=True, text=True, timeout=30)
        assert login.returncode == 0, login.stderr + log.read_text()
    finally:
        proc.terminate()
        proc.wait(10)
        daemons.stop()
    assert not daemons.authorized_keys.parent.exists()
