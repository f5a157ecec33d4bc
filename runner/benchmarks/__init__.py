"""Benchmarks with one lifecycle (see `base`). `BENCHMARKS` maps CBT names to classes."""

from __future__ import annotations

from collections.abc import Mapping

from cephscope.runner.benchmarks.base import Benchmark
from cephscope.runner.benchmarks.fio import Fio
from cephscope.runner.benchmarks.librbdfio import LibrbdFio
from cephscope.runner.benchmarks.radosbench import RadosBench
from cephscope.runner.benchmarks.rawfio import RawFio

BENCHMARKS: Mapping[str, type[Benchmark]] = {
    RadosBench.name: RadosBench,
    LibrbdFio.name: LibrbdFio,
    Fio.name: Fio,
    RawFio.name: RawFio,
}

__all__ = ["BENCHMARKS", "Benchmark", "Fio", "LibrbdFio", "RadosBench", "RawFio"]
