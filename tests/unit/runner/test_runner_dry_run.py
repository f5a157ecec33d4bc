"""`--dry-run` shows every change and command of a sweep on every host (issue 23 finding 4):
scalar settings as well as axes, host knobs per host and file with their value now, the ssh
command line (with the spec's ssh options) each host is reached with, the restart command."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cephscope.runner.dry_run import UNKNOWN, DryRunInputs, change_lines
from cephscope.runner.hostexec import SshHost
from cephscope.runner.hygiene import HygieneOptions
from cephscope.runner.knobs.host import HostKnobs
from cephscope.runner.restart import ArgvRestart
from cephscope.runner.spec import load_spec
from cephscope.runner.steps import generate_steps
from tests.unit.runner_fakes import BENCHES

SPEC = """\
cluster:
  clients: [client1]
  ssh_options: [ConnectTimeout=7]
restart:
  method: command
  command: [systemctl, restart, "ceph-osd@{id}"]
ceph_config:
  osd_op_num_shards: [2, 4]
osd_ra: 256
sysctl:
  vm.swappiness: 10
benchmarks:
  radosbench:
    op_size: 4096
    time: 5
"""


class Mon:
    def command(self, prefix: str, **args: Any) -> Any:
        assert prefix == "osd metadata"
        return [{"id": 0, "hostname": "osd-host-1", "devices": "sda"}]


class ReadOnlyHost(SshHost):
    """An OSD host reached over ssh whose files read as `files` says; refuses any write."""

    files: dict[str, str] = {"/sys/block/sda/queue/read_ahead_kb": "128\n",
                             "/proc/sys/vm/swappiness": "60\n"}

    def run(self, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
        assert argv[0] == "cat", f"the dry run ran {argv} on {self.name}"
        return subprocess.CompletedProcess(list(argv), 0, self.files[argv[1]].encode(), b"")


def inputs(tmp_path: Path, reachable: bool = True) -> DryRunInputs:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(SPEC))
    spec = load_spec(path, benchmarks=BENCHES)
    client = SshHost("client1", options=spec.hosts.ssh_options)

    def host_for(name: str) -> SshHost:
        return client if name == "client1" else ReadOnlyHost(name, options=("ConnectTimeout=7",))

    knobs = HostKnobs(Mon(), host_for, spec.sysctl_on,  # type: ignore[arg-type]
                      client_hosts=["client1"])
    return DryRunInputs(spec=spec, steps=generate_steps(spec),
                        restart_options={"osd_op_num_shards"}, config=None,
                        host_knobs=knobs if reachable else None,
                        restart=ArgvRestart("command", spec.restart.command),
                        hygiene=HygieneOptions(), clients=[client], host_for=host_for,
                        pools=["cephscope-bench"])


def test_every_change_and_command_on_every_host(tmp_path):
    lines = change_lines(inputs(tmp_path))
    text = "\n".join(lines)
    # scalar host knobs, per host and file, with the value they have now
    assert ("  osd_ra on osd-host-1:sda (/sys/block/sda/queue/read_ahead_kb): 128 → 256"
            in lines)
    assert "  sysctl.vm.swappiness on osd-host-1 (/proc/sys/vm/swappiness): 60 → 10" in lines
    # no cluster to read: the before-value says so
    assert f"  osd_op_num_shards: {UNKNOWN} → 2, 4 (OSD restart)" in lines
    assert "OSD restart on this machine, per OSD: systemctl restart 'ceph-osd@{id}'" in text
    # the ssh command line of each host, with the spec's ssh options, and what runs there
    assert any(line.startswith("  on osd-host-1: sync; tee /proc/sys/vm/drop_caches")
               and "-o ConnectTimeout=7" in line and "-- osd-host-1 <command>" in line
               for line in lines), text
    assert any(line.startswith("  on client1:") and "-o ConnectTimeout=7" in line
               for line in lines), text
    assert "benchmark tools (radosbench) on client client1" in text
    assert "ceph osd set noscrub / nodeep-scrub" in text and "cephscope-bench" in text


def test_without_a_cluster_every_before_value_is_unknown(tmp_path):
    lines = change_lines(inputs(tmp_path, reachable=False))
    assert f"  osd_ra: {UNKNOWN} → 256" in lines
    assert f"  sysctl.vm.swappiness: {UNKNOWN} → 10" in lines


def test_client_endpoints_each_step_makes_are_said(tmp_path):
    path = tmp_path / "fio.yaml"
    path.write_text("client_endpoints:\n  fs: {driver: cephfs-fuse, endpoints_per_client: 2}\n"
                    "  img: {driver: rbd-fuse}\n"
                    "benchmarks:\n  fio: {client_endpoints: [img, fs], size: 64}\n")
    spec = load_spec(path)
    lines = change_lines(DryRunInputs(spec=spec, steps=generate_steps(spec), restart_options=set(),
                                      config=None, host_knobs=None, restart=None,
                                      hygiene=HygieneOptions(), clients=[],
                                      host_for=lambda name: SshHost(name), pools=[]))
    assert ("  client endpoints img (rbd-fuse, 1 per client): RBD images, an rbd-fuse mount "
            "per image on its client for each step, removed after it") in lines
    assert any(line.startswith("  client endpoints fs (cephfs-fuse, 2 per client): a ceph-fuse")
               for line in lines)
