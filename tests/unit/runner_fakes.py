"""Small stand-ins shared by the runner unit tests (no Ceph needed)."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cephscope.runner.benchmarks.base import (
    BenchContext,
    Benchmark,
    BenchmarkError,
    BenchResult,
    LiveSample,
)
from cephscope.runner.cephclient import CephError, CephTarget
from cephscope.runner.hostexec import LocalHost
from cephscope.runner.knobs.ceph_config import ConfigManager
from cephscope.runner.options import SweepOptions
from cephscope.runner.restart import RestartJournal, RestartMethod
from cephscope.runner.spec import Spec
from cephscope.runner.sweep import Sweep
from cephscope.runner.wiring import ClusterParts, Collaborators, Wire


class EchoBench(Benchmark):
    """A benchmark that 'runs' by writing its params; results derived from op_size."""

    name: ClassVar[str] = "radosbench"
    parameters: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "op_size": (int,),
        "concurrent_ops": (int,),
        "concurrent_procs": (int,),
        "time": (int, float),
        "write_only": (bool,),
        "readmode": (str,),
    }

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> list[str]:
        if params.get("readmode") not in (None, "seq", "rand"):
            return [f"radosbench: readmode must be seq or rand, got {params['readmode']!r}"]
        return []

    @classmethod
    def estimated_seconds(cls, params: Mapping[str, Any]) -> float:
        return float(params.get("time", 10)) * (1 if params.get("write_only") else 2)

    def modes(self) -> Sequence[str]:
        return ["write"] if self.params.get("write_only") else ["write", "seq"]

    def run(self, mode: str, ctx: BenchContext) -> list[Path]:
        ctx.report_progress(mode, LiveSample(timestamp=0.0, ops_per_second=100.0,
                                             latency_seconds=0.004))
        out = ctx.step_dir / f"{mode}.out"
        out.write_text(f"{mode} {self.params}\n")
        return [out]

    def parse(self, mode: str, ctx: BenchContext) -> BenchResult:
        op_size = int(self.params.get("op_size", 4096))
        return BenchResult(benchmark=self.name, mode=mode, iops=1e6 / op_size,
                           bandwidth_bytes_per_second=1e6, latency_avg_seconds=op_size / 1e6)


class FioLike(EchoBench):
    name: ClassVar[str] = "librbdfio"
    parameters: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "mode": (str,), "op_size": (int,), "iodepth": (int,), "numjobs": (int,),
        "volumes": (int,), "vol_size": (int,), "time": (int, float),
    }


BENCHES: dict[str, type[Benchmark]] = {"radosbench": EchoBench, "librbdfio": FioLike}


OPTIONS = {
    "osd_op_num_shards": {"type": "int", "default": 0, "can_update_at_runtime": False,
                          "flags": ["startup"]},
    "osd_max_backfills": {"type": "uint", "default": 1, "can_update_at_runtime": True,
                          "flags": ["runtime"]},
    # what osd_op_num_shards = 0 stands for, by the OSD's store (Pacific's defaults)
    "osd_op_num_shards_hdd": {"type": "int", "default": 5, "can_update_at_runtime": False,
                              "flags": ["startup"]},
    "osd_op_num_shards_ssd": {"type": "int", "default": 8, "can_update_at_runtime": False,
                              "flags": ["startup"]},
}


class FakeCluster:
    """The mon + OSDs, in memory, behaving like Pacific where it matters: `config set` pushes
    the new value into running OSDs' config (so `config get` shows it) even for startup
    options, whose effect only a restart brings; unknown options answer ENOENT."""

    conf_path = Path("/nonexistent/ceph.conf")
    client_name = "client.admin"
    keyring_path = None

    def __init__(self, osds: int = 3) -> None:
        self.db: dict[str, str] = {}
        self.epoch = 10
        self.osds = {i: {"up_from": 5, "config": {k: str(v["default"]) for k, v in
                                                   OPTIONS.items()}} for i in range(osds)}
        self.started_with = {i: dict(o["config"]) for i, o in self.osds.items()}
        self.restarts: list[list[int]] = []
        self.commands: list[tuple[str, dict]] = []
        self.restart_ignores_db = False
        self.stopped: set[int] = set()  # OSDs whose process is not running (down)
        self.restart_error: str | None = None  # the restart method fails with this
        self.pools: dict[str, dict[str, Any]] = {}
        self.limited_to: float | None = None
        # `osd metadata`: what each OSD's host reports (a test makes it hostile)
        self.metadata: list[dict[str, Any]] = [
            {"id": i, "hostname": "osd-host", "devices": "sda"} for i in range(osds)]
        self.rotational: set[int] = set()  # OSDs whose store is on a rotational device
        # erasure-code profiles as `osd erasure-code-profile get` prints them (all strings)
        self.ec_profiles: dict[str, dict[str, str]] = {}
        # `osd crush rule dump`: id -> name
        self.crush_rules: dict[int, str] = {0: "replicated_rule"}

    # the CephCli surface the manager uses
    def limit_to(self, seconds: float | None) -> None:
        """CephCli's shared deadline of the restore; recorded, not enforced (the fake always
        answers)."""
        self.limited_to = seconds

    def command(self, prefix: str, timeout: float | None = None, **args: Any) -> Any:
        self.commands.append((prefix, args))
        if prefix == "config help":
            if args["key"] not in OPTIONS:
                raise CephError("`ceph config help` failed: ENOENT")
            return {"name": args["key"], **OPTIONS[args["key"]]}
        if prefix == "osd metadata":
            return [{**m, "rotational": "1" if m["id"] in self.rotational else "0"}
                    for m in self.metadata]
        if prefix == "osd dump":
            return {"epoch": self.epoch, "osds": [
                {"osd": i, "up": int(i not in self.stopped), "in": 1, "up_from": o["up_from"]}
                for i, o in self.osds.items()]}
        if prefix == "config dump":
            return [{"section": "osd", "name": k, "value": v, "mask": ""}
                    for k, v in self.db.items()]
        if prefix == "config set":
            self.db[args["name"]] = args["value"]
            for o in self.osds.values():  # the mon pushes it, startup option or not
                o["config"][args["name"]] = args["value"]
            return None
        if prefix == "config rm":
            self.db.pop(args["name"], None)
            for o in self.osds.values():
                o["config"][args["name"]] = str(OPTIONS[args["name"]]["default"])
            return None
        if prefix == "pg dump":
            return {"pg_stats": [{"pgid": "1.0", "state": "active+clean", "acting": [0, 1, 2],
                                  "up": [0, 1, 2], "reported_epoch": self.epoch}]}
        if prefix == "osd pool ls":
            return [{"pool_name": n, **p} for n, p in self.pools.items()]
        if prefix == "osd pool create":
            if args.get("pool_type") == "erasure":
                # as Ceph does: a crush rule named after the pool, which outlives it
                rule = max(self.crush_rules) + 1
                self.crush_rules[rule] = args["pool"]
                ec = self.ec_profiles[args["erasure_code_profile"]]
                self.pools[args["pool"]] = {"type": 3, "size": int(ec["k"]) + int(ec["m"]),
                                            "erasure_code_profile": args["erasure_code_profile"],
                                            "crush_rule": rule}
            else:
                self.pools[args["pool"]] = {"type": 1, "size": 3, "crush_rule": 0}
            return None
        if prefix == "osd crush rule dump":
            return [{"rule_id": i, "rule_name": n} for i, n in self.crush_rules.items()]
        if prefix == "osd crush rule rm":
            used = {p["crush_rule"] for p in self.pools.values()}
            rule = next(i for i, n in self.crush_rules.items() if n == args["name"])
            if rule in used:
                raise CephError(f"`ceph osd crush rule rm` failed: EBUSY crush rule "
                                f"{args['name']} in use")
            del self.crush_rules[rule]
            return None
        if prefix == "osd erasure-code-profile get":
            if args["name"] not in self.ec_profiles:
                raise CephError("`ceph osd erasure-code-profile get` failed: ENOENT unknown "
                                f"erasure code profile '{args['name']}'")
            return dict(self.ec_profiles[args["name"]])
        if prefix == "osd erasure-code-profile set":
            self.ec_profiles[args["name"]] = dict(p.split("=", 1) for p in args["profile"])
            return None
        if prefix == "osd erasure-code-profile rm":
            self.ec_profiles.pop(args["name"], None)
            return None
        if prefix == "osd pool set":
            self.pools[args["pool"]][args["var"]] = int(args["val"])
            return None
        if prefix == "osd pool application enable":
            return None
        if prefix == "versions":  # as Ceph 16.2 prints it
            return {"overall": {"ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) "
                                "pacific (stable)": 5}}
        if prefix == "osd pool delete":
            del self.pools[args["pool"]]
            return None
        raise AssertionError(f"unexpected command {prefix}")

    def close(self) -> None:
        pass

    def json(self, *args: str, timeout: float | None = None) -> Any:
        assert args[0] == "tell" and args[2:4] == ("config", "get")
        osd = int(args[1].split(".")[1])
        if osd in self.stopped:
            raise CephError(f"`ceph tell osd.{osd}` failed: problem getting command descriptions")
        return {args[4]: self.osds[osd]["config"][args[4]]}

    # restart method
    name = "fake"

    def restart(self, osd_ids: Sequence[int], timeout_seconds: float,
                on_stopped: Callable[[], None] = lambda: None) -> None:
        if self.restart_error is not None:
            raise CephError(self.restart_error)
        self.restarts.append(list(osd_ids))
        self.stopped |= set(osd_ids)
        on_stopped()
        self.stopped -= set(osd_ids)
        for i in osd_ids:
            self.epoch += 1
            self.osds[i]["up_from"] = self.epoch
            fresh = {k: self.db.get(k, str(v["default"])) for k, v in OPTIONS.items()}
            if self.restart_ignores_db:
                fresh = dict(self.started_with[i])
            self.osds[i]["config"] = fresh
            self.started_with[i] = dict(fresh)


class CountingBench(EchoBench):
    """EchoBench recording the steps it ran; `fail_step` fails that one."""
    runs: ClassVar[list[str]] = []
    fail_step: ClassVar[str | None] = None

    def run(self, mode: str, ctx: BenchContext) -> list[Path]:
        if ctx.step_id == CountingBench.fail_step:
            raise BenchmarkError("tool exited 1")
        CountingBench.runs.append(ctx.step_id)
        return super().run(mode, ctx)


def fake_wiring(cluster: FakeCluster, restart: RestartMethod | None = None) -> Wire:
    """A sweep's collaborators on the in-memory cluster (its own restart method unless
    `restart`); no host is reached (no host knobs, no hygiene)."""

    def wire(spec: Spec, target: CephTarget | None, journal: RestartJournal) -> Collaborators:
        config = ConfigManager(cluster, restart or cluster, lambda i: None,  # type: ignore[arg-type]
                               log=lambda m: None, poll_seconds=0.01, timeout_seconds=5,
                               restart_journal=journal)
        return Collaborators(target or CephTarget(cluster.conf_path),
                             ClusterParts(cluster, config))  # type: ignore[arg-type]

    return wire


def fake_sweep(opts: SweepOptions, cluster: FakeCluster,
               benchmarks: Mapping[str, type[Benchmark]] | None = None,
               restart: RestartMethod | None = None) -> Sweep:
    """A Sweep on the in-memory cluster, silent, running CountingBench unless `benchmarks`."""
    return Sweep(opts, fake_wiring(cluster, restart), log=lambda m: None,
                 benchmarks=benchmarks or {"radosbench": CountingBench})


SPEC = """\
ceph_config:
  osd_op_num_shards: [2, 4]
