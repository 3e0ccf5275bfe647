"""CDALBench's claims (cdalbench.toml beside this module), each a verdict with its figures.

Replay figures come from the result store: the ok trials of protocol ``cdalbench`` stored
under the current fingerprint (this code, the protocol, the environment), at the protocol's
query size; a data set or strategy without stored trials makes its part "not testable here",
with the command that would store them. Published figures come from the transcribed tables
(reference_results/cdalbench2024_tables8_9.csv, reference_results/ranks/). The statistics are
audit.analysis.stats' (per-run ranks, draws of k runs, runs-needed, paired t-tests, Holm).
"""
from __future__ import annotations

import csv
import sqlite3
import tomllib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from audit.analysis.claims import ClaimRow
from audit.analysis.references import load_references
from audit.analysis.stats import (
    adjust_pvalues,
    draw_rank_changes,
    paired_difference_test,
    runs_needed,
    subset_below,
)
from audit.engine.store import fingerprint_details, fingerprint_of, open_read_only
from audit.errors import AuditError
from audit.paths import REFERENCE_DIR
from audit.protocols import Protocol, load_protocol

CLAIMS = Path(__file__).with_suffix(".toml")
OPTIONS = ("store", "samples", "seed")
RANKS = REFERENCE_DIR / "ranks" / "cdalbench2024_tables3_5.csv"
NOT_TESTABLE = "not testable here"

Stored = dict[str, dict[int, float]]  # strategy -> trial seed -> AUBC


class Context:
    """What every claim reads: the protocol, its stored trials and the published tables."""

    def __init__(self, store: str | Path, samples: int, seed: int, data: dict[str, Any]):
        self.protocol: Protocol = load_protocol(data["protocol"])
        self.paper, self.alpha, self.samples, self.seed = data["paper"], float(data["alpha"]), samples, seed
        self.min_runs = int(data["min_runs"])
        self.store = Path(store)
        self.fingerprint = fingerprint_of(fingerprint_details(self.protocol))
        self._stored: dict[str, Stored] = {}

    def stored(self, dataset: str) -> Stored:
        """The ok trials of every strategy on ``dataset`` under the current fingerprint."""
        if dataset not in self._stored:
            found: Stored = {}
            if self.store.is_file():
                db = open_read_only(self.store)
                try:
                    rows = db.execute("SELECT strategy, trial_seed, aubc FROM trials WHERE protocol=? AND dataset=? "
                                      "AND fingerprint=? AND status='ok'",
                                      (self.protocol.name, dataset, self.fingerprint)).fetchall()
                except sqlite3.Error as exc:
                    raise AuditError(f"cannot read the result store {self.store}: {exc}") from None
                finally:
                    db.close()
                for strategy, trial_seed, aubc in rows:
                    found.setdefault(strategy, {})[int(trial_seed)] = float(aubc)
            # a strategy with fewer runs than the claims' minimum is left out: its figures would be noise
            self._stored[dataset] = {s: runs for s, runs in found.items() if len(runs) >= self.min_runs}
        return self._stored[dataset]

    def missing(self, dataset: str, strategies: list[str]) -> str:
        """Why ``strategies`` cannot be read on ``dataset`` (empty when every one has trials)."""
        lacking = [s for s in strategies if s not in self.stored(dataset)]
        if not lacking:
            return ""
        return (f"{dataset}: fewer than {self.min_runs} stored runs of {', '.join(lacking)} under this code and "
                f"environment "
                f"(`audit reproduce {self.protocol.name} --dataset {dataset} --strategies {','.join(strategies)} "
                f"--store {self.store}`)")

    def published(self, table: str, dataset: str) -> dict[str, float]:
        """{strategy: published mean} of one table column."""
        return {r.strategy: r.mean_fraction for r in load_references(self.paper, dataset=dataset)
                if r.table == table and r.mean is not None}


def _fmt(value: float) -> str:
    return f"{value:.4f}"


def subset_below_claim(ctx: Context, claim: dict[str, Any]) -> tuple[str, list[str]]:
    """P(a k-run mean of the strategy < the baseline's all-run mean), where the all-run means
    put the strategy above the baseline (the claim's premise)."""
    strategy, baseline, k = claim["strategy"], claim["baseline"], int(claim["k"])
    lines, verdicts = [], []
    for dataset in claim["datasets"]:
        why = ctx.missing(dataset, [strategy, baseline])
        if why:
            lines.append(why)
            continue
        runs = ctx.stored(dataset)
        values = list(runs[strategy].values())
        base_mean = float(np.mean(list(runs[baseline].values())))
        mean = float(np.mean(values))
        p = subset_below(values, base_mean, k, ctx.samples, ctx.seed)
        p_all = subset_below(values, base_mean, len(values), 1, ctx.seed)
        said = (f"{dataset}: {strategy} {_fmt(mean)} vs {baseline} {_fmt(base_mean)} over {len(values)} runs; "
                f"P({k}-run mean of {strategy} < {baseline}'s) = {p:.3f} ({ctx.samples} draws); "
                f"all {len(values)} runs below: {bool(p_all)}")
        if mean <= base_mean:
            lines.append(said + f" -> premise absent ({strategy} is not above {baseline} with all runs)")
            continue
        verdicts.append(p >= float(claim["min_probability"]))
        lines.append(said)
    return _combine(verdicts), lines


