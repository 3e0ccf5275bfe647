"""Engine overhead and `--jobs` speed-up on sonar under the lu2023 protocol.

Run by hand (not a test):

    cd /work/main && uv run python benchmarks/overhead.py [--trials 20] [--repeats 3]
                                                        [--jobs-trials 20,40]

1. For Uniform and US-C: wall time of the engine (``audit.engine.runner.run_trial`` for each
   trial seed, in-process, no store) against a plain scikit-learn loop doing the same
   fits (same split, StandardScaler on the train rows, SVC fit on the labeled rows,
   predict the test rows, query the next pool item / the smallest |decision_function|,
   until the pool is empty). The plain loop's per-trial AUBC must equal the engine's,
   so both timings measure the same work. Minimum of ``--repeats`` runs.
2. ``run_tasks(tasks, jobs=1)`` against ``run_tasks(tasks, jobs=2)`` over the same
   TrialTask list; results must be identical. The forkserver is started before the timing,
   as the CLI starts it while its own imports run (the workers' fork, data shipping and
   first trials are timed). Beside it, the hardware's own ceiling: the
   plain loop over the same trials in one process against two already-started processes
   (no start-up in the timing). On a VM whose two vCPUs slow each other down, no engine
   can beat that ceiling, so the engine's speed-up is also given as a fraction of it.
3. A Markdown table of the figures, for the README.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# Runnable as `python benchmarks/overhead.py` from the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Warm up imports before anything is timed.
import numpy as np  # noqa: E402
import sklearn  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.svm import SVC  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import adapters  # noqa: E402
import adapters.native  # noqa: E402,F401
from audit.engine.datasets import load_dataset  # noqa: E402
from audit.engine.executors import run_tasks  # noqa: E402
from audit.engine.metrics import get_variant  # noqa: E402
from audit.engine.runner import TrialTask, run_trial  # noqa: E402
from audit.engine.splits import make_split, plan_seeds  # noqa: E402
from audit.engine.workers import context as worker_context  # noqa: E402
from audit.engine.workers import start_early
from audit.protocols import load_protocol  # noqa: E402

PROTOCOL = "lu2023"
DATASET = "sonar"
STRATEGIES = ("uniform", "us-c")
MODEL_SEED = 6211
ENGINE_TARGET = 1.15
SPEEDUP_TARGET = 1.7


# --- the plain scikit-learn loop ---------------------------------------------------------

def plain_trial(X: np.ndarray, y: np.ndarray, split, strategy: str) -> list[float]:
    """Accuracies of one trial (initial model first), written as a plain sklearn loop.

    Rows are laid out as the engine lays them out (initial labels, then the pool in pool
    order) and the labeled rows are fitted in that layout order, so libsvm sees exactly
    the same training matrices as in the engine.
    """
    train = np.concatenate([split.labeled, split.pool])
    scaler = StandardScaler().fit(X[train])
    X_train, X_test = scaler.transform(X[train]), scaler.transform(X[split.test])
    y_train, y_test = y[train], y[split.test]
    labeled = np.zeros(train.size, dtype=bool)
    labeled[: split.labeled.size] = True
    pool = list(range(split.labeled.size, train.size))  # positions in pool order

    accuracies = []
    while True:
        rows = np.flatnonzero(labeled)
        model = SVC(kernel="rbf", gamma="auto", C=1.0, random_state=MODEL_SEED).fit(X_train[rows], y_train[rows])
        accuracies.append(float(np.mean(model.predict(X_test) == y_test)))
        if not pool:
            return accuracies
        if strategy == "uniform":
            pick = pool.pop(0)
        else:  # us-c: smallest |f(x)|, ties to the first in pool order (argmin takes the first)
            pick = pool.pop(int(np.argmin(np.abs(model.decision_function(X_train[pool])))))
        labeled[pick] = True


def plain_aubc(accuracies: list[float]) -> float:
    return get_variant("lu2023_code")(accuracies, list(range(len(accuracies))))


# --- machine load: this benchmark's CPU against everyone else's ------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def _machine_busy() -> float:
    """CPU-seconds the whole machine has spent busy since boot (all cores)."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal, *_ = (int(v) for v in f.readline().split()[1:])
    return (user + nice + system + irq + softirq + steal) / _TICK


