"""Replaying a protocol on one data set: validate the request, plan the trial seeds, run
what the store lacks (with a progress bar and a time estimate) and store every result.
`audit reproduce`, the diagnosis's counterfactual replays, the statistics commands, the
compatibility grid, the gate and `audit run` all replay through it."""

import dataclasses
import itertools
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import adapters
from audit.engine import scratch
from audit.engine.datasets import Dataset, get_info, load_dataset
from audit.engine.executors import run_tasks
from audit.engine.runner import TrialTask, budget_for, prepare_strategies
from audit.engine.splits import plan_seeds, seed_split
from audit.engine.store import ResultStore, fingerprint_details
from audit.errors import AuditError
from audit.extras import require
from audit.protocols import Protocol, load_protocol


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
    force: bool = False  # replace an earlier report in ``out`` even when it held more
    references: str | Path | None = None  # a user's published table; None: reference_results/
    until_settled: bool = False  # rounds, each cell stopped once settled (audit/analysis/settled.py); trials: the maximum


def choose_strategies(protocol: Protocol, requested: Sequence[str] | None) -> tuple[list[str], dict[str, str]]:
    """(strategies to run, {strategy: reason} for those that cannot run here)."""
    if requested:
        ids = list(requested)
    else:  # the protocol's strategies, in the order of lu2023 Table 1
        from audit.engine.capabilities import canonical_order

        ids = canonical_order(protocol.strategies)
    unavailable = {}
    for sid in ids:
        reason = adapters.unavailable_reason(protocol.strategy(sid).implementation)
        if reason:
            unavailable[sid] = reason
    if requested and unavailable:
        sid, reason = next(iter(unavailable.items()))
        raise AuditError(f"strategy '{sid}' cannot run here: {reason}")
    chosen = [s for s in ids if s not in unavailable]
    for sid in chosen:
        check_constructs(protocol, sid)
    return chosen, unavailable


def check_constructs(protocol: Protocol, sid: str) -> None:
    """Build the strategy once as a trial will, so parameters it rejects (or a plug-in whose
    constructor raises) stop the run before any trial, with one line."""
    spec = protocol.strategy(sid)
    cls = adapters.strategy_class(spec.implementation)
    try:
        cls(query_model=protocol.query_model_for(spec) if cls.model_use == "own" else None, random_state=0,
            **spec.params)
    except AuditError as exc:
        raise AuditError(f"strategy '{sid}' ({spec.implementation}): {exc}") from None
    except Exception as exc:  # a plug-in's constructor may fail in any way
        raise AuditError(f"strategy '{sid}' ({spec.implementation}) cannot be constructed: "
                         f"{type(exc).__name__}: {exc}") from None


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
    for extra in protocol.requires:
        require(extra, f"protocol '{protocol.name}'")
    if request.batch_size:
        protocol = dataclasses.replace(protocol, batch_size=request.batch_size)
    missing = protocol.for_dataset(get_info(request.dataset).name).task_model.missing()
    if missing:
        raise AuditError(f"protocol '{protocol.name}': {missing}")
    data: Dataset = load_dataset(request.dataset, request.data_dir)
    name = data.info.name
    if data.info.task not in protocol.tasks:
        raise AuditError(f"protocol '{protocol.name}' covers {'/'.join(protocol.tasks)} data sets; '{name}' is {data.info.task}")
    strategies, unavailable = choose_strategies(protocol, request.strategies)
    seeds, skipped = plan_seeds(protocol, data.y, request.trials, data)
    if not seeds:
        raise AuditError(f"no valid trial seed for '{name}' under {protocol.name}: {skipped[0][1] if skipped else 'none tried'}")
    _, y, first = seed_split(protocol, data, seeds[0])
    budget_for(protocol.for_dataset(name), first.pool.size, int(y.max()) + 1)  # an impossible budget fails before any work
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
    oracle_ids = {sid for sid in plan.strategies if adapters.uses_test_labels(protocol.strategy(sid).implementation)}
    n_oracle_trials = sum(len(set(seeds) - done[sid]) for sid in oracle_ids)
    inner = oracle_jobs(n_oracle_trials, request.jobs)
    tasks = [TrialTask(protocol, name, request.data_dir, sid, s, request.trial_timeout,
                       inner if sid in oracle_ids else 1, scratch=scratch.current())
             for sid in plan.strategies for s in seeds if s not in done[sid]]
    expected = expected_seconds(plan, store)
    return fingerprint, details, longest_first(tasks, {(name, s): v for s, v in expected.items()}), \
        sum(len(d) for d in done.values())