def draw_rank_change_claim(ctx: Context, claim: dict[str, Any]) -> tuple[str, list[str]]:
    """The paper's own Tables 4 vs 5, then two independent k-run draws of the stored runs."""
    k = int(claim["k"])
    with open(RANKS, encoding="utf-8", newline="") as f:
        ranks = {(r["table"], r["dataset"], r["strategy"]): float(r["mean_rank"]) for r in csv.DictReader(f)}
    changes = sorted(((abs(v - ranks[("Table 5", d, s)]), d, s) for (t, d, s), v in ranks.items()
                      if t == "Table 4" and ("Table 5", d, s) in ranks and d not in ("unencoded", "encoded")),
                     reverse=True)
    top, cell = changes[0], tuple(claim["stated_cell"])
    cell_change = next(c for c, d, s in changes if (d, s) == cell)
    lines = [f"published: largest |Table 4 - Table 5| = {top[0]:.1f} ({top[2]} on {top[1]}); "
             f"{cell[1]} on {cell[0]}: {cell_change:.1f} (the text says {claim['stated_change']})"]
    verdicts = [abs(top[0] - float(claim["stated_change"])) < 0.05]
    if not verdicts[0]:
        lines[0] += " -> the stated figure is not in the tables"
    for dataset in claim["datasets"]:
        runs = ctx.stored(dataset)
        strategies = sorted(s for s, v in runs.items() if len(v) >= k)
        if len(strategies) < 2:
            lines.append(ctx.missing(dataset, ["random", "margin"]) or f"{dataset}: fewer than 2 strategies stored")
            continue
        result = draw_rank_changes(runs, strategies, k, ctx.samples, ctx.seed)
        largest = result["largest"]
        share = float(np.mean(largest >= float(claim["min_change"])))
        verdicts.append(share >= 0.5)
        lines.append(f"{dataset} ({', '.join(strategies)}; {result['n']} runs): largest rank change between two "
                     f"{k}-run draws: median {np.median(largest):.2f}, max {largest.max():.2f}; "
                     f">= {claim['min_change']:g} rank in {share:.1%} of {ctx.samples} pairs "
                     f"(most moved: {result['most_moved']})")
    return _combine(verdicts), lines


def runs_needed_claim(ctx: Context, claim: dict[str, Any]) -> tuple[str, list[str]]:
    """How often k-run subsets rank unlike all runs: supported when it falls from k = 3 to the largest k."""
    verdicts, lines = [], []
    for dataset in claim["datasets"]:
        runs = ctx.stored(dataset)
        strategies = sorted(s for s, v in runs.items() if len(v) >= 3)
        if len(strategies) < 2:
            lines.append(ctx.missing(dataset, ["random", "margin"]) or f"{dataset}: fewer than 2 strategies stored")
            continue
        result = runs_needed(runs, strategies, ctx.samples, seed=ctx.seed, baseline=claim["baseline"])
        rows = result["rows"]
        verdicts.append(rows[0]["ranking_differs"] > rows[-1]["ranking_differs"])
        lines.append(f"{dataset} ({result['n']} runs; 50-run ranking {' > '.join(result['full_ranking'])}): "
                     "ranking differs from all runs in " + ", ".join(
                         f"k={r['k']}: {r['ranking_differs']:.1%}" for r in rows))
    return _combine(verdicts), lines


