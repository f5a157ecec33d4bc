"""CBT's `rawfio`: fio on block devices or files the spec names (`block_devices`), with no Ceph
in the path: a baseline of the disks before Ceph goes on them.

Parameters as CBT reads them (benchmark/rawfio.py): `block_devices` (comma-separated paths; a
list is an axis), `concurrent_procs` (fio processes per client, round robin over the paths;
default one per path), `time` (300), `ramp` (0), `startdelay`, `rate_iops`, `iodepth` (16),
`direct` (1), `numjobs`, `mode`, `rwmixread`, `ioengine` (libaio), `op_size`, `vol_size` (MiB,
65536; fio writes 90 % of it, CBT's rule), `fio_cmd` (the fio binary), `time_based`, and
`log_avg_msec` (fio's own time series, as the fio benchmark). Each path is written
sequentially first (CBT's initialisation; `prefill: false` skips it). Which paths are refused:
runner/endpoints/raw.py. Runs on every client, each on the same paths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from cephscope.runner.benchmarks.base import BenchContext, BenchmarkError, PreflightAccess
from cephscope.runner.benchmarks.fio import Fio
from cephscope.runner.benchmarks.paramcheck import type_problems
from cephscope.runner.endpoints.settings import EndpointSpec
from cephscope.runner.endpoints.undo import UndoLog

# fio writes this share of vol_size (CBT's rule)
VOLUME_SHARE = 0.9
PATH = r"/[A-Za-z0-9_.@+/-]+"


def device_paths(value: Any) -> list[str]:
    return [p.strip() for p in str(value).split(",") if p.strip()]


def _seconds(value: Any) -> float | None:
    """CBT writes times as numbers or strings ('0')."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class RawFio(Fio):
    name: ClassVar[str] = "rawfio"
    pool_application: ClassVar[str] = "rados"
    parameters: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "block_devices": (str,),
        "concurrent_procs": (int,),
        "time": (int, float, str),
        "ramp": (int, float, str),
        "startdelay": (int, float),
        "rate_iops": (int,),
        "iodepth": (int,),
        "direct": (int, bool),
        "numjobs": (int,),
        "mode": (str,),
        "rwmixread": (int,),
        "ioengine": (str,),
        "op_size": (int, str),
        "vol_size": (int,),
        "fio_cmd": (str,),
        "time_based": (bool,),
        "prefill": (bool,),
        "log_avg_msec": (int,),
        "log_iops": (bool,),
        "log_bw": (bool,),
        "log_lat": (bool,),
        "pool_profile": (str,),
    }
    raw_defaults: ClassVar[Mapping[str, Any]] = {
        "time": 300, "ramp": 0, "iodepth": 16, "direct": 1, "numjobs": 1, "mode": "write",
        "rwmixread": 50, "ioengine": "libaio", "op_size": 4194304, "vol_size": 65536,
        "fio_cmd": "fio", "time_based": False, "prefill": True,
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        raw = {**self.raw_defaults, **{k: v for k, v in params.items() if v is not None}}
        paths = device_paths(raw.get("block_devices", ""))
        settings = {
            "mode": raw["mode"], "rwmixread": raw["rwmixread"], "op_size": raw["op_size"],
            "iodepth": raw["iodepth"], "numjobs": raw["numjobs"], "direct": raw["direct"],
            "ioengine": raw["ioengine"], "cmd_path": raw["fio_cmd"],
            "size": max(1, int(int(raw["vol_size"]) * VOLUME_SHARE)),
            "time": _seconds(raw["time"]) or None, "ramp": _seconds(raw["ramp"]) or None,
            "time_based": raw["time_based"], "prefill": raw["prefill"],
            **{k: raw[k] for k in ("rate_iops", "log_avg_msec") if k in raw},
        }
        if raw.get("startdelay"):
            settings["startdelay"] = raw["startdelay"]
        if not any(raw.get(k, True) for k in ("log_iops", "log_bw", "log_lat")):
            settings["logging"] = False
        super().__init__(settings)
        self.paths = paths
        self.endpoint = EndpointSpec(self.name, "raw",
                                     int(raw.get("concurrent_procs") or max(1, len(paths))),
                                     int(raw["vol_size"]))

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> list[str]:
        n = cls.name
        problems = type_problems(n, params, cls.parameters)
        if problems:
            return problems
        paths = device_paths(params.get("block_devices", ""))
        if not paths:
            problems.append(f"{n}: block_devices missing (the devices or files fio runs on)")
        for path in paths:
            if not re.fullmatch(PATH, path):
                problems.append(f"{n}: block_devices {path!r} is not an absolute path")
        for key in ("time", "ramp"):
            if key in params and (_seconds(params[key]) is None or _seconds(params[key]) < 0):
                problems.append(f"{n}: {key} must be seconds, got {params[key]!r}")
        fio_cmd = params.get("fio_cmd")
        if isinstance(fio_cmd, str) and not re.fullmatch(r"[A-Za-z0-9_./-]+", fio_cmd):
            problems.append(f"{n}: fio_cmd {fio_cmd!r}: the path of fio (cephscope runs it "
                            "as its own user, no sudo or shell)")
        for key in ("concurrent_procs", "vol_size"):
            value = params.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value < 1:
                problems.append(f"{n}: parameter {key!r} must be > 0, got {value!r}")
        if problems:
            return problems
        bench = cls(params)
        return [p.replace("fio:", f"{n}:", 1)
                for p in Fio._check({k: v for k, v in bench.settings.items()
                                     if k not in ("startdelay",)})]

    @classmethod
    def needs_pool(cls, params: Mapping[str, Any]) -> bool:
        return False

    @classmethod
    def application(cls, params: Mapping[str, Any]) -> str:
        return cls.pool_application

    @classmethod
    def preflight(cls, steps: Sequence[Mapping[str, Any]], access: PreflightAccess) -> list[str]:
        from cephscope.runner.endpoints.raw import target_problems

        paths = [p for params in steps for p in device_paths(params.get("block_devices", ""))]
        return target_problems(paths, access)

    def prepare(self, ctx: BenchContext) -> None:
        # the drivers import the benchmarks' base module: imported when used, not with this one
        from cephscope.runner.endpoints.base import EndpointSite
        from cephscope.runner.endpoints.raw import RawTargets

        if not self.paths:
            raise BenchmarkError(f"{self.name}: no block_devices")
        ctx.step_dir.mkdir(parents=True, exist_ok=True)
        undo = ctx.undo if isinstance(ctx.undo, UndoLog) else UndoLog()
        self.site = EndpointSite(ctx, self.endpoint, undo, log=ctx.log)
        self.driver = RawTargets(self.site, self.paths)
        self.driver.create()
        if self.settings["prefill"]:
            # CBT's initialisation: the whole volume written once, in op_size blocks
            prefill = {**self._prefill_settings(), "bs": None, "op_size": self.settings["op_size"]}
            self._run_each("prefill", ctx, prefill, logs=False)
