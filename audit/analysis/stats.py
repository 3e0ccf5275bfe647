"""Statistics across stored trials: usefulness over Uniform, average rank with Friedman
and Nemenyi, win/tie/loss, and how many runs a ranking needs.

Every statistical computation of al-audit lives here, as pure functions: the t-intervals,
Welch test and detectable difference of the verdicts, the gate's paired tests, the paired
tests of compat and crosscheck, Holm, and the analyses, each over a per-trial table that
`audit.analysis.strategy_stats.collect` fills from the store. The tests themselves are the
field's libraries: statsmodels for t-intervals (``DescrStatsW.tconfint_mean``), Welch
(``CompareMeans.ttest_ind``), the gate's t-test and TOST (``DescrStatsW.ttest_mean`` /
``ttost_mean``, what ``ttost_paired`` runs on the differences) and Holm (``multipletests``);
scipy for paired t-tests (``ttest_rel``), Friedman (``friedmanchisquare``) and the
studentized range behind Nemenyi. Written out here are only the two power sizes
(detectable difference, trials needed), textbook normal-then-t approximations.

Choices (documented in the README):
- usefulness (lu2023 Section 5.3): tau = AUBC(q) - AUBC(Uniform) on the same trial seed;
  the paper counts "significant improvements" over Uniform, so the paired t-test is
  one-sided (H1: mean tau > 0) at 5%. The Holm column corrects over every
  (strategy, data set) test of the table.
- rank (lu2023 Section 5.2, Table 3): within each trial seed strategies are ranked by AUBC,
  1 = best, ties averaged; Friedman over the trials of a data set; Nemenyi critical
  difference CD = q_alpha * sqrt(k(k+1) / (6N)), q_alpha the studentized-range quantile
  (k groups, infinite df) over sqrt(2) as in Demsar (2006), N = trials.
- wtl (zhan2021 Table 4): mean AUBC per data set; a tie when |difference| <= 0.005
  (0.5% on the 0-1 scale, boundary included); score = 2 * win + tie.
- runs-needed (CDALBench): subsets of k trials drawn without replacement (generator seed 0);
  the baseline whose sign is tracked is "uniform" unless named (CDALBench calls it "random").
- draws of k runs (CDALBench App. C, Tables 4-5): k trial seeds drawn without replacement,
  shared by every strategy (runs are paired by seed); ranks are computed within each run and
  then averaged over the k runs (a mean of per-run ranks, as CDALBench's Table 3, not a rank of
  means); two independent draws give the largest change of any strategy's mean rank.
- By default the analyses cover the protocol's query strategies that run here, without the
  reference oracles (BSO, the greedy oracle): they choose by the test labels, and lu2023's
  Table 3 and Figure 5 rank and count query strategies only (its Table 1 reports BSO
  apart). Named in ``--strategies``, an oracle is analysed like any strategy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW

from audit.errors import AuditError

ALPHA = 0.05
TIE_BAND = 0.005
RUNS_K = (3, 5, 10, 20, 50)
BASELINE = "uniform"
TRIALS_NEEDED_POWER = 0.8  # of the gate's trials-needed estimate

Table = dict[str, dict[str, dict[int, float]]]  # data set -> strategy -> trial seed -> AUBC (ok trials)


def seed_ranges(seeds: Sequence[int]) -> str:
    """Trial seeds as compact ranges: [0, 1, 2, 5] -> "0-2,5"; "none" when empty."""
    parts: list[str] = []
    for s in sorted(seeds):
        if parts and parts[-1][1] == s - 1:
            parts[-1][1] = s
        else:
            parts.append([s, s])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts) or "none"


def _paired(per_strategy: dict[str, dict[int, float]], strategies: Sequence[str]) -> tuple[list[int], np.ndarray]:
    """(seeds where every strategy succeeded, AUBC matrix trials x strategies)."""
    seeds = sorted(set.intersection(*(set(per_strategy[s]) for s in strategies)))
    matrix = np.array([[per_strategy[s][seed] for s in strategies] for seed in seeds], dtype=float)
    return seeds, matrix.reshape(len(seeds), len(strategies))


def adjust_pvalues(pvalues: Sequence[float], method: str = "holm") -> list[float]:
    """Multiple-comparison adjusted p-values, statsmodels' ``multipletests`` (Holm's step-down
    by default); a NaN stays NaN and is not counted in the family."""
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, math.nan)
    finite = ~np.isnan(p)
    if finite.any():
        adjusted[finite] = multipletests(p[finite], method=method)[1]
    return adjusted.tolist()


# --- t-distribution statistics (every module's t-intervals, tests and power sizes) --------

def t_interval(values: Sequence[float], level: float) -> tuple[float, float]:
    """Two-sided t-interval of the mean with the sample SD and df = n - 1: statsmodels'
    ``DescrStatsW.tconfint_mean``. NaN below two values."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return (math.nan, math.nan)
    low, high = DescrStatsW(v).tconfint_mean(alpha=1 - level)
    return (float(low), float(high))


