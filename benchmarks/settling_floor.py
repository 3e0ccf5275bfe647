"""How early can any betting confidence sequence settle a cell? (by hand, not CI)

    uv run python benchmarks/settling_floor.py REPORT_DIR [--alpha 0.01]

REPORT_DIR is a ``benchmarks/headline.py --keep`` directory (its ``store.sqlite`` and
``report/report.json``). For every cell with a published value m, the stored AUBCs x_i
give the growth per trial of the best *constant* bet chosen in hindsight,

    g* = max over lambda in [-c/(1-m), c/m] of mean_i log(1 + lambda (x_i - m)),

c = 3/4 being the truncation of :mod:`audit.analysis.stats` (every factor stays >= 1/4).
A cell's capital must reach 1/alpha, so no predictable bet with that truncation can be
expected to settle it before about log(1/alpha) / g* trials; the betting CS's own bets,
which must estimate lambda as they go, need more. The fixed-n 99% t-interval's needs are
printed beside it: the trials after which |mean - m| exceeds t * SD / sqrt(n).

It shows why a cell 0.3-0.5 SD from its published value cannot settle before the
protocol's 100 trials under any anytime-valid boundary for values in [0, 1]: with AUBCs
near 0.75 the bet is capped near 1, far below the Kelly bet Delta / SD^2 of such data.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.stats import t as student_t

from audit.analysis.stats import BETTING_TRUNCATION, betting_first_exclusion
from audit.api import trials


def best_constant_growth(x: np.ndarray, m: float, c: float = BETTING_TRUNCATION) -> tuple[float, float]:
    """(lambda*, g*): the constant bet with the largest mean log growth on ``x`` against mean m."""
    result = minimize_scalar(lambda lam: -np.mean(np.log1p(lam * (x - m))),
                             bounds=(-c / (1 - m), c / m), method="bounded")
    return float(result.x), float(-result.fun)


def fixed_n_needed(x: np.ndarray, m: float, alpha: float) -> int | None:
    """The smallest n at which the (1 - alpha) t-interval of mean +- t SD / sqrt(n), with this
    cell's mean and SD held fixed, leaves m outside; None beyond 10,000."""
    gap, sd = abs(float(x.mean()) - m), float(x.std(ddof=1))
    for n in range(2, 10_001):
        if gap > student_t.ppf(1 - alpha / 2, n - 1) * sd / math.sqrt(n):
            return n
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("report_dir", type=Path)
    parser.add_argument("--alpha", type=float, default=0.01)
    args = parser.parse_args()
    report = json.loads((args.report_dir / "report" / "report.json").read_text())
    stored = trials(args.report_dir / "store.sqlite", protocol=report["protocol"]["name"],
                    dataset=report["dataset"]["name"])
    stored = stored[stored.status == "ok"]
    print(f"{report['protocol']['name']} on {report['dataset']['name']}, alpha {args.alpha:g}, "
          f"truncation c = {BETTING_TRUNCATION}")
    print("| strategy | n | mean | SD | published | gap / SD | best bet | growth / trial "
          "| floor n (any bet) | betting CS settled at | fixed-n t needs n |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for cell in report["strategies"]:
        m = cell.get("published_mean")
        if m is None:
            continue
        rows = stored[stored.strategy == cell["strategy"]].sort_values("trial_seed")
        x = rows.aubc.to_numpy(dtype=float)
        if x.size < 2:
            continue
        lam, growth = best_constant_growth(x, m)
        floor = math.log(1 / args.alpha) / growth if growth > 0 else math.inf
        settled = betting_first_exclusion(x, m, args.alpha)
        needed = fixed_n_needed(x, m, args.alpha)
        print(f"| {cell['strategy']} | {x.size} | {x.mean():.4f} | {x.std(ddof=1):.4f} | {m:.3f} "
              f"| {(x.mean() - m) / x.std(ddof=1):+.2f} | {lam:+.2f} | {growth:.4f} "
              f"| {'never' if math.isinf(floor) else round(floor)} | {settled or 'not by n=' + str(x.size)} "
              f"| {needed or '> 10,000'} |")


if __name__ == "__main__":
    main()