def family_below_claim(ctx: Context, claim: dict[str, Any]) -> tuple[str, list[str]]:
    """Each (family member, comparator) pair: the paired t-test of the per-run AUC differences,
    Holm-adjusted over the pairs; supported when every pair is below with adjusted p < alpha,
    contradicted when some pair is above with adjusted p < alpha, else inconclusive."""
    dataset = claim["dataset"]
    published = ctx.published("Table 8", dataset)
    pairs = [(a, b) for a in claim["family"] for b in claim["versus"]]
    lines = ["published (Table 8): " + ", ".join(
        f"{a} {published[a]:.3f} {'<' if published[a] < published[b] else '>='} {b} {published[b]:.3f}"
        for a, b in pairs if a in published and b in published)]
    runs = ctx.stored(dataset)
    testable = [(a, b) for a, b in pairs if len(runs.get(a, {})) >= 2 and len(runs.get(b, {})) >= 2]
    untested = sorted({s for pair in pairs if pair not in testable for s in pair if len(runs.get(s, {})) < 2})
    if untested:
        lines.append(f"not replayed here: {', '.join(untested)}" + (
            " (no faithful implementation: `audit strategies --protocol cdalbench`)"
            if any(s in ("bald",) for s in untested) else " (too few stored runs)"))
    if not testable:
        return NOT_TESTABLE, lines + [ctx.missing(dataset, sorted({s for p in pairs for s in p}))]
    tests = []
    for a, b in testable:
        seeds = sorted(set(runs[a]) & set(runs[b]))
        diff = np.array([runs[a][s] - runs[b][s] for s in seeds])
        t, p = paired_difference_test([runs[a][s] for s in seeds], [runs[b][s] for s in seeds])
        tests.append((a, b, len(seeds), float(diff.mean()), t, p))
    adjusted = adjust_pvalues([p for *_, p in tests])
    below, above = [], []
    for (a, b, n, mean, t, p), p_holm in zip(tests, adjusted):
        below.append(mean < 0 and p_holm < ctx.alpha)
        above.append(mean > 0 and p_holm < ctx.alpha)
        lines.append(f"{a} - {b}: mean {mean:+.4f} over {n} paired runs, t = {t:.2f}, p = {p:.2g}, "
                     f"Holm p = {p_holm:.2g} ({len(tests)} tests)")
    if all(below):
        return "support", lines
    return ("contradiction" if any(above) else "inconclusive"), lines


def oracle_lift_claim(ctx: Context, claim: dict[str, Any]) -> tuple[str, list[str]]:
    """The oracle's AUC minus the best method's, per published column (Tables 8 and 9), averaged;
    then on the stored runs where the oracle was replayed."""
    oracle, lifts, lines = claim["oracle"], [], []
    for table in ("Table 8", "Table 9"):
        columns = sorted({r.dataset for r in load_references(ctx.paper) if r.table == table})
        for dataset in columns:
            means = ctx.published(table, dataset)
            best = max(v for s, v in means.items() if s != oracle)
            lifts.append((means[oracle] - best, (means[oracle] - best) / best))
    points, relative = np.mean([p for p, _ in lifts]), np.mean([r for _, r in lifts])
    lines.append(f"published (Tables 8-9, {len(lifts)} columns): oracle - best method = {points:+.4f} AUC on average "
                 f"({relative:+.1%} relative); smallest {min(p for p, _ in lifts):+.3f}, largest "
                 f"{max(p for p, _ in lifts):+.3f}")
    verdict = "support" if abs(points - float(claim["stated_lift"])) <= float(claim["tolerance"]) else "contradiction"
    for dataset in claim["datasets"]:
        runs = ctx.stored(dataset)
        if len(runs.get(oracle, {})) < 2:
            lines.append(f"{dataset}: the oracle is not stored here ("
                         f"`audit reproduce {ctx.protocol.name} --dataset {dataset} --strategies {oracle}`)")
            continue
        others = {s: np.mean(list(v.values())) for s, v in runs.items() if s != oracle and len(v) >= 2}
        best = max(others, key=others.get)
        lines.append(f"{dataset}: oracle {np.mean(list(runs[oracle].values())):.4f} vs best stored {best} "
                     f"{others[best]:.4f}")
    return verdict, lines


def _combine(verdicts: list[bool]) -> str:
    if not verdicts:
        return NOT_TESTABLE
    return "support" if all(verdicts) else "contradiction"


KINDS: dict[str, Callable[[Context, dict[str, Any]], tuple[str, list[str]]]] = {
    "subset-below": subset_below_claim,
    "draw-rank-change": draw_rank_change_claim,
    "runs-needed": runs_needed_claim,
    "family-below": family_below_claim,
    "oracle-lift": oracle_lift_claim,
}


def evaluate(store: str | Path = ".audit-store.sqlite", samples: int = 1000, seed: int = 0) -> list[ClaimRow]:
    """Every claim of cdalbench.toml with its verdict and figures."""
    if samples < 1:
        raise AuditError(f"--samples must be a positive number, not {samples}")
    data = tomllib.loads(CLAIMS.read_text(encoding="utf-8"))
    ctx = Context(store, samples, seed, data)
    rows = []
    for claim in data["claims"]:
        verdict, lines = KINDS[claim["kind"]](ctx, claim)
        rows.append(ClaimRow(claim["id"], claim["source"], claim["statement"], verdict, "\n".join(lines)))
    return rows
