"""Statistics across stored trials: usefulness over Uniform, average rank with Friedman
and Nemenyi, win/tie/loss, and how many runs a ranking needs.

Each analysis is one pure function over a per-trial table; `collect` fills that table from
the results store, running through `plan_replay`/`execute_replay` whatever it lacks.

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
- runs-needed (CDALBench): subsets of k trials drawn without replacement (generator seed 0).
- By default the analyses cover the protocol's query strategies that run here, without the
  reference oracles (BSO, the greedy oracle): they choose by the test labels, and lu2023's
  Table 3 and Figure 5 rank and count query strategies only (its Table 1 reports BSO
  apart). Named in ``--strategies``, an oracle is analysed like any strategy.
"""
from __future__ import annotations

import csv
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

import adapters
from audit.destinations import check_report_dir, write_directory
from audit.errors import AuditError
from audit.metrics import get_variant
from audit.protocols import Protocol, load_protocol
from audit.replay import ReproduceRequest, execute_replay, plan_replay
from audit.store import ResultStore

ALPHA = 0.05
TIE_BAND = 0.005
RUNS_K = (3, 5, 10, 20, 50)
BASELINE = "uniform"
TRIALS_NEEDED_POWER = 0.8  # of the gate's trials-needed estimate

Table = dict[str, dict[str, dict[int, float]]]  # data set -> strategy -> trial seed -> AUBC (ok trials)


@dataclass
class Collected:
    """Per-trial AUBCs of the requested strategies and data sets, with their provenance."""

    table: Table
    strategies: list[str]
    provenance: list[str]
    sd_ddof: int
    protocol: str


def seed_ranges(seeds: Sequence[int]) -> str:
    """Trial seeds as compact ranges: [0, 1, 2, 5] -> "0-2,5"; "none" when empty."""
    parts: list[str] = []
    for s in sorted(seeds):
        if parts and parts[-1][1] == s - 1:
            parts[-1][1] = s
        else:
            parts.append([s, s])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts) or "none"


def collect(protocol: str | Protocol, datasets: Sequence[str], strategies: Sequence[str] | None = None,
            trials: int | None = None, jobs: int = 1, data_dir: str | None = None,
            store: str | Path = ".audit-store.sqlite", progress: bool = True, require: str | None = None,
            log=lambda line: print(line, file=sys.stderr)) -> Collected:
    """Run what the store lacks for every data set and read the ok trials back.

    `require` (e.g. "uniform") is added to explicitly requested strategies when missing.
    """
    if not datasets:
        raise AuditError("no data set given")
    wanted = list(strategies) if strategies else None
    if wanted and require and require not in wanted:
        wanted.insert(0, require)
    requests = [ReproduceRequest(protocol, d, wanted, trials=trials, jobs=jobs, data_dir=data_dir, store=store,
                                 progress=progress) for d in datasets]
    plans = [plan_replay(r, log) for r in requests]  # every input validated before any work
    left_out: list[str] = []
    if wanted is None:
        p = plans[0].protocol
        left_out = [sid for sid in plans[0].strategies if adapters.uses_test_labels(p.strategy(sid).implementation)]
        plans = [replace(pl, strategies=[s for s in pl.strategies if s not in left_out]) for pl in plans]
    if require and require not in plans[0].strategies:
        raise AuditError(f"this analysis needs strategy '{require}', which protocol '{plans[0].protocol.name}' "
                         "cannot run here")
    table: Table = {}
    result_store = ResultStore(store)
    try:
        for plan, request in zip(plans, requests):
            fingerprint, details, _, _ = execute_replay(plan, request, result_store, log)
            table[plan.dataset] = {
                sid: {r.trial_seed: r.aubc for r in result_store.trials(plan.protocol.name, plan.dataset, sid,
                                                                        fingerprint, plan.seeds)
                      if r.status == "ok"}
                for sid in plan.strategies}
    finally:
        result_store.close()
    p = plans[0].protocol
    libs = ", ".join(f"{k} {v}" for k, v in details["versions"].items() if v != "absent")
    provenance = [
        f"protocol {p.name} (spec {p.spec_hash}); AUBC {p.aubc_variant} on {p.aubc_metric} "
        f"({get_variant(p.aubc_variant).source}); SD ddof={p.sd_ddof}; store fingerprint {fingerprint}",
        f"libraries: {libs}",
        "trial seeds: " + "; ".join(f"{pl.dataset} {seed_ranges(pl.seeds)} ({len(pl.seeds)})" for pl in plans),
    ]
    if plans[0].unavailable:
        provenance.append(f"not run here: {', '.join(plans[0].unavailable)} (reasons: `audit strategies`)")
    if left_out:
        provenance.append(f"reference oracles left out: {', '.join(left_out)} (they choose by the test labels; "
                          "name them in --strategies to include them)")
    return Collected(table, plans[0].strategies, provenance, p.sd_ddof, p.name)