# Mean seconds per trial of each implementation on sonar under lu2023 (104 rounds x 124 train
# rows), from docs/performance.md ("Seconds per trial of every strategy": 20 trials each, a
# shared machine; eer after LeanSVC, "ALiPy's EER and BMDR"; lal: "ALiPy's LAL", CPU s of a
# zhan2021 sonar trial with the lean forests; bso: lu2023's own 52 s).
# Only the order of the cells depends on it, never a result: the store's own measurements
# replace it as soon as a cell has a trial stored.
PRIOR_SECONDS_ON_SONAR = {
    "native.uniform": 0.31, "native.graph": 0.30, "native.coreset": 0.33, "native.hier": 0.33,
    "native.mcm": 0.37, "native.infodiv": 0.39, "native.margin": 0.39, "libact.hintsvm": 0.65,
    "libact.uncertainty": 0.82, "libact.quire": 0.95, "libact.qbc": 2.34, "libact.albl": 4.02,
    "libact.dwus": 7.79, "alipy.lal": 6.5, "alipy.spal": 8.26, "alipy.bmdr": 14.24, "alipy.eer": 15.4,
    "oracle.bso": 52.0,
}
# Where a protocol's own settings make a strategy much costlier or cheaper than under lu2023
# (zhan2021: the grid-searched LR query model of margin, mcm and infodiv, VR's sigma = 0.1,
# EER's liblinear LR), its own CPU s per sonar trial, by strategy id: docs/performance.md
# ("Today: CPU seconds per sonar trial of every strategy"). Diagnosis replays
# ("zhan2021~pool-order") take their protocol's figures.
PRIOR_SECONDS_BY_PROTOCOL = {
    "zhan2021": {"vr": 13.94, "spal": 9.61, "eer": 8.71, "bso": 8.32, "margin": 7.23, "lal": 5.73, "mcm": 5.41,
                 "infodiv": 4.48, "bmdr": 3.76, "albl": 2.58, "greedy-oracle": 2.01, "qbc": 1.44, "quire": 0.77,
                 "us-nc": 0.74, "dwus": 0.74, "hintsvm": 0.42, "coreset": 0.20, "hier": 0.18, "graph": 0.17,
                 "uniform": 0.16},
}
SONAR_ROUND_ROWS = 104 * 124
PRIOR_DEFAULT = PRIOR_SECONDS_ON_SONAR["native.uniform"]  # an implementation not measured: a cheap one
SECONDS_PER_ROUND_ROW = PRIOR_DEFAULT / SONAR_ROUND_ROWS


def expected_seconds(plan: ReplayPlan, store: ResultStore) -> dict[str, float]:
    """{strategy: expected seconds per trial} of a plan: the mean of the cell's successful
    trials in the store (any fingerprint), else the prior on sonar (the protocol's own figure
    for the strategy, else the implementation's) scaled by this data set's rounds x train
    rows. For ordering tasks and estimates, never results."""
    _, y, split = seed_split(plan.protocol, plan.data, plan.seeds[0])
    n_classes = int(y.max()) + 1
    protocol = plan.protocol.for_dataset(plan.dataset)
    rounds = math.ceil(budget_for(protocol, split.pool.size, n_classes) / protocol.batch_for(n_classes))
    scale = rounds * split.train.size / SONAR_ROUND_ROWS
    own = PRIOR_SECONDS_BY_PROTOCOL.get(plan.protocol.name.split("~")[0], {})
    out = {}
    for sid in plan.strategies:
        measured = store.seconds_per_trial(plan.protocol.name, plan.dataset, sid)
        prior = own.get(sid, PRIOR_SECONDS_ON_SONAR.get(plan.protocol.strategy(sid).implementation, PRIOR_DEFAULT))
        out[sid] = measured if measured is not None else prior * scale
    return out


def longest_first(tasks: Sequence[TrialTask], expected: dict[tuple[str, str], float]) -> list[TrialTask]:
    """Tasks by expected seconds descending, then data set, strategy and trial seed (a total
    order: the same plan is always submitted the same way). The longest trials start first,
    so the run ends on short ones and no core idles behind one slow trial. A trial's result
    depends only on its seeds, so the order changes no result."""
    return sorted(tasks, key=lambda t: (-expected.get((t.dataset, t.strategy), 0.0), t.dataset, t.strategy,
                                        t.trial_seed))


