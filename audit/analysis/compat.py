"""`audit compat`: query-model x task-model grids for uncertainty sampling (lu2023 Section 5.1).

lu2023 argues that uncertainty sampling loses accuracy when the model that picks the
queries (the query model) differs from the model that is trained and evaluated (the task
model): in its heatmaps (Figures 4, 7-12) the best mean AUBC lies on the diagonal on 22
of 26 data sets. This module replays every (query, task) pair on the same trial splits,
one derived protocol per task model (column), and stores every cell's trial under its
column's protocol, so reruns reuse them. A row (query model) runs as one trial per seed:
the query model is fitted once a round, shared with its own task model, and every other
column's task model is trained and scored on the same queries. Each column then tests
the diagonal against every off-diagonal cell with paired t-tests on the same trials,
Holm-corrected.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from audit.analysis.compare import summarise
from audit.analysis.stats import adjust_pvalues, paired_test
from audit.engine.destinations import check_report_dir, csv_table, write_directory
from audit.engine.metrics import get_variant
from audit.engine.models import BUILDERS, OPTIONAL_MODELS, ModelSpec, parse_model
from audit.engine.replay import (
    ReplayPlan,
    ReproduceRequest,
    missing_tasks,
    plan_replay,
    run_and_store,
)
from audit.engine.runner import TrialResult, TrialTask
from audit.engine.store import ResultStore
from audit.errors import AuditError
from audit.protocols import Protocol, StrategySpec, load_protocol

ALPHA = 0.05
STRATEGIES = {"us-margin": "native.margin"}  # uncertainty sampling on a fitted query model's margin
DEFAULT_MODELS = ("lr", "svm-rbf", "rf")
# The classifiers of lu2023's grids (Section 5.1; PROTOCOL-NOTES.md). Any other model
# name of audit.engine.models.BUILDERS runs with scikit-learn's defaults; any spec
# `NAME(param=value, ...)` or scikit-learn class path (audit.engine.models.parse_model) as written.
LU2023_SPECS = {
    "lr": ModelSpec("lr", {"C": 1.0, "solver": "lbfgs"}),
    "svm-rbf": ModelSpec("svm-rbf", {"C": 1.0, "gamma": "auto"}),
    "rf": ModelSpec("rf", {"n_estimators": 100}),
}
CSV_FIELDS = ("query_model", "task_model", "n", "mean", "sd", "ci95_low", "ci95_high")

NON_COMPATIBLE = "non-compatible best"
_GROUP_NAMES = {"lr": "LR", "svm-rbf": "SVM", "rf": "RF"}
# Which grid cell is best on each data set, as the captions of lu2023 Figures 7-12
# (Appendix B.2) group them; the paper counts groups 1-3 as "compatible best on 22 data sets".
_CAPTIONS = {
    "Figure 7": ("compatible LR best", ("appendicitis", "ex8b", "haberman", "wdbc")),
    "Figure 8": ("compatible LR best", ("diabetes", "mammographic", "gcloudub", "twonorm")),
    "Figure 9": ("compatible SVM best", ("sonar", "ionosphere", "clean1", "tic", "gcloudb", "ringnorm")),
    "Figure 10": ("compatible RF best", ("parkinsons", "breast", "australian", "ex8a")),
    "Figure 11": ("compatible RF best", ("german", "spambase", "phoneme", "phishing")),
    "Figure 12": (NON_COMPATIBLE, ("heart", "splice", "checkerboard", "banana")),
}
PAPER_GROUPS: dict[str, tuple[str, str]] = {d: (group, fig) for fig, (group, names) in _CAPTIONS.items()
                                            for d in names}
PAPER_DIAGONAL_BEST = (22, 26)


def compatible_group(model: str) -> str:
    return f"compatible {_GROUP_NAMES.get(model, model)} best"


def judge_column(task: str, column: dict[str, dict[int, float]], alpha: float = ALPHA) -> dict[str, Any]:
    """Is the compatible cell (query model = task model) the best of its column?

    ``column`` maps each query model to its {trial seed: AUBC}. Every off-diagonal cell is
    compared with the diagonal by a paired t-test on the shared trials; the p-values of
    the column are one Holm family. ``mean_difference`` is off-diagonal minus diagonal.
    """
    means = {q: float(np.mean(list(v.values()))) for q, v in column.items() if v}
    comparisons = []
    for q, values in column.items():
        if q != task:
            comparisons.append({"query_model": q, **paired_test(column.get(task, {}), values)})
    for c, p_holm in zip(comparisons, adjust_pvalues([c["p"] for c in comparisons])):
        c["p_holm"] = p_holm
        c["significant"] = bool(p_holm < alpha)
    result = {"task_model": task, "means": means, "comparisons": comparisons, "alpha": alpha}
    if task not in means or any(c["n_pairs"] < 2 for c in comparisons):
        return {**result, "compatible_best": None, "best_query_model": None,
                "verdict": "too few paired trials to test"}
    best = max(means, key=lambda q: (means[q], q == task))  # a tie goes to the diagonal
    result.update(compatible_best=best == task, best_query_model=best)
    if best == task:
        beaten = sum(c["significant"] and c["mean_difference"] < 0 for c in comparisons)
        result["verdict"] = f"compatible best, significant vs {beaten}/{len(comparisons)}"
    else:
        c = next(c for c in comparisons if c["query_model"] == best)
        result["verdict"] = (f"non-compatible {best} query better, p = {c['p_holm']:.3g} "
                             f"(Holm; {'significant' if c['significant'] else 'not significant'})")
    return result


def grid_group(means: dict[tuple[str, str], float]) -> tuple[str, tuple[str, str]]:
    """(lu2023 figure group, best (query, task) cell): where the grid's best mean lies.

    lu2023's analysis script picks the grid's maximum; a tie goes to the diagonal.
    """
    cell = max((k for k in means if not math.isnan(means[k])), key=lambda k: (means[k], k[0] == k[1]))
    return (compatible_group(cell[0]) if cell[0] == cell[1] else NON_COMPATIBLE), cell


# --- running the grid --------------------------------------------------------------------

@dataclass
class CompatRequest:
    """Everything `audit compat` was asked to do, with the documented defaults."""

    protocol: str | Protocol
    datasets: Sequence[str]
    models: Sequence[str] = DEFAULT_MODELS
    strategy: str = "us-margin"
    trials: int | None = None  # None: the protocol's count for the data set's size
    jobs: int = 1
    data_dir: str | None = None
    store: str | Path = ".audit-store.sqlite"
    out: str | Path | None = None
    progress: bool = True


def model_spec(name: str) -> ModelSpec:
    """A grid model by its text: lu2023's spec for lr, svm-rbf and rf, else the spec as written
    (``knn``, ``knn(n_neighbors=3)``, ``sklearn.naive_bayes.GaussianNB``; scikit-learn's defaults
    for parameters it does not name)."""
    return LU2023_SPECS.get(name) or parse_model(name)


def grid_models(names: Sequence[str]) -> dict[str, ModelSpec]:
    """The grid's models by their text, checked: two or more, distinct, valid specs."""
    names = [n.strip() for n in names]
    if len(names) < 2:
        raise AuditError("a compatibility grid needs at least two models (--models a,b,...)")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise AuditError(f"model(s) named twice in --models: {', '.join(repeated)}")
    models = {name: model_spec(name) for name in names}
    same = sorted({f"{a} = {b}" for a in models for b in models if a < b and models[a].key == models[b].key})
    if same:
        raise AuditError(f"--models names one model twice: {', '.join(same)}")
    return models


