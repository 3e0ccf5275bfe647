"""Reproduced cells against published numbers: t-intervals, Welch tests, verdicts.

A cell is the per-trial AUBCs of one (protocol, data set, strategy). Its verdict follows
lu2023 Table 9: is the published mean inside the reproduced t-interval (df = n - 1)?
Inside the 95% interval: consistent; outside it but inside the 99% one: discrepant at
5%; outside both: discrepant at 1%. When the reference also has SD and n, a Welch test
is reported beside it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

CONSISTENT = "consistent"
DISCREPANT_5 = "discrepant at 5%"
DISCREPANT_1 = "discrepant at 1%"
NO_REFERENCE = "no reference"
TOO_FEW = "too few trials"


@dataclass(frozen=True)
class CellSummary:
    n: int
    mean: float
    sd: float  # with the protocol's SD convention (ddof)
    ci95: tuple[float, float]
    ci99: tuple[float, float]


def t_interval(values: Sequence[float], level: float) -> tuple[float, float]:
    """Two-sided t-interval of the mean with the sample SD (ddof=1) and df = n - 1."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return (math.nan, math.nan)
    half = stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    return (float(v.mean() - half), float(v.mean() + half))


def summarise(values: Sequence[float], sd_ddof: int = 1) -> CellSummary:
    v = np.asarray(values, dtype=float)
    sd = float(v.std(ddof=sd_ddof)) if v.size > sd_ddof else math.nan
    return CellSummary(int(v.size), float(v.mean()) if v.size else math.nan, sd,
                       t_interval(v, 0.95), t_interval(v, 0.99))


def verdict(summary: CellSummary, published_mean: float | None) -> str:
    if published_mean is None:
        return NO_REFERENCE
    if summary.n < 2:
        return TOO_FEW
    inside = lambda ci: ci[0] <= published_mean <= ci[1]  # noqa: E731
    if inside(summary.ci95):
        return CONSISTENT
    return DISCREPANT_5 if inside(summary.ci99) else DISCREPANT_1


@dataclass(frozen=True)
class WelchResult:
    t: float
    df: float
    p: float


def welch(mean1: float, sd1: float, n1: int, mean2: float, sd2: float, n2: int) -> WelchResult | None:
    """Welch's unequal-variance t-test from summary statistics (sample SDs).

    None when it is undefined: a group of fewer than two, or both SDs zero.
    """
    if n1 < 2 or n2 < 2:
        return None
    v1, v2 = sd1**2 / n1, sd2**2 / n2
    se = math.sqrt(v1 + v2)
    if se == 0:
        return None
    t = (mean1 - mean2) / se
    df = (v1 + v2) ** 2 / (v1**2 / (n1 - 1) + v2**2 / (n2 - 1))
    return WelchResult(t, df, float(2 * stats.t.sf(abs(t), df)))
