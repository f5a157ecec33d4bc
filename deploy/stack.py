"""The local monitoring stack without Docker: Prometheus, Alertmanager, node_exporter (Debian's
packages) and cephscope-exporter, configured for the dev cluster, all on 127.0.0.1.

Ports are a base plus fixed offsets so that two stacks run side by side:

    +0 Prometheus   +1 Alertmanager   +3 node_exporter   +4 cephscope-exporter   +5 runner (scraped)

All state (configs, TSDB, logs, pid files) lives under one state dir; `down` stops only the
processes whose pid files are there and whose command line names that state dir.

Past one Prometheus (cephscope/forwarding.py): a stack with `remote_write_url` is an edge (it
scrapes, evaluates the per-host recording rules and forwards what the dashboards and the report
read); a stack with `remote_write_receiver` is the central store (Prometheus and Alertmanager
only, receiving remote writes, evaluating the cluster-wide rules and the alerts).
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cephscope import forwarding, host_commands
from cephscope.deploy import rootfs
from cephscope.deploy.placement import Release, release_command
from cephscope.deploy.procs import exporter_binary, pid_from_file, port_is_free, terminate
from cephscope.deploy.scrape_auth import ExporterScrapeAuth, ScrapeAuthError, load_scrape_auth
from cephscope.figures import EXPORTER_JOB, NODE_JOB, RUNNER_JOB, SCRAPE_INTERVAL_SECONDS
from cephscope.prometheus_api import PrometheusAPI, PrometheusError

REPO_ROOT = Path(__file__).resolve().parent.parent
ALERTS_DIR = REPO_ROOT / "alerts"

PROMETHEUS_OFFSET = 0
ALERTMANAGER_OFFSET = 1
NODE_EXPORTER_OFFSET = 3
EXPORTER_OFFSET = 4
RUNNER_OFFSET = 5

# Job names and scrape interval are the figures' (the rules and the report select on them).
__all__ = ["EXPORTER_JOB", "NODE_JOB", "RUNNER_JOB", "SCRAPE_INTERVAL_SECONDS"]


class StackError(RuntimeError):
    """Something the user must fix; the message is one clear line."""


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by this user only (0600), whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)  # O_CREAT keeps the mode of a file that already exists
        f.write(text)


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "cephscope" / "stack"


@dataclass(frozen=True)
class Component:
    name: str
    binary: str
    port_offset: int
    ready_path: str

    @property
    def package(self) -> str:
        if self.binary == "cephscope-exporter":
            return "cephscope (make setup)"
        return host_commands.package_of(self.binary)


COMPONENTS = (
    Component("prometheus", "prometheus", PROMETHEUS_OFFSET, "/-/ready"),
    Component("alertmanager", "prometheus-alertmanager", ALERTMANAGER_OFFSET, "/-/ready"),
    Component("node_exporter", "prometheus-node-exporter", NODE_EXPORTER_OFFSET, "/metrics"),
    Component("exporter", "cephscope-exporter", EXPORTER_OFFSET, "/metrics"),
)


def http_get(url: str, timeout: float = 5.0, context: ssl.SSLContext | None = None,
             headers: dict[str, str] | None = None) -> bytes:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
        return resp.read()


# Prometheus major -> the release root filesystem that carries it (None: this machine's).
PROMETHEUS_RELEASES: dict[str, str | None] = {"2": None, "3": "tentacle"}
# Majors that store a classic histogram as a native histogram with custom buckets
# (`convert_classic_histograms_to_nhcb`; 3.5 drops converted histograms altogether unless
# `--enable-feature=native-histograms` is on, so the two always go together).
NATIVE_HISTOGRAM_RELEASES = ("3",)
NATIVE_HISTOGRAMS_FEATURE = "--enable-feature=native-histograms"


class Stack:
    def __init__(
        self,
        state_dir: Path | str | None = None,
        port_base: int = 18000,
        asok_dir: Path | str | None = None,
        ceph_conf: Path | str | None = None,
        with_exporter: bool = True,
        webhook_url: str | None = None,
        exporter_args: list[str] | None = None,
        scrape_interval_seconds: int = SCRAPE_INTERVAL_SECONDS,
        log: Any = None,
        targets_dir: Path | str | None = None,
        prometheus_release: str = "2",
        runner_port: int | None = None,
        exporter_web_config: Path | str | None = None,
        exporter_scrape_config: Path | str | None = None,
        native_histograms: bool | None = None,
        remote_write_url: str | None = None,
        remote_write_receiver: bool = False,
    ) -> None:
        self.state_dir = Path(state_dir or default_state_dir()).resolve()
        self.port_base = port_base
        self.asok_dir = Path(asok_dir) if asok_dir else None
        self.ceph_conf = Path(ceph_conf) if ceph_conf else None
        self.with_exporter = with_exporter
        self.webhook_url = webhook_url
        self.exporter_args = list(exporter_args or [])
        self.scrape_interval_seconds = scrape_interval_seconds
        # Prometheus file_sd files of a cluster's hosts (`exporter.json`, `node.json`, each
        # target labelled `host`): written by a multi-host dev cluster, or by hand for a real
        # cluster. With them the hosts' own exporters are scraped instead of a local one.
        self.targets_dir = Path(targets_dir).resolve() if targets_dir else None
        if self.targets_dir is not None and (self.targets_dir / "exporter.json").exists():
            self.with_exporter = False
        self._log = log or (lambda msg: print(msg, flush=True))
        if prometheus_release not in PROMETHEUS_RELEASES:
            raise StackError(f"--prometheus-release {prometheus_release!r}: one of "
                             f"{', '.join(PROMETHEUS_RELEASES)}")
        self.prometheus_release = prometheus_release
        # Prometheus 3 stores the exporter's classic histograms as native histograms with
        # custom buckets (one series per histogram instead of one per bucket) unless told not
        # to; Prometheus 2 cannot.
        if native_histograms is None:
            native_histograms = prometheus_release in NATIVE_HISTOGRAM_RELEASES
        if native_histograms and prometheus_release not in NATIVE_HISTOGRAM_RELEASES:
            raise StackError(f"native histograms need --prometheus-release "
                             f"{' or '.join(NATIVE_HISTOGRAM_RELEASES)} (Prometheus "
                             f"{prometheus_release} keeps classic histograms)")
        self.native_histograms = native_histograms
        if remote_write_url is not None and remote_write_receiver:
            raise StackError("a stack either forwards (--remote-write-url) or receives "
                             "(--remote-write-receiver), not both")
        if remote_write_url is not None:
            parsed = urllib.parse.urlparse(remote_write_url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise StackError(f"--remote-write-url {remote_write_url!r}: an http(s) URL, "
                                 f"e.g. http://127.0.0.1:18100/api/v1/write")
        self.remote_write_url = remote_write_url
        self.remote_write_receiver = remote_write_receiver
        # Another stack's runner port: two Prometheus servers scrape one sweep.
        self._runner_port = runner_port
        # the exporter behind TLS / client certificates / basic auth (deploy/scrape_auth.py)
        self.exporter_auth: ExporterScrapeAuth | None = None
        if exporter_scrape_config is not None and exporter_web_config is None:
            raise StackError("--exporter-scrape-config needs --exporter-web-config")
        if exporter_web_config is not None:
            try:
                self.exporter_auth = load_scrape_auth(
                    Path(exporter_web_config).resolve(),
                    Path(exporter_scrape_config).resolve() if exporter_scrape_config else None)
            except ScrapeAuthError as exc:
                raise StackError(str(exc)) from None
        saved = self.state_dir / "stack.json"
        if saved.exists():
            settings = json.loads(saved.read_text())
            self.port_base = settings["port_base"]
            # what runs there: `status` and `down` of a central store name its two daemons
            if self.remote_write_url is None and settings.get("remote_write_receiver"):
                self.remote_write_receiver = True

    # ---- addresses -------------------------------------------------------------------------

    def port(self, offset: int) -> int:
        return self.port_base + offset

    def url(self, offset: int) -> str:
        return f"http://127.0.0.1:{self.port(offset)}"

    @property
    def prometheus_url(self) -> str:
        return self.url(PROMETHEUS_OFFSET)

    @property
    def alertmanager_url(self) -> str:
        return self.url(ALERTMANAGER_OFFSET)

    @property
    def node_exporter_url(self) -> str:
        return self.url(NODE_EXPORTER_OFFSET)

    @property
    def exporter_url(self) -> str:
        scheme = self.exporter_auth.scheme if self.exporter_auth else "http"
        return f"{scheme}://127.0.0.1:{self.port(EXPORTER_OFFSET)}"

    @property
    def runner_port(self) -> int:
        return self._runner_port or self.port(RUNNER_OFFSET)

    def _components(self) -> list[Component]:
        if self.remote_write_receiver:  # the central store scrapes no host
            return [c for c in COMPONENTS if c.name in ("prometheus", "alertmanager")]
        return [c for c in COMPONENTS if c.name != "exporter" or self.with_exporter]

    @property
    def rules_role(self) -> str | None:
        """Which share of the rules this Prometheus evaluates (None: all of them)."""
        if self.remote_write_url is not None:
            return forwarding.EDGE
        return forwarding.CENTRAL if self.remote_write_receiver else None

    @property
    def rules_dir(self) -> Path:
        """Where this stack's rule files are: alerts/, or its own share of them."""
        return ALERTS_DIR if self.rules_role is None else self.state_dir / "rules"

    def write_rule_files(self) -> list[Path]:
        """An edge's or a central store's share of every rule file of alerts/."""
        role = self.rules_role
        if role is None:
            return []
        self.rules_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for source in sorted(ALERTS_DIR.glob("*.rules.yml")):
            share = forwarding.rules_for(role, yaml.safe_load(source.read_text()))
            if share["groups"]:
                target = self.rules_dir / source.name
                target.write_text(yaml.safe_dump(share, sort_keys=False))
                written.append(target)
        return written

    # ---- configs ---------------------------------------------------------------------------

    def prometheus_config(self) -> dict[str, Any]:
        interval = f"{self.scrape_interval_seconds}s"

        def job(name: str, offset: int, port: int | None = None, **extra: Any) -> dict[str, Any]:
            return {
                "job_name": name,
                "static_configs": [{"targets": [f"127.0.0.1:{port or self.port(offset)}"]}],
                **extra,
            }

        jobs = [
            job("prometheus", PROMETHEUS_OFFSET),
            job("alertmanager", ALERTMANAGER_OFFSET),
            job(NODE_JOB, NODE_EXPORTER_OFFSET),
            job(RUNNER_JOB, RUNNER_OFFSET, port=self.runner_port),
        ]
        if self.with_exporter:
            jobs.insert(2, job(EXPORTER_JOB, EXPORTER_OFFSET,
                               **(self.exporter_auth.job_settings() if self.exporter_auth
                                  else {})))
        if self.targets_dir is not None:
            for name, file in ((EXPORTER_JOB, "exporter.json"), (NODE_JOB, "node.json")):
                if not (self.targets_dir / file).exists():
                    continue
                found = [j for j in jobs if j["job_name"] == name]
                if not found:
                    found = [{"job_name": name}]
                    jobs.insert(2, found[0])
                found[0]["file_sd_configs"] = [{"files": [str(self.targets_dir / file)],
                                                "refresh_interval": "30s"}]
        if self.remote_write_receiver:
            jobs = [j for j in jobs if j["job_name"] == "prometheus"]
        if self.native_histograms:
            for found_job in jobs:
                if found_job["job_name"] == EXPORTER_JOB:
                    found_job["convert_classic_histograms_to_nhcb"] = True
        config = {
            "global": {
                "scrape_interval": interval,
                "scrape_timeout": f"{max(1, self.scrape_interval_seconds - 1)}s",
                "evaluation_interval": interval,
            },
            "rule_files": [str(self.rules_dir / "*.rules.yml")],
            "alerting": {
                "alertmanagers": [
                    {"static_configs": [{"targets": [f"127.0.0.1:{self.port(ALERTMANAGER_OFFSET)}"]}]}
                ]
            },
            "scrape_configs": jobs,
        }
        if self.remote_write_url is not None:
            config["remote_write"] = [forwarding.remote_write_config(self.remote_write_url,
                                                                     self.native_histograms)]
        return config

    def alertmanager_config(self) -> dict[str, Any]:
        source = ALERTS_DIR / "alertmanager.yml"
        if source.exists():
            config = yaml.safe_load(source.read_text())
        else:
            config = {"route": {"receiver": "webhook"}, "receivers": [{"name": "webhook"}]}
        # The example receiver named `webhook` is pointed at the URL we were given (a test's
        # local receiver); without one it points at a port nothing listens on.
        url = self.webhook_url or f"http://127.0.0.1:{self.port(RUNNER_OFFSET + 1)}/alerts"
        for receiver in config.get("receivers", []):
            if receiver.get("name") == "webhook":
                receiver["webhook_configs"] = [{"url": url, "send_resolved": True}]
        return config

    def _argv(self, component: Component) -> list[str]:
        s = self.state_dir
        listen = f"127.0.0.1:{self.port(component.port_offset)}"
        if component.name == "prometheus":
            return self._prometheus_command([
                component.binary,
                f"--config.file={s}/prometheus.yml",
                f"--storage.tsdb.path={s}/prometheus-data",
                f"--web.listen-address={listen}",
                "--web.enable-lifecycle",
                "--storage.tsdb.retention.time=15d",
                *([NATIVE_HISTOGRAMS_FEATURE] if self.native_histograms else []),
                *(self._receiver_flags() if self.remote_write_receiver else []),
            ])
        if component.name == "alertmanager":
            return [
                component.binary,
                f"--config.file={s}/alertmanager.yml",
                f"--storage.path={s}/alertmanager-data",
                f"--web.listen-address={listen}",
                # An empty cluster address turns off gossip (it would listen on 0.0.0.0:9094).
                "--cluster.listen-address=",
            ]
        if component.name == "node_exporter":
            return [
                component.binary,
                f"--web.listen-address={listen}",
                "--no-collector.systemd",
                # The dev cluster's OSDs are loop devices and all its traffic is on lo:
                # the defaults would drop both.
                r"--collector.diskstats.device-exclude=^(ram|fd)\d+$",
                "--collector.netdev.device-exclude=^$",
                f"--collector.textfile.directory={s}/textfile",
            ]
        argv = [
            self._exporter_binary(),
            f"--web.listen-address={listen}",
        ]
        if self.asok_dir:
            argv.append(f"--ceph.asok-dir={self.asok_dir}")
        if self.ceph_conf:
            argv.append(f"--ceph.conf={self.ceph_conf}")
        if self.exporter_auth:
            argv.append(f"--web.config.file={self.exporter_auth.web_config_path}")
        return argv + self.exporter_args

    def _receiver_flags(self) -> list[str]:
        """Receive remote writes; on Prometheus 3 in both protocol versions (2.0 carries the
        custom bucket bounds of native histograms, 1.0 does not)."""
        flags = ["--web.enable-remote-write-receiver"]
        if self.prometheus_release in NATIVE_HISTOGRAM_RELEASES:
            flags += [f"--web.remote-write-receiver.accepted-protobuf-messages={message}"
                      for message in (forwarding.REMOTE_WRITE_1, forwarding.REMOTE_WRITE_2)]
        return flags

    @staticmethod
    def _exporter_binary() -> str:
        return exporter_binary()

    # ---- lifecycle -------------------------------------------------------------------------

    def _pid_file(self, component: Component) -> Path:
        return self.state_dir / "run" / f"{component.name}.pid"

    def _pid(self, component: Component) -> int | None:
        listen = f"--web.listen-address=127.0.0.1:{self.port(component.port_offset)}"
        return pid_from_file(self._pid_file(component), listen)

    def running(self) -> dict[str, int]:
        return {c.name: pid for c in self._components() if (pid := self._pid(c))}

    def _preflight(self) -> None:
        missing = [
            f"{c.binary} ({c.package})"
            for c in self._components()
            if not shutil.which(c.binary)
            and not (c.name == "exporter" and Path(self._exporter_binary()).exists())
        ]
        if missing:
            raise StackError(f"missing: {', '.join(missing)}; run `make setup` as root")
        running = self.running()
        if running:
            raise StackError(f"stack in {self.state_dir} is already running ({', '.join(sorted(running))})")
        busy = [
            f"{self.port(c.port_offset)} ({c.name})"
            for c in self._components()
            if not port_is_free(self.port(c.port_offset))
        ]
        if busy:
            raise StackError(f"ports in use on 127.0.0.1: {', '.join(busy)}; pick another --port-base")
        runs_exporter = any(c.name == "exporter" for c in self._components())
        if runs_exporter and self.asok_dir and not self.asok_dir.is_dir():
            raise StackError(f"admin socket dir {self.asok_dir} does not exist (is the cluster up?)")

    def up(self, timeout: float = 60) -> float:
        started = time.monotonic()
        self._preflight()
        for sub in ("run", "log", "prometheus-data", "alertmanager-data", "textfile"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        (self.state_dir / "stack.json").write_text(json.dumps(
            {"port_base": self.port_base, "remote_write_receiver": self.remote_write_receiver}) + "\n")
        # Private: prometheus.yml holds the exporter scrape's inline basic_auth password when
        # the scrape file gives one (password_file stays a path), alertmanager.yml may hold a
        # webhook URL with a token; the stack's daemons run as this user.
        self.write_rule_files()
        write_private(self.state_dir / "prometheus.yml",
                      yaml.safe_dump(self.prometheus_config(), sort_keys=False))
        write_private(self.state_dir / "alertmanager.yml",
                      yaml.safe_dump(self.alertmanager_config(), sort_keys=False))
        try:
            procs = {c.name: self._start(c) for c in self._components()}
            for component in self._components():
                self._wait_ready(component, deadline=started + timeout, proc=procs[component.name])
        except BaseException:
            self.down(quiet=True)
            raise
        return time.monotonic() - started

    def _prometheus_command(self, argv: list[str]) -> list[str]:
        """This machine's Prometheus, or Prometheus 3 from the root filesystem that also holds
        Ceph Tentacle (Debian sid; deploy/rootfs.py), seeing the stack's and the rules' dirs."""
        root_release = PROMETHEUS_RELEASES[self.prometheus_release]
        if root_release is None:
            return argv
        try:
            release = Release(root_release, rootfs.build(root_release, log=self._log))
        except rootfs.RootfsError as exc:
            raise StackError(f"Prometheus {self.prometheus_release}: {exc}") from exc
        binds = [self.state_dir, ALERTS_DIR, *([self.targets_dir] if self.targets_dir else [])]
        return release_command(release, argv, binds)

    def _start(self, component: Component) -> subprocess.Popen[bytes]:
        log_path = self.state_dir / "log" / f"{component.name}.log"
        with log_path.open("ab") as log_file:
            proc = subprocess.Popen(
                self._argv(component),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=self.state_dir,
                start_new_session=True,  # outlives `cephscope stack up`
            )
        self._pid_file(component).write_text(f"{proc.pid}\n")
        return proc

    def _wait_ready(self, component: Component, deadline: float,
                    proc: subprocess.Popen[bytes] | None = None) -> None:
        url = self.url(component.port_offset) + component.ready_path
        context: ssl.SSLContext | None = None
        headers: dict[str, str] = {}
        if component.name == "exporter" and self.exporter_auth is not None:
            # asked the way Prometheus will ask: the scrape's CA, client certificate, password
            url = self.exporter_url + component.ready_path
            context = self.exporter_auth.ssl_context()
            headers = self.exporter_auth.headers()
        while True:
            # Our own child is asked directly; otherwise by pid file and command line.
            status = proc.poll() if proc is not None else None
            if status is not None or (proc is None and self._pid(component) is None):
                log_path = self.state_dir / "log" / f"{component.name}.log"
                lines = log_path.read_text(errors="replace").strip().splitlines()
                how = "" if status is None else (
                    f" (killed by signal {-status})" if status < 0 else f" (exit status {status})")
                raise StackError(f"{component.name} exited at start{how}: {' | '.join(lines[-3:])}")
            try:
                http_get(url, timeout=2, context=context, headers=headers)
                return
            except urllib.error.HTTPError as exc:
                if exc.code in (401, 403):
                    raise StackError(f"{component.name} refuses the scrape credentials at "
                                     f"{url}: HTTP {exc.code}") from None
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise StackError(f"{component.name} not ready at {url}")
            time.sleep(0.2)

    def down(self, quiet: bool = False) -> list[str]:
        running = self.running()
        if not running and not quiet:
            raise StackError(f"stack in {self.state_dir} is not running")
        for component in self._components():
            pid = running.get(component.name)
            if pid is None:
                continue
            terminate(pid, 15, log=self._log)
        for component in self._components():
            self._pid_file(component).unlink(missing_ok=True)
        return sorted(running)

    def purge(self) -> None:
        self.down(quiet=True)
        if (self.state_dir / "stack.json").exists():
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def reload_prometheus(self) -> None:
        req = urllib.request.Request(self.prometheus_url + "/-/reload", method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass

    # ---- queries ---------------------------------------------------------------------------

    @property
    def prometheus(self) -> PrometheusAPI:
        return PrometheusAPI(self.prometheus_url, 30.0)

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        try:
            return self.prometheus.query(promql, at)
        except PrometheusError as exc:
            raise StackError(f"query failed: {promql}: {exc}") from exc

    def query_range(self, promql: str, start: float, end: float, step: float = 5) -> list[dict[str, Any]]:
        try:
            return self.prometheus.query_range(promql, start, end, step)
        except PrometheusError as exc:
            raise StackError(f"query failed: {promql}: {exc}") from exc

    def wait_for_series(self, promql: str, timeout: float = 60) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(promql)
            if result:
                return result
            if time.monotonic() > deadline:
                raise StackError(f"no series for {promql} after {timeout:.0f}s")
            time.sleep(1)

    def status(self) -> dict[str, Any]:
        running = self.running()
        return {
            "state_dir": str(self.state_dir),
            "components": {
                c.name: {"pid": running.get(c.name), "url": self.url(c.port_offset)}
                for c in self._components()
            },
            "runner_target": f"127.0.0.1:{self.runner_port}",
        }
