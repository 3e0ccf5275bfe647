"""Cost of a compatibility grid against one replay per pair (issue 6; run by hand, not in CI).

    cd /work/main && uv run python benchmarks/compat.py [--dataset sonar] [--trials 20] [--jobs 2]
                                                        [--models lr,svm-rbf,rf]

1. grid: `audit.analysis.compat.run_compat` into a fresh store. One trial per query model (row) and
   seed: the query model is fitted once a round and queries with that fit, and every
   task model (column) is trained and scored on the same queries.
2. naive: every (query, task) pair as its own `audit.analysis.reproduce.reproduce` run, with its own
   store and report, sharing nothing. On the diagonal the query model is spelled apart
   from the task model (lr(C=1.0) for lr(C=1.0, solver='lbfgs'), svm-rbf(gamma='auto') for
   svm-rbf(C=1.0, gamma='auto'), rf() for rf(n_estimators=100): the same estimators), so
   the runner fits it a second time for the queries. Every pair's per-trial AUBCs must
   equal the grid's, so both sides did the same work.
3. The diagonal pairs again as separate runs that do share the fit: with step 2, the cost
   of k*k `reproduce` runs as the runner stands today.
4. Where the grid's time goes: per row, trial seconds and querying (margin on the query
   model's fit); per cell, task-model fitting and scoring; summed from the stored rounds.

Cost is measured twice: wall seconds, and CPU seconds of this process and every process
it starts (worker processes included, sampled from /proc). On a machine shared with
other work the wall time follows the others' load; the CPU seconds do not.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

# Runnable as `python benchmarks/compat.py` from the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib.pyplot  # noqa: E402,F401  (imports warmed up before anything is timed)
import sklearn.ensemble  # noqa: E402,F401

from audit.analysis.compat import LU2023_SPECS, CompatRequest, run_compat, strategy_id  # noqa: E402
from audit.analysis.reproduce import ReproduceRequest, reproduce  # noqa: E402
from audit.engine.models import ModelSpec  # noqa: E402
from audit.engine.store import ResultStore  # noqa: E402
from audit.protocols import StrategySpec, load_protocol  # noqa: E402

TARGET = 0.8
# The same estimator as LU2023_SPECS[name], written so that its spec key differs.
RESPELLED = {"lr": ModelSpec("lr", {"C": 1.0}), "svm-rbf": ModelSpec("svm-rbf", {"gamma": "auto"}),
             "rf": ModelSpec("rf", {})}


class CpuMeter:
    """CPU seconds used so far by this process and all its descendants (Linux /proc).

    Samples every ``interval`` seconds in a thread; a process keeps its last sampled
    value after it exits (worker processes live as long as their pool, so little is lost).
    """

    def __init__(self, interval: float = 0.2):
        self.tick = os.sysconf("SC_CLK_TCK")
        self.cpu: dict[tuple[int, str], float] = {}  # (pid, start time) -> CPU seconds
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.interval = interval
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        procs = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # fields from 3 (state) on
            procs[int(entry)] = (int(fields[1]), fields[19], (int(fields[11]) + int(fields[12])) / self.tick)
        family, grew = {os.getpid()}, True
        while grew:
            new = {pid for pid, (ppid, _, _) in procs.items() if ppid in family} - family
            family |= new
            grew = bool(new)
        with self.lock:
            for pid in family & procs.keys():
                self.cpu[(pid, procs[pid][1])] = procs[pid][2]

    def seconds(self) -> float:
        self._sample()
        with self.lock:
            return sum(self.cpu.values())


def aubcs(path: Path, **match: str) -> dict[int, str]:
    """{trial seed: AUBC as written} of the per_trial.csv rows matching ``match``."""
    with open(path) as f:
        return {int(r["trial_seed"]): r["aubc"] for r in csv.DictReader(f) if all(r[k] == v for k, v in match.items())}


def separate_run(base, query: str, task: str, shared_fit: bool, args, work: Path,
                 meter: CpuMeter) -> tuple[tuple[float, float], Path]:
    """One pair as its own `reproduce` run (own store, own report); ((wall s, CPU s), report dir)."""
    spec = LU2023_SPECS[query] if query != task or shared_fit else RESPELLED[query]
    sid = strategy_id(query)
    tag = f"{'shared' if shared_fit else 'naive'}-q={query}-t={task}"
    protocol = dataclasses.replace(base, name=f"{base.name}-bench-{tag}", task_model=LU2023_SPECS[task],
                                   strategies={sid: StrategySpec(sid, "native.margin", {}, spec)})
    out = work / tag
    start, cpu = time.perf_counter(), meter.seconds()
    reproduce(ReproduceRequest(protocol, args.dataset, [sid], trials=args.trials, jobs=args.jobs,
                               store=work / f"{tag}.sqlite", out=out, progress=False), log=lambda line: None)
    return (time.perf_counter() - start, meter.seconds() - cpu), out


def time_split(report: dict, store_path: Path) -> dict[tuple[str, str], dict[str, float]]:
    """Per cell, seconds summed over its trials: the row trial's, its queries', the cell's task fits.

    The cells of a row come from one trial each seed: they share its seconds and queries.
    """
    store = ResultStore(store_path)
    try:
        split = {}
        for t, run in report["runs"].items():
            for q in report["models"]:
                trials = store.trials(run["protocol"], report["dataset"]["name"], strategy_id(q), run["fingerprint"])
                split[(q, t)] = {"trial": sum(r.seconds for r in trials),
                                 "fit": sum(x.fit_seconds for r in trials for x in r.rounds),
                                 "query": sum(x.query_seconds for r in trials for x in r.rounds)}
        return split
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", default="lu2023")
    parser.add_argument("--dataset", default="sonar")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--models", default="lr,svm-rbf,rf", help="a subset of lr, svm-rbf, rf")
    args = parser.parse_args()
    models = args.models.split(",")
    unknown = set(models) - set(RESPELLED)
    if unknown:
        parser.error(f"the benchmark knows how to respell lr, svm-rbf and rf only, not {', '.join(sorted(unknown))}")
    base = load_protocol(args.protocol)
    k = len(models)
    print(f"{args.protocol} on {args.dataset}: {k}x{k} grid, margin uncertainty sampling, {args.trials} trials, "
          f"--jobs {args.jobs}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}", flush=True)

    meter = CpuMeter()
    with tempfile.TemporaryDirectory(prefix="compat-bench-") as tmp:
        work = Path(tmp)
        start, cpu = time.perf_counter(), meter.seconds()
        (report,), _ = run_compat(CompatRequest(base, [args.dataset], models, trials=args.trials, jobs=args.jobs,
                                                store=work / "grid.sqlite", out=work / "grid", progress=False),
                                  log=lambda line: None)
        grid = (time.perf_counter() - start, meter.seconds() - cpu)
        print(f"grid: {grid[0]:.1f} s wall, {grid[1]:.1f} s CPU", flush=True)
        naive, shared_diagonal, mismatches = {}, {}, []
        for q in models:
            for t in models:
                naive[(q, t)], out = separate_run(base, q, t, False, args, work, meter)
                if aubcs(out / "per_trial.csv", strategy=strategy_id(q)) != \
                        aubcs(work / "grid" / "per_trial.csv", query_model=q, task_model=t):
                    mismatches.append(f"q={q} t={t}")
                print(f"naive q={q} t={t}: {naive[(q, t)][0]:.1f} s wall, {naive[(q, t)][1]:.1f} s CPU", flush=True)
        for m in models:
            shared_diagonal[m], _ = separate_run(base, m, m, True, args, work, meter)
            print(f"separate, fit shared, q=t={m}: {shared_diagonal[m][0]:.1f} s wall, "
                  f"{shared_diagonal[m][1]:.1f} s CPU", flush=True)
        split = time_split(report, work / "grid.sqlite")
    meter.stop.set()

    if mismatches:
        sys.exit(f"per-trial AUBCs of separate runs differ from the grid's for {', '.join(mismatches)}")
    naive_total = [sum(v[i] for v in naive.values()) for i in (0, 1)]
    today = [naive_total[i] - sum(naive[(m, m)][i] for m in models) + sum(v[i] for v in shared_diagonal.values())
             for i in (0, 1)]
    load = os.getloadavg()[2]
    print(f"\n(load average over the last 15 minutes at the end: {load:.1f} on {os.cpu_count()} cores)")
    print("| what | wall s | CPU s | grid / it (wall) | grid / it (CPU) |")
    print("|---|---|---|---|---|")
    print(f"| grid (`audit compat`) | {grid[0]:.1f} | {grid[1]:.1f} | 1.00 | 1.00 |")
    for what, cost in ((f"{k * k} separate runs, nothing shared (naive)", naive_total),
                       (f"{k * k} separate runs, diagonal fit shared (the runner as it is)", today)):
        print(f"| {what} | {cost[0]:.1f} | {cost[1]:.1f} | {grid[0] / cost[0]:.2f} | {grid[1] / cost[1]:.2f} |")
    for i, kind in ((0, "wall"), (1, "CPU")):
        ratio = grid[i] / naive_total[i]
        print(f"ratio grid / naive ({kind}) = {ratio:.2f}: {'meets' if ratio <= TARGET else 'misses'} the target "
              f"<= {TARGET}")
    print("per-trial AUBCs of every separate run equal the grid's")

    print("\nwhere the grid's trial time goes (seconds summed over trials): per row, the trial and its queries "
          "(margin on the query model's fit); per cell, fitting and scoring the task model")
    print("| query (row) | row trials | queries | " + " | ".join(f"fit {t}" for t in models) + " |")
    print("|---|---|---|" + "---|" * k)
    for q in models:
        print(f"| {q} | {split[(q, q)]['trial']:.1f} | {split[(q, q)]['query']:.1f} | "
              + " | ".join(f"{split[(q, t)]['fit']:.1f}" for t in models) + " |")


if __name__ == "__main__":
    main()