benchmarks:
  radosbench:
    op_size: [4096, 65536]
    time: 5
    write_only: true
"""


def run_sweep(tmp_path: Path, cluster: FakeCluster, **kw: Any) -> tuple[int, Path]:
    spec_path = tmp_path / "shards.yaml"
    if not spec_path.exists():
        spec_path.write_text(SPEC)
    results = tmp_path / "run"
    opts = SweepOptions(spec_path=None if kw.get("resume_dir") else spec_path,
                        results_dir=results, metrics_linger_seconds=0, tty=False, **kw)
    return fake_sweep(opts, cluster).run(), results


class RootedHost(LocalHost):
    """This machine, with absolute path arguments under `root`."""

    def __init__(self, root: Path) -> None:
        super().__init__("here")
        self.root = root

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        return super().argv([f"{self.root}{a}" if a.startswith("/") else a for a in argv], env)


class Recorder:
    """A tiny HTTP server recording POSTs, answering like Grafana (or failing on demand)."""

    def __init__(self, status: int = 200) -> None:
        self.calls: list[dict[str, Any]] = []
        self.status = status
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recorder.calls.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(body)})
                out = json.dumps({"id": len(recorder.calls), "message": "Annotation added"})
                self.send_response(recorder.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(out.encode())

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# Stand-in for the tools a benchmark runs (fio, rbd, ...): records argv and CEPH_CONF in
# $FAKE_LOG; fio replays the real capture $FAKE_FIO_CAPTURE on stdout and, asked for logs
# (--write_iops_log=PREFIX), copies the real logs in $FAKE_FIO_LOGS under PREFIX; the others
# succeed silently. $FAKE_FIO_FAIL makes fio fail as fio does without its image.
FAKE_TOOL = textwrap.dedent(
    """\
    #!{python}
    import glob, os, re, shutil, sys, time
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(os.path.basename(sys.argv[0]) + " " + " ".join(sys.argv[1:]) + " CEPH_CONF="
                  + os.environ.get("CEPH_CONF", "") + "\\n")
    if os.path.basename(sys.argv[0]) == "fio":
        if os.environ.get("FAKE_FIO_FAIL"):
            sys.stderr.write("rbd_open failed.\\nfio_rbd_connect failed.\\n")
            sys.exit(1)
        for arg in sys.argv[1:]:
            if arg.startswith("--write_iops_log=") and os.environ.get("FAKE_FIO_LOGS"):
                prefix = arg.split("=", 1)[1]
                for path in glob.glob(os.path.join(os.environ["FAKE_FIO_LOGS"], "*.log")):
                    kind = re.search(r"_([a-z]+\\.[0-9]+\\.log)$", path).group(1)
                    shutil.copy(path, prefix + "_" + kind)
        data = open(os.environ["FAKE_FIO_CAPTURE"]).read()
        for i in range(0, len(data), 20000):
            sys.stdout.write(data[i:i + 20000]); sys.stdout.flush(); time.sleep(0.01)
    """
)


def install_fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       names: Sequence[str]) -> Path:
    """FAKE_TOOL as each of `names`, first on PATH; calls logged in tmp_path/calls.log."""
    from tests.unit.bench_golden import TOOLS_DIR

    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name in names:
        script = bindir / name
        script.write_text(FAKE_TOOL.format(python=sys.executable))
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("FAKE_FIO_CAPTURE",
                       str(TOOLS_DIR / "fio-3.33-rbd-randread-4k-qd16-status1.jsonplus"))
    return bindir


class ScriptedHost:
    """A HostExec whose commands are answered by `answer(argv) -> (returncode, stdout)`; every
    argv it was asked to run is kept in `calls` (nothing is run)."""

    def __init__(self, name: str,
                 answer: Callable[[list[str]], tuple[int, bytes]] = lambda argv: (0, b"")
                 ) -> None:
        self.name = name
        self.answer = answer
        self.calls: list[list[str]] = []

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        return list(argv)

    def run(self, argv: Sequence[str], *, timeout: float, input: bytes | None = None,
            check: bool = True, env: Mapping[str, str] | None = None) -> Any:
        import subprocess

        from cephscope.runner.hostexec import HostExecError

        self.calls.append(list(argv))
        code, out = self.answer(list(argv))
        if check and code != 0:
            raise HostExecError(f"{self.name}: {' '.join(argv)} failed ({code})")
        return subprocess.CompletedProcess(list(argv), code, out, b"")

    def popen(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
              **kwargs: Any) -> Any:
        raise NotImplementedError("ScriptedHost runs no processes")


class MountTable:
    """What a ScriptedHost's mount commands do to its mount table: `mount`-like tools add
    their last argument, `umount` removes it, `mountpoint -q` asks it."""

    MOUNTERS = ("ceph-fuse", "rbd-fuse", "mount")

    def __init__(self) -> None:
        self.mounted: set[str] = set()

    def __call__(self, argv: list[str]) -> tuple[int, bytes]:
        program = argv[0]
        if program == "mountpoint":
            return (0 if argv[-1] in self.mounted else 1), b""
        if program == "umount":
            self.mounted.discard(argv[-1])
            return 0, b""
        if program in self.MOUNTERS:
            # `mount -t ceph :/ MP -o ...` names the mountpoint before its options
            self.mounted.add(argv[argv.index(":/") + 1] if ":/" in argv else argv[-1])
        return 0, b""
