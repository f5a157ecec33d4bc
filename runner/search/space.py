"""The candidates of a search: every combination of the sweep's axes, and what a change costs.

A candidate is one configuration (one value per axis). Axes whose values need an OSD restart
make a change between candidates expensive; `restart_key` is what candidates must share to run
one after the other without a restart.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Candidate = tuple[tuple[str, Any], ...]  # ((axis, value), ...) in the space's axis order


@dataclass(frozen=True)
class Space:
    axes: tuple[tuple[str, tuple[Any, ...]], ...]  # (axis, values) in spec order
    restart_axes: frozenset[str] = frozenset()

    @classmethod
    def of(cls, axes: Mapping[str, Sequence[Any]], restart_axes: Iterable[str] = ()) -> Space:
        return cls(tuple((a, tuple(v)) for a, v in axes.items()), frozenset(restart_axes))

    def candidates(self) -> list[Candidate]:
        names = [a for a, _ in self.axes]
        return [tuple(zip(names, combo, strict=True))
                for combo in itertools.product(*(v for _, v in self.axes))]

    def __len__(self) -> int:
        n = 1
        for _, values in self.axes:
            n *= len(values)
        return n

    def restart_key(self, candidate: Candidate) -> tuple[Any, ...]:
        return tuple(v for a, v in candidate if a in self.restart_axes)

    def group_by_restart(self, candidates: Sequence[Candidate],
                         first_key: tuple[Any, ...] | None = None) -> list[list[Candidate]]:
        """Candidates sharing restart-only values, one group each, in first-seen order; the
        group whose key is `first_key` (the cluster's current values) goes first."""
        groups: dict[tuple[Any, ...], list[Candidate]] = {}
        for c in candidates:
            groups.setdefault(self.restart_key(c), []).append(c)
        keys = list(groups)
        if first_key is not None and first_key in groups:
            keys.remove(first_key)
            keys.insert(0, first_key)
        return [groups[k] for k in keys]

    def covering_subset(self, k: int, seed: int) -> list[Candidate]:
        """k candidates that spread over every axis: each pick is a candidate whose values
        have been picked least so far (ties broken by a seeded shuffle), in space order."""
        pool = self.candidates()
        random.Random(seed).shuffle(pool)
        used: dict[tuple[str, Any], int] = {}
        chosen: list[Candidate] = []
        for _ in range(min(k, len(pool))):
            pick = min(pool, key=lambda c: sum(used.get(av, 0) for av in c))
            pool.remove(pick)
            chosen.append(pick)
            for av in pick:
                used[av] = used.get(av, 0) + 1
        order = self.candidates()
        return sorted(chosen, key=order.index)

    def restarts_for(self, order: Sequence[Candidate], start_key: tuple[Any, ...] | None) -> int:
        restarts, key = 0, start_key
        for c in order:
            k = self.restart_key(c)
            if self.restart_axes and k != key:
                restarts += 1
            key = k
        return restarts


def label(candidate: Candidate) -> str:
    return " ".join(f"{a.rsplit('.', 1)[-1]}={v}" for a, v in candidate)


def as_dict(candidate: Candidate) -> dict[str, Any]:
    return dict(candidate)


def from_axes(axes: Mapping[str, Any], order: Sequence[str]) -> Candidate:
    return tuple((a, axes[a]) for a in order)
