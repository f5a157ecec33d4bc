"""CBT files shaped like each source study's appendix (the shard-tuning study, the all-flash
study, the CBT talk, the EC study) load without a "does not act on it" warning for any key the
study relies on: read-ahead, pool and data-pool profiles, erasure profiles, RBD object size,
volumes per client, prefill, ramp, concurrency, read mode, recovery test. Only the keys that
build a cluster (which cephscope does not do) and fio logging options are warned about."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.spec import load_spec
from cephscope.runner.steps import generate_steps
from cephscope.runner.sweep import benchmark_registry

SHARD = """\
cluster:
  user: ceph
  head: head1
  clients: [client1]
  osds: [osd1, osd2, osd3]
  mons:
    mon1:
      a: 192.0.2.10:6789
  osds_per_node: 4
  fs: xfs
  mkfs_opts: -f -i size=2048
  mount_opts: -o inode64,noatime
  conf_file: /etc/ceph/ceph.conf
  iterations: 3
  use_existing: true
  clusterid: ceph
  tmp_dir: /tmp/cbt
  pool_profiles:
    replicated:
      pg_size: 1024
      pgp_size: 1024
      replication: 3
benchmarks:
  radosbench:
    op_size: [4096]
    write_only: false
    time: 300
    concurrent_ops: [1, 256]
    concurrent_procs: 4
    readmode: rand
    osd_ra: [4096]
    pool_profile: replicated
"""
ALLFLASH = """\
cluster:
  user: ceph
  head: head1
  clients: [client1, client2]
  osds: [osd1, osd2]
  mons: [mon1]
  osds_per_node: 8
  fs: xfs
  conf_file: /etc/ceph/ceph.conf
  iterations: 1
  use_existing: true
  clusterid: ceph
  tmp_dir: /tmp/cbt
  pool_profiles:
    rbd:
      pg_size: 4096
      pgp_size: 4096
      replication: 2
benchmarks:
  librbdfio:
    time: 300
    ramp: 30
    idle_monitor_sleep: 60
    vol_size: 65536
    mode: [randread, randwrite, read, write]
    op_size: [4096, 65536]
    numjobs: 1
    iodepth: [32]
    volumes_per_client: [8]
    procs_per_volume: [1]
    prefill: true
    pool_profile: rbd
    norandommap: true
    log_avg_msec: 100
    use_existing_volumes: false
"""
TALK = """\
cluster:
  user: ceph
  head: head1
  clients: [client1]
  osds: [osd1, osd2, osd3]
  mons: [mon1]
  osds_per_node: 2
  fs: xfs
  iterations: 3
  use_existing: true
  clusterid: ceph
  tmp_dir: /tmp/cbt
  osd_ra: 0
  pool_profiles:
    rep2: {pg_size: 512, pgp_size: 512, replication: 2}
    rep3: {pg_size: 512, pgp_size: 512, replication: 3}
    ec42: {pg_size: 512, pgp_size: 512, replication: erasure, erasure_profile: ec42}
  erasure_profiles:
    ec42: {erasure_k: 4, erasure_m: 2}
  recovery_test:
    osds: [1]
benchmarks:
  radosbench:
    op_size: [4194304, 1048576]
    write_only: false
    time: 300
    concurrent_ops: [128]
    concurrent_procs: 4
    readmode: seq
    osd_ra: [0]
    pool_profile: [rep2, rep3, ec42]
"""
EC = """\
cluster:
  user: ceph
  head: head1
  clients: [client1]
  osds: [osd1, osd2, osd3, osd4, osd5, osd6]
  mons: [mon1]
  iterations: 3
  use_existing: true
  clusterid: ceph
  tmp_dir: /tmp/cbt
  pool_profiles:
    rbd: {pg_size: 256, pgp_size: 256, replication: 3}
    ec33: {pg_size: 256, pgp_size: 256, replication: erasure, erasure_profile: ec33}
  erasure_profiles:
    ec33: {erasure_k: 3, erasure_m: 3, erasure_plugin: jerasure, failure_domain: osd}
