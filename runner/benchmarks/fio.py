"""CBT's `fio` benchmark: one fio definition run against the endpoints of a `client_endpoints`
section (runner/endpoints/), one fio process per endpoint on every client.

Parameters as CBT reads them (benchmark/fio.py): `client_endpoints` (the section's name; a list
of names is an axis), `mode`, `rwmixread`, `bs` (fio's own syntax) or `op_size` (bytes or
'4k'; CBT's older name, `bs` wins), `bsrange`, `bssplit`, `iodepth` (per endpoint) or
`total_iodepth` (per client, split over its endpoints; fewer endpoints when it is smaller than
their number: CBT's rule), `numjobs`, `procs_per_endpoint` (job sections per fio process),
`size` (MiB per job; numjobs x procs_per_endpoint x size must fit in the endpoint), `time`,
`time_based`, `ramp`, `prefill` (default true: every endpoint written sequentially in 4 MiB
blocks first, `prefill_iodepth` deep), `norandommap`, `rate_iops`, `random_distribution`,
`end_fsync`, `sync`, `direct`, `ioengine` (file and directory endpoints; the rbd engine for
librbd), `log_avg_msec` (fio's own IOPS, bandwidth and latency logs, averaged over that many
ms, kept in the step dir: runner/benchmarks/fio_logs.py), `logging` (false: no logs),
`cmd_path`, and the `workloads` block with its precondition (runner/workloads.py).

Endpoints are made in prepare and removed in cleanup (always); their drivers say what runs
where. A remote client's logs are written in its work dir and copied into the step dir.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from cephscope.runner.benchmark_params import INJECTED
from cephscope.runner.benchmarks.base import (
    BenchContext,
    Benchmark,
    BenchmarkError,
    BenchResult,
    PreflightAccess,
    Slot,
    client_slots,
)
from cephscope.runner.benchmarks.fio_json import (
    FIO_MODES,
    MIXED_MODES,
    FioProcess,
    result_of_processes,
    run_fio,
)
from cephscope.runner.benchmarks.fio_logs import LOG_NAME, step_series
from cephscope.runner.benchmarks.paramcheck import parse_size, positive, type_problems
from cephscope.runner.benchmarks.toolproc import ToolCommand, resolve_tool, run_tools
from cephscope.runner.endpoints.settings import EndpointSpec
from cephscope.runner.endpoints.undo import UndoLog
from cephscope.runner.hostexec import HostExecError

if TYPE_CHECKING:
    from cephscope.runner.endpoints.base import Client, Driver, Endpoint, EndpointSite

MIB = 1024 * 1024
PREFILL_BLOCK = "4M"
STARTUP_SECONDS = 3.0
PREFILL_BYTES_PER_SECOND = 100 * MIB  # a floor, for estimates only
# fio's own syntax for block sizes: 4k, 4k-16k, 4k/50:64k/50, 4k,8k (read,write)
BLOCK_SYNTAX = re.compile(r"[0-9]+[KkMmGg]?(i?[Bb])?([-/:,][0-9]+[KkMmGg]?(i?[Bb])?)*")
WORD = re.compile(r"[A-Za-z0-9_.:/-]+")
FETCH_SECONDS = 120.0


def split_depth(total: int, endpoints: int) -> list[int]:
    """CBT's total_iodepth: spread over the endpoints, the first ones taking the remainder;
    fewer endpoints when the total is smaller than their number."""
    used = max(1, min(endpoints, total))
    return [total // used + (1 if i < total % used else 0) for i in range(used)]


class Fio(Benchmark):
    name: ClassVar[str] = "fio"
    pool_application: ClassVar[str] = "rbd"
    load_parameters: ClassVar[tuple[str, ...]] = (
        "iodepth", "total_iodepth", "numjobs", "procs_per_endpoint", "rate_iops")
    parameters: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "client_endpoints": (str,),
        "mode": (str,),
        "rwmixread": (int,),
        "bs": (int, str),
        "op_size": (int, str),
        "bsrange": (str,),
        "bssplit": (str,),
        "iodepth": (int,),
        "total_iodepth": (int,),
        "numjobs": (int,),
        "procs_per_endpoint": (int,),
        "size": (int,),
        "time": (int, float),
        "time_based": (bool,),
        "ramp": (int, float),
        "prefill": (bool,),
        "prefill_iodepth": (int,),
        "norandommap": (bool,),
        "rate_iops": (int,),
        "random_distribution": (str,),
        "end_fsync": (int,),
        "sync": (int, bool),
        "direct": (int, bool),
        "ioengine": (str,),
        "log_avg_msec": (int,),
        "logging": (bool,),
        "cmd_path": (str,),
        "workloads": (dict,),
        "pool_profile": (str,),
        "data_pool_profile": (str,),
    }
    # CBT's defaults (benchmark/fio.py)
    defaults: ClassVar[Mapping[str, Any]] = {
        "mode": "write", "rwmixread": 50, "op_size": 4 * MIB, "iodepth": 16, "numjobs": 1,
        "procs_per_endpoint": 1, "size": 4096, "time_based": False, "prefill": True,
        "prefill_iodepth": 16, "norandommap": False, "end_fsync": 0, "direct": 1,
        "ioengine": "libaio", "logging": True, "cmd_path": "fio",
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        given = {k: v for k, v in params.items() if v is not None and k not in INJECTED}
        self.settings: dict[str, Any] = {**self.defaults, **given}
        endpoint = params.get("endpoint")
        self.endpoint = EndpointSpec.from_dict(endpoint) if isinstance(endpoint, Mapping) else None
        pre = params.get("precondition")
        self.precondition_settings = ({**self.defaults, **{k: v for k, v in pre.items()
                                                           if k not in INJECTED}}
                                      if isinstance(pre, Mapping) else None)
        self.cephfs_pools = dict(params.get("cephfs_pools") or {})
        self.site: EndpointSite | None = None
        self.driver: Driver | None = None
        self._remote_log_dirs: list[tuple[Client, str]] = []

    # -- spec side -------------------------------------------------------------------------
    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> list[str]:
        own = {k: v for k, v in params.items() if k not in INJECTED}
        problems = cls._check(own)
        endpoint = params.get("endpoint")
        if "client_endpoints" not in params:
            problems.append(f"{cls.name}: client_endpoints missing (the name of a "
                            "client_endpoints section)")
        elif isinstance(endpoint, Mapping) and not problems:
            problems += cls._check_endpoint(own, EndpointSpec.from_dict(endpoint))
        pre = params.get("precondition")
        if isinstance(pre, Mapping):
            problems += [p.replace(f"{cls.name}:", f"{cls.name} precondition:", 1)
                         for p in cls._check({k: v for k, v in pre.items() if k not in INJECTED})]
        return problems

    @classmethod
    def _check(cls, params: Mapping[str, Any]) -> list[str]:
        n = cls.name
        problems = type_problems(n, {k: v for k, v in params.items() if k != "workloads"},
                                 cls.parameters)
        for key in ("iodepth", "total_iodepth", "numjobs", "procs_per_endpoint", "size",
                    "time", "rate_iops", "prefill_iodepth", "log_avg_msec"):
            problems += positive(n, params, key)
        for key in ("ramp", "end_fsync"):
            problems += positive(n, params, key, allow_zero=True)
        if "iodepth" in params and "total_iodepth" in params:
            problems.append(f"{n}: give iodepth (per endpoint) or total_iodepth (per client), "
                            "not both")
        mode = params.get("mode")
        if isinstance(mode, str) and mode not in FIO_MODES:
            problems.append(f"{n}: mode must be one of {', '.join(FIO_MODES)}, got {mode!r}")
        mix = params.get("rwmixread")
        if isinstance(mix, int) and not isinstance(mix, bool) and not 0 <= mix <= 100:
            problems.append(f"{n}: rwmixread must be 0..100, got {mix!r}")
        op_size = params.get("op_size")
        if isinstance(op_size, int | str) and not isinstance(op_size, bool):
            try:
                if parse_size(op_size) <= 0:
                    problems.append(f"{n}: op_size must be > 0, got {op_size!r}")
            except ValueError as exc:
                problems.append(f"{n}: op_size: {exc}")
        for key in ("bs", "bsrange", "bssplit"):
            value = params.get(key)
            if isinstance(value, int | str) and not isinstance(value, bool) \
                    and not BLOCK_SYNTAX.fullmatch(str(value)):
                problems.append(f"{n}: {key} {value!r} is not a fio block size (e.g. 4k, "
                                "4k-64k, 4k/50:64k/50)")
        for key in ("cmd_path", "random_distribution", "ioengine"):
            value = params.get(key)
            if isinstance(value, str) and not WORD.fullmatch(value):
                problems.append(f"{n}: {key} {value!r} may hold only letters, digits, _ . : / -")
        for key in ("direct", "sync"):
            value = params.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value not in (0, 1):
                problems.append(f"{n}: {key} must be 0 or 1, got {value!r}")
        if params.get("time_based") is True and params.get("time") is None:
            problems.append(f"{n}: time_based needs time (seconds)")
        return problems

    @classmethod
    def _check_endpoint(cls, params: Mapping[str, Any], endpoint: EndpointSpec) -> list[str]:
        settings = {**cls.defaults, **params}
        jobs = int(settings["numjobs"]) * int(settings["procs_per_endpoint"])
        problems = []
        if jobs * int(settings["size"]) > endpoint.endpoint_size_mib:
            problems.append(
                f"{cls.name}: numjobs x procs_per_endpoint x size = {jobs} x "
                f"{settings['size']} MiB exceeds endpoint_size {endpoint.endpoint_size_mib} MiB "
                f"of client_endpoints.{endpoint.name} (CBT's check)")
        if endpoint.driver == "rbd-fuse" and jobs > 1:
            problems.append(
                f"{cls.name}: rbd-fuse endpoints take one fio job each (numjobs x "
                f"procs_per_endpoint = {jobs}): rbd-fuse's open of an image races another "
                "open at the same time (one of them fails with ENOENT); use "
                "endpoints_per_client for more jobs")
        return problems

    @classmethod
    def needs_pool(cls, params: Mapping[str, Any]) -> bool:
        endpoint = params.get("endpoint")
        # CephFS endpoints live in the filesystem's pools (their driver makes any it needs)
        return not (isinstance(endpoint, Mapping)
                    and str(endpoint.get("driver")).startswith("cephfs-"))

    @classmethod
    def application(cls, params: Mapping[str, Any]) -> str:
        endpoint = params.get("endpoint")
        if isinstance(endpoint, Mapping) and str(endpoint.get("driver")).startswith("cephfs-"):
            return "cephfs"
        return cls.pool_application

    @classmethod
    def preflight(cls, steps: Sequence[Mapping[str, Any]], access: PreflightAccess) -> list[str]:
        endpoints = {}
        for params in steps:
            endpoint = params.get("endpoint")
            if isinstance(endpoint, Mapping):
                spec = EndpointSpec.from_dict(endpoint)
                endpoints[spec.name] = (spec, bool(params.get("cephfs_pools")))
        # the drivers import the benchmarks' base module: imported when used, not with this one
        from cephscope.runner.endpoints.drivers import preflight_problems

        return preflight_problems(list(endpoints.values()), access)

    @classmethod
    def estimated_seconds(cls, params: Mapping[str, Any]) -> float:
        bench = cls(params)
        s = bench.settings
        seconds = float(s.get("time") or 0) + float(s.get("ramp") or 0) + STARTUP_SECONDS
        if not s.get("time"):  # runs until each job wrote its size
            seconds += int(s["size"]) * MIB / PREFILL_BYTES_PER_SECOND
        per_client = bench.endpoint.endpoints_per_client if bench.endpoint else 1
        if s["prefill"]:
            seconds += (per_client * int(s["numjobs"]) * int(s["procs_per_endpoint"])
                        * int(s["size"]) * MIB / PREFILL_BYTES_PER_SECOND + STARTUP_SECONDS)
        pre = bench.precondition_settings
        if pre is not None:
            seconds += float(pre.get("time") or 0) + STARTUP_SECONDS
        return seconds

    def modes(self) -> Sequence[str]:
        return [str(self.settings["mode"])]

    # -- endpoints ---------------------------------------------------------------------------
    def prepare(self, ctx: BenchContext) -> None:
        # the drivers import the benchmarks' base module: imported when used, not with this one
        from cephscope.runner.endpoints.base import EndpointSite
        from cephscope.runner.endpoints.drivers import driver_class

        if self.endpoint is None:
            raise BenchmarkError(f"{self.name}: no client_endpoints section for this step")
        ctx.step_dir.mkdir(parents=True, exist_ok=True)
        undo = ctx.undo if isinstance(ctx.undo, UndoLog) else UndoLog()
        self.site = EndpointSite(ctx, self.endpoint, undo, ctx.ceph, ctx.ensure_pool,
                                 self.cephfs_pools, ctx.log)
        self.driver = driver_class(self.endpoint.driver)(self.site)
        self.driver.create()
        if self.settings["prefill"]:
            self._run_each("prefill", ctx, self._prefill_settings(), logs=False)

    @property
    def has_precondition(self) -> bool:
        return self.precondition_settings is not None

    def precondition(self, ctx: BenchContext) -> list[Path]:
        if self.precondition_settings is None:
            return []
        return self._run_each("precondition", ctx, self.precondition_settings, logs=False)

    def run(self, mode: str, ctx: BenchContext) -> list[Path]:
        return self._run_each(mode, ctx, self.settings, logs=self.logs_wanted(self.settings))

    @staticmethod
    def logs_wanted(settings: Mapping[str, Any]) -> bool:
        return bool(settings.get("log_avg_msec")) and settings.get("logging", True) is not False

    def _prefill_settings(self) -> dict[str, Any]:
        """CBT's prefill: sequential 4 MiB writes of each job's size, on the same job names."""
        s = self.settings
        return {**{k: s[k] for k in ("numjobs", "procs_per_endpoint", "size", "direct",
                                     "ioengine", "cmd_path")},
                "mode": "write", "bs": PREFILL_BLOCK, "iodepth": s["prefill_iodepth"],
                "time_based": False, "end_fsync": 0, "norandommap": False}

    def endpoints_of(self, client: Client, settings: Mapping[str, Any]
                         ) -> list[tuple[Endpoint, int]]:
        """(endpoint, its iodepth) of one client: every endpoint at `iodepth`, or the first
        ones sharing `total_iodepth`."""
        if self.driver is None:
            raise BenchmarkError(f"{self.name}: endpoints not made (prepare did not run)")
        endpoints = self.driver.endpoints(client)
        if settings.get("total_iodepth"):
            depths = split_depth(int(settings["total_iodepth"]), len(endpoints))
        else:
            depths = [int(settings["iodepth"])] * len(endpoints)
        return list(zip(endpoints, depths, strict=False))

    def slots(self, ctx: BenchContext, settings: Mapping[str, Any] | None = None) -> list[Slot]:
        settings = settings or self.settings
        per_client = self.endpoint.endpoints_per_client if self.endpoint else 1
        if settings.get("total_iodepth"):
            per_client = len(split_depth(int(settings["total_iodepth"]), per_client))
        return client_slots(ctx, per_client)

    def slot_paths(self, what: str, ctx: BenchContext, slot: Slot) -> tuple[Path, Path]:
        base = f"fio-{what}.{slot.label}{slot.index}"
        return ctx.step_dir / f"{base}.json", ctx.step_dir / f"{base}.stderr"

    def made(self) -> EndpointSite:
        """The endpoints' site, once prepare made them."""
        if self.site is None:
            raise BenchmarkError(f"{self.name}: endpoints not made (prepare did not run)")
        return self.site

    def client(self, slot: Slot) -> Client:
        return self.made().client(slot.client)

    # -- fio ---------------------------------------------------------------------------------
    def argv(self, fio: str, endpoint: Endpoint, depth: int, settings: Mapping[str, Any],
             client_id: str, log_prefix: str | None, prefix: Sequence[str] = ()) -> list[str]:
        s = settings
        rbd = endpoint.kind == "rbd"
        argv = [*prefix, fio, "--group_reporting", "--lat_percentiles=1",
                "--output-format=json+", "--status-interval=1"]
        argv += endpoint.fio_args(client_id)
        if not rbd:
            argv.append(f"--ioengine={s['ioengine']}")
        argv.append(f"--direct={1 if rbd else int(s['direct'])}")
        argv.append(f"--rw={s['mode']}")
        if s["mode"] in MIXED_MODES:
            argv.append(f"--rwmixread={int(s['rwmixread'])}")
        if s.get("bs") is not None:
            argv.append(f"--bs={s['bs']}")
        else:
            argv.append(f"--bs={parse_size(s['op_size'])}")
        for key in ("bsrange", "bssplit"):
            if s.get(key):
                argv.append(f"--{key}={s[key]}")
        argv += [f"--iodepth={depth}", f"--numjobs={int(s['numjobs'])}",
                 f"--size={int(s['size'])}M", f"--end_fsync={int(s.get('end_fsync') or 0)}"]
        if s.get("sync") is not None:
            argv.append(f"--sync={int(s['sync'])}")
        if s.get("random_distribution"):
            argv.append(f"--random_distribution={s['random_distribution']}")
        if s.get("rate_iops"):
            argv.append(f"--rate_iops={int(s['rate_iops'])}")
        if s.get("norandommap"):
            argv.append("--norandommap")
        if s.get("time"):
            argv.append(f"--runtime={s['time']:g}")
        if s.get("time_based"):
            argv.append("--time_based")
        if s.get("ramp"):
            argv.append(f"--ramp_time={s['ramp']:g}")
        if s.get("startdelay"):  # rawfio's
            argv.append(f"--startdelay={s['startdelay']:g}")
        if log_prefix is not None:
            argv += [f"--write_iops_log={log_prefix}", f"--write_bw_log={log_prefix}",
                     f"--write_lat_log={log_prefix}", f"--log_avg_msec={int(s['log_avg_msec'])}",
                     "--log_unix_epoch=1"]
        # one job section per process of the endpoint (CBT's procs_per_endpoint); in a
        # directory each job's files are named after it
        for proc in range(int(s["procs_per_endpoint"])):
            argv.append(f"--name=cephscope-{endpoint.index}-{proc}")
        return argv

    def tool_env(self, ctx: BenchContext) -> dict[str, str]:
        return ctx.cluster.fio_env(ctx.env)

    def _run_each(self, what: str, ctx: BenchContext, settings: Mapping[str, Any],
                  logs: bool) -> list[Path]:
        """One fio process per endpoint on every client, all at once."""
        local_fio = resolve_tool(str(settings["cmd_path"]))
        processes = []
        for slot in self.slots(ctx, settings):
            client = self.client(slot)
            endpoint, depth = self.endpoints_of(client, settings)[slot.index]
            stdout_path, stderr_path = self.slot_paths(what, ctx, slot)
            log_prefix = None
            if logs:
                base = f"fio-{what}.{slot.label}{slot.index}"
                if slot.client is None:
                    log_prefix = str(ctx.step_dir / base)
                else:
                    remote = str(self.made().work_dir(client) / "logs" / ctx.step_id)
                    client.run(["mkdir", "-p", remote], f"mkdir {remote} on {client.name}")
                    if (client, remote) not in self._remote_log_dirs:
                        self._remote_log_dirs.append((client, remote))
                    log_prefix = f"{remote}/{base}"
            # the cluster's own release tools (a release root) run here, for the rbd engine;
            # a client resolves the tool on its own PATH
            local = slot.client is None
            prefix = ctx.cluster.tool_prefix if local and endpoint.kind == "rbd" else ()
            fio = local_fio if local else str(settings["cmd_path"])
            processes.append(FioProcess(slot, self.argv(fio, endpoint, depth, settings,
                                                        ctx.cluster.client_id, log_prefix, prefix),
                                        stdout_path, stderr_path))
        if what == "prefill":
            # no live figures: the benchmark is not running yet
            run_tools([ToolCommand(p.argv, p.stdout_path, p.stderr_path, env=self.tool_env(ctx),
                                   host=p.slot.client) for p in processes],
                      ctx.timeout_seconds, f"{self.name} prefill", abort=ctx.abort)
        else:
            try:
                run_fio(processes, ctx, what, self.tool_env(ctx), f"{self.name} {what}")
            finally:
                if logs:
                    self._fetch_logs(ctx)
        if what == "precondition":
            result = result_of_processes(self.name, what, [(p.stdout_path, p.stderr_path)
                                                           for p in processes], ctx.step_dir)
            (ctx.step_dir / "precondition.json").write_text(
                json.dumps(result.to_dict(), indent=2, default=str))
        return [path for p in processes for path in (p.stdout_path, p.stderr_path)]

    def _fetch_logs(self, ctx: BenchContext) -> None:
        """Copy the remote clients' fio logs into the step dir (one tar stream per client;
        only regular files named like fio logs are taken) and remove them there."""
        for client, remote in list(self._remote_log_dirs):
            try:
                done = client.exec().run(["tar", "-C", remote, "-cf", "-", "."],
                                         timeout=FETCH_SECONDS)
            except HostExecError as exc:
                raise BenchmarkError(f"{self.name}: fetching fio logs from {client.name}: "
                                     f"{exc}") from exc
            with tarfile.open(fileobj=io.BytesIO(done.stdout), mode="r:") as tar:
                for member in tar.getmembers():
                    name = Path(member.name).name
                    if not member.isfile() or not LOG_NAME.match(name) or "/" in name:
                        continue
                    data = tar.extractfile(member)
                    if data is not None:
                        (ctx.step_dir / name).write_bytes(data.read())
            self._remove_remote(client, remote)

    def _remove_remote(self, client: Client, remote: str) -> None:
        try:
            client.exec().run(["rm", "-rf", "--one-file-system", remote], timeout=FETCH_SECONDS,
                              check=False)
        except HostExecError:
            return  # said by the cleanup's own attempt
        if (client, remote) in self._remote_log_dirs:
            self._remote_log_dirs.remove((client, remote))

    # -- results -----------------------------------------------------------------------------
    def parse(self, mode: str, ctx: BenchContext) -> BenchResult:
        result = self._parse_slots(mode, ctx, self.slots(ctx))
        series = (step_series(ctx.step_dir, mode, int(self.settings["log_avg_msec"]))
                  if self.logs_wanted(self.settings) else None)
        if series is not None:
            result.extra["time_series"] = {"points": len(series.times), "jobs": series.jobs,
                                           "interval_ms": series.interval_ms,
                                           "mean_iops": series.mean_iops(),
                                           "skipped_lines": series.skipped_lines}
        return result

    def _parse_slots(self, mode: str, ctx: BenchContext, slots: Sequence[Slot]) -> BenchResult:
        result = result_of_processes(self.name, mode, [self.slot_paths(mode, ctx, s)
                                                       for s in slots], ctx.step_dir)
        if self.endpoint is not None:
            result.extra["endpoint"] = {"name": self.endpoint.name,
                                        "driver": self.endpoint.driver,
                                        "endpoints_per_client": len(
                                            {s.index for s in slots}),
                                        "iodepths": [d for _e, d in self.endpoints_of(
                                            self.client(slots[0]), self.settings)]
                                        if slots and self.driver is not None else []}
        return result

    def parse_clients(self, mode: str, ctx: BenchContext) -> dict[str, BenchResult]:
        if not ctx.clients:
            return {}
        slots = self.slots(ctx)
        return {client.name: self._parse_slots(mode, ctx, [s for s in slots
                                                           if s.client is client])
                for client in ctx.clients}

    def cleanup(self, ctx: BenchContext) -> None:
        problems = []
        for client, remote in list(self._remote_log_dirs):
            self._remove_remote(client, remote)
            if (client, remote) in self._remote_log_dirs:
                problems.append(f"{remote} on {client.name} not removed")
        if self.driver is not None:
            problems += self.driver.remove()
        if problems:
            raise BenchmarkError(f"{self.name} cleanup: " + " | ".join(problems))
