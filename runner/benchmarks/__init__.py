"""Benchmarks with one lifecycle (see `base`). `BENCHMARKS` maps CBT names to classes."""

from __future__ import annotations

from collections.abc import Mapping

from cephscope.runner.benchmarks.base import Benchmark
from cephscope.runner.benchmarks.fio import Fio
from cephscope.runner.benchmarks.getput import GetPut
from cephscope.runner.benchmarks.hsbench import HsBench
from cephscope.runner.benchmarks.librbdfio import LibrbdFio
from cephscope.runner.benchmarks.radosbench import RadosBench
from cephscope.runner.benchmarks.rawfio import RawFio
from cephscope.runner.benchmarks.swiftbench import SwiftBench

BENCHMARKS: Mapping[str, type[Benchmark]] = {
    RadosBench.name: RadosBench,
    LibrbdFio.name: LibrbdFio,
    Fio.name: Fio,
    RawFio.name: RawFio,
    SwiftBench.name: SwiftBench,
    HsBench.name: HsBench,
    GetPut.name: GetPut,
}

__all__ = ["BENCHMARKS", "Benchmark", "Fio", "GetPut", "HsBench", "LibrbdFio", "RadosBench",
           "RawFio", "SwiftBench"]
