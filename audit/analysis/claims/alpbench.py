"""ALPBench's claims (alpbench.toml) tested on the pipelines replayed here.

A pipeline is a learner (the protocol's ``[learners]``, as task and query model) x a query
strategy. Each is replayed under the study's small setting on every data set asked for (the
store keeps what was run, so a second call only runs what is missing), then every claim is
tested with the paper's statistics: Welch's t-test at 0.05 between two pipelines' AUBCs, the
heatmap of pipelines not significantly below each data set's best (Figure 2), win matrices of
the strategies per learner (Figure 4). A claim needing a learner, data set or setting that is not
here is "not testable here", with what is missing.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from audit.analysis.claims import ClaimRow
from audit.analysis.stats import adjust_pvalues
from audit.engine import openml_data
from audit.engine.datasets import load_dataset
from audit.engine.replay import ReproduceRequest, execute_replay, plan_replay
from audit.engine.store import ResultStore
from audit.errors import AuditError
from audit.extras import require
from audit.protocols import load_protocol

CLAIMS_FILE = Path(__file__).with_suffix(".toml")
OPTIONS = ("store", "datasets", "trials", "jobs", "learners", "strategies")


@dataclass
class Pipelines:
    """What the replays left: per (learner, strategy, data set) the AUBCs and the accuracies of
    the initial and the last round, seed by seed; the learners that could not run, with why."""

    learners: list[str]
    strategies: list[str]
    datasets: list[str]
    aubc: dict[tuple[str, str, str], np.ndarray] = field(default_factory=dict)
    first_last: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)


def welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Welch's two-sided p between two pipelines' AUBCs; two constant samples: 1 if equal, else 0."""
    p = stats.ttest_ind(a, b, equal_var=False).pvalue
    if np.isnan(p):
        return 1.0 if np.isclose(a.mean(), b.mean()) else 0.0
    return float(p)


def default_datasets() -> list[str]:
    """The shared LIBSVM files that hold an ALPBench data set (audit datasets --alpbench)."""
    copies = (openml_data.local_copy(i) for i in openml_data.alpbench_ids())
    return sorted({c.dataset for c in copies if c is not None})


def replay_pipelines(learners: list[str], strategies: list[str], datasets: list[str], trials: int | None,
                     jobs: int, store_path: str | Path, log=lambda line: print(line, file=sys.stderr)) -> Pipelines:
    """Replay every available learner x strategy on every data set (all inputs checked first)."""
    config = tomllib.loads(CLAIMS_FILE.read_text())
    base = load_protocol(config["protocol"])
    unknown = [name for name in learners if name not in base.learners]
    if unknown:
        raise AuditError(f"unknown learner(s) {', '.join(unknown)}; {base.name} has: {', '.join(base.learners)}")
    result = Pipelines([], strategies, datasets)
    for name in learners:
        try:
            base.learners[name].validate()
            result.learners.append(name)
        except AuditError as exc:
            result.unavailable[name] = str(exc)
    plans = []
    for learner in result.learners:
        protocol = dataclasses.replace(base, name=f"{base.name}~{learner}", task_model=base.learners[learner])
        for dataset in datasets:
            request = ReproduceRequest(protocol, dataset, strategies, trials=trials, jobs=jobs, store=store_path,
                                       progress=False)
            plans.append((learner, request, plan_replay(request)))  # every input checked before any trial
    store = ResultStore(store_path)
    try:
        for learner, request, plan in plans:
            fingerprint, _, _, _ = execute_replay(plan, request, store, lambda line, l=learner: log(f"{l}: {line}"))
            for strategy in plan.strategies:
                ok = [t for t in store.trials(plan.protocol.name, plan.dataset, strategy, fingerprint, plan.seeds)
                      if t.status == "ok"]
                key = (learner, strategy, plan.dataset)
                result.aubc[key] = np.array([t.aubc for t in ok])
                result.first_last[key] = (np.array([t.rounds[0].accuracy for t in ok]),
                                          np.array([t.rounds[-1].accuracy for t in ok]))
    finally:
        store.close()
    return result


def _cells(r: Pipelines, dataset: str) -> dict[tuple[str, str], np.ndarray]:
    return {(l, q): r.aubc[l, q, dataset] for l in r.learners for q in r.strategies
            if r.aubc.get((l, q, dataset)) is not None and r.aubc[l, q, dataset].size}