def _descendants_cpu() -> dict[int, float]:
    """{pid: CPU-seconds} of every live descendant of this process, counting the children
    each has reaped (the forkserver reaps the pool's workers, so their CPU ends up there)."""
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = sum(int(v) for v in fields[11:15]) / _TICK  # utime stime cutime cstime
    me, mine = os.getpid(), {}
    for pid, seconds in cpu.items():
        p, hops = parent.get(pid), 0
        while p and hops < 32:
            if p == me:
                mine[pid] = seconds
                break
            p, hops = parent.get(p), hops + 1
    return mine


def _self_cpu() -> float:
    """CPU-seconds of this process and of the children it has reaped."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CpuMonitor:
    """CPU used during a block by this process and its descendants ("own") and by every
    other process on the machine ("foreign"): the machine may be shared, and a foreign
    load skews wall times. Nothing is sampled during the block (no extra thread)."""

    def __init__(self) -> None:
        self.own = self.foreign = self.wall = 0.0

    def __enter__(self) -> CpuMonitor:
        self._base = _descendants_cpu()
        self._busy0, self._self0 = _machine_busy(), _self_cpu()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self._t0
        busy, own = _machine_busy(), _self_cpu() - self._self0
        own += sum(v - self._base.get(pid, 0.0) for pid, v in _descendants_cpu().items())
        self.own = own
        self.foreign = max(0.0, busy - self._busy0 - own)

    @property
    def foreign_cores(self) -> float:
        return self.foreign / self.wall if self.wall else 0.0


def wait_for_quiet(max_wait: float, threshold: float = 0.15) -> float:
    """Wait (up to max_wait s) until other processes use < threshold cores; the last load seen."""
    deadline = time.perf_counter() + max_wait
    while True:
        with CpuMonitor() as m:
            time.sleep(1.0)
        if m.foreign_cores < threshold or time.perf_counter() >= deadline:
            return m.foreign_cores


# --- measurements ------------------------------------------------------------------------

@dataclass
class Measure:
    wall: float  # seconds
    cpu: float  # CPU-seconds of this process and its descendants
    foreign: float  # cores used by other processes meanwhile

    @classmethod
    def of(cls, m: CpuMonitor) -> Measure:
        return cls(m.wall, m.own, m.foreign_cores)

    def __str__(self) -> str:
        return f"{self.wall:.3f}s (cpu {self.cpu:.3f}, other load {self.foreign:.2f})"


def time_engine(protocol, X, y, strategy, seeds) -> tuple[Measure, dict[int, float]]:
    with CpuMonitor() as m:
        results = [run_trial(protocol, DATASET, X, y, strategy, s) for s in seeds]
    bad = [r for r in results if r.status != "ok"]
    assert not bad, f"engine trial failed: {bad[0].error}"
    return Measure.of(m), {r.trial_seed: r.aubc for r in results}


def time_plain(X, y, splits, strategy) -> tuple[Measure, dict[int, float]]:
    with CpuMonitor() as m:
        with threadpool_limits(1):
            curves = {seed: plain_trial(X, y, split, strategy) for seed, split in splits.items()}
    return Measure.of(m), {seed: plain_aubc(c) for seed, c in curves.items()}


def time_jobs(tasks, jobs) -> tuple[Measure, dict[tuple[str, int], float]]:
    if jobs > 1:  # as the CLI does: its forkserver imports while the driver imports (audit.engine.workers)
        start_early()
        ready = worker_context().Process(target=os.getpid)  # returns once the preloads are imported
        ready.start()
        ready.join()
    with CpuMonitor() as m:
        results = list(run_tasks(tasks, jobs=jobs))
    bad = [r for r in results if r.status != "ok"]
    assert not bad, f"trial failed with jobs={jobs}: {bad[0].error}"
    assert len(results) == len(tasks)
    return Measure.of(m), {(r.strategy, r.trial_seed): r.aubc for r in results}


def _plain_task(args) -> tuple[str, int, float]:
    strategy, seed, split = args
    data = load_dataset(DATASET)
    with threadpool_limits(1):
        return strategy, seed, plain_aubc(plain_trial(data.X, data.y, split, strategy))


def time_plain_jobs(work, jobs) -> tuple[Measure, dict[tuple[str, int], float]]:
    """The plain loop over ``work`` in this process (jobs = 1) or in ``jobs`` started processes."""
    if jobs == 1:
        with CpuMonitor() as m:
            done = [_plain_task(w) for w in work]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("forkserver")) as pool:
            list(pool.map(_plain_task, work[:jobs]))  # start the workers and import, untimed
            with CpuMonitor() as m:
                done = list(pool.map(_plain_task, work, chunksize=1))
    return Measure.of(m), {(sid, seed): aubc for sid, seed, aubc in done}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20, help="trials per strategy for part 1 (default 20)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per part-1 measurement, minimum kept (default 3)")
    ap.add_argument("--jobs-trials", default="20,40",
                    help="comma-separated trials per strategy for the --jobs comparison (default 20,40)")
    ap.add_argument("--jobs-repeats", type=int, default=1, help="repeats per part-2 measurement, minimum kept")
    ap.add_argument("--quiet-wait", type=float, default=30.0,
                    help="before each measurement, wait up to this many seconds for other processes "
                         "to go quiet (default 30; 0: do not wait)")
    ap.add_argument("--skip-engine", action="store_true", help="skip part 1")
    ap.add_argument("--skip-jobs", action="store_true", help="skip part 2")
    args = ap.parse_args(argv)

    def settle() -> None:
        if args.quiet_wait > 0:
            wait_for_quiet(args.quiet_wait)

    protocol = load_protocol(PROTOCOL)
    data = load_dataset(DATASET)
    X, y = data.X, data.y

    machine = {
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sklearn": sklearn.__version__,
        "numpy": np.__version__,
    }
    print(f"machine: {machine['processor']}, {machine['cpus']} CPUs; Python {machine['python']}, "
          f"scikit-learn {machine['sklearn']}, numpy {machine['numpy']}")
    print("'other load' = cores used by other processes during a measurement (the machine may be shared);"
          " wall times taken under load > 0.1 are not reliable, CPU times less affected")

    engine_rows = []
    if not args.skip_engine:
        seeds, _ = plan_seeds(protocol, y, args.trials)
        assert len(seeds) == args.trials, f"only {len(seeds)} valid seeds"
        splits = {s: make_split(protocol, y, s) for s in seeds}  # not timed: the split is not the point
        print(f"\n== 1. engine vs plain scikit-learn loop: {DATASET}, {PROTOCOL}, {len(seeds)} trials "
              f"(seeds {seeds[0]}..{seeds[-1]}), {args.repeats} repeats, minimum kept")
        # warm-up: one trial of each kind for each strategy (lazy imports, libsvm, caches)
        for strategy in STRATEGIES:
            time_engine(protocol, X, y, strategy, seeds[:1])
            time_plain(X, y, {seeds[0]: splits[seeds[0]]}, strategy)
        for strategy in STRATEGIES:
            engine_runs, plain_runs = [], []
            for _ in range(args.repeats):  # alternate, to spread any drift over both
                settle()
                m, engine_aubc = time_engine(protocol, X, y, strategy, seeds)
                engine_runs.append(m)
                settle()
                m, plain_aubc_ = time_plain(X, y, splits, strategy)
                plain_runs.append(m)
                mismatched = [s for s in seeds if engine_aubc[s] != plain_aubc_[s]]
                assert not mismatched, (
                    f"{strategy}: plain loop AUBC differs from the engine for seeds {mismatched}: "
                    + ", ".join(f"{s}: {engine_aubc[s]} vs {plain_aubc_[s]}" for s in mismatched[:5]))
            e_wall, p_wall = min(r.wall for r in engine_runs), min(r.wall for r in plain_runs)
            e_cpu, p_cpu = min(r.cpu for r in engine_runs), min(r.cpu for r in plain_runs)
            load = max(r.foreign for r in engine_runs + plain_runs)
            ratio, cpu_ratio = e_wall / p_wall, e_cpu / p_cpu
            engine_rows.append((strategy, len(seeds), e_wall, p_wall, ratio, cpu_ratio, load))
            print(f"{strategy:8s} per-trial AUBC identical for all {len(seeds)} seeds "
                  f"(mean {100 * np.mean(list(engine_aubc.values())):.2f})")
            print(f"{strategy:8s} engine {e_wall:7.3f} s   plain {p_wall:7.3f} s   ratio {ratio:.3f} "
                  f"(target <= {ENGINE_TARGET})  {'OK' if ratio <= ENGINE_TARGET else 'MISSED'}"
                  f"   | CPU: engine {e_cpu:.3f}  plain {p_cpu:.3f}  ratio {cpu_ratio:.3f}")
            for i, (e, p) in enumerate(zip(engine_runs, plain_runs), 1):
                print(f"           run {i}: engine {e}   plain {p}")

    jobs_rows = []
    if not args.skip_jobs:
        counts = [int(c) for c in args.jobs_trials.split(",") if c.strip()]
        print(f"\n== 2. run_tasks jobs=1 vs jobs=2: {DATASET}, {PROTOCOL}, {' + '.join(STRATEGIES)}; "
              f"forkserver started beforehand as the CLI does; wall includes starting the workers")
        for n in counts:
            seeds, _ = plan_seeds(protocol, y, n)
            assert len(seeds) == n, f"only {len(seeds)} valid seeds for {n} trials"
            tasks = [TrialTask(protocol, DATASET, None, sid, s) for sid in STRATEGIES for s in seeds]
            runs: dict[int, list[Measure]] = {1: [], 2: []}
            reference = None
            for _ in range(args.jobs_repeats):
                for jobs in (1, 2):
                    settle()
                    m, results = time_jobs(tasks, jobs)
                    runs[jobs].append(m)
                    if reference is None:
                        reference = results
                    assert results == reference, f"results differ with jobs={jobs}: " + ", ".join(
                        f"{k}: {reference.get(k)} vs {results.get(k)}"
                        for k in sorted(set(reference) | set(results)) if reference.get(k) != results.get(k))
            m1, m2 = (min(runs[j], key=lambda r: r.wall) for j in (1, 2))
            speedup = m1.wall / m2.wall
            work = [(sid, s, make_split(protocol, y, s)) for sid in STRATEGIES for s in seeds]
            plain_runs: dict[int, list[Measure]] = {1: [], 2: []}
            for _ in range(args.jobs_repeats):
                for jobs in (1, 2):
                    settle()
                    pm, plain_results = time_plain_jobs(work, jobs)
                    assert plain_results == reference, f"plain loop with {jobs} processes differs from the engine"
                    plain_runs[jobs].append(pm)
            p1, p2 = (min(plain_runs[j], key=lambda r: r.wall) for j in (1, 2))
            ceiling = p1.wall / p2.wall
            # if the machine were quiet and the work split evenly, jobs=2 would take about cpu2 / 2
            cpu_estimate = m1.cpu / (m2.cpu / 2)
            load = max(r.foreign for r in runs[1] + runs[2])
            load = max(load, *(r.foreign for r in plain_runs[1] + plain_runs[2]))
            jobs_rows.append((n, len(tasks), m1.wall, m2.wall, speedup, p1.wall, p2.wall, ceiling, load))
            print(f"{n} trials per strategy ({len(tasks)} tasks): jobs=1 {m1.wall:7.3f} s   jobs=2 {m2.wall:7.3f} s   "
                  f"speed-up {speedup:.2f} (target >= {SPEEDUP_TARGET})  "
                  f"{'OK' if speedup >= SPEEDUP_TARGET else 'MISSED'}   results identical")
            print(f"    jobs=1 {m1}   jobs=2 {m2}")
            print(f"    jobs=2 spends {m2.cpu - m1.cpu:+.2f} CPU-s more than jobs=1 (worker start-up, per-worker "
                  f"first-trial cost); excess wall over a perfect halving {m2.wall - m1.wall / 2:.2f} s; "
                  f"speed-up estimated from CPU (quiet machine) {cpu_estimate:.2f}")
            print(f"    plain loop, 1 process {p1.wall:7.3f} s   2 started processes {p2.wall:7.3f} s   "
                  f"hardware ceiling {ceiling:.2f}; the engine reaches {speedup / ceiling:.0%} of it")

    print("\n== 3. Markdown\n")
    print(f"Machine: {machine['processor']}, {machine['cpus']} CPUs (`os.cpu_count()`); "
          f"Python {machine['python']}, scikit-learn {machine['sklearn']}, numpy {machine['numpy']}. "
          f"Data set {DATASET}, protocol {PROTOCOL} (RBF SVC, the whole pool queried one label at a time). "
          f"\"Other load\": cores used by other processes during the measurement.\n")
    if engine_rows:
        print("| Strategy | Trials | Engine (s) | Plain sklearn loop (s) | Engine / plain | Engine / plain (CPU) | Other load |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for strategy, n, e, p, r, cr, load in engine_rows:
            print(f"| {strategy} | {n} | {e:.2f} | {p:.2f} | {r:.2f} | {cr:.2f} | {load:.2f} |")
        print()
    if jobs_rows:
        print("| Trials per strategy | Tasks | `--jobs 1` (s) | `--jobs 2` (s) | Speed-up | Plain loop 1 / 2 processes (s) "
              "| Plain speed-up (ceiling) | Engine / ceiling | Other load |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n, nt, t1, t2, s, p1w, p2w, c, load in jobs_rows:
            print(f"| {n} | {nt} | {t1:.2f} | {t2:.2f} | {s:.2f} | {p1w:.2f} / {p2w:.2f} | {c:.2f} | {s / c:.0%} "
                  f"| {load:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