def t_excludes(values: Sequence[float], value: float, level: float) -> bool:
    """Does the two-sided t-interval at ``level`` (:func:`t_interval`) exclude ``value``?
    False below two values, where there is no interval."""
    low, high = t_interval(values, level)
    return not math.isnan(low) and not low <= value <= high


def detectable_difference(n: int, ci95: tuple[float, float], power: float) -> float:
    """The smallest difference a two-sided t-test at 5% detects with probability ``power``:
    (t[0.975, n-1] + t[power, n-1]) * sem, the sem read off the 95% t-interval. NaN below two."""
    if n < 2:
        return math.nan
    df = n - 1
    sem = (ci95[1] - ci95[0]) / (2 * stats.t.ppf(0.975, df))
    return float((stats.t.ppf(0.975, df) + stats.t.ppf(power, df)) * sem)


@dataclass(frozen=True)
class WelchResult:
    t: float
    df: float
    p: float


def _summary_sample(mean: float, sd: float, n: int) -> DescrStatsW:
    """A sample known only by its mean, sample SD (ddof=1) and size, as statsmodels takes it:
    two values mean -/+ sd*sqrt((n-1)/n) with frequency weights n/2 each have exactly that
    mean, that sample SD and n observations."""
    spread = sd * math.sqrt((n - 1) / n)
    return DescrStatsW(np.array([mean - spread, mean + spread]), weights=np.array([n / 2, n / 2]))


def welch(mean1: float, sd1: float, n1: int, mean2: float, sd2: float, n2: int) -> WelchResult | None:
    """Welch's unequal-variance t-test from summary statistics (sample SDs): statsmodels'
    ``CompareMeans.ttest_ind(usevar="unequal")`` with its Welch-Satterthwaite df.

    None when it is undefined: a group of fewer than two, or both SDs zero.
    """
    if n1 < 2 or n2 < 2 or sd1 == sd2 == 0:
        return None
    t, p, df = CompareMeans(_summary_sample(mean1, sd1, n1), _summary_sample(mean2, sd2, n2)).ttest_ind(
        usevar="unequal")
    return WelchResult(float(t), float(df), float(p))


@dataclass(frozen=True)
class PairedTests:
    """TOST and a paired t-test on per-trial AUBC differences (current - baseline)."""

    n: int
    mean: float
    sd: float
    dz: float | None  # Cohen's d_z = mean / sd of the differences (None when sd = 0)
    ci: tuple[float, float]  # the (1 - 2 alpha) interval TOST decides by
    p_difference: float
    p_tost: float
    verdict: str  # equivalent, drift or inconclusive
    trials_needed: int | None  # inconclusive only: total trials that would likely decide it