def _missing_learners(r: Pipelines, names: list[str]) -> str:
    return "; ".join(f"{n}: {r.unavailable.get(n, 'not run (not in --learners)')}" for n in names
                     if n not in r.learners)


def dominant_learners(claim: dict[str, Any], r: Pipelines, alpha: float) -> tuple[str, str]:
    """Figure 2's heatmap summed per learner: pipelines not significantly below each data set's best."""
    claimed = [n for n in claim["learners"] if n in r.learners]
    if not claimed or len(r.learners) < 3:
        return "not testable here", f"needs the claimed learners and at least 3 learners; {_missing_learners(r, claim['learners'])}"
    heat = dict.fromkeys(r.learners, 0)
    for dataset in r.datasets:
        cells = _cells(r, dataset)
        best = max(cells, key=lambda c: cells[c].mean())
        for (learner, _), values in cells.items():
            heat[learner] += welch_p(values, cells[best]) >= alpha
    ranked = sorted(heat, key=lambda n: -heat[n])
    cutoff = heat[ranked[math.ceil(len(ranked) / 2) - 1]]  # the top half, ties included
    verdict = "support" if all(heat[n] >= cutoff for n in claimed) else "contradiction"
    figures = (f"winning pipelines per learner (Welch p >= {alpha} against each data set's best; "
               f"{len(r.strategies)} strategies x {len(r.datasets)} data sets): "
               + ", ".join(f"{n} {heat[n]}" for n in ranked) + f"; top half from {cutoff}")
    missing = _missing_learners(r, claim["learners"])
    return verdict, figures + (f"\nnot tested: {missing}" if missing else "")


def learner_over_strategy(claim: dict[str, Any], r: Pipelines, alpha: float) -> tuple[str, str]:
    """Per data set: the spread of mean AUBC across learners (averaged over strategies) against the
    spread across strategies (averaged over learners)."""
    if len(r.learners) < 2 or len(r.strategies) < 2:
        return "not testable here", "needs at least 2 learners and 2 strategies"
    wins, lines = 0, []
    for dataset in r.datasets:
        means = np.array([[r.aubc[l, q, dataset].mean() for q in r.strategies] for l in r.learners])
        by_learner, by_strategy = np.ptp(means.mean(axis=1)), np.ptp(means.mean(axis=0))
        wins += by_learner > by_strategy
        lines.append(f"{dataset}: range over learners {by_learner:.4f}, over strategies {by_strategy:.4f}")
    verdict = "support" if wins > len(r.datasets) / 2 else "contradiction"
    return verdict, f"learner matters more on {wins} of {len(r.datasets)} data sets\n" + "\n".join(lines)


def win_matrix(r: Pipelines, learner: str, alpha: float) -> dict[str, dict[str, np.ndarray]]:
    """Figure 4: per data set, whether strategy i beats j for ``learner`` (higher mean, Welch p < alpha)."""
    wins: dict[str, dict[str, np.ndarray]] = {}
    for dataset in r.datasets:
        a = [r.aubc[learner, q, dataset] for q in r.strategies]
        wins[dataset] = np.array([[i != j and a[i].mean() > a[j].mean() and welch_p(a[i], a[j]) < alpha
                                   for j in range(len(a))] for i in range(len(a))])
    return wins


def random_outperforms(claim: dict[str, Any], r: Pipelines, alpha: float) -> tuple[str, str]:
    """Share of data sets on which Rand significantly beats more than half of the other strategies."""
    learner = claim["learner"]
    if learner not in r.learners or "random" not in r.strategies or len(r.datasets) < claim["min_datasets"]:
        return "not testable here", (f"needs {learner}, the strategy random and at least {claim['min_datasets']} data "
                                     f"sets; ran {len(r.datasets)} data sets")
    rand = r.strategies.index("random")
    others = len(r.strategies) - 1

    def share(name: str) -> tuple[float, str]:
        matrices = win_matrix(r, name, alpha)
        beaten = {d: int(m[rand].sum()) for d, m in matrices.items()}
        hits = sum(b > others / 2 for b in beaten.values())
        return hits / len(beaten), f"{name}: Rand beats most others on {hits} of {len(beaten)} ({beaten})"

    own, text = share(learner)
    low, high = claim["share"]
    lines, verdict = [text], "support" if low <= own <= high else "contradiction"
    for other in claim["others"]:
        if other not in r.learners:
            lines.append(f"{other}: not tested ({r.unavailable.get(other, 'not in --learners')})")
            continue
        theirs, text = share(other)
        lines.append(text)
        if theirs >= own:
            verdict = "contradiction"
    return verdict, f"roughly a third read as {low:.0%} to {high:.0%}; beaten = other strategies Rand beats " \
                    f"(Welch p < {alpha})\n" + "\n".join(lines)


