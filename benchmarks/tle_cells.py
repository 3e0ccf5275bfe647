"""What lu2023's TLE cells would cost here: the first rounds of each, timed (run by hand, not CI).

    uv run python benchmarks/tle_cells.py [--rounds 3] [--datasets spambase,banana]
        [--strategies eer,bmdr] [--time-limit 1800]

lu2023 printed TLE (over its limit of 1,080 hours per strategy and data set) for 33 cells of
its repository summary (``note = "printed as TLE"`` in reference_results/lu2023_repository.csv).
A full trial of such a cell queries the
whole pool (thousands of rounds), so it is not run here. Instead each cell runs its
first trial seed through the real runner twice, with the budget cut to one query and to
``--rounds`` queries; the difference of their query seconds over ``--rounds - 1`` is what one
round's query costs at the start, without the one-off set-up both pay (imports, a kernel
matrix, an oracle's test view; the oracles search every depth at the first query, so the
difference also counts their depths). The runner's seconds are wall seconds, one core's
work on a quiet machine (it pins BLAS to one thread). The script prints that, the last
round's task-model fit, the rounds a full trial has (the pool), and figures for a full trial:

- ``at start rate``: rounds x the first rounds' cost per round;
- ``lower bound``: rounds x (query cost / 4 + task fit cost). A round's query work shrinks no
  faster than the cube of the remaining pool for these strategies (a scan of the candidates
  is linear in the pool, a dense QP or a matrix inverse over the pool at most cubic, and the
  work per candidate grows with the labeled set), and the mean of (1 - t/R)^3 over the rounds
  is 1/4; the task model's fit grows with the labeled set, so its first cost is a floor.

For EER and BSO, whose query fits a model per candidate (ALiPy's EER an SVC with Platt
scaling per candidate and label, the oracle an SVC per child set), the work per candidate
grows with the labeled set as the task model's fit does; the estimate is the
sum over rounds t of (query cost x (1 - t/R) + fit cost) x (m_t / m_0)^k, with k the exponent
of the task model's fit-and-predict seconds between the first rounds (m_0 labeled rows) and
every train row (below): an estimate, not a bound.

For strategies whose query costs almost nothing here (lu2023's VR at sigma = 100 picks as
Uniform does, computed without the futile fits), the trial is the task model's fits: the
script also times one fit and prediction of the task model on every train row, the cost of the
last round, so ``rounds x (query cost + that)`` is an upper bound for a trial whose query
cost does not grow (printed where a round's query costs less than that last fit).

lu2023 ran a large set's cell as 10 trials (a small set's as 100); the ``cell`` columns are the
cell's trials x the lower bound, the upper bound and the estimate, on one core, to set beside the
authors' 1,080 hours, and the status says which of them settles the cell against that limit.
"""
from __future__ import annotations

import argparse
import csv
import time
from dataclasses import replace

import numpy as np

from audit.engine.capabilities import capability
from audit.engine.datasets import load_dataset
from audit.engine.runner import _Features, run_trial
from audit.engine.splits import plan_seeds, seed_split, subsystem_seed
from audit.paths import REFERENCE_DIR
from audit.protocols import load_protocol

REPOSITORY_TABLE = REFERENCE_DIR / "lu2023_repository.csv"
LU2023_LIMIT_HOURS = 1080.0
FIT_PER_CANDIDATE = frozenset({"eer", "bso"})  # their query's work per candidate is a model fit on the labeled set


def tle_cells() -> list[tuple[str, str]]:
    """(dataset, strategy) of every cell lu2023's repository summary printed as TLE."""
    with REPOSITORY_TABLE.open(encoding="utf-8") as handle:
        return [(r["dataset"], r["strategy"]) for r in csv.DictReader(handle) if r["note"] == "printed as TLE"]


