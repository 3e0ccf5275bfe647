"""Engine overhead and `--jobs` speed-up on sonar under the lu2023 protocol.

Run by hand (not a test):

    cd /work/main && uv run python benchmarks/overhead.py [--trials 20] [--repeats 3]
                                                        [--jobs-trials 20,40]

1. For Uniform and US-C: wall time of the engine (``audit.runner.run_trial`` for each
   trial seed, in-process, no store) against a plain scikit-learn loop doing the same
   fits (same split, StandardScaler on the train rows, SVC fit on the labeled rows,
   predict the test rows, query the next pool item / the smallest |decision_function|,
   until the pool is empty). The plain loop's per-trial AUBC must equal the engine's,
   so both timings measure the same work. Minimum of ``--repeats`` runs.
2. ``run_tasks(tasks, jobs=1)`` against ``run_tasks(tasks, jobs=2)`` over the same
   TrialTask list; results must be identical.
3. A Markdown table of the figures, for the README.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time
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
from audit.datasets import load_dataset  # noqa: E402
from audit.metrics import get_variant  # noqa: E402
from audit.protocols import load_protocol  # noqa: E402
from audit.runner import TrialTask, run_tasks, run_trial  # noqa: E402
from audit.splits import make_split, plan_seeds  # noqa: E402

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
        user, nice, system, idle, iowait, irq, softirq, steal, *_ = (int(v) for v in f.readline().split()[1:])
    return (user + nice + system + irq + softirq + steal) / _TICK


def _descendants_cpu() -> dict[int, float]:
    """{pid: CPU-seconds} of every live descendant of this process (workers, forkserver)."""
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
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / _TICK
    me, mine = os.getpid(), {}
    for pid in cpu:
        p, hops = parent.get(pid), 0
        while p and hops < 32:
            if p == me:
                mine[pid] = cpu[pid]
                break
            p, hops = parent.get(p), hops + 1
    return mine


class CpuMonitor:
    """CPU used during a block by this process and its descendants ("own") and by every
    other process on the machine ("foreign"): the machine is shared, and a foreign load
    skews wall times. Descendants are sampled every 50 ms while they live."""

    def __init__(self) -> None:
        self.own = self.foreign = self.wall = 0.0

    def __enter__(self) -> "CpuMonitor":
        self._stop = threading.Event()
        self._base = _descendants_cpu()
        self._last = dict(self._base)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._busy0, self._self0 = _machine_busy(), self._self_cpu()
        self._t0 = time.perf_counter()
        self._thread.start()
        return self

    @staticmethod
    def _self_cpu() -> float:
        t = os.times()
        return t.user + t.system

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self._last.update(_descendants_cpu())

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self._t0
        self._last.update(_descendants_cpu())
        self._stop.set()
        self._thread.join()
        children = sum(v - self._base.get(pid, 0.0) for pid, v in self._last.items())
        self.own = self._self_cpu() - self._self0 + children
        self.foreign = max(0.0, _machine_busy() - self._busy0 - self.own)

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

def time_engine(protocol, X, y, strategy, seeds) -> tuple[float, dict[int, float]]:
    t0 = time.perf_counter()
    results = [run_trial(protocol, DATASET, X, y, strategy, s) for s in seeds]
    elapsed = time.perf_counter() - t0
    bad = [r for r in results if r.status != "ok"]
    assert not bad, f"engine trial failed: {bad[0].error}"
    return elapsed, {r.trial_seed: r.aubc for r in results}


def time_plain(X, y, splits, strategy) -> tuple[float, dict[int, float]]:
    t0 = time.perf_counter()
    with threadpool_limits(1):
        curves = {seed: plain_trial(X, y, split, strategy) for seed, split in splits.items()}
    elapsed = time.perf_counter() - t0
    return elapsed, {seed: plain_aubc(c) for seed, c in curves.items()}


def time_jobs(tasks, jobs) -> tuple[float, dict[tuple[str, int], float]]:
    t0 = time.perf_counter()
    results = list(run_tasks(tasks, jobs=jobs))
    elapsed = time.perf_counter() - t0
    bad = [r for r in results if r.status != "ok"]
    assert not bad, f"trial failed with jobs={jobs}: {bad[0].error}"
    assert len(results) == len(tasks)
    return elapsed, {(r.strategy, r.trial_seed): r.aubc for r in results}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20, help="trials per strategy for part 1 (default 20)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per measurement, minimum kept (default 3)")
    ap.add_argument("--jobs-trials", default="20,40",
                    help="comma-separated trials per strategy for the --jobs comparison (default 20,40)")
    ap.add_argument("--skip-engine", action="store_true", help="skip part 1")
    ap.add_argument("--skip-jobs", action="store_true", help="skip part 2")
    args = ap.parse_args(argv)

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

    engine_rows = []
    if not args.skip_engine:
        seeds, skipped = plan_seeds(protocol, y, args.trials)
        assert len(seeds) == args.trials, f"only {len(seeds)} valid seeds"
        splits = {s: make_split(protocol, y, s) for s in seeds}  # not timed: the split is not the point
        print(f"\n== 1. engine vs plain scikit-learn loop: {DATASET}, {PROTOCOL}, {len(seeds)} trials "
              f"(seeds {seeds[0]}..{seeds[-1]}), {args.repeats} repeats, minimum kept")
        # warm-up: one trial of each kind for each strategy (imports, libsvm, caches)
        for strategy in STRATEGIES:
            time_engine(protocol, X, y, strategy, seeds[:1])
            time_plain(X, y, {seeds[0]: splits[seeds[0]]}, strategy)
        for strategy in STRATEGIES:
            engine_times, plain_times = [], []
            engine_aubc = plain_aubc_ = None
            for _ in range(args.repeats):  # alternate to spread any drift over both
                t, engine_aubc = time_engine(protocol, X, y, strategy, seeds)
                engine_times.append(t)
                t, plain_aubc_ = time_plain(X, y, splits, strategy)
                plain_times.append(t)
            mismatched = [s for s in seeds if engine_aubc[s] != plain_aubc_[s]]
            assert not mismatched, (
                f"{strategy}: plain loop AUBC differs from the engine for seeds {mismatched}: "
                + ", ".join(f"{s}: {engine_aubc[s]} vs {plain_aubc_[s]}" for s in mismatched[:5]))
            engine_s, plain_s = min(engine_times), min(plain_times)
            ratio = engine_s / plain_s
            engine_rows.append((strategy, len(seeds), engine_s, plain_s, ratio))
            print(f"{strategy:8s} AUBC identical for all {len(seeds)} seeds "
                  f"(mean {100 * np.mean(list(engine_aubc.values())):.2f})")
            print(f"{strategy:8s} engine {engine_s:7.3f} s   plain {plain_s:7.3f} s   "
                  f"ratio {ratio:.3f} (target <= {ENGINE_TARGET})  {'OK' if ratio <= ENGINE_TARGET else 'MISSED'}"
                  f"   [engine runs {', '.join(f'{t:.3f}' for t in engine_times)};"
                  f" plain runs {', '.join(f'{t:.3f}' for t in plain_times)}]")

    jobs_rows = []
    if not args.skip_jobs:
        counts = [int(c) for c in args.jobs_trials.split(",") if c.strip()]
        print(f"\n== 2. run_tasks jobs=1 vs jobs=2: {DATASET}, {PROTOCOL}, {', '.join(STRATEGIES)}")
        for n in counts:
            seeds, _ = plan_seeds(protocol, y, n)
            assert len(seeds) == n, f"only {len(seeds)} valid seeds for {n} trials"
            tasks = [TrialTask(protocol, DATASET, None, sid, s) for sid in STRATEGIES for s in seeds]
            t1, r1 = time_jobs(tasks, 1)
            t2, r2 = time_jobs(tasks, 2)
            assert r1 == r2, "results differ between jobs=1 and jobs=2: " + ", ".join(
                f"{k}: {r1.get(k)} vs {r2.get(k)}" for k in sorted(set(r1) | set(r2)) if r1.get(k) != r2.get(k))
            speedup = t1 / t2
            jobs_rows.append((n, len(tasks), t1, t2, speedup))
            print(f"{n} trials per strategy ({len(tasks)} tasks): jobs=1 {t1:7.3f} s   jobs=2 {t2:7.3f} s   "
                  f"speed-up {speedup:.2f} (target >= {SPEEDUP_TARGET})  "
                  f"{'OK' if speedup >= SPEEDUP_TARGET else 'MISSED'}   results identical")

    print("\n== 3. Markdown\n")
    print(f"Machine: {machine['processor']}, {machine['cpus']} CPUs (`os.cpu_count()`); "
          f"Python {machine['python']}, scikit-learn {machine['sklearn']}, numpy {machine['numpy']}. "
          f"Data set {DATASET}, protocol {PROTOCOL} (SVC rbf, whole pool queried one at a time).\n")
    if engine_rows:
        print("| Strategy | Trials | Engine (s) | Plain sklearn loop (s) | Engine / plain |")
        print("|---|---:|---:|---:|---:|")
        for strategy, n, e, p, r in engine_rows:
            print(f"| {strategy} | {n} | {e:.2f} | {p:.2f} | {r:.2f} |")
        print()
    if jobs_rows:
        print("| Trials per strategy | Tasks | `--jobs 1` (s) | `--jobs 2` (s) | Speed-up |")
        print("|---:|---:|---:|---:|---:|")
        for n, nt, t1, t2, s in jobs_rows:
            print(f"| {n} | {nt} | {t1:.2f} | {t2:.2f} | {s:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