def deteriorates(claim: dict[str, Any], r: Pipelines, alpha: float) -> tuple[str, str]:
    """Pipelines whose last round's test accuracy is below the initial model's: a one-sided
    paired t-test over seeds per pipeline, Holm-adjusted over every pipeline tested (an
    existential claim tested on hundreds of pipelines would otherwise find some by chance).
    Support when one stays significant; else inconclusive (a "can" is not refuted)."""
    tested, pvalues = [], []
    for (learner, strategy, dataset), (first, last) in r.first_last.items():
        if first.size > 1:
            p = stats.ttest_rel(last, first, alternative="less").pvalue
            tested.append((learner, strategy, dataset, first.mean(), last.mean()))
            pvalues.append(float(p) if not np.isnan(p) else (0.0 if last.mean() < first.mean() else 1.0))
    adjusted = adjust_pvalues(pvalues) if pvalues else []
    found = [f"{learner} x {strategy} on {dataset}: {start:.4f} -> {end:.4f} (p={p:.3g}, Holm p={q:.3g})"
             for (learner, strategy, dataset, start, end), p, q in zip(tested, pvalues, adjusted) if q < alpha]
    below = sum(end < start and p < alpha for (*_, start, end), p in zip(tested, pvalues))
    if found:
        return "support", (f"{len(found)} of {len(tested)} pipelines end below their initial accuracy (Holm p < {alpha:g}):\n"
                           + "\n".join(found[:8]) + ("\n..." if len(found) > 8 else ""))
    return "inconclusive", (f"none of the {len(tested)} pipelines ends below its initial accuracy at Holm p < {alpha:g} "
                            f"({below} below at an unadjusted p < {alpha:g}, as chance alone gives some); "
                            "a claim that it can happen is not refuted by the data sets run")


def needs(claim: dict[str, Any], r: Pipelines, alpha: float) -> tuple[str, str]:
    """A claim about a data set, learner or setting not run here."""
    missing = []
    if "openml_id" in claim:
        copy = openml_data.local_copy(claim["openml_id"])
        if copy is None or copy.dataset not in r.datasets:
            missing.append(f"OpenML data set {claim['openml_id']} is not present here "
                           f"(audit datasets --fetch openml:{claim['openml_id']} where openml.org can be reached)")
    if "learners" in claim and _missing_learners(r, claim["learners"]):
        missing.append(_missing_learners(r, claim["learners"]))
    if "setting" in claim:
        missing.append(f"it compares two settings; this command replays {tomllib.loads(CLAIMS_FILE.read_text())['protocol']} "
                       f"only (the other: {claim['setting']})")
    return "not testable here", "\n".join(missing)


TESTS = {"dominant_learners": dominant_learners, "learner_over_strategy": learner_over_strategy,
         "random_outperforms": random_outperforms, "deteriorates": deteriorates, "needs": needs}


def evaluate(store: str | Path = ".audit-store.sqlite", datasets: list[str] | None = None, trials: int | None = None,
             jobs: int = 1, learners: list[str] | None = None, strategies: list[str] | None = None) -> list[ClaimRow]:
    """Every claim of alpbench.toml with its verdict, on the pipelines replayed (or found in the store)."""
    require("alpbench", "audit claims alpbench")
    config = tomllib.loads(CLAIMS_FILE.read_text())
    # the registry's names (tictactoe is tic); a data set that is not here is one line, before any trial
    datasets = [load_dataset(name).info.name for name in (datasets or default_datasets())]
    r = replay_pipelines(learners or config["learners"], strategies or config["strategies"], datasets, trials, jobs,
                         store)
    rows = []
    for claim in config["claim"]:
        verdict, figures = TESTS[claim["test"]](claim, r, config["alpha"])
        rows.append(ClaimRow(claim["id"], claim["source"], claim["statement"], verdict, figures))
    return rows