def trials_needed(mean: float, sd: float, margin: float, alpha: float, power: float = TRIALS_NEEDED_POWER) -> int | None:
    """Smallest n that decides with about ``power``, taking the observed mean and SD as true.

    Toward equivalence (|mean| < margin): (t[1-alpha, n-1] + t[power, n-1]) sd / sqrt(n) <= margin - |mean|.
    Toward drift (|mean| > margin): (t[1-alpha/2, n-1] + t[power, n-1]) sd / sqrt(n) <= |mean|.
    None when nothing decides it (mean exactly on the margin, or sd unknown).
    """
    if not math.isfinite(sd) or abs(mean) == margin:
        return None
    gap, quantile = (margin - abs(mean), 1 - alpha) if abs(mean) < margin else (abs(mean), 1 - alpha / 2)
    z = stats.norm.ppf(quantile) + stats.norm.ppf(power)
    n = max(2, math.ceil((z * sd / gap) ** 2))
    while (stats.t.ppf(quantile, n - 1) + stats.t.ppf(power, n - 1)) * sd / math.sqrt(n) > gap:
        n += 1  # t exceeds z by O(1/n): a few steps from the normal approximation
    return n


def paired_tests(differences: Iterable[float], margin: float, alpha: float) -> PairedTests:
    d = np.asarray(list(differences), dtype=float)
    n, mean = d.size, float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else math.nan
    if n > 1 and sd == 0:  # every trial moved by the same amount: the difference is exact
        inside = abs(mean) < margin
        p_diff = 1.0 if mean == 0 else 0.0
        p_tost = 0.0 if inside else 1.0
        verdict = "equivalent" if inside else ("drift" if abs(mean) > margin else "inconclusive")
        return PairedTests(n, mean, sd, None, (mean, mean), p_diff, p_tost, verdict, None)
    if n < 2:
        return PairedTests(n, mean, sd, None, (math.nan, math.nan), math.nan, math.nan, "inconclusive", None)
    sample = DescrStatsW(d)
    p_diff = float(sample.ttest_mean(0)[1])
    p_tost = float(sample.ttost_mean(-margin, margin)[0])  # H0: mean <= -margin or mean >= +margin
    low, high = sample.tconfint_mean(alpha=2 * alpha)
    if p_tost < alpha:
        verdict = "equivalent"
    elif p_diff < alpha and abs(mean) > margin:
        verdict = "drift"
    else:
        verdict = "inconclusive"
    needed = trials_needed(mean, sd, margin, alpha) if verdict == "inconclusive" else None
    if needed is not None:
        needed = max(needed, n + 1)
    return PairedTests(n, mean, sd, mean / sd, (float(low), float(high)), p_diff, p_tost, verdict, needed)


def paired_difference_test(after: Sequence[float], before: Sequence[float]) -> tuple[float, float]:
    """(t, two-sided p) of scipy's paired ``ttest_rel`` of after - before. Every difference 0
    (even one pair): (0, 1), nothing moved. Fewer than two pairs, or one constant non-zero
    difference: NaN, no spread to test against."""
    diffs = np.asarray(after, float) - np.asarray(before, float)
    if diffs.size and np.all(diffs == 0):
        return 0.0, 1.0
    if diffs.size < 2 or np.ptp(diffs) == 0:
        return math.nan, math.nan
    test = stats.ttest_rel(after, before)
    return float(test.statistic), float(test.pvalue)


def paired_test(diagonal: dict[int, float], other: dict[int, float]) -> dict[str, Any]:
    """Paired t-test of an off-diagonal cell against the diagonal on the trials both finished."""
    seeds = sorted(set(diagonal) & set(other))
    after, before = [other[s] for s in seeds], [diagonal[s] for s in seeds]
    t, p = paired_difference_test(after, before) if len(seeds) > 1 else (math.nan, math.nan)
    mean = float(np.mean(np.subtract(after, before))) if seeds else math.nan
    return {"n_pairs": len(seeds), "mean_difference": mean, "t": t, "p": p}


