"""`audit reproduce`: plan the trials, run what the store lacks, compare, report."""
from __future__ import annotations

import dataclasses
import itertools
import math
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import adapters
from audit import oracles
from audit.compare import detectable_difference, low_power, summarise, verdict, welch
from audit.datasets import Dataset, label_runs, load_dataset
from audit.diagnose.counterfactual import diagnose_cell, is_discrepant, not_diagnosed
from audit.diagnose.detectors import lint
from audit.errors import AuditError
from audit.metrics import get_variant
from audit.protocols import Protocol, load_protocol
from audit.references import Reference, load_references
from audit.report_files import write_report
from audit.runner import TrialResult, TrialTask, budget_for, run_tasks
from audit.splits import make_split, plan_seeds
from audit.store import ResultStore, fingerprint_details


@dataclass
class ReproduceRequest:
    """Everything `audit reproduce` was asked to do, with the documented defaults."""

    protocol: str | Protocol  # a name, a protocol file, or a Protocol built in code
    dataset: str
    strategies: Sequence[str] | None = None  # None: every available strategy of the protocol
    trials: int | None = None  # None: the protocol's count for the data set's size
    jobs: int = 1
    data_dir: str | None = None
    store: str | Path = ".audit-store.sqlite"
    out: str | Path | None = None  # None: reports/<protocol>-<dataset>
    progress: bool = True
    retry_errors: bool = False
    batch_size: int | None = None  # None: the protocol's
    trial_timeout: float | None = None  # seconds; a slower trial is recorded as TLE
    no_diagnose: bool = False  # skip the counterfactual replays of discrepant cells


@dataclass
class ReproduceOutcome:
    report: dict[str, Any]
    out_dir: Path
    ran: int = 0
    reused: int = 0
    unavailable: dict[str, str] = field(default_factory=dict)