def last_round_fit(protocol, X, y, split, trial_seed: int) -> float:
    """Seconds of the task model's fit on every train row and its test predictions (a
    full trial's last round), the rows scaled as the runner scales them then."""
    features = _Features(protocol.scaling["task"], X, split, protocol.scaler, protocol.scaler_test_fit)
    X_train, X_test = features.views_for(np.arange(split.train.size), slice(None))
    model = protocol.task_model.build(subsystem_seed(protocol.seeds["model"], trial_seed, "model"))
    start = time.perf_counter()
    model.fit(X_train, y[split.train])
    model.predict(X_test)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="queries of the longer probe (default 3)")
    parser.add_argument("--datasets", help="a,b (default: every data set with a TLE cell)")
    parser.add_argument("--strategies", help="a,b (default: every TLE strategy)")
    parser.add_argument("--time-limit", type=float, default=1800.0, help="wall seconds per probe (default 1800)")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (the cost of a round is the difference from a one-query probe)")

    protocol = load_protocol("lu2023")
    every = tle_cells()
    datasets = args.datasets.split(",") if args.datasets else sorted({d for d, _ in every})
    strategies = args.strategies.split(",") if args.strategies else sorted({s for _, s in every})
    for given, known, what in ((datasets, {d for d, _ in every}, "data sets"), (strategies, {s for _, s in every}, "strategies")):
        if set(given) - known:
            parser.error(f"no TLE cell for {', '.join(sorted(set(given) - known))}; the {what} with one: {', '.join(sorted(known))}")
    cells = [(d, s) for d, s in every if d in datasets and s in strategies]
    print(f"lu2023 TLE cells: {len(cells)}; first trial seed, budget cut to {args.rounds} queries, one process, seconds")
    print(f"{'dataset':10s} {'n':>6s} {'strategy':8s} {'probe s':>8s} {'query/rd':>9s} {'fit/rd':>8s} {'rounds':>7s} "
          f"{'start rate h':>12s} {'lower bd h':>11s} {'last fit s':>10s} {'trials':>6s} {'cell lower h':>12s} "
          f"{'cell upper h':>12s} {'cell est h':>10s}  status")
    loaded = {}
    for dataset, sid in cells:
        data = loaded.setdefault(dataset, load_dataset(dataset))
        head = f"{dataset:10s} {data.info.n:6d} {sid:8s}"
        if (status := capability(protocol, sid).status) != "available":
            print(f"{head}  {status[:70]}", flush=True)
            continue
        cell_protocol = protocol.for_dataset(dataset)
        seed = plan_seeds(cell_protocol, data.y, 1, data)[0][0]
        X, y, split = seed_split(cell_protocol, data, seed)
        rounds = split.pool.size  # lu2023's budget: the whole initial pool, one query a round
        one = run_trial(replace(cell_protocol, budget_size=1), data.info.name, data.X, data.y, sid, seed,
                        time_limit=args.time_limit)
        result = one if one.status != "ok" else run_trial(  # the longer probe only when the one-query probe finished
            replace(cell_protocol, budget_size=args.rounds), data.info.name, data.X, data.y, sid, seed,
            time_limit=args.time_limit)
        if result.status != "ok":
            k = 1 if result is one else args.rounds
            bound = tle_bound(one.seconds, args.time_limit, args.rounds, rounds) if result is not one and \
                result.status == "tle" else ""
            print(f"{head}  {result.status} after {result.seconds:.0f} s in the probe of {k} quer"
                  f"{'y' if k == 1 else 'ies'}{bound}: {(result.error or '')[:50]}", flush=True)
            continue
        query = (sum(r.query_seconds for r in result.rounds) - sum(r.query_seconds for r in one.rounds)) / (args.rounds - 1)
        fit = result.rounds[-1].fit_seconds
        start_rate = rounds * (query + fit) / 3600
        lower = rounds * (query / 4 + fit) / 3600
        last_fit = last_round_fit(cell_protocol, X, y, split, seed)
        trials = cell_protocol.trials.for_size(data.info.n)[0]
        upper = trials * rounds * (query + last_fit) / 3600 if query < last_fit else None
        estimate = None
        if sid in FIT_PER_CANDIDATE:
            m_0 = result.rounds[-1].n_labeled
            k = np.log(last_fit / fit) / np.log((m_0 + rounds) / m_0)
            t = np.arange(rounds)
            estimate = trials * float(np.sum((query * (1 - t / rounds) + fit) * ((m_0 + t) / m_0) ** k)) / 3600
        print(f"{head} {result.seconds:8.2f} {query:9.4f} {fit:8.4f} {rounds:7d} {start_rate:12.1f} {lower:11.2f} "
              f"{last_fit:10.2f} {trials:6d} {trials * lower:12.1f} {_hours(upper, 12)} {_hours(estimate, 10)}  "
              f"{against_limit(trials * lower, upper, estimate)} ({result.fast_path or '-'})", flush=True)


def tle_bound(one_seconds: float, time_limit: float, probe_rounds: int, rounds: int) -> str:
    """When only the longer probe ran out of time: its rounds past the first took more than the
    limit less the one-query probe's time, so one round's query takes at least that share, and a
    trial at least rounds x that / 4 (the lower bound of the module docstring)."""
    per_round = (time_limit - one_seconds) / (probe_rounds - 1)
    return (f" (the one-query probe took {one_seconds:.0f} s, so a round takes over {per_round:.0f} s "
            f"and a trial over {rounds * per_round / 4 / 3600:.1f} h)")


def _hours(value: float | None, width: int) -> str:
    return f"{'-':>{width}s}" if value is None else f"{value:{width}.1f}"


def against_limit(lower: float, upper: float | None, estimate: float | None) -> str:
    """The cell against lu2023's limit, from the strongest figure there is (hours of its trials)."""
    if lower > LU2023_LIMIT_HOURS:
        return "over the limit (lower bound)"
    if upper is not None and upper <= LU2023_LIMIT_HOURS:
        return "runs within the limit (upper bound)"
    if estimate is not None:
        return f"{'over' if estimate > LU2023_LIMIT_HOURS else 'within'} the limit (estimate)"
    return "not settled by these figures"


if __name__ == "__main__":
    main()
