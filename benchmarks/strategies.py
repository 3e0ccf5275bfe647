"""CPU seconds per trial of every strategy, and what a whole published table costs (by hand, not CI).

    uv run python benchmarks/strategies.py [--protocol lu2023] [--datasets sonar|a,b|small|large|all]
        [--strategies a,b] [--trials 1] [--time-limit 600] [--csv OUT.csv] [--store PATH]
        [--off lean-grid-lr,lean-lr] [--flip scaling|pool-order+split|...]

Runs the first trials of each strategy on each data set in one process through the real
runner (after one untimed warm-up trial of each strategy on the first data set) and prints CPU seconds per trial (``time.process_time``: the runner pins BLAS to one
thread, so this is one core's work however loaded the machine is), wall seconds, and the
task-model fit and query shares. ``--off`` turns the named fast paths of :mod:`audit.fast`
off (those fits run scikit-learn's own code), for before/after figures. ``--flip`` times a
diagnosis replay instead: each strategy under the protocol with the named counterfactual
flips of :mod:`audit.analysis.diagnose.counterfactual` (one key, or two joined by ``+``), as
the diagnosis builds it from the protocol's released code (``derived_protocols``); a strategy
whose computation the flips do not change is listed as not replayed, as the diagnosis skips it.

It then estimates the whole table at the protocol's trial counts (lu2023: 100 trials on a
set of fewer than 2,000 rows, 10 on the others): the sum over cells of CPU seconds per
trial x trials, on 2 cores (total / 2) and on a 64-core cluster (total / 64, but never less
than the longest single trial, which one core must run alone). A cell that was not measured
(a data set not in --datasets, or a trial over --time-limit) is extrapolated from the same
strategy's measured cells with a power law in the number of rows (a least-squares line in
log-log), never below the time limit it exceeded, and is counted apart, so the printout
says how much of the estimate is measured. With ``--store``, the cells a results store
already holds (say, of an ``audit run`` of the protocol) are read from its trials' wall
seconds instead of being measured again.

For lu2023 the printout sets each strategy's measured time beside the running time the
authors published for one experiment (reference_results/timings/lu2023_repository_times.csv:
wall time on a 2x Xeon E5-2640 v3, libraries as they were in 2023).
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audit.engine.capabilities import CANONICAL_STRATEGIES, capability
from audit.engine.datasets import get_info, load_dataset, names
from audit.engine.runner import run_trial
from audit.engine.splits import plan_seeds
from audit.paths import REFERENCE_DIR
from audit.protocols import Protocol, load_protocol

PUBLISHED_TIMES = REFERENCE_DIR / "timings" / "lu2023_repository_times.csv"
CLUSTER_CORES = 64


@dataclass
class Cell:
    dataset: str
    n: int
    strategy: str
    trials: int = 0
    cpu: float = math.nan  # CPU seconds per trial
    wall: float = math.nan
    fit: float = math.nan
    query: float = math.nan
    status: str = "ok"


def dataset_names(protocol: Protocol, spec: str) -> list[str]:
    """'small' / 'large' / 'all' (of the protocol's tasks) or a comma list."""
    if spec in ("small", "large", "all"):
        return [n for task in protocol.tasks for n in names(task, None if spec == "all" else spec)]
    return spec.split(",")


def parse_flip(protocol: Protocol, flip: str | None):
    """The diagnosis's hypothesis for ``flip`` (counterfactual keys joined by "+"), or None
    without one; an error message (str) for an unknown key or a protocol with no released one."""
    if not flip:
        return None
    from audit.analysis.diagnose.counterfactual import HYPOTHESES, combine

    by_key = {h.key: h for h in HYPOTHESES}
    keys = flip.split("+")
    if any(k not in by_key for k in keys) or protocol.released is None:
        return (f"--flip needs keys of {', '.join(by_key)} and a protocol with a released one "
                f"([diagnosis] released); got {flip!r} for {protocol.name}")
    hypothesis = by_key[keys[0]]
    for key in keys[1:]:
        hypothesis = combine(hypothesis, by_key[key])
    return hypothesis


def flipped(protocol: Protocol, hypothesis, sid: str, data) -> Protocol | None:
    """``protocol`` itself (no ``hypothesis``), or the replay the diagnosis runs for strategy
    ``sid`` on ``data`` under ``hypothesis`` (:func:`parse_flip`); None when it changes nothing
    that strategy computes there (the diagnosis does not replay it)."""
    if hypothesis is None:
        return protocol
    from audit.analysis.diagnose.counterfactual import derived_protocols

    replays = derived_protocols(protocol, load_protocol(protocol.released), sid, (hypothesis,), data)
    return replays[0][1] if replays else None


def measure(protocol: Protocol, dataset: str, strategies: list[str], trials: int, time_limit: float,
            hypothesis=None) -> list[Cell]:
    data = load_dataset(dataset)
    seeds, _ = plan_seeds(protocol, data.y, trials, data)
    cells = []
    for sid in strategies:
        replayed = flipped(protocol, hypothesis, sid, data)
        cell = Cell(dataset, data.info.n, sid)
        cpu, wall, fit, query, paths = [], [], [], [], set()
        if (status := capability(protocol, sid).status) != "available":
            cell.status, seeds_to_run = status[:60], []
        elif replayed is None:
            cell.status, seeds_to_run = f"not replayed: the flip changes nothing {sid} computes", []
        else:
            seeds_to_run = seeds
        for seed in seeds_to_run:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            result = run_trial(replayed, data.info.name, data.X, data.y, sid, seed, time_limit=time_limit)
            if result.status != "ok":
                cell.status = result.status if result.status == "tle" else f"error: {result.error}"[:60]
                break
            cpu.append(time.process_time() - cpu0)
            wall.append(time.perf_counter() - wall0)
            fit.append(sum(r.fit_seconds for r in result.rounds))
            query.append(sum(r.query_seconds for r in result.rounds))
            paths.add(result.fast_path or "-")
        if cpu and cell.status == "ok":
            cell.trials, cell.cpu, cell.wall = len(cpu), statistics.fmean(cpu), statistics.fmean(wall)
            cell.fit, cell.query = statistics.fmean(fit), statistics.fmean(query)
        cells.append(cell)
        print(f"{dataset:13s} {cell.n:6d} {sid:9s} {cell.cpu:9.2f} {cell.wall:9.2f} {cell.fit:8.2f} "
              f"{cell.query:8.2f}  {cell.status} ({','.join(sorted(paths)) or '-'})", flush=True)
    return cells


def stored_cells(store: Path, protocol: Protocol, strategies: list[str]) -> list[Cell]:
    """Cells from trials already in a results store (e.g. an `audit run` of the protocol):
    wall seconds per stored trial as the figure (the runner pins BLAS to one thread, so with
    no more workers than cores a trial's wall time is one core's work)."""
    from audit.api import rounds, trials  # the public API reads the store read-only

    table = trials(store, protocol=protocol.name)
    table = table[(table.status == "ok") & table.strategy.isin(strategies)]
    work = rounds(store, protocol=protocol.name).groupby(["dataset", "strategy", "trial_seed", "fingerprint"])[
        ["fit_seconds", "query_seconds"]].sum()
    table = table.join(work, on=["dataset", "strategy", "trial_seed", "fingerprint"])
    cells = []
    for (dataset, sid), group in table.groupby(["dataset", "strategy"]):
        cells.append(Cell(dataset, get_info(dataset).n, sid, trials=len(group), cpu=float(group.seconds.mean()),
                          wall=float(group.seconds.mean()), fit=float(group.fit_seconds.mean()),
                          query=float(group.query_seconds.mean()), status="stored"))
        c = cells[-1]
        print(f"{dataset:13s} {c.n:6d} {sid:9s} {c.cpu:9.2f} {c.wall:9.2f} {c.fit:8.2f} {c.query:8.2f}  "
              f"stored ({c.trials} trials)", flush=True)
    return cells


def power_law(points: list[tuple[int, float]]):
    """seconds(n) from a least-squares line through (log n, log seconds); None unless the
    sets span at least a factor of 2 in n (two close sizes give any exponent at all)."""
    sizes = [n for n, _ in points]
    if not sizes or max(sizes) < 2 * min(sizes):
        return None
    slope, intercept = np.polyfit(np.log([n for n, _ in points]), np.log([s for _, s in points]), 1)
    seconds = lambda n: float(np.exp(intercept + slope * np.log(n)))  # noqa: E731
    seconds.exponent = slope
    return seconds


def estimate(protocol: Protocol, cells: list[Cell], strategies: list[str], time_limit: float) -> None:
    """Whole-table CPU estimate at the protocol's trial counts, small and large sets apart;
    see the module docstring."""
    measured = {(c.dataset, c.strategy): c for c in cells}
    available = [s for s in strategies if capability(protocol, s).status == "available"]
    fits = {s: power_law([(c.n, c.cpu) for c in cells if c.strategy == s and c.trials]) for s in available}
    print(f"\nthe whole {protocol.name} table at its trial counts, {len(available)} available strategies "
          f"(unavailable, not counted: {', '.join(sorted(set(strategies) - set(available))) or 'none'}):")
    print("  seconds per trial ~ n^k, k fitted per strategy over the measured sets: " + ", ".join(
        f"{s} {fits[s].exponent:.1f}" for s in available if fits[s] is not None))
    grand, longest = 0.0, 0.0
    for size in ("small", "large"):
        totals, missing = {"measured": 0.0, "extrapolated": 0.0}, []
        table = [n for task in protocol.tasks for n in names(task, size)]
        for sid in available:
            for dataset in table:
                n = get_info(dataset).n
                cell = measured.get((dataset, sid))
                if cell is not None and cell.trials:
                    per_trial, kind = cell.cpu, "measured"
                elif fits[sid] is None:
                    missing.append(f"{sid}@{dataset}")
                    continue
                else:  # a trial over the time limit took at least the limit
                    floor = time_limit if cell is not None and cell.status == "tle" else 0.0
                    per_trial, kind = max(fits[sid](n), floor), "extrapolated"
                totals[kind] += per_trial * protocol.trials.for_size(n)[0]
                longest = max(longest, per_trial)
        total = sum(totals.values())
        grand += total
        print(f"  {len(table)} {size} sets: {total / 3600:,.1f} CPU hours ({totals['measured'] / 3600:,.1f} measured, "
              f"{totals['extrapolated'] / 3600:,.1f} extrapolated)"
              + (f"; no figure for {len(missing)} cells ({', '.join(missing[:4])}...)" if missing else ""))
    print(f"  in all {grand / 3600:,.1f} CPU hours: on 2 cores {grand / 2 / 3600:,.1f} h; on {CLUSTER_CORES} cores "
          f"{max(grand / CLUSTER_CORES, longest) / 3600:,.1f} h (the longest single trial: {longest / 3600:,.2f} h)")


def compare_published(cells: list[Cell]) -> None:
    """Our CPU seconds per trial beside lu2023's published seconds per experiment."""
    with PUBLISHED_TIMES.open(encoding="utf-8") as handle:
        published = {(r["dataset"], r["strategy"]): float(r["seconds"]) for r in csv.DictReader(handle)
                     if r["estimated"] == "no"}
    ratios: dict[str, list[float]] = {}
    for c in cells:
        if c.trials and (c.dataset, c.strategy) in published:
            ratios.setdefault(c.strategy, []).append(published[(c.dataset, c.strategy)] / c.cpu)
    if ratios:
        print("\nlu2023's published seconds per experiment / ours per trial (median over the sets measured, "
              f"{PUBLISHED_TIMES.name}):")
        print("  " + ", ".join(f"{s} {statistics.median(r):.1f}x" for s, r in ratios.items()))
    # The small sets' total at 100 trials, each unmeasured cell being the authors' published time
    # over that strategy's median ratio: the published times carry each cell's own scaling in n and d.
    small = {d for d, _ in published}
    measured = {(c.dataset, c.strategy): c.cpu for c in cells if c.trials}
    total, from_published, missing = 0.0, 0.0, []
    for dataset in sorted(small):
        for sid in ratios:
            if (dataset, sid) in measured:
                total += 100 * measured[(dataset, sid)]
            elif (dataset, sid) in published:
                seconds = 100 * published[(dataset, sid)] / statistics.median(ratios[sid])
                total, from_published = total + seconds, from_published + seconds
            else:
                missing.append(f"{sid}@{dataset}")
    print(f"\nthe {len(small)} small sets at 100 trials, the {len(ratios)} strategies above, unmeasured cells scaled "
          f"from the published times: {total / 3600:,.1f} CPU hours ({from_published / 3600:,.1f} scaled); "
          f"on 2 cores {total / 7200:,.1f} h, on {CLUSTER_CORES} cores {total / CLUSTER_CORES / 3600:,.1f} h"
          + (f"; no published time for {', '.join(missing)}" if missing else ""))


def turn_off(fast_paths: set[str]) -> None:
    """In this process, the named fast paths of :mod:`audit.fast` (and ``lean-qp``, ALiPy
    BMDR/SPAL's QPs; ``lean-dwus``, libact DWUS's fits; ``blas-labels``, binary SVC labels
    (LeanSVC.predict's and the oracles'); ``lean-scaler``, the runner's StandardScaler fits) act
    as if their self-check had failed: their fits run the library's own code."""
    from audit.fast.policy import FastPathMixin, fast_path_verified

    FastPathMixin._fast_path_verified = (
        lambda self: self.fast_path_name not in fast_paths and fast_path_verified(type(self)))
    if "lean-qp" in fast_paths:  # not an estimator
        from adapters import alipy_qp

        alipy_qp.lean_qp_verified = lambda: False
    if "blas-labels" in fast_paths:
        from audit.fast import svc

        svc.blas_binary_codes_verified = lambda: False
    if "lean-dwus" in fast_paths:
        from adapters import libact_dwus

        libact_dwus.lean_dwus_verified = lambda: False
    if "lean-scaler" in fast_paths:
        from audit.fast import scaler

        scaler.lean_scaler_verified = lambda: False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", default="lu2023")
    parser.add_argument("--datasets", default="sonar", help="a,b or small, large, all (default sonar)")
    parser.add_argument("--strategies", help="a,b (default: every strategy of the protocol)")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=600.0, help="wall seconds per trial (default 600)")
    parser.add_argument("--csv", type=Path, help="also write the measured cells here (a new file)")
    parser.add_argument("--store", type=Path, help="take the cells this results store holds from its trials "
                        "(wall seconds) and measure only the others of --datasets")
    parser.add_argument("--off", default="", help="comma-separated fast paths to turn off, e.g. lean-grid-lr,lean-qp")
    parser.add_argument("--flip", help="time the diagnosis replay with these flips instead (e.g. scaling, "
                        "pool-order+split); the table estimate then prices that replay at the protocol's counts")
    args = parser.parse_args()
    if args.off:
        turn_off(set(args.off.split(",")))
    if args.flip and args.store is not None:
        parser.error("--store holds the protocol's own trials, not a replay's: give --flip or --store")
    if args.csv is not None and args.csv.exists():
        parser.error(f"{args.csv} exists; give a new file")
    protocol = load_protocol(args.protocol)
    hypothesis = parse_flip(protocol, args.flip)
    if isinstance(hypothesis, str):
        parser.error(hypothesis)

    rank = {s: i for i, s in enumerate(CANONICAL_STRATEGIES)}
    strategies = (args.strategies.split(",") if args.strategies
                  else sorted(protocol.strategies, key=lambda s: rank.get(s, len(rank))))
    datasets = dataset_names(protocol, args.datasets)
    print(f"{args.protocol}{'~' + args.flip if args.flip else ''}: {args.trials} trial(s) per cell, one process, time limit {args.time_limit:g} s; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'dataset':13s} {'n':>6s} {'strategy':9s} {'cpu s':>9s} {'wall s':>9s} {'fit s':>8s} {'query s':>8s}  status")
    cells = stored_cells(args.store, protocol, strategies) if args.store is not None else []
    have = {(c.dataset, c.strategy) for c in cells}
    for sid in strategies:  # untimed: imports, fast-path self-checks and caches are paid once per process
        if capability(protocol, sid).status == "available" and any((d, sid) not in have for d in datasets):
            warm = load_dataset(datasets[0])
            if (replayed := flipped(protocol, hypothesis, sid, warm)) is not None:
                run_trial(replayed, warm.info.name, warm.X, warm.y, sid, plan_seeds(protocol, warm.y, 1, warm)[0][0],
                          time_limit=args.time_limit)
    for dataset in datasets:
        missing = [sid for sid in strategies if (dataset, sid) not in have]
        if missing:
            cells += measure(protocol, dataset, missing, args.trials, args.time_limit, hypothesis)
    if args.csv is not None:
        with args.csv.open("x", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, list(Cell.__dataclass_fields__), lineterminator="\n")
            writer.writeheader()
            writer.writerows(vars(c) for c in cells)
    estimate(protocol, cells, strategies, args.time_limit)
    if protocol.paper == "lu2023":
        compare_published(cells)


if __name__ == "__main__":
    main()