benchmarks:
  librbdfio:
    time: 300
    ramp: 30
    vol_size: 65536
    vol_object_size: [4M, 2M, 1M, 512K]
    mode: [randread]
    op_size: [65536]
    iodepth: [32]
    volumes_per_client: [4]
    pool_profile: rbd
    data_pool_profile: ec33
"""

# study -> (CBT file, the keys the study relies on, the axes its steps sweep)
STUDIES = {
    "shard-tuning": (SHARD, ["osd_ra", "op_size", "concurrent_ops", "concurrent_procs",
                             "readmode", "write_only", "pool_profile", "pool_profiles",
                             "iterations", "use_existing"],
                     {"osd_ra", "radosbench.concurrent_ops"}),
    "all-flash": (ALLFLASH, ["mode", "op_size", "ramp", "idle_monitor_sleep", "vol_size",
                             "volumes_per_client", "procs_per_volume", "prefill", "norandommap", "numjobs",
                             "iodepth", "use_existing_volumes", "pool_profile"],
                  {"librbdfio.mode", "librbdfio.op_size"}),
    "cbt-talk": (TALK, ["osd_ra", "op_size", "readmode", "pool_profile", "pool_profiles",
                        "erasure_profiles", "erasure_profile", "recovery_test",
                        "concurrent_procs"],
                 {"radosbench.op_size", "pool_profile", "osd_ra"}),
    "ec-study": (EC, ["vol_object_size", "data_pool_profile", "pool_profile",
                      "erasure_profiles", "erasure_plugin", "failure_domain",
                      "volumes_per_client", "ramp"],
                 {"librbdfio.vol_object_size"}),
}
# What a study file may be warned about: the CBT keys that build a cluster or log fio.
WARNED_ONLY = ("osds_per_node", "fs", "mkfs_opts", "mount_opts", "tmp_dir", "log_avg_msec")


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_study_shaped_cbt_file_acts_on_every_study_key(study: str) -> None:
    text, used, axes = STUDIES[study]
    spec = load_spec(Path(f"{study}.yaml"), text, benchmark_registry())
    for line in spec.warnings:
        key = line.split(": ", 2)[1].rsplit(".", 1)[-1]
        assert key in WARNED_ONLY, line
        assert not any(f".{k}:" in line or f" {k}:" in line for k in used), line
    steps = generate_steps(spec)
    # (CBT writes one-value lists too: those are one-value axes beside the study's own)
    assert all(axes <= set(s.axes) for s in steps), [s.axes for s in steps]


def test_study_keys_reach_the_steps() -> None:
    load = {name: load_spec(Path(f"{name}.yaml"), text, benchmark_registry())
            for name, (text, _, _) in STUDIES.items()}
    shard = generate_steps(load["shard-tuning"])
    assert {s.knobs["osd_ra"] for s in shard} == {4096}
    assert {s.params["concurrent_ops"] for s in shard} == {1, 256}
    assert len(shard) == 3 * 2  # iterations x concurrency
    talk = load["cbt-talk"]
    assert talk.recovery is not None and talk.recovery.osds == (1,)
    assert talk.pool_profiles["ec42"].erasure_k == 4 and talk.pool_profiles["ec42"].erasure_m == 2
    assert {s.knobs["osd_ra"] for s in generate_steps(talk)} == {0}
    ec = generate_steps(load["ec-study"])
    assert {s.params["vol_object_size"] for s in ec} == {"4M", "2M", "1M", "512K"}
    assert {s.params["data_pool_profile"] for s in ec} == {"ec33"}
    assert load["ec-study"].pool_profiles["ec33"].to_dict()["failure_domain"] == "osd"
    assert load["all-flash"].idle_baseline_seconds == 60.0  # the run's idle window
    assert load["shard-tuning"].idle_baseline_seconds is None
    flash = generate_steps(load["all-flash"])
    assert {s.params["volumes_per_client"] for s in flash} == {8}
    assert {s.params["prefill"] for s in flash} == {True}
