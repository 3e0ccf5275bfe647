"""`audit reproduce --until-settled`: the betting confidence sequence's time-uniform
coverage (by simulation), its values on a tiny sequence worked by hand, the rounds of a
real replay, and the default left unchanged."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from audit.analysis.stats import (
    betting_cs,
    betting_excludes,
    betting_first_exclusion,
    betting_log_capital,
)

SEQUENCES, HORIZON = 10_000, 100


def _distributions(rng: np.random.Generator) -> dict[str, tuple[np.ndarray, float]]:
    """(SEQUENCES x HORIZON draws, true mean) of four bounded distributions on [0, 1]."""
    shape = (SEQUENCES, HORIZON)
    near = np.where(rng.random(shape) < 0.9, 0.02, 0.98)  # two points near the bounds, skewed
    return {
        "bernoulli(0.5)": (rng.binomial(1, 0.5, shape).astype(float), 0.5),
        "beta(2,5)": (rng.beta(2, 5, shape), 2 / 7),
        "point mass 0.3": (np.full(shape, 0.3), 0.3),
        "two-point 0.02/0.98": (near, 0.9 * 0.02 + 0.1 * 0.98),
    }


def _ever_excluded_t(x: np.ndarray, mean: float, level: float) -> np.ndarray:
    """Per sequence: does the fixed-n t-interval, recomputed after every trial n = 2..HORIZON,
    ever exclude the true mean (the naive way of looking repeatedly)?"""
    n = np.arange(1, x.shape[1] + 1)
    mean_n = np.cumsum(x, axis=1) / n
    var_n = (np.cumsum(x**2, axis=1) - n * mean_n**2) / np.maximum(n - 1, 1)
    half = sps.t.ppf(0.5 + level / 2, np.maximum(n - 1, 1)) * np.sqrt(np.maximum(var_n, 0) / n)
    outside = (np.abs(mean_n - mean) > half + 1e-12)[:, 1:]
    return outside.any(axis=1)


@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_time_uniform_coverage_by_simulation(alpha):
    """10,000 sequences of 100 draws each: the share whose CS ever excludes the true mean, at
    any n <= 100, is at most alpha. Figures (seed 0, c = 3/4): alpha 0.05 gives bernoulli(0.5) 0.0350,
    beta(2,5) 0.0122, point mass 0, two-point 0.0228; alpha 0.01 gives 0.0087, 0.0014, 0, 0.0035."""
    for name, (x, mean) in _distributions(np.random.default_rng(0)).items():
        ever = betting_excludes(x, mean, alpha)[:, -1]
        assert ever.mean() <= alpha, (name, ever.mean())


def test_the_coverage_check_can_fail():
    """The same check on the naive rule, a 95% t-interval recomputed after every trial: it
    excludes the true mean somewhere in 2 <= n <= 100 far more often than 5% (seed 0: bernoulli(0.5)
    0.650, beta(2,5) 0.409, two-point 0.848; at 99%: 0.541, 0.138, 0.827), so the simulation
    does catch an invalid boundary."""
    for name, (x, mean) in _distributions(np.random.default_rng(0)).items():
        if np.ptp(x) == 0:
            continue  # a point mass has no t-interval
        assert _ever_excluded_t(x, mean, 0.95).mean() > 0.2, name


def test_capital_on_a_tiny_sequence_by_hand():
    # x = (1, 0), m = 1/2, alpha = 0.05, c = 3/4, theta = 1/2.
    # t=1: sigma2_0 = 1/4, lambda_1 = sqrt(2 ln 40 / (1/4 * 1 * ln 2)) = 6.525, capped at c/m = 1.5
    #      K+ = 1 + 1.5 * 0.5 = 1.75, K- = 1 - 1.5 * 0.5 = 0.25, K = max(0.875, 0.125) = 0.875
    # t=2: mu_1 = (1/2 + 1)/2 = 0.75, sigma2_1 = (1/4 + 0.0625)/2 = 0.15625,
    #      lambda_2 = sqrt(2 ln 40 / (0.15625 * 2 * ln 3)) = 4.636, capped at 1.5
    #      K+ = 1.75 * (1 - 0.75) = 0.4375, K- = 0.25 * 1.75 = 0.4375, K = 0.21875
    log_k = betting_log_capital(np.array([1.0, 0.0]), 0.5, 0.05)
    assert np.exp(log_k) == pytest.approx([0.875, 0.21875], rel=1e-12)
    # x = (1, 1, 1, 1, 1), m = 0.2: sigma2_t = 1/4, 0.15625, 0.11343, 0.08898, 0.07318 (t = 0..4).
    # alpha 0.01: lambda_t = sqrt(2 ln 200 / (sigma2_{t-1} t ln(1 + t))) = 7.82, 5.56, 4.74, 4.30, 4.02,
    #   all capped at c/m = 3.75; each factor 1 + 3.75 * 0.8 = 4, so K_t = 4^t / 2 = 2, 8, 32, 128, 512.
    # alpha 0.05: lambda_t = 6.52, 4.64, 3.95, 3.59, 3.35: capped for t <= 3, then
    #   K_4 = 32 * (1 + 3.589 * 0.8) = 123.9.
    ones = np.ones(5)
    assert np.exp(betting_log_capital(ones, 0.2, 0.01)) == pytest.approx([2, 8, 32, 128, 512], rel=1e-12)
    assert np.exp(betting_log_capital(ones, 0.2, 0.05))[:4] == pytest.approx([2, 8, 32, 123.9], rel=1e-3)
    # 1/0.05 = 20 is passed at n = 3 and 1/0.01 = 100 at n = 4.
    assert betting_first_exclusion(ones, 0.2, 0.05) == 3
    assert betting_first_exclusion(ones, 0.2, 0.01) == 4
    assert betting_first_exclusion(ones, 0.9, 0.01) is None  # x - m = 0.1 with lambda <= 7.5: too slow


def test_cs_interval_holds_what_is_not_excluded():
    x = np.random.default_rng(1).beta(8, 3, 60)
    lower, upper = betting_cs(x, 0.05)
    assert np.all(np.diff(lower) >= 0) and np.all(np.diff(upper) <= 0)  # a running intersection
    assert lower[-1] < x.mean() < upper[-1]
    for m in (lower[-1] - 0.002, upper[-1] + 0.002):
        assert betting_excludes(x, m, 0.05)[-1]
    for m in np.linspace(lower[-1] + 0.002, upper[-1] - 0.002, 7):
        assert not betting_excludes(x, m, 0.05)[-1]
    # wider at 99% than at 95%
    lo99, hi99 = betting_cs(x, 0.01)
    assert lo99[-1] <= lower[-1] and hi99[-1] >= upper[-1]


# --- the rounds of a real replay: zhan2021 Uniform on sonar ------------------------------
# Its published value (0.617, zhan2021 Table 5) is far below a shuffled-pool replay (about
# 0.76). No bound valid for every distribution on [0, 1] can exclude it at 1% after 10 trials:
# a distribution with mean 0.617 may put 18% of its mass at 0 and the rest at 0.756, and then
# ten draws all near 0.756 have probability 0.82^10 = 0.14. The 99% betting CS excludes it at
# about n = 35, so with a maximum of 50 the cell settles at the round ending at n = 40.

import json  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import audit  # noqa: E402
from audit.analysis.settled import schedule  # noqa: E402
from audit.api import CELL_COLUMNS, SETTLED_COLUMNS  # noqa: E402
from audit.report.sections import TABLE_HEADER  # noqa: E402

MAXIMUM = 50


def test_schedule():
    assert schedule(100) == [10, 20, 40, 70, 100]
    assert schedule(50) == [10, 20, 40, 50]
    assert schedule(30) == [10, 20, 30]
    assert schedule(7) == [7]


@pytest.fixture(scope="module")
def settled_run(tmp_path_factory, sonar):
    where = tmp_path_factory.mktemp("settled")
    done = subprocess.run([sys.executable, "-m", "audit.cli.main", "reproduce", "zhan2021", "--dataset", "sonar",
                           "--strategies", "uniform", "--trials", str(MAXIMUM), "--until-settled", "--no-diagnose",
                           "--no-progress", "--store", str(where / "store.sqlite"), "--out", str(where / "report")],
                          capture_output=True, text=True, cwd=where)
    assert done.returncode == 0, done.stderr
    return where, done


def _stored_seeds(store) -> list[int]:
    db = sqlite3.connect(store)
    try:
        return [r[0] for r in db.execute("SELECT trial_seed FROM trials WHERE strategy='uniform' ORDER BY trial_seed")]
    finally:
        db.close()


def test_a_far_published_value_settles_early(settled_run):
    where, done = settled_run
    report = json.loads((where / "report" / "report.json").read_text())
    cell = report["strategies"][0]
    settle = cell["settle"]
    assert settle["settled_at"] == settle["trials_run"] == cell["n_trials"] == 40 < MAXIMUM
    assert cell["verdict"] == "discrepant at 1%" and settle["alpha"] == 0.01
    assert settle["cs99"][1] < 1 and not settle["cs99"][0] <= cell["published_mean"] <= settle["cs99"][1]
    assert report["settled"]["boundary"] == "betting CS" and "Waudby-Smith" in report["settled"]["source"]
    assert report["settled"]["rounds"] == [10, 20, 40, 50]
    # the stored trials are exactly the first 40 trial seeds of the fixed run's plan
    assert _stored_seeds(where / "store.sqlite") == report["seeds"]["trial_seeds"][:40]
    per_trial = (where / "report" / "per_trial.csv").read_text().splitlines()
    assert len(per_trial) == 1 + 40
    # the terminal table, report.md and report.html show the trials the cell needed
    for text in (done.stdout, (where / "report" / "report.md").read_text(),
                 (where / "report" / "report.html").read_text()):
        assert "40 of 50" in text and "settled at n=40 by betting CS (alpha 0.01)" in text
    assert "until settled: betting CS" in done.stdout and "Waudby-Smith" in done.stdout
    assert "settled: uniform at n=40" in done.stderr


def test_a_consistent_cell_runs_to_the_maximum_and_reuses_the_stored_trials(settled_run):
    where, _ = settled_run
    values = [r for r in (where / "report" / "per_trial.csv").read_text().splitlines()[1:]]
    mean = float(np.mean([float(line.split(",")[2]) for line in values]))
    table = where / "mine.csv"
    table.write_text("paper,table,dataset,strategy,metric,mean,scale,aubc_variant\n"
                     f"mine,Table 1,sonar,uniform,accuracy,{mean:.4f},fraction,zhan2021_code\n")
    replay = audit.reproduce("zhan2021", "sonar", strategies=["uniform"], trials=MAXIMUM,
                             store=where / "store.sqlite", out=where / "mine", references=table,
                             diagnose=False, until_settled=True)
    assert (replay.ran, replay.reused) == (10, 40)  # the first 40 came from the settled run
    cell = replay.cells.iloc[0]
    assert list(replay.cells.columns) == [*CELL_COLUMNS, *SETTLED_COLUMNS]
    assert cell.trials_run == cell.n == MAXIMUM and cell.settled_at is None or math.isnan(cell.settled_at)
    assert cell.stop == f"ran to n={MAXIMUM}" and cell.verdict.startswith("consistent")
    assert cell.cs99_low < mean < cell.cs99_high
    assert len(replay.trials) == MAXIMUM
    assert _stored_seeds(where / "store.sqlite") == replay.report["seeds"]["trial_seeds"]


def test_without_the_flag_nothing_changes(settled_run):
    where, _ = settled_run
    replay = audit.reproduce("zhan2021", "sonar", strategies=["uniform"], trials=MAXIMUM,
                             store=where / "store.sqlite", out=where / "fixed", diagnose=False)
    assert replay.ran == 0  # every trial stored by the settled runs
    assert "settled" not in replay.report and "settle" not in replay.report["strategies"][0]
    assert list(replay.cells.columns) == list(CELL_COLUMNS)
    assert replay.cells.iloc[0].verdict == "discrepant at 1%"  # the settled verdict, at n = 50 by t-intervals
    md = (where / "fixed" / "report.md").read_text()
    assert "until settled" not in md.lower()
    header = md.split("## AUBC per strategy")[1].split("```")[1].splitlines()[1]
    assert header.split()[:3] == list(TABLE_HEADER[:3]) and header.endswith(TABLE_HEADER[-1])


def test_a_cell_without_a_published_value_stops_after_the_first_round(tmp_path, sonar):
    table = tmp_path / "other.csv"  # a table with no row for uniform: nothing to settle
    table.write_text("paper,table,dataset,strategy,metric,mean,scale,aubc_variant\n"
                     "mine,Table 1,sonar,coreset,accuracy,0.7500,fraction,zhan2021_code\n")
    replay = audit.reproduce("zhan2021", "sonar", strategies=["uniform"], trials=30,
                             store=tmp_path / "store.sqlite", out=tmp_path / "report", references=table,
                             diagnose=False, until_settled=True)
    cell = replay.cells.iloc[0]
    assert replay.ran == 10 and cell.trials_run == cell.n == 10
    assert cell.stop == "no published value: stopped at n=10" and cell.verdict == "no reference"
    assert (cell.settled_at is None or math.isnan(cell.settled_at)) and cell.cs99_low < cell["mean"] < cell.cs99_high
    assert "nothing to settle and stops after the first round (n=10)" in (tmp_path / "report" / "report.md").read_text()