def _paired(per_strategy: dict[str, dict[int, float]], strategies: Sequence[str]) -> tuple[list[int], np.ndarray]:
    """(seeds where every strategy succeeded, AUBC matrix trials x strategies)."""
    seeds = sorted(set.intersection(*(set(per_strategy[s]) for s in strategies)))
    matrix = np.array([[per_strategy[s][seed] for s in strategies] for seed in seeds], dtype=float)
    return seeds, matrix.reshape(len(seeds), len(strategies))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (statsmodels); a NaN stays NaN and is not counted in the family."""
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, math.nan)
    finite = ~np.isnan(p)
    if finite.any():
        adjusted[finite] = multipletests(p[finite], method="holm")[1]
    return adjusted.tolist()


# --- t-distribution statistics (every module's t-intervals, tests and power sizes) --------

def t_interval(values: Sequence[float], level: float) -> tuple[float, float]:
    """Two-sided t-interval of the mean with the sample SD (ddof=1) and df = n - 1.

    Written out rather than scipy's ``t.interval``, which differs from it in the last bit
    for about 1% of samples: stored reports stay bit-identical."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return (math.nan, math.nan)
    half = stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    return (float(v.mean() - half), float(v.mean() + half))


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
    se, df = sd / math.sqrt(n), n - 1
    p_diff = float(2 * stats.t.sf(abs(mean) / se, df))
    p_lower = float(stats.t.sf((mean + margin) / se, df))   # H0: mean <= -margin
    p_upper = float(stats.t.cdf((mean - margin) / se, df))  # H0: mean >= +margin
    p_tost = max(p_lower, p_upper)
    half = float(stats.t.ppf(1 - alpha, df)) * se
    if p_tost < alpha:
        verdict = "equivalent"
    elif p_diff < alpha and abs(mean) > margin:
        verdict = "drift"
    else:
        verdict = "inconclusive"
    needed = trials_needed(mean, sd, margin, alpha) if verdict == "inconclusive" else None
    if needed is not None:
        needed = max(needed, n + 1)
    return PairedTests(n, mean, sd, mean / sd, (mean - half, mean + half), p_diff, p_tost, verdict, needed)


def paired_test(diagonal: dict[int, float], other: dict[int, float]) -> dict[str, Any]:
    """Paired t-test of an off-diagonal cell against the diagonal on the trials both finished."""
    seeds = sorted(set(diagonal) & set(other))
    diffs = np.array([other[s] - diagonal[s] for s in seeds])
    if len(seeds) < 2:
        t, p = math.nan, math.nan
    elif np.all(diffs == 0):
        t, p = 0.0, 1.0
    else:
        test = stats.ttest_rel([other[s] for s in seeds], [diagonal[s] for s in seeds])
        t, p = float(test.statistic), float(test.pvalue)
    return {"n_pairs": len(seeds), "mean_difference": float(diffs.mean()) if seeds else math.nan, "t": t, "p": p}


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
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
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


