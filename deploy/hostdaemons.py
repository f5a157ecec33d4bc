"""The per-host services of a multi-host dev cluster: sshd, cephscope-exporter, node_exporter.

Each runs inside its host's namespaces and listens on the host's public address only. The dev
cluster writes what a real cluster's user writes by hand:

    ssh/ssh_config          `Host host1` -> HostName <public addr>, key, known_hosts
    ssh/known_hosts         every host's generated host key
    ssh/id_ed25519          the client key, authorized on every host
    targets/exporter.json   Prometheus file_sd targets (label `host`), one per host
    targets/node.json       the same for node_exporter

Whoever can write the client key's authorized_keys logs in to every host as root, so: the ssh
dir must be a directory of this user with mode 0700 (one another user made first, or one
group/world-writable, is refused, never reused), and sshd keeps ``StrictModes`` on. sshd then
refuses an authorized_keys file below a group/world-writable directory -- the state dir often
sits under /tmp -- so the copy sshd reads lives in a private directory under /run (root's,
0700, per state dir), removed when the host services stop.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cephscope.deploy.hosts import HostPlan, NsHost
from cephscope.deploy.placement import host_command
from cephscope.deploy.procs import exporter_binary, pid_alive, proc_cmdline, terminate

SSHD = "/usr/sbin/sshd"
SSH_PORT = 22
EXPORTER_PORT = 9967
NODE_EXPORTER_PORT = 9100
NODE_EXPORTER = "prometheus-node-exporter"
# Parent of each cluster's authorized_keys dir: every directory above it is root's and not
# group/world-writable, as sshd's StrictModes requires.
AUTHORIZED_KEYS_ROOT = Path("/run/cephscope-sshd")


class HostDaemonError(RuntimeError):
    """A host service could not be set up or started; the message names the host."""


class HostDaemons:
    """sshd, exporter and node_exporter of every host in `plan`; state under `state_dir`."""

    def __init__(self, state_dir: Path, plan: HostPlan, conf_path: Path,
                 asok_dir_of: Any, log: Any = None,
                 keys_root: Path = AUTHORIZED_KEYS_ROOT) -> None:
        self.state_dir = state_dir
        self.keys_root = keys_root
        self.plan = plan
        self.conf_path = conf_path
        self.asok_dir_of = asok_dir_of  # NsHost name -> admin socket dir of that host
        self._log = log or (lambda msg: None)

    # ---- paths -----------------------------------------------------------------------------

    @property
    def ssh_dir(self) -> Path:
        return self.state_dir / "ssh"

    @property
    def ssh_config(self) -> Path:
        return self.ssh_dir / "ssh_config"

    @property
    def identity(self) -> Path:
        return self.ssh_dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.ssh_dir / "known_hosts"

    @property
    def authorized_keys(self) -> Path:
        """What sshd reads: one dir per state dir (two clusters may run side by side)."""
        tag = hashlib.sha256(str(self.state_dir.resolve()).encode()).hexdigest()[:16]
        return self.keys_root / tag / "authorized_keys"

    @property
    def targets_dir(self) -> Path:
        return self.state_dir / "targets"

    def _host_dir(self, host: NsHost) -> Path:
        return self.ssh_dir / "hosts" / host.name

    def pid_file(self, host: NsHost, service: str) -> Path:
        return self.state_dir / "run" / f"{service}-{host.name}.pid"

    def _marker(self, host: NsHost, service: str) -> str:
        """A command-line fragment that proves a process is this host's service of ours."""
        if service == "sshd":
            return str(self._host_dir(host) / "sshd_config")
        return f"--web.listen-address={host.public_addr}:"

    # ---- ssh -------------------------------------------------------------------------------

    def write_ssh_files(self) -> None:
        """Client key, per-host host keys and sshd configs, ssh_config and known_hosts."""
        self.ssh_dir.parent.mkdir(parents=True, exist_ok=True)
        private_dir(self.ssh_dir)
        if not self.identity.exists():
            _keygen(self.identity, "cephscope dev cluster client")
        private_dir(self.keys_root)
        private_dir(self.authorized_keys.parent)
        authorized = self.authorized_keys
        _write_owner_only(authorized, self.identity.with_suffix(".pub").read_text())
        known: list[str] = []
        config: list[str] = [
            f"# Written by `cephscope devcluster`: how to reach its hosts (ssh -F {self.ssh_config}).",
        ]
        for host in self.plan.hosts:
            hdir = self._host_dir(host)
            hdir.mkdir(parents=True, exist_ok=True)
            key = hdir / "ssh_host_ed25519_key"
            if not key.exists():
                _keygen(key, host.name)
            pub = key.with_suffix(".pub").read_text().split()
            known.append(f"{host.name},{host.public_addr} {pub[0]} {pub[1]}")
            (hdir / "sshd_config").write_text(
                f"# sshd of dev-cluster host {host.name}: its public address only.\n"
                f"ListenAddress {host.public_addr}:{SSH_PORT}\n"
                f"HostKey {key}\n"
                f"PidFile {self.pid_file(host, 'sshd')}\n"
                f"AuthorizedKeysFile {authorized}\n"
                "PermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\n"
                "UsePAM no\n"
                "PrintMotd no\n"
                "X11Forwarding no\n"
                "AllowTcpForwarding no\n"
                "MaxStartups 50:30:100\n"
                "MaxSessions 50\n"
            )
            config += [
                f"Host {host.name}",
                f"  HostName {host.public_addr}",
                f"  Port {SSH_PORT}",
                "  User root",
                f"  IdentityFile {self.identity}",
                "  IdentitiesOnly yes",
                f"  UserKnownHostsFile {self.known_hosts}",
                "  GlobalKnownHostsFile /dev/null",
                "  StrictHostKeyChecking yes",
                "",
            ]
        self.known_hosts.write_text("\n".join(known) + "\n")
        self.ssh_config.write_text("\n".join(config) + "\n")

    # ---- services --------------------------------------------------------------------------

    def _argv(self, host: NsHost, service: str) -> list[str]:
        if service == "sshd":
            return [SSHD, "-f", str(self._host_dir(host) / "sshd_config")]
        if service == "exporter":
            return [
                exporter_binary(),
                f"--web.listen-address={host.public_addr}:{EXPORTER_PORT}",
                f"--ceph.asok-dir={self.asok_dir_of(host.name)}",
                f"--ceph.conf={self.conf_path}",
                # every counter: the replica side (subop_w, priority 0) shows which host
                # carries replication, the point of a multi-host cluster
                "--collector.perf.priority=0",
            ]
        return [
            NODE_EXPORTER,
            f"--web.listen-address={host.public_addr}:{NODE_EXPORTER_PORT}",
            "--no-collector.systemd",
            r"--collector.diskstats.device-exclude=^(ram|fd)\d+$",
            # a host's namespace holds lo, eth0 (public) and eth1 (cluster) only: keep them all
            "--collector.netdev.device-exclude=^$",
        ]

    def services_of(self, host: NsHost) -> list[str]:
        if host.role == "client":
            return ["sshd", "node_exporter"]
        return ["sshd", "exporter", "node_exporter"]

    def start(self, host: NsHost) -> None:
        for service in self.services_of(host):
            if self.pid(host, service) is not None:
                continue
            argv = host_command(host.dev_host(), self._argv(host, service))
            if service == "sshd":
                Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
                proc = subprocess.run(argv, capture_output=True, timeout=30, check=False)
                if proc.returncode != 0:
                    raise HostDaemonError(
                        f"sshd on {host.name} failed: {proc.stderr.decode(errors='replace').strip()}")
                continue
            log = self.state_dir / "log" / f"{service}-{host.name}.log"
            with log.open("ab") as out:
                child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                         start_new_session=True)
            # nsenter execs the service itself (no fork for net/uts): its pid is the service's.
            self.pid_file(host, service).write_text(f"{child.pid}\n")

    def pid(self, host: NsHost, service: str) -> int | None:
        """The service's live pid, if its command line (sshd rewrites its own into one
        string) still names this host's config or address."""
        try:
            pid = int(self.pid_file(host, service).read_text().strip())
        except (OSError, ValueError):
            return None
        if not pid_alive(pid) or self._marker(host, service) not in " ".join(proc_cmdline(pid)):
            return None
        return pid

    def running(self) -> dict[str, int]:
        found = {}
        for host in self.plan.hosts:
            for service in self.services_of(host):
                if (pid := self.pid(host, service)) is not None:
                    found[f"{service}@{host.name}"] = pid
        return found

    def stop(self) -> list[str]:
        stopped = []
        for name, pid in self.running().items():
            with contextlib.suppress(ProcessLookupError):
                terminate(pid, 10, log=self._log)
            stopped.append(name)
        for host in self.plan.hosts:
            for service in self.services_of(host):
                self.pid_file(host, service).unlink(missing_ok=True)
        # No sshd of ours reads it any more; `up` writes it again.
        shutil.rmtree(self.authorized_keys.parent, ignore_errors=True)
        return stopped

    def write_targets(self) -> dict[str, Path]:
        """Prometheus file_sd files, one target per host with label `host`."""
        self.targets_dir.mkdir(exist_ok=True)
        files = {}
        for job, port, hosts in (
            ("exporter", EXPORTER_PORT, self.plan.osd_hosts),
            ("node", NODE_EXPORTER_PORT, list(self.plan.hosts)),
        ):
            entries = [{"targets": [f"{h.public_addr}:{port}"],
                        "labels": {"host": h.name, "role": h.role}} for h in hosts]
            path = self.targets_dir / f"{job}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(entries, indent=2) + "\n")
            tmp.replace(path)
            files[job] = path
        return files


