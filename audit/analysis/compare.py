"""Reproduced cells against published numbers: t-intervals, Welch tests, verdicts.

A cell is the per-trial AUBCs of one (protocol, data set, strategy). Its verdict follows
lu2023 Table 9: is the published mean inside the reproduced t-interval (df = n - 1)?
Inside the 95% interval: consistent; outside it but inside the 99% one: discrepant at
5%; outside both: discrepant at 1%. When the reference also has SD and n, a Welch test
is reported beside it.

A consistent verdict is only as strong as the interval it rests on: it is flagged **low
power** when the smallest difference the cell could detect (two-sided t-test at 5%, with
80% power) exceeds LOW_POWER_TOLERANCE.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from audit.analysis import stats
from audit.analysis.stats import t_interval

CONSISTENT = "consistent"
DISCREPANT_5 = "discrepant at 5%"
DISCREPANT_1 = "discrepant at 1%"
NO_REFERENCE = "no reference"
TOO_FEW = "too few trials"
NOT_RUN = "not run"  # `audit summary`: no successful trial stored for the cell
VERDICTS = (CONSISTENT, DISCREPANT_5, DISCREPANT_1, NO_REFERENCE, TOO_FEW, NOT_RUN)
LOW_POWER_TOLERANCE = 0.02  # AUBC (fraction): a consistent cell unable to detect this difference says little
POWER = 0.8  # of the detectable difference behind the low-power flag


@dataclass(frozen=True)
class CellSummary:
    n: int
    mean: float
    sd: float  # with the protocol's SD convention (ddof)
    ci95: tuple[float, float]
    ci99: tuple[float, float]


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


def detectable_difference(summary: CellSummary, power: float = POWER) -> float:
    """The smallest |published - reproduced mean| the cell's two-sided t-test at 5% detects
    with probability ``power`` (:func:`audit.analysis.stats.detectable_difference`). NaN below two trials."""
    return stats.detectable_difference(summary.n, summary.ci95, power)


def low_power(summary: CellSummary, verdict_text: str) -> bool:
    """A consistent verdict resting on an interval too wide to detect a LOW_POWER_TOLERANCE difference."""
    return verdict_text == CONSISTENT and detectable_difference(summary) > LOW_POWER_TOLERANCE
