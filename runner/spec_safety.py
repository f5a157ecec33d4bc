"""What a spec may do without `--allow-unsafe-spec`: the safe set of ssh options and sysctls.

A spec is trusted input, like a shell script: whoever writes it decides what runs as root on
every OSD host and client. Two of its sections can do far more than tune performance, though,
and a spec is often copied from someone else: an ssh option can run a command on this machine
(`ProxyCommand`, `LocalCommand`, `KnownHostsCommand`) or turn off host authentication
(`StrictHostKeyChecking=no`, `UserKnownHostsFile=/dev/null`), and a sysctl can make the kernel
run a program as root (`kernel.modprobe`, `kernel.core_pattern` with a pipe). Everything
outside the lists below is refused at load with a one-line reason unless the operator passes
`--allow-unsafe-spec`; docs/security.md lists the same sets.
"""

from __future__ import annotations

import re

# ssh -o options that tune or restrict a connection and cannot run a command here, reach a
# different host than the one named, or weaken host-key checking. Keys are case-insensitive
# for ssh; compared lower-case here.
SAFE_SSH_OPTIONS = frozenset(o.lower() for o in (
    "AddressFamily", "BatchMode", "BindAddress", "CheckHostIP", "Ciphers", "Compression",
    "ConnectionAttempts", "ConnectTimeout", "ControlPersist", "GSSAPIAuthentication",
    "HashKnownHosts", "HostKeyAlgorithms", "IdentitiesOnly", "IPQoS", "KbdInteractiveAuthentication",
    "KexAlgorithms", "LogLevel", "MACs", "NumberOfPasswordPrompts", "PasswordAuthentication",
    "Port", "PreferredAuthentications", "PubkeyAcceptedAlgorithms", "PubkeyAcceptedKeyTypes",
    "PubkeyAuthentication", "RekeyLimit", "ServerAliveCountMax", "ServerAliveInterval",
    "StrictHostKeyChecking", "TCPKeepAlive", "UpdateHostKeys", "User", "VerifyHostKeyDNS",
))
# safe keys whose value can still weaken the connection: only these values are safe
SAFE_SSH_VALUES = {
    "stricthostkeychecking": frozenset({"yes", "accept-new"}),
    "checkhostip": frozenset({"yes", "no"}),
}
# why the well-known dangerous ones are refused (others: "not in the safe set")
SSH_OPTION_REASONS = {
    "proxycommand": "runs a command on this machine",
    "localcommand": "runs a command on this machine",
    "permitlocalcommand": "lets LocalCommand run a command on this machine",
    "knownhostscommand": "runs a command on this machine",
    "proxyjump": "connects through another host",
    "userknownhostsfile": "replaces the known_hosts file the host keys are checked against",
    "globalknownhostsfile": "replaces the known_hosts file the host keys are checked against",
    "stricthostkeychecking": "turns off host key checking",
    "hostname": "connects to another host than the one named",
    "controlpath": "puts the multiplexing socket elsewhere",
    "controlmaster": "changes connection sharing",
    "remotecommand": "runs another command on the host",
    "pkcs11provider": "loads a library into ssh",
    "securitykeyprovider": "loads a library into ssh",
    "identityagent": "uses another agent socket",
    "forwardagent": "hands the host the agent's keys",
    "include": "reads another configuration file",
}

# sysctls that tune memory, the block and network stacks and scheduling for a benchmark; none
# names a program the kernel runs, loads code, or opens the machine to the network.
SAFE_SYSCTLS = tuple(re.compile(p) for p in (
    r"vm\.(dirty_[a-z_]+|swappiness|vfs_cache_pressure|min_free_kbytes|zone_reclaim_mode"
    r"|nr_hugepages|max_map_count|overcommit_memory|overcommit_ratio|watermark_scale_factor"
    r"|page-cluster|stat_interval)",
    r"net\.core\.([rw]mem_(max|default)|optmem_max|netdev_max_backlog|netdev_budget(_usecs)?"
    r"|somaxconn|busy_poll|busy_read|default_qdisc|dev_weight)",
    r"net\.ipv4\.(tcp_[a-z0-9_]+|udp_[a-z_]+|ip_local_port_range)",
    r"kernel\.(numa_balancing|pid_max|threads-max|sched_[a-z_]+)",
    r"fs\.(aio-max-nr|file-max|nr_open)",
))
SYSCTL_REASONS = {
    "kernel.modprobe": "names a program the kernel runs as root",
    "kernel.core_pattern": "can name a program the kernel runs as root",
    "kernel.hotplug": "names a program the kernel runs as root",
    "kernel.poweroff_cmd": "names a program the kernel runs as root",
    "fs.suid_dumpable": "lets set-uid programs dump core",
    "kernel.kptr_restrict": "weakens kernel hardening",
    "kernel.yama.ptrace_scope": "weakens kernel hardening",
    "kernel.unprivileged_bpf_disabled": "weakens kernel hardening",
    "net.ipv4.ip_forward": "turns the host into a router",
}
UNSAFE_HINT = "pass --allow-unsafe-spec if that is what you mean"


def ssh_option_problem(option: str) -> str | None:
    """Why `Key=Value` is outside the safe set; None when it is inside."""
    key, _, value = option.partition("=")
    k = key.strip().lower()
    if k in SAFE_SSH_OPTIONS:
        allowed = SAFE_SSH_VALUES.get(k)
        if allowed is None or value.strip().lower() in allowed:
            return None
    reason = SSH_OPTION_REASONS.get(k, "not in the safe set of ssh options")
    return f"ssh option {key} {reason}; {UNSAFE_HINT}"


def sysctl_problem(key: str) -> str | None:
    """Why a sysctl is outside the safe set; None when it is inside."""
    if any(p.fullmatch(key) for p in SAFE_SYSCTLS):
        return None
    reason = SYSCTL_REASONS.get(key, "not in the safe set of sysctls")
    return f"sysctl {key} {reason}; {UNSAFE_HINT}"