def strategy_id(query_model: str) -> str:
    return f"q={query_model}"


def grid_protocol(protocol: Protocol, task_model: str, models: dict[str, ModelSpec], implementation: str) -> Protocol:
    """The derived protocol of one task model (one column): every known model is a query strategy.

    It holds every model of audit.engine.models.BUILDERS by name (but those beyond the base
    install, OPTIONAL_MODELS: an optional extra's), not only the grid's, so its spec
    hash (hence the store fingerprint) does not depend on which of them a grid names: a
    larger grid reuses the stored cells of a smaller one. Specs written out in --models
    (``knn(n_neighbors=3)``, class paths) are added, so only grids naming them share
    those cells. Its own name keeps store keys of different task models apart.
    """
    known = {q: model_spec(q) for q in BUILDERS if q not in OPTIONAL_MODELS} | models  # an optional one only when named
    strategies = {strategy_id(q): StrategySpec(strategy_id(q), implementation, {}, spec) for q, spec in known.items()}
    return dataclasses.replace(protocol, name=f"{protocol.name}-compat-task={task_model}",
                               task_model=models[task_model], strategies=strategies)


def run_compat(request: CompatRequest, log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
               ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Replay the grids, write each data set's report, and the summary when there are several.

    Returns (one report per data set, the cross-data-set summary or None).
    """
    if request.strategy not in STRATEGIES:
        raise AuditError(f"unknown --strategy '{request.strategy}'; known: {', '.join(STRATEGIES)}")
    if not request.datasets:
        raise AuditError("no data set given")
    models = grid_models(request.models)
    base = request.protocol if isinstance(request.protocol, Protocol) else load_protocol(request.protocol)
    protocols = {t: grid_protocol(base, t, models, STRATEGIES[request.strategy]) for t in models}
    sids = [strategy_id(q) for q in models]
    plans = {}
    for dataset in request.datasets:  # every input is checked before any trial runs
        plans[dataset] = {}
        for t, protocol in protocols.items():
            replay = ReproduceRequest(protocol, dataset, sids, trials=request.trials, jobs=request.jobs,
                                      data_dir=request.data_dir, store=request.store, progress=request.progress)
            # Skipped seeds are the same for every task model: say so once.
            plans[dataset][t] = (replay, plan_replay(replay, log if not plans[dataset] else lambda line: None))
    names = [next(iter(by_task.values()))[1].dataset for by_task in plans.values()]
    destinations = _destinations(request, base.name, names)
    for target in destinations.values():  # al-audit replaces only what it wrote: checked before any trial
        check_report_dir(target, create_parents=request.out is None)
    holds = {"command": "compat", "protocol": base.name, "strategy": request.strategy, "models": list(models)}
    together: dict[str, Any] = {}  # --out with several data sets: one directory, a grid per data set
    store = ResultStore(request.store)
    reports = []
    try:
        for dataset, by_task in plans.items():
            runs, details = run_grid(by_task, models, store, log)
            results = {(q, t): store.trials(plan.protocol.name, plan.dataset, strategy_id(q),
                                            runs[t]["fingerprint"], plan.seeds)
                       for t, (_, plan) in by_task.items() for q in models}
            first = next(iter(by_task.values()))[1]
            report = analyse(results, list(models), first.protocol.sd_ddof)
            report.update(_provenance(base, first, models, request.strategy, details, runs))
            files = grid_files(report, results)
            if first.dataset in destinations:
                write_directory(destinations[first.dataset], files, {**holds, "dataset": first.dataset},
                                create_parents=request.out is None)
                report["out_dir"] = str(destinations[first.dataset])
            else:
                together.update({f"{first.dataset}/{name}": content for name, content in files.items()})
                report["out_dir"] = str(Path(request.out) / first.dataset)
            reports.append(report)
    finally:
        store.close()
    summary = None
    if len(reports) > 1:
        summary = summarise_grids(reports)
        out = destinations[SUMMARY]
        write_directory(out, {**together, "summary.md": f"# Model compatibility across data sets\n\n```\n"
                                                        f"{format_summary(summary)}\n```\n",
                              "summary.json": json.dumps(summary, indent=2) + "\n"},
                        {**holds, "datasets": [r["dataset"]["name"] for r in reports]},
                        create_parents=request.out is None)
        summary["out_dir"] = str(out)
    return reports, summary


def run_grid(by_task: dict[str, tuple[ReproduceRequest, ReplayPlan]], models: dict[str, ModelSpec],
             store: ResultStore, log: Callable[[str], None]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Run the cells of one data set's grid the store lacks, a row (query model) per trial.

    A row's queries do not depend on the task model, so one trial under the diagonal
    column's protocol replays the row's query model, fitted once a round and shared with
    its own task model, and scores the other columns' task models on the same queries
    (runner.run_trial's companions). Returns ({task model: its column's run record},
    the fingerprint details).
    """
    protocols = {t: plan.protocol for t, (_, plan) in by_task.items()}
    fingerprints, runs, lacking = {}, {}, {}
    for t, (replay, plan) in by_task.items():
        fingerprint, details, tasks, reused = missing_tasks(plan, replay, store)
        fingerprints[plan.protocol.name] = fingerprint
        runs[t] = {"protocol": plan.protocol.name, "spec_hash": plan.protocol.spec_hash,
                   "fingerprint": fingerprint, "ran": len(tasks), "reused": reused}
        for task in tasks:  # seed-major already: every row finishes a first trial early
            lacking.setdefault((task.trial_seed, task.strategy), []).append(t)
    query_model = {strategy_id(q): q for q in models}
    replay, plan = next(iter(by_task.values()))
    tasks = [TrialTask(protocols[query_model[sid]], plan.dataset, replay.data_dir, sid, seed, None, 1,
                       tuple(protocols[t] for t in columns if t != query_model[sid]))
             for (seed, sid), columns in lacking.items()]
    cells = sum(len(columns) for columns in lacking.values())
    log(f"{plan.dataset}: {len(models)}x{len(models)} grid x {len(plan.seeds)} trials, {cells} cells to run as "
        f"{len(tasks)} row trials (one per query model and trial seed), "
        f"{sum(r['reused'] for r in runs.values())} cells already stored, --jobs {replay.jobs}")
    run_and_store(tasks, replay, store, fingerprints, log)
    return runs, details


SUMMARY = None  # the destinations key of the cross-data-set summary


def _destinations(request: CompatRequest, protocol: str, datasets: list[str]) -> dict[str | None, Path]:
    """The report directories to write, by data set (SUMMARY: the summary's). By default one
    per data set and one for the summary under reports/; --out holds one data set's grid,
    or, with several, one directory of them all (a subdirectory per data set) and the summary."""
    if request.out is not None:
        return {datasets[0] if len(datasets) == 1 else SUMMARY: Path(request.out)}
    targets: dict[str | None, Path] = {ds: Path("reports") / f"compat-{protocol}-{ds}" for ds in datasets}
    if len(datasets) > 1:
        targets[SUMMARY] = Path("reports") / f"compat-{protocol}-summary"
    return targets


def _provenance(base: Protocol, plan: ReplayPlan, models: dict[str, ModelSpec], strategy: str, details: dict[str, Any],
                runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    data = plan.data.info
    return {
        "dataset": {"name": data.name, "n": data.n, "d": data.d, "sha256": data.sha256},
        "protocol": {"name": base.name, "spec_hash": base.spec_hash, "aubc_variant": base.aubc_variant,
                     "aubc_definition": get_variant(base.aubc_variant).source, "aubc_metric": base.aubc_metric,
                     "sd_ddof": base.sd_ddof, "scale": base.scale, "scaling": base.scaling,
                     "model_seed": base.seeds["model"], "strategy_seed": base.seeds["strategy"]},
        "strategy": {"name": strategy, "implementation": STRATEGIES[strategy]},
        "model_specs": {name: str(spec) for name, spec in models.items()},
        "trial_seeds": plan.seeds,
        "skipped_seeds": [list(s) for s in plan.skipped],
        "environment": details["versions"],
        "code": details["code"],
        "runs": runs,
        "paper_group": PAPER_GROUPS.get(data.name),
    }


def analyse(results: dict[tuple[str, str], list[TrialResult]], models: list[str], sd_ddof: int = 1) -> dict[str, Any]:
    """Cells, column tests, the figure group, and whether each row queried identically in every column."""
    ok = {k: {r.trial_seed: r.aubc for r in v if r.status == "ok"} for k, v in results.items()}
    cells = []
    for q in models:
        for t in models:
            s = summarise(list(ok[(q, t)].values()), sd_ddof)
            cells.append({"query_model": q, "task_model": t, "n": s.n,
                          "n_failed": len(results[(q, t)]) - s.n, "mean": _finite(s.mean), "sd": _finite(s.sd),
                          "ci95_low": _finite(s.ci95[0]), "ci95_high": _finite(s.ci95[1])})
    columns = [judge_column(t, {q: ok[(q, t)] for q in models}) for t in models]
    means = {(c["query_model"], c["task_model"]): math.nan if c["mean"] is None else c["mean"] for c in cells}
    group, best = grid_group(means) if any(not math.isnan(m) for m in means.values()) else (None, None)
    rows = []
    for q in models:
        hashes = [{r.trial_seed: r.query_hash for r in results[(q, t)] if r.status == "ok"} for t in models]
        shared = set.intersection(*(set(h) for h in hashes))
        rows.append({"query_model": q, "trials": len(shared),
                     "identical": sum(len({h[s] for h in hashes}) == 1 for s in shared)})
    return {"models": models, "cells": cells, "columns": columns, "group": group,
            "best_cell": list(best) if best else None, "diagonal_best": None if best is None else best[0] == best[1],
            "row_queries": rows}


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


# --- output ------------------------------------------------------------------------------

def _cell(report: dict[str, Any], q: str, t: str) -> dict[str, Any]:
    return next(c for c in report["cells"] if c["query_model"] == q and c["task_model"] == t)


def _fmt(scale: str, value: float | None, signed: bool = False) -> str:
    """An AUBC (fraction) on the paper's scale."""
    if value is None or math.isnan(value):
        return "-"
    if scale == "percent":
        return f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _table(rows: list[Sequence[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return [lines[0], "  ".join("-" * w for w in widths), *lines[1:]]


def format_grid(report: dict[str, Any]) -> str:
    """The terminal / Markdown text of one data set's grid: provenance, heatmap, cells, verdicts."""
    p, d, models = report["protocol"], report["dataset"], report["models"]
    scale = p["scale"]
    seeds = report["trial_seeds"]
    libs = ", ".join(f"{k} {v}" for k, v in report["environment"].items() if v != "absent")
    lines = [
        f"compat on {d['name']} (n={d['n']}, d={d['d']}, sha256 {d['sha256'][:12]}): protocol {p['name']} "
        f"(spec {p['spec_hash']}), {report['strategy']['name']} ({report['strategy']['implementation']})",
        f"AUBC {p['aubc_variant']} on {p['aubc_metric']} ({p['aubc_definition']}); SD ddof={p['sd_ddof']}; "
        f"values in {p['scale']}; scaling {p['scaling']}",
        "models: " + ", ".join(f"{k} = {v}" for k, v in report["model_specs"].items())
        + f"; model random_state {p['model_seed']}",
        f"trial seeds {seeds[0]}-{seeds[-1]} ({len(seeds)} trials, {len(report['skipped_seeds'])} skipped), "
        f"the same splits in every cell",
        f"libraries: {libs}",
        "store: " + "; ".join(f"task {t}: {r['ran']} run, {r['reused']} reused (fingerprint {r['fingerprint']})"
                              for t, r in report["runs"].items()),
        "",
        "mean AUBC: rows = query model (picks the queries), columns = task model (trained and evaluated); "
        "[diagonal] = compatible",
    ]
    grid = [["query \\ task", *models]]
    for q in models:
        grid.append([q] + [(f"[{_fmt(scale, _cell(report, q, t)['mean'])}]" if q == t
                            else _fmt(scale, _cell(report, q, t)["mean"])) for t in models])
    lines += _table(grid) + [""]
    cells = [["query", "task", "n", "mean", "sd", "95% CI"]]
    for c in report["cells"]:
        failed = f" ({c['n_failed']} failed)" if c["n_failed"] else ""
        cells.append([c["query_model"], c["task_model"], f"{c['n']}{failed}", _fmt(scale, c["mean"]),
                      _fmt(scale, c["sd"]), f"[{_fmt(scale, c['ci95_low'])}, {_fmt(scale, c['ci95_high'])}]"])
    lines += _table(cells) + [""]
    lines.append(f"per task model: the diagonal against each other query model, paired t-test on the same "
                 f"trials, Holm-corrected within the column (alpha {ALPHA})")
    tests = [["task", "query", "pairs", "diff vs diagonal", "t", "p", "p Holm"]]
    for col in report["columns"]:
        for c in col["comparisons"]:
            tests.append([col["task_model"], c["query_model"], str(c["n_pairs"]),
                          _fmt(scale, c["mean_difference"], True),
                          "-" if math.isnan(c["t"]) else f"{c['t']:.2f}", _pval(c["p"]), _pval(c["p_holm"])])
    lines += _table(tests) + [""]
    lines += [f"task {col['task_model']}: {col['verdict']}" for col in report["columns"]]
    lines.append("")
    if report["group"]:
        q, t = report["best_cell"]
        paper = report["paper_group"]
        lines.append(f"best cell: query {q} x task {t} ({_fmt(scale, _cell(report, q, t)['mean'])}) -> "
                     f"{report['group']}; lu2023: " + (f"{paper[0]} ({paper[1]})" if paper else "not in Figures 7-12"))
    lines.append("query sequences: " + ", ".join(
        f"{r['query_model']} row identical in every column on {r['identical']}/{r['trials']} trials"
        for r in report["row_queries"]))
    return "\n".join(lines)


def _pval(p: float) -> str:
    return "-" if p is None or math.isnan(p) else f"{p:.3g}"


def plot_grid(report: dict[str, Any], path: Path) -> None:
    """The heatmap: rows = query model, columns = task model, means annotated, diagonal outlined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    models, p = report["models"], report["protocol"]
    k = len(models)
    factor, unit = (100, "%") if p["scale"] == "percent" else (1, "fraction")
    values = np.array([[np.nan if _cell(report, q, t)["mean"] is None else factor * _cell(report, q, t)["mean"]
                        for t in models] for q in models])
    significant = {(c["query_model"], col["task_model"]): c["significant"]
                   for col in report["columns"] for c in col["comparisons"]}
    fig, ax = plt.subplots(figsize=(2.6 + 1.5 * k, 1.9 + 1.25 * k), dpi=120)
    image = ax.imshow(values, cmap="viridis")
    low, high = np.nanmin(values), np.nanmax(values)
    for i, q in enumerate(models):
        for j, t in enumerate(models):
            if np.isnan(values[i, j]):
                continue
            shade = (values[i, j] - low) / (high - low) if high > low else 1.0
            color = "black" if shade > 0.55 else "white"
            ax.text(j, i - 0.12, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=12,
                    fontweight="bold", color=color)
            if q == t:
                note = "compatible"
            else:
                diff = values[i, j] - values[j, j]
                note = f"{diff:+.2f}{' *' if significant.get((q, t)) else ''}"
            ax.text(j, i + 0.22, note, ha="center", va="center", fontsize=9, color=color)
        ax.add_patch(Rectangle((i - 0.46, i - 0.46), 0.92, 0.92, fill=False, edgecolor="red", linewidth=3))
    ax.set_xticks(range(k), models)
    ax.set_yticks(range(k), models)
    ax.set_xlabel("task model (trained and evaluated)")
    ax.set_ylabel("query model (picks the queries)")
    n = sorted({c["n"] for c in report["cells"]})
    n_text = (f"{n[0]} trial" + ("" if n[0] == 1 else "s")) if len(n) == 1 else f"{n[0]}-{n[-1]} trials"
    ax.set_title(f"{report['dataset']['name']}: uncertainty sampling (margin), query x task model\n"
                 f"{p['name']} protocol, AUBC {p['aubc_variant']} on {p['aubc_metric']}, n = {n_text}",
                 fontsize=10)
    colorbar = fig.colorbar(image, ax=ax, shrink=0.85)
    colorbar.set_label(f"mean AUBC ({unit})")
    fig.text(0.01, 0.01, "red outline: compatible pair (diagonal)\nbelow each mean: difference to its column's "
             f"diagonal; * paired t-test, Holm-corrected, p < {ALPHA}", fontsize=8, ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def grid_files(report: dict[str, Any], results: dict[tuple[str, str], list[TrialResult]]
               ) -> dict[str, str | Callable[[Path], None]]:
    """compat.csv, per_trial.csv, compat.json, report.md and compat.png, for write_directory."""
    cells_csv = csv_table(CSV_FIELDS, report["cells"])
    trials_csv = csv_table(["query_model", "task_model", "trial_seed", "aubc", "status", "query_hash"],
                           [[q, t, r.trial_seed, r.aubc, r.status, r.query_hash]
                            for (q, t), trials in results.items() for r in trials])

    markdown = (f"# Model compatibility on {report['dataset']['name']}\n\n"
                f"## Uncertainty sampling: query model x task model (lu2023 Section 5.1, Figures 4, 7-12)\n\n"
                f"```\n{format_grid(report)}\n```\n\n![query x task heatmap](compat.png)\n")
    return {"compat.csv": cells_csv, "per_trial.csv": trials_csv, "compat.json": json.dumps(report, indent=2) + "\n",
            "report.md": markdown, "compat.png": lambda path: plot_grid(report, path)}


# --- across data sets --------------------------------------------------------------------

def summarise_grids(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """On how many data sets the diagonal holds the grid's best mean, and each set's group vs lu2023's."""
    paper_models = set(reports[0]["models"]) == set(DEFAULT_MODELS)
    rows = []
    for r in reports:
        paper = r["paper_group"]
        columns = [c for c in r["columns"] if c["compatible_best"] is not None]
        rows.append({
            "dataset": r["dataset"]["name"], "n_trials": len(r["trial_seeds"]), "best_cell": r["best_cell"],
            "best_mean": None if r["best_cell"] is None else _cell(r, *r["best_cell"])["mean"],
            "diagonal_best": r["diagonal_best"], "group": r["group"],
            "columns_compatible_best": sum(bool(c["compatible_best"]) for c in columns),
            "columns": len(r["columns"]),
            "paper_group": paper[0] if paper else None, "paper_figure": paper[1] if paper else None,
            "matches_paper": (r["group"] == paper[0]) if paper and paper_models and r["group"] else None,
        })
    return {
        "protocol": reports[0]["protocol"]["name"], "scale": reports[0]["protocol"]["scale"],
        "aubc_variant": reports[0]["protocol"]["aubc_variant"], "models": reports[0]["models"],
        "paper_models": paper_models, "datasets": rows,
        "diagonal_best": sum(bool(r["diagonal_best"]) for r in rows),
        "matches_paper": sum(bool(r["matches_paper"]) for r in rows),
        "compared": sum(r["matches_paper"] is not None for r in rows),
        "paper_diagonal_best": list(PAPER_DIAGONAL_BEST),
    }


def format_summary(summary: dict[str, Any]) -> str:
    rows = [["data set", "trials", "best cell (query x task)", "mean", "diagonal best", "columns compatible best",
             "group (replay)", "lu2023 group", "same"]]
    for r in summary["datasets"]:
        cell = "-" if r["best_cell"] is None else f"{r['best_cell'][0]} x {r['best_cell'][1]}"
        paper = f"{r['paper_group']} ({r['paper_figure']})" if r["paper_group"] else "not in Figures 7-12"
        same = "-" if r["matches_paper"] is None else ("yes" if r["matches_paper"] else "no")
        rows.append([r["dataset"], str(r["n_trials"]), cell, _fmt(summary["scale"], r["best_mean"]),
                     "yes" if r["diagonal_best"] else "no", f"{r['columns_compatible_best']}/{r['columns']}",
                     r["group"] or "-", paper, same])
    n = len(summary["datasets"])
    claim, of = summary["paper_diagonal_best"]
    lines = [f"compat summary: protocol {summary['protocol']}, AUBC {summary['aubc_variant']}, "
             f"models {', '.join(summary['models'])}", "", *_table(rows), "",
             f"diagonal best (the grid's best mean is a compatible pair) on {summary['diagonal_best']} of {n} "
             f"data sets (lu2023: {claim} of {of})"]
    if summary["paper_models"]:
        lines.append(f"group as lu2023 Figures 7-12 assign it on {summary['matches_paper']} of "
                     f"{summary['compared']} data sets named there")
    else:
        lines.append("groups are not compared with lu2023: its grids used lr, svm-rbf and rf")
    return "\n".join(lines)