def runs_needed(per_strategy: dict[str, dict[int, float]], strategies: Sequence[str], samples: int = 1000,
                ks: Sequence[int] = RUNS_K, seed: int = 0) -> dict[str, Any]:
    """CDALBench: for each k < n, how often k random trials rank the strategies (by mean AUBC) unlike
    all n, and how often a strategy's sign of mean difference against Uniform flips."""
    seeds, m = _paired(per_strategy, strategies)
    n = len(seeds)
    if n < 2:
        raise AuditError(f"runs-needed needs at least 2 trials where every strategy succeeded, not {n}")
    full_order = list(np.argsort(-m.mean(axis=0), kind="stable"))
    base = list(strategies).index(BASELINE) if BASELINE in strategies else None
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


def write_outputs(out_dir: Path, name: str, text: str, header: Sequence[str], rows: Sequence[Sequence[Any]],
                  holds: dict[str, Any], create_parents: bool) -> Path:
    """Write `<name>.csv` (the rows) and `<name>.txt` (the printed text) into out_dir, all or nothing."""
    def write_csv(path: Path) -> None:
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(rows)

    write_directory(out_dir, {f"{name}.csv": write_csv, f"{name}.txt": text + "\n"}, holds,
                    create_parents=create_parents)
    return out_dir


def usefulness_text(c: Collected, result: dict[str, Any]) -> tuple[str, list[str], list[list[Any]]]:
    """(printed text, CSV header, CSV rows) of `audit usefulness`."""
    header = ["dataset", "strategy", "n", "mean_tau", "sd_tau", "t", "p_one_sided", "p_holm", "significant",
              "significant_holm"]
    rows = [[r["dataset"], r["strategy"], r["n"], format_number(r["mean_tau"], ".5f"), format_number(r["sd_tau"], ".5f"),
             format_number(r["t"], ".3f"), format_number(r["p"], ".3g"), format_number(r["p_holm"], ".3g"),
             "yes" if r["significant"] else "no", "yes" if r["significant_holm"] else "no"] for r in result["rows"]]
    counts = result["counts"]
    count_rows = [[f"strategy {k}", v["significant"], v["significant_holm"], v["tests"]]
                  for k, v in counts["by_strategy"].items()]
    count_rows += [[f"data set {k}", v["significant"], v["significant_holm"], v["tests"]]
                   for k, v in counts["by_dataset"].items()]
    text = "\n".join(c.provenance + [
        f"tau = AUBC(strategy) - AUBC(uniform) on the same trial seed; paired t-test, one-sided "
        f"(improvement), alpha {result['alpha']}; Holm over all {len(rows)} tests", "",
        format_table(header, rows), "", "significant improvements over uniform (lu2023 Figure 5)",
        format_table(["group", "significant", "significant (Holm)", "tests"], count_rows)])
    return text, header, rows


def rank_text(c: Collected, result: dict[str, Any]) -> tuple[str, list[str], list[list[Any]]]:
    """(printed text, CSV header, CSV rows) of `audit rank`."""
    datasets = result["datasets"]
    header = ["strategy"] + [f"{d} mean" for d in datasets] + [f"{d} sd" for d in datasets]
    rows = [[s] + [format_number(datasets[d]["ranks"].get(s, {}).get("mean", math.nan), ".2f") for d in datasets]
            + [format_number(datasets[d]["ranks"].get(s, {}).get("sd", math.nan), ".2f") for d in datasets]
            for s in c.strategies]
    shown = [[s] + [f"{a} ({b})" for a, b in zip(r[1:1 + len(datasets)], r[1 + len(datasets):])]
             for s, r in zip(c.strategies, rows)]
    tests = []
    for d, e in datasets.items():
        fr = e["friedman"]
        tests.append([d, e["n"], "-" if fr is None else f"{fr['statistic']:.2f}",
                      "-" if fr is None else f"{fr['p']:.3g}", format_number(e["cd"], ".3f"),
                      "; ".join(f"{a}/{b}" for a, b in e["different"]) or "none"])
    text = "\n".join(c.provenance + [
        "rank within each trial seed by AUBC (1 = best, ties averaged); mean (SD) over trials (lu2023 Table 3)", "",
        format_table(["strategy"] + list(datasets), shown), "",
        f"Friedman test per data set; Nemenyi CD = q_alpha*sqrt(k(k+1)/(6N)), alpha {result['alpha']}, "
        f"N = trials, k = {len(c.strategies)}",
        format_table(["dataset", "N", "chi2", "p", "CD", "pairs with mean-rank difference > CD"], tests)])
    return text, header, rows


