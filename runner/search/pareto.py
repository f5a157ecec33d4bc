"""Pareto fronts across objectives (e.g. read IOPS at 256 in flight vs single-op write latency)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from cephscope.runner.search.settings import Objective

K = TypeVar("K", bound=Hashable)


def dominates(a: Sequence[float], b: Sequence[float], objectives: Sequence[Objective]) -> bool:
    """a is at least as good as b in every objective and better in one."""
    at_least = all(x == y or o.better(x, y) for x, y, o in zip(a, b, objectives, strict=True))
    better = any(o.better(x, y) for x, y, o in zip(a, b, objectives, strict=True))
    return at_least and better


def pareto_front(points: Mapping[K, Sequence[float]], objectives: Sequence[Objective]) -> list[K]:
    """The non-dominated keys, in the order of the first objective (best first)."""
    front = [k for k, p in points.items()
             if not any(dominates(q, p, objectives) for j, q in points.items() if j != k)]
    first = objectives[0]
    return sorted(front, key=lambda k: -first.sign() * points[k][0])