def paired_improvement(q: np.ndarray, baseline: np.ndarray, ddof: int = 1) -> dict[str, float]:
    """Mean and SD of tau = q - baseline and the one-sided paired t-test of mean tau > 0."""
    tau = np.asarray(q, float) - np.asarray(baseline, float)
    n = len(tau)
    sd = float(np.std(tau, ddof=ddof)) if n > ddof else math.nan
    if n > 1 and np.ptp(tau) > 0:
        test = stats.ttest_rel(q, baseline, alternative="greater")
        t, p = float(test.statistic), float(test.pvalue)
    else:  # too few trials or a constant difference: no t-test
        t = p = math.nan
    return {"n": n, "mean_tau": float(tau.mean()) if n else math.nan, "sd_tau": sd, "t": t, "p": p}


def usefulness(table: Table, strategies: Sequence[str], ddof: int = 1, alpha: float = ALPHA) -> dict[str, Any]:
    """lu2023 Section 5.3: per (strategy, data set) tau statistics, raw and Holm significance, Figure 5 counts."""
    rows = []
    for dataset, per in table.items():
        for sid in strategies:
            if sid == BASELINE:
                continue
            _, m = _paired(per, [sid, BASELINE])
            rows.append({"dataset": dataset, "strategy": sid, **paired_improvement(m[:, 0], m[:, 1], ddof)})
    for row, adjusted in zip(rows, adjust_pvalues([r["p"] for r in rows])):
        row["p_holm"] = adjusted
        row["significant"] = bool(row["p"] < alpha)
        row["significant_holm"] = bool(adjusted < alpha)
    counts = {"by_strategy": {}, "by_dataset": {}}
    for key, group in (("by_strategy", "strategy"), ("by_dataset", "dataset")):
        for row in rows:
            c = counts[key].setdefault(row[group], {"significant": 0, "significant_holm": 0, "tests": 0})
            c["significant"] += row["significant"]
            c["significant_holm"] += row["significant_holm"]
            c["tests"] += 1
    return {"rows": rows, "counts": counts, "alpha": alpha}


def trial_ranks(matrix: np.ndarray) -> np.ndarray:
    """Rank strategies (columns) within each trial (row) by AUBC: 1 = best, ties averaged."""
    return stats.rankdata(-np.asarray(matrix, float), axis=1, method="average")


def nemenyi_cd(k: int, n: int, alpha: float = ALPHA) -> float:
    """Nemenyi critical difference of average ranks for k strategies over n blocks (Demsar 2006)."""
    q_alpha = stats.studentized_range.ppf(1 - alpha, k, np.inf) / math.sqrt(2)
    return float(q_alpha * math.sqrt(k * (k + 1) / (6 * n)))


def average_rank(table: Table, strategies: Sequence[str], ddof: int = 1, alpha: float = ALPHA) -> dict[str, Any]:
    """lu2023 Table 3: per data set, mean/SD of the per-trial rank, Friedman test and Nemenyi CD."""
    out = {}
    for dataset, per in table.items():
        seeds, m = _paired(per, strategies)
        entry: dict[str, Any] = {"n": len(seeds), "ranks": {}, "friedman": None, "cd": None, "different": []}
        if seeds:
            r = trial_ranks(m)
            for j, sid in enumerate(strategies):
                entry["ranks"][sid] = {"mean": float(r[:, j].mean()),
                                       "sd": float(r[:, j].std(ddof=ddof)) if len(seeds) > ddof else math.nan}
            k = len(strategies)
            if k >= 3 and len(seeds) >= 2:
                f = stats.friedmanchisquare(*m.T)
                entry["friedman"] = {"statistic": float(f.statistic), "p": float(f.pvalue)}
            if k >= 2:
                cd = nemenyi_cd(k, len(seeds), alpha)
                entry["cd"] = cd
                means = r.mean(axis=0)
                entry["different"] = [(strategies[a], strategies[b]) for a in range(k) for b in range(a + 1, k)
                                      if abs(means[a] - means[b]) > cd]
        out[dataset] = entry
    return {"datasets": out, "alpha": alpha}