def wtl_text(c: Collected, result: dict[str, Any]) -> tuple[str, list[str], list[list[Any]]]:
    """(printed text, CSV header, CSV rows) of `audit wtl`."""
    header = ["strategy", "win", "tie", "loss", "score"]
    rows = [[r[h] for h in header] for r in result["totals"]]
    text = "\n".join(c.provenance + [
        f"pairwise on mean AUBC per data set over {len(c.table)} data sets; tie when |difference| <= "
        f"{result['band']} (zhan2021 Table 4); score = 2*win + tie", "", format_table(header, rows)])
    return text, header, rows


def runs_needed_text(c: Collected, dataset: str, result: dict[str, Any]) -> tuple[str, list[str], list[list[Any]]]:
    """(printed text, CSV header, CSV rows) of `audit runs-needed`."""
    others = [s for s in c.strategies if s != BASELINE]
    header = ["k", "ranking_differs"] + [f"sign_flip_{s}" for s in others]
    rows = [[r["k"], f"{r['ranking_differs']:.3f}"] + [f"{r['sign_flips'][s]:.3f}" for s in others]
            for r in result["rows"]]
    means = ", ".join(f"{s} {v:.4f}" for s, v in result["full_mean"].items())
    text = "\n".join(c.provenance + [
        f"{dataset}: {result['n']} paired trials; full ranking {' > '.join(result['full_ranking'])} (mean AUBC {means})",
        f"{result['samples']} subsets of k trials without replacement per k (generator seed 0); fraction whose "
        "ranking differs from the full one, and whose sign of mean(strategy - uniform) differs", "",
        format_table(header, rows) if rows else f"no k in {RUNS_K} below n = {result['n']}"])
    return text, header, rows


def run_command(command: str, protocol: str, datasets: Sequence[str], strategies: Sequence[str] | None = None,
                trials: int | None = None, jobs: int = 1, data_dir: str | None = None,
                store: str | Path = ".audit-store.sqlite", out: str | Path | None = None, progress: bool = True,
                samples: int = 1000) -> tuple[str, Path]:
    """Collect, analyse and write one of usefulness, rank, wtl, runs-needed; returns (text, output dir)."""
    if command == "runs-needed" and samples < 1:
        raise AuditError(f"--samples must be a positive number, not {samples}")
    require = BASELINE if command in ("usefulness", "runs-needed") else None
    spec = load_protocol(protocol)
    out_dir = Path(out) if out else Path("reports") / f"{command}-{spec.name}"
    check_report_dir(out_dir, create_parents=out is None)  # before any trial: al-audit replaces only its own
    c = collect(spec, datasets, strategies, trials, jobs, data_dir, store, progress, require)
    if command == "usefulness":
        text, header, rows = usefulness_text(c, usefulness(c.table, c.strategies, c.sd_ddof))
    elif command == "rank":
        text, header, rows = rank_text(c, average_rank(c.table, c.strategies, c.sd_ddof))
    elif command == "wtl":
        text, header, rows = wtl_text(c, win_tie_loss(c.table, c.strategies))
    else:
        dataset = next(iter(c.table))
        text, header, rows = runs_needed_text(c, dataset, runs_needed(c.table[dataset], c.strategies, samples))
    holds = {"command": command, "protocol": c.protocol, "datasets": list(c.table), "strategies": c.strategies}
    return text, write_outputs(out_dir, command, text, header, rows, holds, create_parents=out is None)
