"""Known answers for cephscope.runner.stats: closed forms of Student's t for df 1 and 2, tabulated
quantiles, and Student's sleep data (R: t.test(extra ~ group, data = sleep))."""

import math

import pytest

from cephscope.runner import stats

# Student (1908) / R's `sleep` data set: extra hours of sleep with two drugs.
SLEEP_GROUP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_GROUP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


@pytest.mark.parametrize("x", [-30.0, -2.5, -0.3, 0.0, 0.7, 4.0, 100.0])
def test_t_cdf_matches_closed_forms(x):
    # df=1 is the Cauchy distribution; df=2 has cdf 1/2 + x / (2 sqrt(2 + x^2)).
    assert stats.t_cdf(x, 1) == pytest.approx(0.5 + math.atan(x) / math.pi, abs=1e-12)
    assert stats.t_cdf(x, 2) == pytest.approx(0.5 + x / (2 * math.sqrt(2 + x * x)), abs=1e-12)


@pytest.mark.parametrize(("df", "quantile"), [
    (1, 12.706204736), (2, 4.302652730), (5, 2.570581836), (9, 2.262157163),
    (10, 2.228138852), (30, 2.042272456), (1e7, 1.959964),
])
def test_t_ppf_matches_tables(df, quantile):
    assert stats.t_ppf(0.975, df) == pytest.approx(quantile, rel=1e-6)
    assert stats.t_ppf(0.025, df) == pytest.approx(-quantile, rel=1e-6)


def test_t_ppf_inverts_cdf_for_fractional_df():
    for q in (0.6, 0.9, 0.995, 0.9995):
        assert stats.t_cdf(stats.t_ppf(q, 17.776), 17.776) == pytest.approx(q, abs=1e-12)


def test_summary_of_sleep_group_1():
    s = stats.summarize(SLEEP_GROUP_1)
    assert s.n == 10
    assert s.mean == pytest.approx(0.75)
    assert s.sd == pytest.approx(1.789010, rel=1e-6)
    assert s.cv == pytest.approx(1.789010 / 0.75, rel=1e-6)
    # R: t.test(sleep$extra[1:10]) -> 95 percent confidence interval -0.5297804 2.0297804
    assert s.ci_low == pytest.approx(-0.5297804, abs=1e-7)
    assert s.ci_high == pytest.approx(2.0297804, abs=1e-7)
    assert s.ci_half_width == pytest.approx(1.2797804, abs=1e-7)
    assert s.rel_ci_half_width == pytest.approx(1.2797804 / 0.75, rel=1e-6)


def test_summary_confidence_level_and_small_samples():
    wide = stats.summarize([10.0, 12.0, 11.0], confidence=0.99)
    narrow = stats.summarize([10.0, 12.0, 11.0], confidence=0.90)
    # sd = 1, n = 3: half-width = t(df=2) / sqrt(3)
    assert wide.ci_half_width == pytest.approx(9.924843 / math.sqrt(3), rel=1e-6)
    assert narrow.ci_half_width == pytest.approx(2.919986 / math.sqrt(3), rel=1e-6)
    one = stats.summarize([42.0])
    assert (one.n, one.mean) == (1, 42.0)
    assert one.sd is None and one.ci_low is None and one.cv is None and one.rel_ci_half_width is None
    zero_mean = stats.summarize([-1.0, 1.0])
    assert zero_mean.cv is None and zero_mean.rel_ci_half_width is None and zero_mean.sd == 2 ** 0.5
    with pytest.raises(stats.NotEnoughSamples):
        stats.summarize([])
    with pytest.raises(ValueError, match="finite"):
        stats.summarize([1.0, float("nan")])


def test_welch_on_sleep_data():
    # R: t.test(extra ~ group, data = sleep): t = -1.8608, df = 17.776, p-value = 0.07939
    w = stats.welch(SLEEP_GROUP_2, SLEEP_GROUP_1)
    assert w.t == pytest.approx(-1.860813, rel=1e-5)
    assert w.df == pytest.approx(17.77647, rel=1e-5)
    assert w.p == pytest.approx(0.07939414, rel=1e-5)
    assert w.diff == pytest.approx(-1.58)
    assert not w.significant
    assert stats.welch(SLEEP_GROUP_2, SLEEP_GROUP_1, alpha=0.1).significant
    # symmetric: swapping the sides flips t and diff, keeps df and p
    back = stats.welch(SLEEP_GROUP_1, SLEEP_GROUP_2)
    assert (back.t, back.df, back.p) == pytest.approx((-w.t, w.df, w.p))


def test_welch_unequal_variances():
    # Hand-checked: a = (20, 22, 24): var 4; b = (30, 40, 50, 60): var 166.67
    w = stats.welch([20, 22, 24], [30, 40, 50, 60])
    se2 = 4 / 3 + (500 / 3) / 4
    assert w.t == pytest.approx(23 / math.sqrt(se2))
    assert w.df == pytest.approx(se2 ** 2 / ((4 / 3) ** 2 / 2 + ((500 / 3) / 4) ** 2 / 3))
    assert w.p == pytest.approx(2 * stats.t_cdf(-w.t, w.df))
    assert w.significant


def test_welch_refuses_one_sample_and_handles_zero_spread():
    with pytest.raises(stats.NotEnoughSamples, match="cannot tell noise from change"):
        stats.welch([1.0], [2.0, 3.0])
    same = stats.welch([5.0, 5.0], [5.0, 5.0, 5.0])
    assert (same.t, same.p, same.significant) == (0.0, 1.0, False)
    apart = stats.welch([5.0, 5.0], [6.0, 6.0])
    assert apart.t == math.inf and apart.p == 0.0 and apart.significant
