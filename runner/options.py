"""What a sweep is told to do beyond its spec: the runner's options (from the command line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cephscope.monclient import DEFAULT_CLUSTER_TIMEOUT_SECONDS
from cephscope.runner.cephclient import CephTarget
from cephscope.runner.clients import SshSettings
from cephscope.runner.crashpoints import Checkpoint, no_checkpoint
from cephscope.runner.hygiene import HygieneOptions
from cephscope.runner.rgw_endpoint import RgwFlags

DEFAULT_CONF = "/etc/ceph/ceph.conf"
DEFAULT_POOL = "cephscope-bench"
DEFAULT_RBD_POOL = "rbd"
# How long the restore after SIGINT/SIGTERM may take (with the worker's grace and the exit,
# the run ends within 25 s of the signal).
DEFAULT_RESTORE_TIMEOUT_SECONDS = 15.0
# Beyond its deadline, the restore worker's last call is given this long to return.
RESTORE_GRACE_SECONDS = 5.0

@dataclass
class SweepOptions:
    spec_path: Path | None = None
    resume_dir: Path | None = None
    results_dir: Path | None = None
    dry_run: bool = False
    # ssh options and sysctls outside the safe set (runner/spec_safety.py) are accepted
    allow_unsafe_spec: bool = False
    conf: Path | None = None
    # how to reach the cluster when the caller decided it (the CLI builds it for --devcluster)
    target: CephTarget | None = None
    hygiene: HygieneOptions = field(default_factory=HygieneOptions)
    asok_dir: Path = Path("/var/run/ceph")
    client_name: str = "client.admin"
    keyring: Path | None = None
    metrics_port: int | None = None
    metrics_linger_seconds: float = 30.0
    grafana_url: str | None = None
    grafana_token: str | None = None
    grafana_dashboard_uid: str | None = None
    prometheus_url: str | None = None
    prometheus_rate_window: str = "auto"
    prometheus_lag_seconds: float = 10.0
    baseline_dir: Path | None = None
    keep_pools: bool = False
    pool: str = DEFAULT_POOL
    rbd_pool: str = DEFAULT_RBD_POOL
    restart_method: str | None = None
    rolling: bool | None = None
    step_timeout_seconds: float | None = None
    stop_on_failure: bool = False
    # every call to the cluster gives up after this long (librados' mount, mon op and the
    # benchmarks' OSD op timeouts; the ceph CLI's connect timeout)
    cluster_timeout_seconds: float = DEFAULT_CLUSTER_TIMEOUT_SECONDS
    # the restore after a signal gives up after this long (what it did not restore is said and
    # left in the run dir for --resume)
    restore_timeout_seconds: float = DEFAULT_RESTORE_TIMEOUT_SECONDS
    # beyond that, how long the restore's last call is given to return (tests shorten it)
    restore_grace_seconds: float = RESTORE_GRACE_SECONDS
    tty: bool | None = None
    clients: tuple[str, ...] | None = None  # overrides the spec's cluster.clients
    ssh: SshSettings = field(default_factory=SshSettings)
    # the gateway's endpoint and keys file from the command line (runner/rgw_endpoint.py)
    rgw: RgwFlags = field(default_factory=RgwFlags)
    # a test hook (see cephscope.runner.crashpoints); a no-op for every real run
    checkpoint: Checkpoint = no_checkpoint
