"""Adaptive repetition: when has a step been repeated often enough?"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cephscope.runner.search.settings import AdaptiveIterations
from cephscope.runner.stats import summarize


@dataclass(frozen=True)
class Decision:
    done: bool
    reason: str  # "ci" (interval tight enough), "max" (gave up, interval wider), "more"
    n: int
    rel_ci_half_width: float | None


def decide(values: Sequence[float], rule: AdaptiveIterations) -> Decision:
    """Stop when n >= min and the 95 % CI half-width is within rule.ci of the mean, or at max.

    A step never stops with a wider interval than asked unless it reached `max` (and then the
    reason says so)."""
    n = len(values)
    rel = summarize(values).rel_ci_half_width if n >= 2 else None
    if n >= rule.min and rel is not None and rel <= rule.ci:
        return Decision(True, "ci", n, rel)
    if n >= rule.max:
        return Decision(True, "max", n, rel)
    return Decision(False, "more", n, rel)