def _nan_to_none(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def choose_strategies(protocol: Protocol, requested: Sequence[str] | None) -> tuple[list[str], dict[str, str]]:
    """(strategies to run, {strategy: reason} for those that cannot run here)."""
    if requested:
        ids = list(requested)
    else:  # the protocol's strategies, in the order of lu2023 Table 1
        from audit.capabilities import CANONICAL_STRATEGIES

        rank = {s: i for i, s in enumerate(CANONICAL_STRATEGIES)}
        ids = sorted(protocol.strategies, key=lambda s: rank.get(s, len(rank)))
    unavailable = {}
    for sid in ids:
        implementation = protocol.strategy(sid).implementation
        reason = (oracles.unavailable_reason if oracles.is_oracle(implementation)
                  else adapters.unavailable_reason)(implementation)
        if reason:
            unavailable[sid] = reason
    if requested and unavailable:
        sid, reason = next(iter(unavailable.items()))
        raise AuditError(f"strategy '{sid}' cannot run here: {reason}")
    return [s for s in ids if s not in unavailable], unavailable


def pick_reference(protocol: Protocol, dataset: str, strategy: str) -> Reference | None:
    """The published number a cell is compared with, by the protocol's table preference."""
    refs = [r for r in load_references(paper=protocol.reference_paper, dataset=dataset, strategy=strategy,
                                       metric=protocol.aubc_metric, batch_size=protocol.batch_size)
            if r.mean is not None]
    rank = {t: i for i, t in enumerate(protocol.reference_tables)}
    refs.sort(key=lambda r: rank.get(r.table, len(rank)))
    return refs[0] if refs else None


def _cell(protocol: Protocol, dataset: str, strategy: str, results: list[TrialResult]) -> dict[str, Any]:
    spec = protocol.strategy(strategy)
    oracle = oracles.is_oracle(spec.implementation)
    cls = oracles.oracle_class(spec.implementation) if oracle else adapters.strategy_class(spec.implementation)
    ok = [r for r in results if r.status == "ok"]
    summary = summarise([r.aubc for r in ok], protocol.sd_ddof)
    ref = pick_reference(protocol, dataset, strategy)
    published = ref.mean_fraction if ref else None
    query_model = protocol.query_model_for(spec)
    verdict_text = verdict(summary, published) if ok else "no successful trials"
    cell: dict[str, Any] = {
        "strategy": strategy, "status": "ok", "implementation": spec.implementation,
        "library": cls.library_version(), "params": spec.params,
        "query_model": None if query_model is None else str(query_model),
        "query_model_is_task_model": spec.query_model == "task"
        or (query_model is not None and query_model.key == protocol.task_model.key),
        "uses_test_labels": oracle,  # an oracle: a reference bound, not a query strategy
        "n_trials": summary.n, "n_errors": sum(r.status == "error" for r in results),
        "n_tle": sum(r.status == "tle" for r in results),
        "errors": [{"trial_seed": r.trial_seed, "status": r.status, "error": r.error}
                   for r in results if r.status != "ok"],
        "mean": _nan_to_none(summary.mean), "sd": _nan_to_none(summary.sd),
        "ci95": [_nan_to_none(v) for v in summary.ci95], "ci99": [_nan_to_none(v) for v in summary.ci99],
        "published_mean": published,
        "verdict": verdict_text, "low_power": low_power(summary, verdict_text),
        "detectable_difference": _nan_to_none(detectable_difference(summary)),
        "reference": None, "welch": None,
        "warnings": sorted({w for r in results for w in r.warnings}),
    }
    if ref:
        cell["reference"] = {"paper": ref.paper, "table": ref.table, "row": ref.row, "source": ref.source,
                             "aubc_variant": ref.aubc_variant, "sd": ref.sd, "n": ref.n, "note": ref.note}
        if ref.sd is not None and ref.n and ref.n > 1 and summary.n > 1:
            w = welch(summary.mean, float(np.std([r.aubc for r in ok], ddof=1)), summary.n,
                      published, ref.sd / (100 if ref.scale == "percent" else 1), ref.n)
            cell["welch"] = None if w is None else {"t": w.t, "df": w.df, "p": w.p}
    return cell


def _curves(results: list[TrialResult]) -> tuple[np.ndarray, np.ndarray] | None:
    ok = [r for r in results if r.status == "ok" and r.rounds]
    if not ok:
        return None
    length = min(len(r.rounds) for r in ok)
    n_labeled = np.array([r.n_labeled for r in ok[0].rounds[:length]])
    return n_labeled, np.array([[r.accuracy for r in t.rounds[:length]] for t in ok])


@dataclass
class ReplayPlan:
    """What a replay will run: the validated protocol, data, strategies and trial seeds."""

    protocol: Protocol
    data: Dataset
    strategies: list[str]
    unavailable: dict[str, str]
    seeds: list[int]
    skipped: list[tuple[int, str]]

    @property
    def dataset(self) -> str:
        return self.data.info.name


def plan_replay(request: ReproduceRequest, log=lambda line: None) -> ReplayPlan:
    """Validate every input before any work; bad input raises AuditError with one line."""
    if request.trials is not None and request.trials < 1:
        raise AuditError(f"--trials must be a positive number, not {request.trials}")
    if request.jobs < 1:
        raise AuditError(f"--jobs must be a positive number, not {request.jobs}")
    if request.batch_size is not None and request.batch_size < 1:
        raise AuditError(f"--batch-size must be a positive number, not {request.batch_size}")
    if request.trial_timeout is not None and not 0 < request.trial_timeout < math.inf:  # NaN fails too
        raise AuditError(f"--trial-timeout must be a positive finite number, not {request.trial_timeout}")
    protocol = request.protocol if isinstance(request.protocol, Protocol) else load_protocol(request.protocol)
    if request.batch_size:
        protocol = dataclasses.replace(protocol, batch_size=request.batch_size)
    data: Dataset = load_dataset(request.dataset, request.data_dir)
    name = data.info.name
    if data.info.task not in protocol.tasks:
        raise AuditError(f"protocol '{protocol.name}' covers {'/'.join(protocol.tasks)} data sets; '{name}' is {data.info.task}")
    strategies, unavailable = choose_strategies(protocol, request.strategies)
    seeds, skipped = plan_seeds(protocol, data.y, request.trials)
    if not seeds:
        raise AuditError(f"no valid trial seed for '{name}' under {protocol.name}: {skipped[0][1] if skipped else 'none tried'}")
    first = make_split(protocol, data.y, seeds[0])
    budget_for(protocol, first.pool.size)  # an impossible budget fails before any work
    for seed, why in skipped:
        log(f"skipping trial seed {seed}: {why}")
    return ReplayPlan(protocol, data, strategies, unavailable, seeds, skipped)


def missing_tasks(plan: ReplayPlan, request: ReproduceRequest,
                  store: ResultStore) -> tuple[str, dict[str, Any], list[TrialTask], int]:
    """The trials of a plan the store lacks: (fingerprint, its details, tasks, trials reused)."""
    protocol, name, seeds = plan.protocol, plan.dataset, plan.seeds
    details = fingerprint_details(protocol)
    fingerprint = store.register(details)
    done: dict[str, set[int]] = {}
    for sid in plan.strategies:
        done[sid] = store.finished_seeds(protocol.name, name, sid, fingerprint) & set(seeds)
        if request.retry_errors:
            done[sid] -= {r.trial_seed for r in store.trials(protocol.name, name, sid, fingerprint)
                          if r.status != "ok"}
    # Seed-major order: every strategy finishes a first trial early, for the time estimate.
    oracle_ids = {sid for sid in plan.strategies if oracles.is_oracle(protocol.strategy(sid).implementation)}
    n_oracle_trials = sum(len(set(seeds) - done[sid]) for sid in oracle_ids)
    inner = oracle_jobs(n_oracle_trials, request.jobs)
    tasks = [TrialTask(protocol, name, request.data_dir, sid, s, request.trial_timeout,
                       inner if sid in oracle_ids else 1)
             for s in seeds for sid in plan.strategies if s not in done[sid]]
    return fingerprint, details, tasks, sum(len(d) for d in done.values())


def oracle_jobs(n_oracle_trials: int, jobs: int) -> int:
    """Processes inside each oracle trial (its candidate evaluations; the result is the
    same). With at least as many oracle trials as jobs, the trials run side by side, which
    uses the cores better (no hand-off between processes every round); with fewer, each
    spreads its candidates over the jobs and they run one at a time after the others."""
    return jobs if 0 < n_oracle_trials < jobs else 1


def execute_replay(plan: ReplayPlan, request: ReproduceRequest, store: ResultStore,
                   log=lambda line: None) -> tuple[str, dict[str, Any], int, int]:
    """Run the trials the store lacks; returns (fingerprint, its details, trials run, trials reused)."""
    fingerprint, details, tasks, reused = missing_tasks(plan, request, store)
    name, seeds = plan.dataset, plan.seeds
    log(f"plan: {len(plan.strategies)} strategies ({', '.join(plan.strategies)}) x {len(seeds)} trials on {name}, "
        f"{len(tasks)} to run, {reused} already stored, --jobs {request.jobs}"
        + (f"; unavailable: {', '.join(plan.unavailable)}" if plan.unavailable else ""))
    if reused:
        log(f"resuming: {reused} finished trials found in {store.path}, {len(tasks)} to run")
    run_and_store(tasks, request, store, {plan.protocol.name: fingerprint}, log)
    return fingerprint, details, len(tasks), reused


def reproduce(request: ReproduceRequest, log=lambda line: print(line, file=sys.stderr)) -> ReproduceOutcome:
    plan = plan_replay(request, log)
    protocol, name, data, seeds = plan.protocol, plan.dataset, plan.data, plan.seeds
    store = ResultStore(request.store)
    try:
        fingerprint, details, ran, reused = execute_replay(plan, request, store, log)
        cells, per_trial, curves = [], [], {}
        for sid in plan.strategies:
            results = store.trials(protocol.name, name, sid, fingerprint, seeds)
            cells.append(_cell(protocol, name, sid, results))
            per_trial += [{"strategy": sid, "trial_seed": r.trial_seed, "aubc": r.aubc, "status": r.status,
                           "query_hash": r.query_hash} for r in results]
            curve = _curves(results)
            if curve is not None:
                curves[sid] = curve
        for cell in filter(is_discrepant, cells):  # counterfactual replays, or why there are none
            if request.no_diagnose:
                cell["diagnosis"] = not_diagnosed(protocol, "diagnosis not run (--no-diagnose)", "not run")
            elif protocol.released:
                cell["diagnosis"] = diagnose_cell(protocol, name, cell, request, store, log)
        for sid, reason in plan.unavailable.items():
            ref = pick_reference(protocol, name, sid)
            implementation = protocol.strategy(sid).implementation
            cells.append({"strategy": sid, "status": "unavailable", "reason": reason,
                          "implementation": implementation, "library": "-",
                          "uses_test_labels": oracles.is_oracle(implementation),
                          "published_mean": ref.mean_fraction if ref else None, "verdict": "unavailable"})
        report = {
            "protocol": {"name": protocol.name, "title": protocol.title, "spec_hash": protocol.spec_hash,
                         "aubc_variant": protocol.aubc_variant,
                         "aubc_definition": get_variant(protocol.aubc_variant).source,
                         "aubc_metric": protocol.aubc_metric, "sd_ddof": protocol.sd_ddof, "scale": protocol.scale,
                         "task_model": str(protocol.task_model), "batch_size": protocol.batch_size,
                         "scaling": protocol.scaling, "pool_order": protocol.split.pool_order},
            "dataset": {"name": name, "n": data.info.n, "d": data.info.d, "sha256": data.info.sha256,
                        "label_runs": label_runs(data.y), "path": str(data.path)},
            "environment": details["versions"], "code": details["code"], "fingerprint": fingerprint,
            "seeds": {"trial_seeds": seeds, "skipped": [list(s) for s in plan.skipped], "policy": protocol.seeds},
            "strategies": cells,
            "findings": [dataclasses.asdict(f) for f in lint(protocol, data)],
            "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        suffix = f"-b{request.batch_size}" if request.batch_size else ""
        out_dir = Path(request.out) if request.out else Path("reports") / f"{protocol.name}-{name}{suffix}"
        write_report(report, per_trial, curves, out_dir)
        return ReproduceOutcome(report, out_dir, ran, reused, plan.unavailable)
    finally:
        store.close()


def estimate_seconds(tasks: list[TrialTask], seconds_per_trial: dict[str, float], jobs: int) -> float:
    """Wall time left: each strategy's measured seconds per trial times its remaining trials,
    over the jobs (a trial parallel inside, an oracle's, was measured with its jobs already)."""
    return sum(seconds_per_trial[t.strategy] / (1 if t.jobs > 1 else jobs) for t in tasks)


def run_and_store(tasks: list[TrialTask], request: ReproduceRequest, store: ResultStore,
                  fingerprints: dict[str, str], log) -> None:
    """Run tasks on ``request.jobs`` processes with a progress bar and a time estimate, and
    store each result (and its companions) under its protocol's fingerprint as it arrives."""
    if not tasks:
        return
    from tqdm import tqdm

    remaining = list(tasks)
    first_seconds: dict[str, float] = {}
    estimated = False
    start = time.perf_counter()
    with tqdm(total=len(tasks), unit="trial", desc="trials", disable=not request.progress,
              file=sys.stderr, mininterval=0.5, dynamic_ncols=True) as bar:
        failed = 0
        # Trials parallel inside (oracles with --jobs > 1) run one at a time after the others.
        results = itertools.chain(run_tasks([t for t in tasks if t.jobs == 1], request.jobs),
                                  run_tasks([t for t in tasks if t.jobs > 1], 1))
        for result in results:
            for each in (result, *result.companions):
                store.save(each, fingerprints[each.protocol])
            remaining.remove(next(t for t in remaining if (t.strategy, t.trial_seed)
                                  == (result.strategy, result.trial_seed)))
            first_seconds.setdefault(result.strategy, result.seconds)
            failed += result.status != "ok"
            if not estimated and remaining and set(first_seconds) >= {t.strategy for t in remaining}:
                estimated = True
                left = estimate_seconds(remaining, first_seconds, request.jobs)
                per = ", ".join(f"{s} {v:.2f}s" for s, v in first_seconds.items())
                bar.write(f"estimate: about {_duration(time.perf_counter() - start + left)} in all "
                          f"({_duration(left)} left; first trial: {per})", file=sys.stderr)
            bar.set_postfix_str(f"{result.strategy} seed {result.trial_seed}"
                                + (f", {failed} failed" if failed else ""))
            bar.update()


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
