"""Statistics over repeated measurements of one step (iterations): summaries and Welch's t-test.

Standard library only; Student's t distribution is computed from the regularized incomplete beta
function (continued fraction), accurate to ~1e-10, for any real degrees of freedom > 0.

API (everything else in this module is private):

- ``summarize(values, confidence=0.95) -> Summary``: n, mean, sd (sample, n-1), cv (sd/|mean|),
  ci_low / ci_high (Student-t confidence interval of the mean), ci_half_width and
  rel_ci_half_width (half-width / |mean|). Figures that need n >= 2 (sd, cv, the interval) are
  None for a single value; cv and rel_ci_half_width are None when the mean is 0.
- ``welch(a, b, alpha=0.05) -> Welch``: Welch's unequal-variance t-test of mean(b) - mean(a):
  t, df (Welch-Satterthwaite), two-sided p, diff, and ``significant`` (p < alpha). Raises
  ``NotEnoughSamples`` (a ValueError) when either side has fewer than 2 values: one sample per
  side cannot tell noise from change.
- ``t_cdf(x, df)`` and ``t_ppf(q, df)``: Student's t CDF and its inverse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["NotEnoughSamples", "Summary", "Welch", "summarize", "t_cdf", "t_ppf", "welch"]


class NotEnoughSamples(ValueError):
    """A statistic needs more values than were given."""


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = tiny if abs(d) < tiny else d
    d = 1.0 / d
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with df degrees of freedom (df > 0, may be fractional)."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if math.isinf(x):
        return 1.0 if x > 0 else 0.0
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + x * x))  # P(T > |x|)
    return 1.0 - tail if x > 0 else tail


def t_ppf(q: float, df: float) -> float:
    """The x with t_cdf(x, df) == q (0 < q < 1), by bisection on the CDF."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < q:
        low, high = high, high * 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if t_cdf(mid, df) < q:
            low = mid
        else:
            high = mid
        if high - low <= 1e-13 * max(1.0, high):
            break
    return (low + high) / 2.0


@dataclass(frozen=True)
class Summary:
    """Summary of one metric over n repetitions; see the module docstring."""
    n: int
    mean: float
    sd: float | None
    cv: float | None
    ci_low: float | None
    ci_high: float | None
    ci_half_width: float | None
    rel_ci_half_width: float | None
    confidence: float


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, var


def summarize(values: Sequence[float], confidence: float = 0.95) -> Summary:
    """n, mean, sd, cv and the Student-t confidence interval of the mean of ``values``."""
    values = [float(v) for v in values]
    if not values:
        raise NotEnoughSamples("no values to summarize")
    if any(math.isnan(v) or math.isinf(v) for v in values):
        raise ValueError(f"values must be finite numbers, got {values}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = len(values)
    mean, var = _mean_var(values)
    if n < 2:
        return Summary(n, mean, None, None, None, None, None, None, confidence)
    sd = math.sqrt(var)
    half = t_ppf(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    cv = sd / abs(mean) if mean else None
    rel = half / abs(mean) if mean else None
    return Summary(n, mean, sd, cv, mean - half, mean + half, half, rel, confidence)


@dataclass(frozen=True)
class Welch:
    """Welch's t-test of mean(b) - mean(a); see the module docstring."""
    t: float
    df: float
    p: float
    diff: float
    alpha: float
    significant: bool


def welch(a: Sequence[float], b: Sequence[float], alpha: float = 0.05) -> Welch:
    """Welch's unequal-variance t-test, two-sided, of b against a."""
    if len(a) < 2 or len(b) < 2:
        raise NotEnoughSamples(
            f"Welch's t-test needs at least 2 values per side, got {len(a)} and {len(b)}: "
            "one sample per side cannot tell noise from change")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    mean_a, var_a = _mean_var([float(v) for v in a])
    mean_b, var_b = _mean_var([float(v) for v in b])
    se2_a, se2_b = var_a / len(a), var_b / len(b)
    se2 = se2_a + se2_b
    diff = mean_b - mean_a
    if se2 == 0.0:
        # No spread on either side: any difference is exact, none is exactly none.
        t = 0.0 if diff == 0 else math.copysign(math.inf, diff)
        p = 1.0 if diff == 0 else 0.0
        return Welch(t, float(len(a) + len(b) - 2), p, diff, alpha, p < alpha)
    t = diff / math.sqrt(se2)
    df = se2 ** 2 / (se2_a ** 2 / (len(a) - 1) + se2_b ** 2 / (len(b) - 1))
    p = min(1.0, 2.0 * t_cdf(-abs(t), df))
    return Welch(t, df, p, diff, alpha, p < alpha)