def win_tie_loss(table: Table, strategies: Sequence[str], band: float = TIE_BAND) -> dict[str, Any]:
    """zhan2021 Table 4: pairwise win/tie/loss over data sets on mean AUBC, score 2*win+tie, sorted."""
    means = {d: {s: float(np.mean(list(per[s].values()))) for s in strategies if per[s]} for d, per in table.items()}
    pairs = {(a, b): [0, 0, 0] for a in strategies for b in strategies if a != b}
    for m in means.values():
        for (a, b), wtl in pairs.items():
            if a in m and b in m:
                diff = m[a] - m[b]
                wtl[1 if abs(diff) <= band + 1e-12 else 0 if diff > 0 else 2] += 1
    totals = []
    for s in strategies:
        win, tie, loss = (sum(pairs[(s, o)][i] for o in strategies if o != s) for i in range(3))
        totals.append({"strategy": s, "win": win, "tie": tie, "loss": loss, "score": 2 * win + tie})
    totals.sort(key=lambda r: (-r["score"], -r["win"], r["strategy"]))
    return {"totals": totals, "pairs": {f"{a} vs {b}": v for (a, b), v in pairs.items()}, "band": band}


def mean_run_ranks(matrix: np.ndarray) -> np.ndarray:
    """Each strategy's rank averaged over runs (rows): ranks within each run first (1 = best,
    ties averaged), then their mean; not the rank of the mean AUBCs."""
    return trial_ranks(matrix).mean(axis=0)


