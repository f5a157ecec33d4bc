"""fio with the rbd engine (CBT name `librbdfio`).

Parameters follow CBT's benchmark/librbdfio.py: `mode` (fio rw=), `op_size` (bytes or '4k'),
`iodepth` (per fio process), `numjobs`, `volumes` (CBT: `volumes_per_client`),
`procs_per_volume`, `vol_size` (MiB), `vol_object_size` (RBD object size: an order like 22,
bytes, or '4M'), `rwmixread`, `time`, `time_based`, `ramp`, `norandommap`,
`random_distribution`, `rate_iops`, `end_fsync`, `use_existing_volumes` + `rbdname`,
`prefill`, `cmd_path`. `pool_profile` / `poolname` are accepted for CBT files; the runner
decides the pool.

Volumes: unless `use_existing_volumes`, prepare() creates one image per volume
(`cephscope-<step>-<n>`, `rbd create --size --object-size`), so the object size can be a sweep
axis, and cleanup() removes them. Reads of never-written RBD extents are answered without
touching the OSDs' disks, so images are prefilled with 4 MiB sequential writes before any mode
that reads (`prefill: false` skips that, `prefill: true` forces it).

fio's JSON output and the processes streaming it: `fio_json`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from cephscope.runner.benchmarks.base import (
    BenchContext,
    Benchmark,
    BenchmarkError,
    BenchResult,
    Slot,
    client_slots,
)
from cephscope.runner.benchmarks.fio_json import (
    FIO_MODES,
    MIXED_MODES,
    READ_MODES,
    FioProcess,
    result_of_processes,
    run_fio,
)
from cephscope.runner.benchmarks.paramcheck import parse_size, positive, type_problems
from cephscope.runner.benchmarks.toolproc import ToolCommand, resolve_tool, run_quick, run_tools
from cephscope.runner.hostexec import HostExec

MIB = 1024 * 1024
PREFILL_BLOCK = 4 * MIB
STARTUP_SECONDS = 3.0
# a rough floor for prefill speed, only for estimates
PREFILL_BYTES_PER_SECOND = 100 * MIB


class LibrbdFio(Benchmark):
    name: ClassVar[str] = "librbdfio"
    pool_application: ClassVar[str] = "rbd"
    load_parameters: ClassVar[tuple[str, ...]] = (
        "iodepth", "numjobs", "procs_per_volume", "volumes", "volumes_per_client", "rate_iops")
    parameters: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "mode": (str,),
        "op_size": (int, str),
        "iodepth": (int,),
        "numjobs": (int,),
        "volumes": (int,),
        "volumes_per_client": (int,),
        "procs_per_volume": (int,),
        "vol_size": (int,),
        "vol_object_size": (int, str),
        "rwmixread": (int,),
        "time": (int, float),
        "time_based": (bool,),
        "ramp": (int, float),
        "norandommap": (bool,),
        "random_distribution": (str,),
        "rate_iops": (int,),
        "end_fsync": (int,),
        "use_existing_volumes": (bool,),
        "rbdname": (str,),
        "prefill": (bool,),
        "cmd_path": (str,),
        "pool_profile": (str,),
        "data_pool_profile": (str,),
        "poolname": (str,),
    }
    defaults: ClassVar[Mapping[str, Any]] = {
        "mode": "write",
        "op_size": 4 * MIB,
        "iodepth": 16,
        "numjobs": 1,
        "volumes": 1,
        "procs_per_volume": 1,
        "vol_size": 1024,
        "vol_object_size": 22,
        "rwmixread": 50,
        "time": 60,
        "time_based": True,
        "norandommap": False,
        "end_fsync": 0,
        "use_existing_volumes": False,
        "rbdname": "",
        "cmd_path": "fio",
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        given = {k: v for k, v in params.items() if v is not None}
        if "volumes_per_client" in given and "volumes" not in given:
            given["volumes"] = given["volumes_per_client"]
        self.settings: dict[str, Any] = {**self.defaults, **given}
        self._created_images: list[str] = []

    # -- spec side -------------------------------------------------------------------------
    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> list[str]:
        problems = type_problems(cls.name, params, cls.parameters)
        for key in ("iodepth", "numjobs", "volumes", "volumes_per_client", "procs_per_volume",
                    "vol_size", "time", "rate_iops"):
            problems += positive(cls.name, params, key)
        for key in ("ramp", "end_fsync"):
            problems += positive(cls.name, params, key, allow_zero=True)
        mode = params.get("mode")
        if isinstance(mode, str) and mode not in FIO_MODES:
            problems.append(f"{cls.name}: mode must be one of {', '.join(FIO_MODES)}, got {mode!r}")
        mix = params.get("rwmixread")
        if isinstance(mix, int) and not isinstance(mix, bool) and not 0 <= mix <= 100:
            problems.append(f"{cls.name}: rwmixread must be 0..100, got {mix!r}")
        if isinstance(params.get("op_size"), int | str) and not isinstance(params.get("op_size"), bool):
            try:
                if parse_size(params["op_size"]) <= 0:
                    problems.append(f"{cls.name}: op_size must be > 0, got {params['op_size']!r}")
            except ValueError as exc:
                problems.append(f"{cls.name}: op_size: {exc}")
        if "vol_object_size" in params and isinstance(params["vol_object_size"], int | str):
            try:
                object_size_bytes(params["vol_object_size"])
            except ValueError as exc:
                problems.append(f"{cls.name}: vol_object_size: {exc}")
        if params.get("use_existing_volumes") is True and not params.get("rbdname"):
            problems.append(f"{cls.name}: use_existing_volumes needs rbdname")
        for key in ("rbdname", "cmd_path", "random_distribution"):
            value = params.get(key)
            if isinstance(value, str) and value and not re.fullmatch(r"[A-Za-z0-9_.:/-]+", value):
                problems.append(f"{cls.name}: {key} {value!r} may hold only letters, digits, _ . : / -")
        return problems

    @classmethod
    def estimated_seconds(cls, params: Mapping[str, Any]) -> float:
        bench = cls(params)
        seconds = float(bench.settings["time"]) + float(bench.settings.get("ramp") or 0)
        seconds += STARTUP_SECONDS
        if bench.needs_prefill():
            size = int(bench.settings["vol_size"]) * MIB * int(bench.settings["volumes"])
            seconds += size / PREFILL_BYTES_PER_SECOND + STARTUP_SECONDS
        return seconds

    def modes(self) -> Sequence[str]:
        return [str(self.settings["mode"])]

    def needs_prefill(self) -> bool:
        explicit = self.settings.get("prefill")
        if explicit is not None:
            return bool(explicit)
        return not self.settings["use_existing_volumes"] and self.settings["mode"] in READ_MODES + MIXED_MODES

    # -- lifecycle -------------------------------------------------------------------------
    def client_images(self, ctx: BenchContext, client: HostExec | None) -> list[str]:
        """The volumes one client writes: its own, so clients never share an image."""
        volumes = int(self.settings["volumes"])
        if self.settings["use_existing_volumes"]:
            base = str(self.settings["rbdname"])
            return [base] if volumes == 1 else [f"{base}-{i}" for i in range(volumes)]
        tag = "" if client is None else f"{client.name}-"
        return [f"cephscope-{ctx.step_id}-{tag}{i}" for i in range(volumes)]

    def image_names(self, ctx: BenchContext) -> list[str]:
        names: list[str] = []
        for client in list(ctx.clients) or [None]:
            names += [n for n in self.client_images(ctx, client) if n not in names]
        return names

    def tool_env(self, ctx: BenchContext) -> dict[str, str]:
        return ctx.cluster.fio_env(ctx.env)

    def _rbd(self, ctx: BenchContext, *args: str) -> list[str]:
        return [resolve_tool("rbd"), *ctx.cluster.common_args(), *args]

    def prepare(self, ctx: BenchContext) -> None:
        ctx.step_dir.mkdir(parents=True, exist_ok=True)
        images = self.image_names(ctx)
        timeout = min(ctx.timeout_seconds, 300)
        if self.settings["use_existing_volumes"]:
            for image in images:
                spec = f"{ctx.pool}/{image}"
                info = run_quick(self._rbd(ctx, "info", spec), timeout, "librbdfio prepare", ctx.env)
                if info.returncode != 0:
                    reason = info.stderr.strip()[-500:]
                    raise BenchmarkError(f"librbdfio: existing volume {spec} not usable: {reason}")
        else:
            object_size = object_size_bytes(self.settings["vol_object_size"])
            for image in images:
                spec = f"{ctx.pool}/{image}"
                # a leftover of an interrupted attempt of this same step: start clean
                run_quick(self._rbd(ctx, "rm", "--no-progress", spec), timeout, "librbdfio prepare", ctx.env)
                data_pool = ["--data-pool", ctx.data_pool] if ctx.data_pool else []
                created = run_quick(
                    self._rbd(ctx, "create", "--size", f"{int(self.settings['vol_size'])}M",
                              "--object-size", str(object_size), *data_pool, spec),
                    timeout, "librbdfio prepare", ctx.env,
                )
                if created.returncode != 0:
                    reason = created.stderr.strip()[-500:]
                    raise BenchmarkError(f"librbdfio: rbd create {spec} failed: {reason}")
                self._created_images.append(image)
        if self.needs_prefill():
            self._prefill(ctx, images)

    def _prefill(self, ctx: BenchContext, images: Sequence[str]) -> None:
        fio = resolve_tool(str(self.settings["cmd_path"]))
        commands = []
        for index, image in enumerate(images):
            argv = [
                *ctx.cluster.tool_prefix, fio, f"--name=prefill-{index}", "--ioengine=rbd",
                f"--clientname={ctx.cluster.client_id}",
                f"--pool={ctx.pool}", f"--rbdname={image}", "--invalidate=0", "--rw=write",
                f"--bs={PREFILL_BLOCK}", "--iodepth=16", "--direct=1",
                f"--size={int(self.settings['vol_size'])}M", "--output-format=json",
            ]
            commands.append(
                ToolCommand(argv, ctx.step_dir / f"fio-prefill.{index}.json",
                            ctx.step_dir / f"fio-prefill.{index}.stderr", env=self.tool_env(ctx))
            )
        run_tools(commands, ctx.timeout_seconds, "librbdfio prefill")

    def argv(self, ctx: BenchContext, fio: str, image: str, name: str, local: bool = True) -> list[str]:
        s = self.settings
        argv = [
            # The cluster's own client tools (a dev cluster release's root filesystem) run here only.
            *(ctx.cluster.tool_prefix if local else ()), fio, f"--name={name}", "--ioengine=rbd",
            f"--clientname={ctx.cluster.client_id}",
            f"--pool={ctx.pool}", f"--rbdname={image}", "--invalidate=0", f"--rw={s['mode']}",
            f"--bs={parse_size(s['op_size'])}", f"--iodepth={int(s['iodepth'])}",
            f"--numjobs={int(s['numjobs'])}", "--direct=1", "--group_reporting",
            "--lat_percentiles=1", "--output-format=json+", "--status-interval=1",
            f"--runtime={s['time']:g}",
        ]
        if s["time_based"]:
            argv.append("--time_based")
        if s.get("ramp"):
            argv.append(f"--ramp_time={s['ramp']:g}")
        if s["mode"] in MIXED_MODES:
            argv.append(f"--rwmixread={int(s['rwmixread'])}")
        if s["norandommap"]:
            argv.append("--norandommap")
        if s.get("random_distribution"):
            argv.append(f"--random_distribution={s['random_distribution']}")
        if s.get("rate_iops"):
            argv.append(f"--rate_iops={int(s['rate_iops'])}")
        if s["end_fsync"]:
            argv.append(f"--end_fsync={int(s['end_fsync'])}")
        return argv

    def slots(self, ctx: BenchContext) -> list[Slot]:
        return client_slots(ctx, int(self.settings["volumes"]) * int(self.settings["procs_per_volume"]))

    def slot_paths(self, mode: str, ctx: BenchContext, slot: Slot) -> tuple[Path, Path]:
        base = f"fio-{mode}.{slot.label}{slot.index}"
        return ctx.step_dir / f"{base}.json", ctx.step_dir / f"{base}.stderr"

    def output_paths(self, mode: str, ctx: BenchContext) -> list[tuple[Path, Path]]:
        return [self.slot_paths(mode, ctx, slot) for slot in self.slots(ctx)]

    def run(self, mode: str, ctx: BenchContext) -> list[Path]:
        local_fio = resolve_tool(str(self.settings["cmd_path"]))
        processes = []
        for slot in self.slots(ctx):
            stdout_path, stderr_path = self.slot_paths(mode, ctx, slot)
            images = self.client_images(ctx, slot.client)
            image = images[slot.index % len(images)]
            # a client resolves the tool on its own PATH
            fio = local_fio if slot.client is None else str(self.settings["cmd_path"])
            argv = self.argv(ctx, fio, image, f"cephscope-{slot.index}", local=slot.client is None)
            processes.append(FioProcess(slot, argv, stdout_path, stderr_path))
        run_fio(processes, ctx, mode, self.tool_env(ctx), f"librbdfio {mode}")
        return [p for each in processes for p in (each.stdout_path, each.stderr_path)]

    def parse(self, mode: str, ctx: BenchContext) -> BenchResult:
        return self._parse_slots(mode, ctx, self.slots(ctx))

    def _parse_slots(self, mode: str, ctx: BenchContext, slots: Sequence[Slot]) -> BenchResult:
        return result_of_processes(self.name, mode,
                                   [self.slot_paths(mode, ctx, slot) for slot in slots],
                                   ctx.step_dir)

    def parse_clients(self, mode: str, ctx: BenchContext) -> dict[str, BenchResult]:
        if not ctx.clients:
            return {}
        slots = self.slots(ctx)
        return {client.name: self._parse_slots(mode, ctx, [s for s in slots if s.client is client])
                for client in ctx.clients}

    def cleanup(self, ctx: BenchContext) -> None:
        errors = []
        for image in list(self._created_images):
            spec = f"{ctx.pool}/{image}"
            done = run_quick(self._rbd(ctx, "rm", "--no-progress", spec),
                             min(ctx.timeout_seconds, 600), "librbdfio cleanup", ctx.env)
            if done.returncode == 0 or "No such file" in done.stderr:
                self._created_images.remove(image)
            else:
                errors.append(f"{spec}: {done.stderr.strip()[-300:]}")
        if errors:
            raise BenchmarkError("librbdfio cleanup failed: " + " | ".join(errors))


def object_size_bytes(value: Any) -> int:
    """RBD object size from an order (12..25, as CBT's vol_object_size), bytes, or '4M'."""
    if isinstance(value, bool):
        raise ValueError(f"expected an order or a size, got {value!r}")
    size = 1 << value if isinstance(value, int) and 0 <= value <= 32 else parse_size(value)
    if size < 4096 or size > 32 * MIB or size & (size - 1):
        raise ValueError(f"RBD object size must be a power of two from 4K to 32M, got {value!r}")
    return size


