"""t-intervals, SDs, verdicts and Welch tests against hand computations and scipy."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from audit.analysis.compare import (
    CONSISTENT,
    DISCREPANT_1,
    DISCREPANT_5,
    NO_REFERENCE,
    TOO_FEW,
    CellSummary,
    summarise,
    verdict,
)
from audit.analysis.stats import t_interval, welch

# values 0.70 0.72 0.75 0.71 0.74, n = 5
#   mean = 3.62 / 5 = 0.724
#   deviations -0.024 -0.004 0.026 -0.014 0.016; squares sum to
#   0.000576 + 0.000016 + 0.000676 + 0.000196 + 0.000256 = 0.00172
#   sample SD (ddof 1) = sqrt(0.00172 / 4) = 0.0207364..; population SD = sqrt(0.00172 / 5) = 0.0185472..
#   sem = 0.0207364 / sqrt(5) = 0.0092736..
#   t.ppf(0.975, 4) = 2.776445..  -> half95 = 0.0257477..
#   t.ppf(0.995, 4) = 4.604095..  -> half99 = 0.0426966..
SMALL = [0.70, 0.72, 0.75, 0.71, 0.74]
MEAN = 0.724
SD1 = math.sqrt(0.00172 / 4)
SD0 = math.sqrt(0.00172 / 5)
SEM = SD1 / math.sqrt(5)
HALF95 = stats.t.ppf(0.975, 4) * SEM
HALF99 = stats.t.ppf(0.995, 4) * SEM


def test_hand_numbers_are_what_the_comment_says():
    assert SD1 == pytest.approx(0.0207364, abs=1e-7)
    assert HALF95 == pytest.approx(0.0257477, abs=1e-7)
    assert HALF99 == pytest.approx(0.0426966, abs=1e-7)


def test_t_interval_hand_computation():
    lo, hi = t_interval(SMALL, 0.95)
    assert lo == pytest.approx(MEAN - HALF95, abs=1e-12)
    assert hi == pytest.approx(MEAN + HALF95, abs=1e-12)
    assert (lo, hi) == pytest.approx((0.6982523, 0.7497477), abs=1e-7)
    lo, hi = t_interval(SMALL, 0.99)
    assert (lo, hi) == pytest.approx((MEAN - HALF99, MEAN + HALF99), abs=1e-12)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.99])
def test_t_interval_matches_scipy(seed, level):
    rng = np.random.default_rng(seed)
    v = rng.normal(0.7, 0.05, size=int(rng.integers(2, 120)))
    want = stats.t.interval(level, df=v.size - 1, loc=v.mean(), scale=stats.sem(v))
    assert t_interval(v, level) == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert t_interval(list(v), level) == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_t_interval_wider_at_99_than_95():
    lo95, hi95 = t_interval(SMALL, 0.95)
    lo99, hi99 = t_interval(SMALL, 0.99)
    assert lo99 < lo95 < MEAN < hi95 < hi99


@pytest.mark.parametrize("values", [[0.7], [], np.array([0.3])])
def test_t_interval_fewer_than_two_values_is_nan(values):
    lo, hi = t_interval(values, 0.95)
    assert math.isnan(lo) and math.isnan(hi)


def test_t_interval_of_identical_values_is_a_point():
    assert t_interval([0.8, 0.8, 0.8], 0.95) == pytest.approx((0.8, 0.8))


# ------------------------------------------------------------------------------ summarise

def test_summarise_sd_ddof_1_and_0():
    s1 = summarise(SMALL, sd_ddof=1)
    s0 = summarise(SMALL, sd_ddof=0)
    assert s1.n == s0.n == 5
    assert s1.mean == pytest.approx(MEAN) and s0.mean == pytest.approx(MEAN)
    assert s1.sd == pytest.approx(SD1, abs=1e-12)
    assert s0.sd == pytest.approx(SD0, abs=1e-12)
    assert s0.sd == pytest.approx(0.0185472, abs=1e-7)
    # the SD convention changes only the SD: the intervals always use the sample SD
    assert s1.ci95 == s0.ci95 == pytest.approx((MEAN - HALF95, MEAN + HALF95))
    assert s1.ci99 == s0.ci99 == pytest.approx((MEAN - HALF99, MEAN + HALF99))


def test_summarise_default_is_ddof_1():
    assert summarise(SMALL).sd == pytest.approx(SD1)


def test_summarise_single_value():
    s1 = summarise([0.7], sd_ddof=1)
    assert s1.n == 1 and s1.mean == 0.7 and math.isnan(s1.sd)
    assert all(math.isnan(x) for x in s1.ci95 + s1.ci99)
    s0 = summarise([0.7], sd_ddof=0)
    assert s0.sd == 0.0


# ------------------------------------------------------------------------------ verdict

def test_verdict_inside_95():
    s = summarise(SMALL)
    for published in (MEAN, MEAN + 0.5 * HALF95, MEAN - 0.9 * HALF95):
        assert verdict(s, published) == CONSISTENT


def test_verdict_between_95_and_99():
    s = summarise(SMALL)
    between = 0.5 * (HALF95 + HALF99)
    assert verdict(s, MEAN + between) == DISCREPANT_5
    assert verdict(s, MEAN - between) == DISCREPANT_5


def test_verdict_outside_99():
    s = summarise(SMALL)
    assert verdict(s, MEAN + 1.5 * HALF99) == DISCREPANT_1
    assert verdict(s, MEAN - 1.5 * HALF99) == DISCREPANT_1
    assert verdict(s, 0.0) == DISCREPANT_1


def test_verdict_interval_ends_are_inside():
    s = summarise(SMALL)
    assert verdict(s, s.ci95[0]) == CONSISTENT
    assert verdict(s, s.ci95[1]) == CONSISTENT
    assert verdict(s, s.ci99[1]) == DISCREPANT_5


def test_verdict_no_reference():
    assert verdict(summarise(SMALL), None) == NO_REFERENCE
    assert verdict(summarise([0.7]), None) == NO_REFERENCE


def test_verdict_too_few_trials():
    assert verdict(summarise([0.7]), 0.7) == TOO_FEW
    assert verdict(summarise([0.7]), 0.1) == TOO_FEW


def test_verdict_on_a_large_random_cell():
    rng = np.random.default_rng(7)
    v = rng.normal(0.8, 0.02, size=100)
    s = summarise(v)
    h95 = stats.t.ppf(0.975, 99) * stats.sem(v)
    h99 = stats.t.ppf(0.995, 99) * stats.sem(v)
    m = float(np.mean(v))
    assert verdict(s, m + 0.99 * h95) == CONSISTENT
    assert verdict(s, m + 1.01 * h95) == DISCREPANT_5
    assert verdict(s, m - 0.99 * h99) == DISCREPANT_5
    assert verdict(s, m - 1.01 * h99) == DISCREPANT_1


def test_verdict_uses_the_summary_intervals():
    s = CellSummary(n=3, mean=0.5, sd=0.1, ci95=(0.4, 0.6), ci99=(0.3, 0.7))
    assert verdict(s, 0.55) == CONSISTENT
    assert verdict(s, 0.65) == DISCREPANT_5
    assert verdict(s, 0.25) == DISCREPANT_1


# ------------------------------------------------------------------------------ welch

# mean1 0.75, sd1 0.03, n1 100; mean2 0.74, sd2 0.05, n2 10
#   v1 = 0.03^2 / 100 = 0.000009; v2 = 0.05^2 / 10 = 0.00025
#   t = 0.01 / sqrt(0.000259) = 0.621370..
#   df = 0.000259^2 / (0.000009^2 / 99 + 0.00025^2 / 9)
#      = 6.7081e-8 / (8.1818e-13 + 6.9444e-9) = 9.658..
def test_welch_hand_numbers():
    r = welch(0.75, 0.03, 100, 0.74, 0.05, 10)
    assert r.t == pytest.approx(0.01 / math.sqrt(0.000259), rel=1e-12)
    assert r.t == pytest.approx(0.621370, abs=1e-6)
    df = 0.000259**2 / (0.000009**2 / 99 + 0.00025**2 / 9)
    assert r.df == pytest.approx(df, rel=1e-12)
    assert r.df == pytest.approx(9.658, abs=1e-3)
    assert r.p == pytest.approx(2 * stats.t.sf(0.621370, df), abs=1e-5)


@pytest.mark.parametrize("seed", range(20))
def test_welch_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    m1, m2 = rng.uniform(0.5, 0.9, size=2)
    s1, s2 = rng.uniform(0.005, 0.08, size=2)
    n1, n2 = (int(x) for x in rng.integers(2, 150, size=2))
    r = welch(m1, s1, n1, m2, s2, n2)
    ref = stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False)
    assert r.t == pytest.approx(ref.statistic, rel=1e-10)
    assert r.p == pytest.approx(ref.pvalue, rel=1e-8, abs=1e-300)
    v1, v2 = s1**2 / n1, s2**2 / n2
    assert r.df == pytest.approx((v1 + v2) ** 2 / (v1**2 / (n1 - 1) + v2**2 / (n2 - 1)), rel=1e-12)
    assert min(n1, n2) - 1 <= r.df + 1e-9 and r.df <= n1 + n2 - 2 + 1e-9


def test_welch_is_antisymmetric_and_two_sided():
    a = welch(0.8, 0.02, 30, 0.78, 0.03, 25)
    b = welch(0.78, 0.03, 25, 0.8, 0.02, 30)
    assert a.t == pytest.approx(-b.t) and a.df == pytest.approx(b.df) and a.p == pytest.approx(b.p)
    assert 0 < a.p < 1


def test_welch_equal_means_p_is_one():
    r = welch(0.7, 0.02, 20, 0.7, 0.04, 30)
    assert r.t == 0.0 and r.p == pytest.approx(1.0)


def test_welch_is_undefined_for_single_trials_or_zero_spread():
    assert welch(0.7, 0.01, 1, 0.6, 0.02, 10) is None
    assert welch(0.7, 0.0, 10, 0.6, 0.0, 10) is None
