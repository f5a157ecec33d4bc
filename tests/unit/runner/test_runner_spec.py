"""Spec loading and validation: every bad-spec case names key, value and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cephscope.runner.spec import SpecError, load_spec
from tests.unit.runner_fakes import BENCHES

GOOD = """\
cluster:
  use_existing: true
iterations: 1
ceph_config:
  osd_op_num_shards: [2, 4]
benchmarks:
  radosbench:
    op_size: [4096, 65536]
    time: 5
    write_only: true
"""


def load(text: str, allow_unsafe: bool = False):
    return load_spec(Path("sweep.yaml"), text=textwrap.dedent(text), benchmarks=BENCHES,
                     allow_unsafe=allow_unsafe)


def errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load(text)
    return info.value.problems


def test_good_spec_loads_with_axes():
    spec = load(GOOD)
    assert spec.ceph_config == {"osd_op_num_shards": [2, 4]}
    assert spec.benchmarks["radosbench"]["op_size"] == [4096, 65536]
    assert spec.warnings == []


def test_unknown_top_level_key_names_key_value_line():
    problems = errors(GOOD + "colour: blue\n")
    assert problems == ["sweep.yaml:11: colour: 'blue': unknown key (neither cephscope's nor CBT's)"]


def test_unknown_benchmark_parameter():
    problems = errors(GOOD.replace("    time: 5\n", "    time: 5\n    blocksize: 4096\n"))
    assert len(problems) == 1
    assert problems[0].startswith("sweep.yaml:10: benchmarks.radosbench.blocksize: 4096:")
    assert "unknown radosbench parameter" in problems[0]


def test_wrong_type_in_axis_points_at_the_element_line():
    text = GOOD.replace("op_size: [4096, 65536]", "op_size:\n      - 4096\n      - big")
    problems = errors(text)
    assert len(problems) == 1
    assert problems[0].startswith("sweep.yaml:10: benchmarks.radosbench.op_size[1]: 'big':")
    assert "wrong type str; expected int" in problems[0]


def test_bool_is_not_an_int():
    problems = errors(GOOD.replace("time: 5", "time: true"))
    assert "benchmarks.radosbench.time: True: wrong type bool" in problems[0]


def test_empty_axis():
    problems = errors(GOOD.replace("osd_op_num_shards: [2, 4]", "osd_op_num_shards: []"))
    assert problems == ["sweep.yaml:5: ceph_config.osd_op_num_shards: []: "
                        "empty list: a sweep axis needs at least one value"]


def test_negative_time():
    problems = errors(GOOD.replace("time: 5", "time: -5"))
    assert problems == ["sweep.yaml:9: benchmarks.radosbench.time: -5: must not be negative"]


@pytest.mark.parametrize("value", ["seq; rm -rf /", "$(reboot)", "`id`", "a|b", "x > /etc/y"])
def test_shell_metacharacters_rejected(value: str):
    text = GOOD.replace("write_only: true", f"write_only: true\n    readmode: {value!r}")
    problems = errors(text)
    assert any(p.startswith("sweep.yaml:11: benchmarks.radosbench.readmode:")
               and "shell metacharacter" in p and repr(value) in p for p in problems), problems


def test_shell_metacharacters_in_ceph_config_value():
    text = GOOD.replace("osd_op_num_shards: [2, 4]", "osd_op_num_shards: [2, '4;reboot']")
    problems = errors(text)
    assert any("ceph_config.osd_op_num_shards[1]: '4;reboot': holds shell metacharacter"
               in p and p.startswith("sweep.yaml:5:") for p in problems), problems


def test_benchmark_validate_is_called_per_combination():
    text = GOOD.replace("write_only: true", "write_only: true\n    readmode: [seq, sideways]")
    problems = errors(text)
    assert len(problems) == 1
    assert "readmode must be seq or rand, got 'sideways'" in problems[0]
    assert problems[0].startswith("sweep.yaml:7: benchmarks.radosbench")


def test_unknown_benchmark():
    problems = errors(GOOD.replace("radosbench:", "cosbench:"))
    assert problems[0].startswith("sweep.yaml:7: benchmarks.cosbench: 'cosbench': "
                                  "CBT benchmark cephscope does not have (it has: ")
    assert "librbdfio" in problems[0] and "radosbench" in problems[0]
    problems = errors(GOOD.replace("radosbench:", "fancybench:"))
    assert "'fancybench': unknown benchmark (known: " in problems[0]


def test_cbt_file_accepted_with_one_warning_per_ignored_key():
    cbt = """\
    cluster:
      user: 'cbt'
      head: "head"
      clients: ["client1"]
      osds: ["osd1"]
      mons:
        mon1:
          a: "127.0.0.1:6789"
      fs: 'xfs'
      mkfs_opts: '-f -i size=2048'
      mount_opts: '-o inode64,noatime,logbsize=256k'
      conf_file: '/etc/ceph/ceph.conf'
      iterations: 2
      use_existing: False
      rebuild_every_test: False
      clusterid: "ceph"
      tmp_dir: "/tmp/cbt"
      pool_profiles:
        rbd:
          pg_size: 64
          pgp_size: 64
          replication: 3
        ec21:
          pg_size: 32
          replication: 'erasure'
          erasure_profile: 'ec21'
      erasure_profiles:
        ec21:
          erasure_k: 2
          erasure_m: 1
    benchmarks:
      radosbench:
        op_size: [4194304, 4096]
        write_only: False
        time: 300
        concurrent_ops: [128]
        concurrent_procs: 1
        osd_ra: [4096]
        pool_profile: [rbd, ec21]
    """
    spec = load(cbt)
    assert spec.iterations == 2
    assert spec.conf_file == "/etc/ceph/ceph.conf"
    assert spec.pool_profiles["rbd"].replication == 3
    ec = spec.pool_profiles["ec21"]
    assert (ec.is_erasure, ec.erasure_k, ec.erasure_m, ec.pg_num) == (True, 2, 1, 32)
    assert (spec.hosts.user, spec.hosts.head, spec.hosts.clients, spec.hosts.osds,
            spec.hosts.mons) == ("cbt", "head", ("client1",), ("osd1",), ("mon1",))
    ignored = ["fs", "mkfs_opts", "mount_opts", "rebuild_every_test", "tmp_dir"]
    for key in ignored:
        assert sum(f"cluster.{key}:" in w for w in spec.warnings) == 1, key
    assert any("cluster.use_existing" in w and "using the cluster you are pointed at" in w
               for w in spec.warnings)
    # CBT's per-benchmark read-ahead is a host knob now, not a warning
    assert not any("osd_ra" in w for w in spec.warnings)
    assert "osd_ra" not in spec.benchmarks["radosbench"]
    assert spec.benchmark_knobs == {"radosbench": {"osd_ra": [4096]}}
    assert len(spec.warnings) == len(ignored) + 1


def test_pool_profile_reference_must_exist():
    text = GOOD.replace("write_only: true", "write_only: true\n    pool_profile: nope")
    problems = errors(text)
    assert problems[0].startswith("sweep.yaml:11: benchmarks.radosbench.pool_profile: 'nope':")


def test_restart_command_must_be_argv_with_id():
    text = GOOD + "restart:\n  method: command\n  command: 'ssh host systemctl restart osd'\n"
    problems = errors(text)
    assert any(p.startswith("sweep.yaml:13: restart.command:") and "argv list" in p
               for p in problems), problems


def test_every_problem_reported_at_once():
    text = GOOD.replace("time: 5", "time: -1").replace("[2, 4]", "[]") + "bogus: 1\n"
    assert len(errors(text)) == 3


def test_invalid_yaml_names_line():
    problems = errors("benchmarks:\n  radosbench: {op_size: [1, 2}\n")
    assert problems[0].startswith("sweep.yaml:2: not valid YAML")


def test_duplicate_axis_value():
    problems = errors(GOOD.replace("[4096, 65536]", "[4096, 4096]"))
    assert "axis holds the same value twice" in problems[0]


def test_restart_command_with_osd_id_placeholder_validates():
    spec = load(GOOD + textwrap.dedent("""\
    restart:
      method: command
      command: [ssh, osd-host, systemctl, restart, "ceph-osd@{id}"]
    """))
    assert spec.restart.command == ("ssh", "osd-host", "systemctl", "restart", "ceph-osd@{id}")


@pytest.mark.parametrize("element", ["ceph-osd@{id};reboot", "{osd}", "$(id){id}", "{id}}"])
def test_restart_command_braces_allowed_only_as_the_placeholder(element):
    problems = errors(GOOD + textwrap.dedent(f"""\
    restart:
      method: command
      command: [systemctl, restart, "{element}"]
    """))
    assert any("restart.command" in p and "metacharacter" in p for p in problems), problems


def test_cluster_hosts_and_ssh_settings():
    spec = load("""\
    cluster:
      user: ceph
      clients: [client1, "10.0.0.7"]
      ssh_config: /etc/cephscope/ssh_config
      ssh_port: 2222
      ssh_identity_file: /root/.ssh/id_bench
      ssh_options: [ConnectionAttempts=2, "ProxyJump=jump.example"]
    benchmarks:
      radosbench: {time: 5}
    """, allow_unsafe=True)  # ProxyJump is outside the safe set
    h = spec.hosts
    assert h.clients == ("client1", "10.0.0.7") and h.user == "ceph" and h.ssh_port == 2222
    assert h.ssh_options == ("ConnectionAttempts=2", "ProxyJump=jump.example")
    assert h.ssh_config == "/etc/cephscope/ssh_config"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("clients: [-oProxyCommand=x]", "cluster.clients[0]: '-oProxyCommand=x': not a host name"),
        ("clients: [a, a]", "cluster.clients[1]: 'a': host named twice"),
        ("ssh_options: ['ProxyCommand=nc %h']", "cluster.ssh_options[0]"),
        ("ssh_port: 70000", "cluster.ssh_port: 70000: must be a port number"),
        ("user: 'Root User'", "cluster.user"),
    ],
)
def test_cluster_hosts_bad_values_name_the_key(line, message):
    problems = errors(f"""\
    cluster:
      {line}
    benchmarks:
      radosbench: {{time: 5}}
    """)
    assert any(message in p for p in problems), problems


@pytest.mark.parametrize(
    ("option", "reason"),
    [
        ("ProxyCommand=nc", "ssh option ProxyCommand runs a command on this machine"),
        ("LocalCommand=id", "ssh option LocalCommand runs a command on this machine"),
        ("PermitLocalCommand=yes", "ssh option PermitLocalCommand lets LocalCommand run"),
        ("StrictHostKeyChecking=no", "ssh option StrictHostKeyChecking turns off host key"),
        ("UserKnownHostsFile=/dev/null", "ssh option UserKnownHostsFile replaces the known_hosts"),
        ("ProxyJump=jump", "ssh option ProxyJump connects through another host"),
        ("SendEnv=LANG", "ssh option SendEnv not in the safe set of ssh options"),
    ],
)
def test_unsafe_ssh_options_need_allow_unsafe_spec(option, reason):
    """Issue 23 finding 4: a spec's ssh option outside the safe set is refused at load with a
    one-line reason naming the key, unless --allow-unsafe-spec."""
    text = f"""\
    cluster:
      clients: [client1]
      ssh_options: [ConnectTimeout=5, "{option}"]
    benchmarks:
      radosbench: {{time: 5}}
    """
    problems = errors(text)
    assert len(problems) == 1 and "cluster.ssh_options[1]" in problems[0]
    assert reason in problems[0] and "--allow-unsafe-spec" in problems[0]
    assert "\n" not in problems[0]
    assert load(text, allow_unsafe=True).hosts.ssh_options == ("ConnectTimeout=5", option)


def test_safe_ssh_options_load():
    spec = load("""\
    cluster:
      clients: [client1]
      ssh_options: [ConnectTimeout=5, StrictHostKeyChecking=yes, ServerAliveInterval=3,
                    Compression=no, "Ciphers=aes128-gcm@openssh.com"]
    benchmarks:
      radosbench: {time: 5}
    """)
    assert len(spec.hosts.ssh_options) == 5


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("kernel.modprobe", "sysctl kernel.modprobe names a program the kernel runs as root"),
        ("kernel.core_pattern", "sysctl kernel.core_pattern can name a program"),
        ("net.ipv4.ip_forward", "sysctl net.ipv4.ip_forward turns the host into a router"),
        ("kernel.randomize_va_space", "not in the safe set of sysctls"),
        ("net.core.bpf_jit_enable", "not in the safe set of sysctls"),
    ],
)
def test_unsafe_sysctls_need_allow_unsafe_spec(key, reason):
    text = f"""\
    sysctl:
      vm.swappiness: 10
      {key}: /tmp/x
    benchmarks:
      radosbench: {{time: 5}}
    """
    problems = errors(text)
    assert len(problems) == 1 and f"sysctl.{key}" in problems[0]
    assert reason in problems[0] and "--allow-unsafe-spec" in problems[0]
    assert f"sysctl.{key}" in load(text, allow_unsafe=True).knobs


@pytest.mark.parametrize("key", ["vm.swappiness", "vm.dirty_ratio", "kernel.pid_max",
                                 "net.core.rmem_max", "net.ipv4.tcp_congestion_control",
                                 "vm.min_free_kbytes", "fs.aio-max-nr"])
def test_benchmark_sysctls_are_in_the_safe_set(key):
    assert f"sysctl.{key}" in load(f"sysctl:\n  {key}: 1\nbenchmarks:\n  radosbench: {{time: 5}}\n").knobs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &a [1, *a]\n", "alias *a refers to a node that contains it"),
        ("a: &a {b: *a}\n", "alias *a refers to a node that contains it"),
        ("a: &a {<<: *a}\n", "alias *a refers to a node that contains it"),
        ("a: &a [[[*a]]]\n", "alias *a refers to a node that contains it"),
        ("\n".join(["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
                   + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)])
         + "\n", "aliases expand to more than 100000 YAML nodes"),
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ],
    ids=["self-list", "self-map", "self-merge", "self-deep", "billion-laughs", "deep-nesting"],
)
def test_hostile_yaml_is_a_clear_error_naming_the_file(tmp_path, text, message):
    """Issue 23 finding 13: never RecursionError or MemoryError, a SpecError naming the file."""
    path = tmp_path / "evil.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path, benchmarks=BENCHES)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith(f"{path}")
    assert message in info.value.problems[0]


def test_ordinary_aliases_still_load():
    spec = load("""\
    ceph_config:
      osd_op_num_shards: &n [2, 4]
    benchmarks:
      radosbench:
        concurrent_ops: *n
        time: 5
    """)
    assert spec.benchmarks["radosbench"]["concurrent_ops"] == [2, 4]