def draw_rank_changes(per_strategy: dict[str, dict[int, float]], strategies: Sequence[str], k: int,
                      samples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Two independent draws of k runs each (seeds without replacement, shared by every strategy),
    ``samples`` times: the largest change of any strategy's mean per-run rank between the two
    draws, and which strategy moved most often."""
    seeds, m = _paired(per_strategy, strategies)
    n = len(seeds)
    if n < k:
        raise AuditError(f"draws of {k} runs need at least {k} runs where every strategy succeeded, not {n}")
    rng = np.random.default_rng(seed)
    ranks = trial_ranks(m)
    largest = np.empty(samples)
    mover = np.zeros(len(strategies), dtype=int)
    for i in range(samples):
        first = ranks[rng.choice(n, size=k, replace=False)].mean(axis=0)
        second = ranks[rng.choice(n, size=k, replace=False)].mean(axis=0)
        change = np.abs(first - second)
        largest[i] = change.max()
        mover[int(np.argmax(change))] += 1
    return {"n": n, "k": k, "samples": samples, "largest": largest,
            "most_moved": strategies[int(np.argmax(mover))], "full_ranks": dict(zip(strategies, mean_run_ranks(m)))}


def subset_below(values: Sequence[float], reference: float, k: int, samples: int = 1000, seed: int = 0) -> float:
    """The probability that the mean of k runs drawn without replacement falls below ``reference``."""
    values = np.asarray(values, dtype=float)
    if values.size < k:
        raise AuditError(f"subsets of {k} runs need at least {k} runs, not {values.size}")
    rng = np.random.default_rng(seed)
    return float(np.mean([values[rng.choice(values.size, size=k, replace=False)].mean() < reference
                          for _ in range(samples)]))


def runs_needed(per_strategy: dict[str, dict[int, float]], strategies: Sequence[str], samples: int = 1000,
                ks: Sequence[int] = RUNS_K, seed: int = 0, baseline: str = BASELINE) -> dict[str, Any]:
    """CDALBench: for each k < n, how often k random trials rank the strategies (by mean AUBC) unlike
    all n, and how often a strategy's sign of mean difference against ``baseline`` flips."""
    seeds, m = _paired(per_strategy, strategies)
    n = len(seeds)
    if n < 2:
        raise AuditError(f"runs-needed needs at least 2 trials where every strategy succeeded, not {n}")
    full_order = list(np.argsort(-m.mean(axis=0), kind="stable"))
    base = list(strategies).index(baseline) if baseline in strategies else None
    others = [j for j in range(len(strategies)) if j != base]
    full_sign = np.sign(m.mean(axis=0) - m[:, base].mean()) if base is not None else None
    rng = np.random.default_rng(seed)
    rows = []
    for k in (k for k in ks if k < n):
        rank_changes, flips = 0, np.zeros(len(strategies))
        for _ in range(samples):
            sub = m[rng.choice(n, size=k, replace=False)].mean(axis=0)
            rank_changes += list(np.argsort(-sub, kind="stable")) != full_order
            if base is not None:
                flips += np.sign(sub - sub[base]) != full_sign
        row = {"k": k, "ranking_differs": rank_changes / samples}
        if base is not None:
            row["sign_flips"] = {strategies[j]: float(flips[j] / samples) for j in others}
        rows.append(row)
    return {"n": n, "samples": samples, "full_ranking": [strategies[j] for j in full_order], "rows": rows,
            "full_mean": {s: float(v) for s, v in zip(strategies, m.mean(axis=0))}}


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain aligned text table, like `audit reproduce` prints."""
    cells = [list(map(str, header))] + [[str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_number(value: float | None, fmt: str = ".4f") -> str:
    """A number for a table cell: "-" for None or NaN."""
    return "-" if value is None or math.isnan(value) else format(value, fmt)


# --- anytime-valid confidence sequences (`audit reproduce --until-settled`) --------------

BETTING_CS = "betting CS"
BETTING_CS_SOURCE = ("hedged-capital betting confidence sequence with predictable plug-in bets, "
                     "Waudby-Smith & Ramdas, 'Estimating means of bounded random variables by betting', "
                     "JRSS-B 86(1), 2024, Theorem 3")
BETTING_THETA = 0.5  # weight of the upward bet in the hedged capital
BETTING_TRUNCATION = 0.75  # c in lambda <= c / m and c / (1 - m); WSR suggest 1/2 or 3/4, the larger settles sooner
CS_GRID = 10_000  # steps of [0, 1] on which the interval's ends are read (the verdict reads the published value exactly)


def betting_bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """The predictable plug-in bets of the betting CS, for values in [0, 1] along the last axis.

    lambda_t = sqrt(2 log(2/alpha) / (sigma2_{t-1} t log(1 + t))), with the regularised running
    mean and variance mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1) and
    sigma2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1), sigma2_0 = 1/4: lambda_t uses
    x_1..x_{t-1} only (predictable), which is what makes the capital a martingale."""
    x = np.asarray(x, dtype=float)
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1)
    previous = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), sigma2[..., :-1]], axis=-1)
    return np.sqrt(2 * math.log(2 / alpha) / (previous * t * np.log1p(t)))


def betting_log_capital(x: np.ndarray, m: np.ndarray | float, alpha: float) -> np.ndarray:
    """log K_t(m) of the hedged capital process for t = 1..n, values ``x`` in [0, 1] along the last axis.

    K_t(m) = max(theta K+_t(m), (1 - theta) K-_t(m)), theta = 1/2, with
    K+_t(m) = prod_{i<=t} (1 + min(lambda_i, c/m) (x_i - m)) and
    K-_t(m) = prod_{i<=t} (1 - min(lambda_i, c/(1-m)) (x_i - m)), c = 3/4, lambda_i from
    :func:`betting_bets`. When the mean is m, K+ and K- are nonnegative martingales from 1 (each
    factor is at least 1 - c = 1/4 > 0 and has mean 1), so is theta K+ + (1 - theta) K- >= K_t(m),
    and by Ville's inequality P(sup_t K_t(m) >= 1/alpha) <= alpha.
    ``m`` broadcasts against ``x[..., 0]``."""
    x = np.asarray(x, dtype=float)
    m = np.asarray(m, dtype=float)[..., None]
    lam = betting_bets(x, alpha)
    with np.errstate(divide="ignore"):
        up = np.minimum(lam, BETTING_TRUNCATION / m)
        down = np.minimum(lam, BETTING_TRUNCATION / (1 - m))
    log_up = np.cumsum(np.log1p(up * (x - m)), axis=-1) + math.log(BETTING_THETA)
    log_down = np.cumsum(np.log1p(-down * (x - m)), axis=-1) + math.log(1 - BETTING_THETA)
    return np.maximum(log_up, log_down)


def betting_excludes(x: np.ndarray, m: np.ndarray | float, alpha: float) -> np.ndarray:
    """Whether the level-(1 - alpha) betting CS has excluded ``m`` by each t = 1..n (boolean, last
    axis): sup_{s<=t} K_s(m) >= 1/alpha. Valid under continuous monitoring: when the mean is m,
    the chance that this is ever true is at most alpha."""
    log_k = betting_log_capital(x, m, alpha)
    return np.maximum.accumulate(log_k, axis=-1) >= math.log(1 / alpha)


def betting_first_exclusion(values: Sequence[float], m: float, alpha: float) -> int | None:
    """The first n (1-based) at which the betting CS at level 1 - alpha excludes ``m``; None if never."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return None
    hits = np.flatnonzero(betting_excludes(v, m, alpha))
    return int(hits[0]) + 1 if hits.size else None