def oracle_jobs(n_oracle_trials: int, jobs: int) -> int:
    """Processes inside each oracle trial (its candidate evaluations; the result is the
    same). With at least as many oracle trials as jobs, the trials run side by side, which
    uses the cores better (no hand-off between processes every round); with fewer, each
    spreads its candidates over the jobs and they run one at a time after the others."""
    return jobs if 0 < n_oracle_trials < jobs else 1


def execute_replay(plan: ReplayPlan, request: ReproduceRequest, store: ResultStore,
                   log=lambda line: None, on_done: Callable[[str], None] | None = None
                   ) -> tuple[str, dict[str, Any], int, int]:
    """Run the trials the store lacks; returns (fingerprint, its details, trials run, trials
    reused). ``on_done(strategy)``: called once a strategy's last trial of this run is stored."""
    fingerprint, details, tasks, reused = missing_tasks(plan, request, store)
    name, seeds = plan.dataset, plan.seeds
    log(f"plan: {len(plan.strategies)} strategies ({', '.join(plan.strategies)}) x {len(seeds)} trials on {name}, "
        f"{len(tasks)} to run, {reused} already stored, --jobs {request.jobs}"
        + (f"; unavailable: {', '.join(plan.unavailable)}" if plan.unavailable else ""))
    if reused:
        log(f"resuming: {reused} finished trials found in {store.path}, {len(tasks)} to run")
    run_and_store(tasks, request, store, {plan.protocol.name: fingerprint}, log,
                  expected=expected_seconds(plan, store) if tasks else None, on_done=on_done)
    return fingerprint, details, len(tasks), reused


def estimate_seconds(tasks: list[TrialTask], seconds_per_trial: dict[str, float], jobs: int) -> float:
    """Wall time left: each strategy's measured seconds per trial times its remaining trials,
    over the jobs (a trial parallel inside, an oracle's, was measured with its jobs already)."""
    return sum(seconds_per_trial[t.strategy] / (1 if t.jobs > 1 else jobs) for t in tasks)


def run_and_store(tasks: list[TrialTask], request: ReproduceRequest, store: ResultStore,
                  fingerprints: dict[str, str], log, expected: dict[str, float] | None = None,
                  on_done: Callable[[str], None] | None = None) -> None:
    """Run tasks on ``request.jobs`` processes with a progress bar and a time estimate, and
    store each result (and its companions) under its protocol's fingerprint as it arrives.

    The estimate is printed once every strategy left has a first trial measured; with
    ``expected`` ({strategy: expected seconds per trial}, :func:`expected_seconds`), already
    after the first result, the strategies not measured yet taking their expected seconds
    scaled as the measured ones turned out. ``on_done(strategy)`` is called once the last
    of its tasks is stored (after the store's write: a kill then loses nothing)."""
    if not tasks:
        return
    from tqdm import tqdm

    prepare_strategies(tasks, log)
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
            if on_done is not None and not any(t.strategy == result.strategy for t in remaining):
                on_done(result.strategy)
            if not estimated and remaining and (expected or set(first_seconds) >= {t.strategy for t in remaining}):
                estimated = True
                left = estimate_seconds(remaining, _calibrated(first_seconds, expected), request.jobs)
                per = ", ".join(f"{s} {v:.2f}s" for s, v in first_seconds.items())
                guessed = {t.strategy for t in remaining} - set(first_seconds)
                if guessed:  # not measured yet: their expected seconds, as scaled
                    scaled = _calibrated(first_seconds, expected)
                    per += "; expected: " + ", ".join(f"{s} {scaled[s]:.2f}s" for s in sorted(guessed))
                line = (f"estimate: about {format_duration(time.perf_counter() - start + left)} in all "
                        f"({format_duration(left)} left; first trial: {per})")
                # above a live bar through tqdm, so the bar is redrawn below it; else the caller's log
                bar.write(line, file=sys.stderr) if request.progress else log(line)
            bar.set_postfix_str(f"{result.strategy} seed {result.trial_seed}"
                                + (f", {failed} failed" if failed else ""))
            bar.update()


def _calibrated(measured: dict[str, float], expected: dict[str, float] | None) -> dict[str, float]:
    """Seconds per trial: measured where measured; else expected times the measured ones'
    mean ratio to what was expected of them."""
    if not expected:
        return measured
    ratios = [measured[s] / expected[s] for s in measured if expected.get(s)]
    scale = sum(ratios) / len(ratios) if ratios else 1.0
    return {**{s: v * scale for s, v in expected.items()}, **measured}


def format_duration(seconds: float) -> str:
    """A wall time as a progress line prints it: 1h05m, or 3m07s under an hour."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
