"""Small stand-ins shared by the runner unit tests (no Ceph needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from cephscope.runner.benchmarks.base import BenchContext, Benchmark, BenchResult, LiveSample


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