def betting_cs(values: Sequence[float], alpha: float, grid: int = CS_GRID) -> tuple[np.ndarray, np.ndarray]:
    """The betting CS's running intersection at each n: (lower, upper) arrays of length n.

    The set {m in [0, 1]: sup_{s<=n} K_s(m) < 1/alpha} is evaluated on a grid of ``grid`` steps;
    each end is moved out by one step, so the printed interval contains the set's hull (the
    verdict itself reads :func:`betting_excludes` at the published value, not this grid)."""
    v = np.asarray(values, dtype=float)
    ms = np.linspace(0.0, 1.0, grid + 1)
    kept = ~betting_excludes(np.broadcast_to(v, (ms.size, v.size)), ms, alpha)  # (grid, n)
    lower, upper = np.full(v.size, math.nan), np.full(v.size, math.nan)
    any_kept = kept.any(axis=0)
    first = np.argmax(kept, axis=0)
    last = ms.size - 1 - np.argmax(kept[::-1], axis=0)
    step = 1.0 / grid
    lower[any_kept] = np.maximum(ms[first[any_kept]] - step, 0.0)
    upper[any_kept] = np.minimum(ms[last[any_kept]] + step, 1.0)
    return lower, upper


# --- cross-cell ("shared cause") statistics ----------------------------------------------

def per_seed_offsets(per_cell: Sequence[dict[int, float]], targets: Sequence[float]) -> dict[int, float]:
    """Per trial seed that every cell finished, the mean over the cells of (AUBC - target):
    the cells of one replay share their splits, so the seed is the unit, not the cell."""
    if not per_cell:
        return {}
    seeds = sorted(set.intersection(*(set(values) for values in per_cell)))
    return {s: float(np.mean([values[s] - t for values, t in zip(per_cell, targets)])) for s in seeds}


@dataclass(frozen=True)
class OffsetTest:
    """One-sample t-test of per-seed values against 0: their mean, 95% t-interval and two-sided p."""

    n: int
    mean: float
    ci95: tuple[float, float]
    p: float

    @property
    def covers_zero(self) -> bool:
        lo, hi = self.ci95
        return bool(lo <= 0.0 <= hi)


def offset_test(values: Iterable[float]) -> OffsetTest:
    d = np.asarray(list(values), dtype=float)
    n = d.size
    if n == 0:
        return OffsetTest(0, math.nan, (math.nan, math.nan), math.nan)
    mean = float(d.mean())
    if n < 2:
        return OffsetTest(n, mean, (math.nan, math.nan), math.nan)
    described = DescrStatsW(d)
    if described.std == 0:  # every seed moved by the same amount: exact
        return OffsetTest(n, mean, (mean, mean), 1.0 if mean == 0 else 0.0)
    _, p, _ = described.ttest_mean(0.0)
    low, high = described.tconfint_mean(alpha=0.05)
    return OffsetTest(n, mean, (float(low), float(high)), float(p))