def private_dir(path: Path) -> None:
    """Make ``path`` a directory of this user with mode 0700, or refuse an existing one that
    is not: a symlink, another user's, or open to group/others (it may hold planted keys)."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode):
        raise HostDaemonError(f"{path} is not a directory (a symlink?); remove it")
    if st.st_uid != os.geteuid():
        raise HostDaemonError(f"{path} belongs to uid {st.st_uid}, not to this user "
                              f"({os.geteuid()}): someone else made it; remove it")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise HostDaemonError(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}, open to other "
                              "users: its keys cannot be trusted; remove it")


def _write_owner_only(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)
        f.write(text)


def _keygen(path: Path, comment: str) -> None:
    proc = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                          capture_output=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise HostDaemonError(f"ssh-keygen {path}: {proc.stderr.decode(errors='replace').strip()}")
    os.chmod(path, 0o600)


def ssh_reachable(hosts: Sequence[NsHost], ssh_config: Path, timeout: float = 20) -> list[str]:
    """Hosts that do not answer `ssh NAME true` with the cluster's ssh_config."""
    procs = {
        h.name: subprocess.Popen(["ssh", "-F", str(ssh_config), "-o", "BatchMode=yes",
                                  "-o", "ConnectTimeout=5", h.name, "true"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for h in hosts
    }
    failing = []
    for name, proc in procs.items():
        try:
            if proc.wait(timeout=timeout) != 0:
                failing.append(name)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            failing.append(name)
    return failing
